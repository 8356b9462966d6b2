//! `saker bench meta`: metadata operations through the client library against a running
//! cluster, with the hop counts ARCHITECTURE.md defines: `rpcs_per_op` (MNode requests the
//! client sent per op) and `server_msgs_per_op` (forwards, remote lookups and change-log pushes
//! between MNodes per op, from the groups' counters).
//!
//! Layout: one bucket, one directory per thread at `--depth` (the levels above it shared; with
//! `--shared-dir` one directory for all threads), and the thread's files in it (with
//! `--burst B`, in a new subdirectory every B files: bursts of writes per directory). A warm-up
//! pass creates and unlinks other names in every directory first, so the MNodes' dentry
//! replicas are warm. Each phase also reports the MNodes' mean batch size (ops per
//! transaction / raft entry). The `statdir` op measures a directory's stat right after k
//! creates in it (`--statdir-k`), the cost of aggregating deferred parent updates.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use async_trait::async_trait;
use clap::Args;
use rand::seq::SliceRandom;
use saker_client::Cluster;
use saker_namespace::Router;
use saker_rpc::{
    ClientTag, GroupCounters, MetaError, MetaRequest, MetaResponse, MetaService, NewObject, Want,
};
use serde::Serialize;

const OPS: [&str; 7] = [
    "create", "stat", "readdir", "unlink", "mkdir", "rmdir", "statdir",
];

#[derive(Args, Debug)]
pub struct MetaBenchArgs {
    /// RPC address of a running server (`saker server --rpc-addr`).
    #[arg(long, default_value = "127.0.0.1:9902")]
    cluster: String,
    /// Operations, run in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "create,stat,readdir,unlink,mkdir,rmdir"
    )]
    ops: Vec<String>,
    /// Concurrent client tasks, each in its own directory.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Files (and directories, for mkdir/rmdir) in all, spread over the threads.
    #[arg(long, default_value_t = 20_000)]
    files: usize,
    /// Depth of each thread's directory below the bucket.
    #[arg(long, default_value_t = 3)]
    depth: usize,
    /// All threads work in one directory.
    #[arg(long)]
    shared_dir: bool,
    /// Files per directory: each thread moves to a new subdirectory every B files.
    #[arg(long)]
    burst: Option<usize>,
    /// For the `statdir` op: numbers of creates after which a directory is stat'ed.
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1000,10000")]
    statdir_k: Vec<usize>,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Counts the requests the client sends to each group.
struct Counted {
    inner: Arc<dyn MetaService>,
    sent: Arc<AtomicU64>,
}

#[async_trait]
impl MetaService for Counted {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.inner.call(tag, req).await
    }

    fn routing_version(&self) -> u64 {
        self.inner.routing_version()
    }
}

#[derive(Serialize)]
struct OpResult {
    op: String,
    ops: u64,
    errors: u64,
    seconds: f64,
    ops_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    rpcs_per_op: f64,
    server_msgs_per_op: f64,
    /// Ops per executor batch on the MNodes during the phase (0 when nothing was batched).
    mean_batch: f64,
}

#[derive(Serialize)]
struct Report<'a> {
    cluster: &'a str,
    groups: usize,
    threads: usize,
    files: usize,
    depth: usize,
    shared_dir: bool,
    burst: Option<usize>,
    results: &'a [OpResult],
}

struct Bench {
    cluster: Cluster,
    /// The groups without counting, for reading their counters.
    raw: BTreeMap<u32, Arc<dyn MetaService>>,
    sent: Arc<AtomicU64>,
    /// Each thread's directory.
    dirs: Vec<Vec<String>>,
    burst: Option<usize>,
    bucket: String,
}

pub(super) fn empty_object() -> NewObject {
    NewObject {
        inline: Some(bytes::Bytes::new()),
        ..Default::default()
    }
}

fn child(dir: &[String], name: String) -> Vec<String> {
    let mut p = dir.to_vec();
    p.push(name);
    p
}

impl Bench {
    /// Server messages, batches and batched ops, summed over the groups.
    async fn totals(&self) -> anyhow::Result<(u64, u64, u64)> {
        let mut total = (0, 0, 0);
        for g in self.raw.values() {
            let tag = ClientTag { client: 0, seq: 0 };
            match g.call(tag, MetaRequest::Counters).await? {
                MetaResponse::Counters(c) => {
                    total.0 += GroupCounters::server_msgs(&c);
                    total.1 += c.batches;
                    total.2 += c.batched_ops;
                }
                other => anyhow::bail!("counters answered {other:?}"),
            }
        }
        Ok(total)
    }

    /// The directory of item `i` of thread `t`.
    fn item_dir(&self, t: usize, i: usize) -> Vec<String> {
        match self.burst {
            Some(b) => child(&self.dirs[t], format!("burst{}", i / b)),
            None => self.dirs[t].clone(),
        }
    }

    /// One op on item `i` of thread `t`.
    async fn one(&self, op: &str, t: usize, i: usize) -> Result<(), MetaError> {
        let dir = &self.item_dir(t, i);
        let file = child(dir, format!("f{t}-{i}"));
        let sub = child(dir, format!("m{t}-{i}"));
        let req = match op {
            "create" => MetaRequest::PutObject {
                path: file.clone(),
                obj: empty_object(),
                cond: None,
                versioning: Default::default(),
            },
            "stat" => MetaRequest::Lookup {
                path: file.clone(),
                want: Want::ATTR,
            },
            "unlink" => MetaRequest::Unlink {
                path: file.clone(),
                cred: saker_rpc::Cred::ROOT,
                versioning: saker_rpc::Versioning::Off,
            },
            "mkdir" => MetaRequest::Mkdir {
                path: sub.clone(),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: saker_rpc::Cred::ROOT,
            },
            "rmdir" => MetaRequest::Rmdir {
                path: sub.clone(),
                cred: saker_rpc::Cred::ROOT,
            },
            "readdir" => return self.readdir(dir).await,
            other => return Err(MetaError::Invalid(format!("unknown op {other}"))),
        };
        let target = if matches!(op, "mkdir" | "rmdir") {
            &sub
        } else {
            &file
        };
        self.cluster.call(target, req).await.map(|_| ())
    }

    /// Lists a directory completely: one scan per group per page.
    async fn readdir(&self, dir: &[String]) -> Result<(), MetaError> {
        let id = self.cluster.lookup(dir, Want::ATTR).await?.attr.id;
        for (&g, _) in self.cluster.groups() {
            let mut after = Vec::new();
            loop {
                let req = MetaRequest::Scan {
                    dir: id,
                    start_after: after.clone(),
                    limit: 1000,
                    reader: None,
                };
                let MetaResponse::Entries(page) = self.cluster.call_group(g, req).await? else {
                    return Err(MetaError::Internal("scan answered no entries".into()));
                };
                match page.last() {
                    Some(last) if page.len() == 1000 => {
                        after = saker_namespace::sort_key(&last.name, last.attr.is_dir())
                            .as_bytes()
                            .to_vec()
                    }
                    _ => break,
                }
            }
        }
        Ok(())
    }

    /// Runs `op` over every item (readdir: over every thread's directory, `files / threads`
    /// times in all) with one task per thread; items in random order per thread.
    async fn phase(self: &Arc<Self>, op: &str, per_thread: usize) -> anyhow::Result<OpResult> {
        let (msgs_before, batches_before, batched_before) = self.totals().await?;
        let sent_before = self.sent.load(Ordering::Relaxed);
        let start = Instant::now();
        let mut tasks = Vec::new();
        for t in 0..self.dirs.len() {
            let me = self.clone();
            let op = op.to_string();
            let n = if op == "readdir" {
                (per_thread / 100).max(1)
            } else {
                per_thread
            };
            tasks.push(tokio::spawn(async move {
                let mut order: Vec<usize> = (0..n).collect();
                if op == "stat" {
                    order.shuffle(&mut rand::thread_rng());
                }
                let mut lat = Vec::with_capacity(n);
                let mut errors = 0u64;
                for i in order {
                    let t0 = Instant::now();
                    // A failed operation is an error, never an op: not in ops/s or latency.
                    match me.one(&op, t, i).await {
                        Ok(_) => lat.push(t0.elapsed().as_micros() as u32),
                        Err(_) => errors += 1,
                    }
                }
                (lat, errors)
            }));
        }
        let mut lat = Vec::new();
        let mut errors = 0;
        for t in tasks {
            let (l, e) = t.await?;
            lat.extend(l);
            errors += e;
        }
        let seconds = start.elapsed().as_secs_f64();
        let ops = lat.len() as u64;
        let sent = self.sent.load(Ordering::Relaxed) - sent_before;
        let (msgs, batches, batched) = self.totals().await?;
        let (msgs, batches, batched) = (
            msgs - msgs_before,
            batches - batches_before,
            batched - batched_before,
        );
        lat.sort_unstable();
        Ok(OpResult {
            op: op.to_string(),
            ops,
            errors,
            seconds,
            ops_per_sec: ops as f64 / seconds,
            p50_ms: super::percentile_ms(&lat, 0.5),
            p99_ms: super::percentile_ms(&lat, 0.99),
            rpcs_per_op: sent as f64 / ops.max(1) as f64,
            server_msgs_per_op: msgs as f64 / ops.max(1) as f64,
            mean_batch: batched as f64 / batches.max(1) as f64,
        })
    }

    /// For each k: creates k files in a fresh directory (spread over the threads), then times
    /// one stat of the directory; three times, median reported. A stat that does not show k
    /// entries counts as an error.
    async fn statdir(self: &Arc<Self>, ks: &[usize]) -> anyhow::Result<Vec<OpResult>> {
        const REPS: usize = 3;
        let threads = self.dirs.len();
        let mut out = Vec::new();
        for &k in ks {
            let mut lat = Vec::new();
            let mut errors = 0;
            let (msgs_before, _, _) = self.totals().await?;
            let mut stat_sent = 0;
            for rep in 0..REPS {
                let dir = vec![self.bucket.clone(), format!("statdir-{k}-{rep}")];
                let req = MetaRequest::Mkdir {
                    path: dir.clone(),
                    mode: 0o755,
                    uid: 0,
                    gid: 0,
                    cred: saker_rpc::Cred::ROOT,
                };
                self.cluster.call(&dir, req).await?;
                let mut tasks = Vec::new();
                for t in 0..threads {
                    let me = self.clone();
                    let dir = dir.clone();
                    tasks.push(tokio::spawn(async move {
                        for i in (t..k).step_by(threads) {
                            let path = child(&dir, format!("f{i}"));
                            let req = MetaRequest::PutObject {
                                path: path.clone(),
                                obj: empty_object(),
                                cond: None,
                                versioning: Default::default(),
                            };
                            me.cluster.call(&path, req).await?;
                        }
                        Ok::<_, MetaError>(())
                    }));
                }
                for t in tasks {
                    t.await??;
                }
                let sent_before = self.sent.load(Ordering::Relaxed);
                let t0 = Instant::now();
                let attr = self.cluster.lookup(&dir, Want::ATTR).await?.attr;
                lat.push(t0.elapsed().as_micros() as u32);
                stat_sent += self.sent.load(Ordering::Relaxed) - sent_before;
                if attr.children != k as u64 {
                    errors += 1;
                }
            }
            // The messages of the creates are in here too: per stat, they are what the
            // aggregation pulled plus the creates' marks and pushes.
            let (msgs, _, _) = self.totals().await?;
            lat.sort_unstable();
            out.push(OpResult {
                op: format!("statdir_after_{k}"),
                ops: REPS as u64 - errors,
                errors,
                seconds: lat.iter().map(|&l| l as f64 / 1e6).sum(),
                ops_per_sec: 0.0,
                p50_ms: super::percentile_ms(&lat, 0.5),
                p99_ms: super::percentile_ms(&lat, 0.99),
                rpcs_per_op: stat_sent as f64 / REPS as f64,
                server_msgs_per_op: (msgs - msgs_before) as f64 / (REPS * (k + 1)) as f64,
                mean_batch: 0.0,
            });
        }
        Ok(out)
    }
}

/// Builds the bench's cluster handle: the client library over the given groups, each wrapped
/// to count requests.
fn counted_cluster(
    router: Router,
    groups: BTreeMap<u32, Arc<dyn MetaService>>,
    sent: &Arc<AtomicU64>,
) -> Cluster {
    let counted = groups
        .into_iter()
        .map(|(g, inner)| {
            let s: Arc<dyn MetaService> = Arc::new(Counted {
                inner,
                sent: sent.clone(),
            });
            (g, s)
        })
        .collect();
    Cluster::new(
        router,
        counted,
        Arc::new(saker_chunkstore::MemChunkStore::new()),
        Default::default(),
    )
}

pub async fn run(args: MetaBenchArgs) -> anyhow::Result<()> {
    for op in &args.ops {
        anyhow::ensure!(
            OPS.contains(&op.as_str()),
            "unknown op {op}; known: {OPS:?}"
        );
    }
    anyhow::ensure!(
        args.threads > 0 && args.depth > 0,
        "threads and depth must be > 0"
    );
    crate::install_credential(None, false)?;
    let channel = saker_rpc::RpcChannel::connect(&args.cluster)
        .await
        .with_context(|| format!("cannot reach the cluster at {}", args.cluster))?;
    let map = channel.cluster_map().await?;
    // Each group where the map says it runs (all behind one address for the all-in-one server).
    let pool = saker_rpc::ChannelPool::with(channel);
    let raw = saker_rpc::group_services(&map, &args.cluster, &pool, |_, _| None)?;
    let sent = Arc::new(AtomicU64::new(0));
    let cluster = counted_cluster(map.router()?, raw.clone(), &sent);

    let bucket = format!("bench-meta-{:08x}", rand::random::<u32>());
    let mut dirs = Vec::with_capacity(args.threads);
    for t in 0..args.threads {
        let mut dir = vec![bucket.clone()];
        for level in 1..args.depth {
            dir.push(format!("l{level}"));
        }
        dir.push(if args.shared_dir {
            "shared".to_string()
        } else {
            format!("t{t}")
        });
        dirs.push(dir);
    }
    anyhow::ensure!(args.burst != Some(0), "--burst must be > 0");
    let per_thread = args.files.div_ceil(args.threads);
    // With bursts, each directory's subdirectories (once per distinct directory).
    let mut tree: Vec<Vec<String>> = Vec::new();
    for dir in &dirs {
        if !tree.contains(dir) {
            tree.push(dir.clone());
        }
    }
    if let Some(b) = args.burst {
        let bases = tree.clone();
        for base in bases {
            for k in 0..per_thread.div_ceil(b) {
                tree.push(child(&base, format!("burst{k}")));
            }
        }
    }
    // Directories, top-down (levels shared by all threads exist after the first).
    let root = MetaRequest::CreateBucket {
        name: bucket.clone(),
        uid: 0,
        gid: 0,
    };
    cluster.call(&dirs[0][..1], root).await?;
    for dir in &tree {
        for depth in 2..=dir.len() {
            let req = MetaRequest::Mkdir {
                path: dir[..depth].to_vec(),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: saker_rpc::Cred::ROOT,
            };
            match cluster.call(&dir[..depth], req).await {
                Ok(_) | Err(MetaError::Exists) => {}
                Err(e) => return Err(e).context("cannot create the benchmark tree"),
            }
        }
    }
    let bench = Arc::new(Bench {
        cluster,
        raw,
        sent,
        dirs,
        burst: args.burst,
        bucket: bucket.clone(),
    });
    // Warm-up: every group resolves every directory once.
    for dir in &tree {
        for i in 0..64 {
            let path = child(dir, format!("warm{i}"));
            let obj = empty_object();
            bench
                .cluster
                .call(
                    &path,
                    MetaRequest::PutObject {
                        path: path.clone(),
                        obj,
                        cond: None,
                        versioning: Default::default(),
                    },
                )
                .await?;
            bench
                .cluster
                .call(
                    &path,
                    MetaRequest::Unlink {
                        path: path.clone(),
                        cred: saker_rpc::Cred::ROOT,
                        versioning: saker_rpc::Versioning::Off,
                    },
                )
                .await?;
        }
    }

    println!(
        "{:<18} {:>9} {:>10} {:>9} {:>9} {:>8} {:>12} {:>7} {:>7}",
        "op", "ops", "ops/s", "p50 ms", "p99 ms", "rpcs/op", "srv msgs/op", "batch", "errors"
    );
    let mut results = Vec::new();
    for op in &args.ops {
        let rs = if op == "statdir" {
            bench.statdir(&args.statdir_k).await?
        } else {
            vec![bench.phase(op, per_thread).await?]
        };
        for r in rs {
            println!(
                "{:<18} {:>9} {:>10.0} {:>9.3} {:>9.3} {:>8.2} {:>12.2} {:>7.1} {:>7}",
                r.op,
                r.ops,
                r.ops_per_sec,
                r.p50_ms,
                r.p99_ms,
                r.rpcs_per_op,
                r.server_msgs_per_op,
                r.mean_batch,
                r.errors
            );
            results.push(r);
        }
    }
    if let Some(path) = &args.json {
        let report = Report {
            cluster: &args.cluster,
            groups: bench.raw.len(),
            threads: args.threads,
            files: args.files,
            depth: args.depth,
            shared_dir: args.shared_dir,
            burst: args.burst,
            results: &results,
        };
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
