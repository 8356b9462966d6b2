//! `saker bench meta`: metadata operations through the client library against a running
//! cluster, with the hop counts ARCHITECTURE.md defines: `rpcs_per_op` (MNode requests the
//! client sent per op) and `server_msgs_per_op` (forwards, remote lookups and change-log pushes
//! between MNodes per op, from the groups' counters).
//!
//! Layout: one bucket, one directory per thread at `--depth` (the levels above it shared), and
//! the thread's files in it. A warm-up pass creates, stats and unlinks other names in every
//! directory first, so the MNodes' dentry replicas are warm.

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

const OPS: [&str; 6] = ["create", "stat", "readdir", "unlink", "mkdir", "rmdir"];

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
}

#[derive(Serialize)]
struct Report<'a> {
    cluster: &'a str,
    groups: usize,
    threads: usize,
    files: usize,
    depth: usize,
    results: &'a [OpResult],
}

struct Bench {
    cluster: Cluster,
    /// The groups without counting, for reading their counters.
    raw: BTreeMap<u32, Arc<dyn MetaService>>,
    sent: Arc<AtomicU64>,
    /// Each thread's directory.
    dirs: Vec<Vec<String>>,
}

fn empty_object() -> NewObject {
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
    async fn server_msgs(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for g in self.raw.values() {
            let tag = ClientTag { client: 0, seq: 0 };
            match g.call(tag, MetaRequest::Counters).await? {
                MetaResponse::Counters(c) => total += GroupCounters::server_msgs(&c),
                other => anyhow::bail!("counters answered {other:?}"),
            }
        }
        Ok(total)
    }

    /// One op on item `i` of thread `t`.
    async fn one(&self, op: &str, t: usize, i: usize) -> Result<(), MetaError> {
        let dir = &self.dirs[t];
        let file = child(dir, format!("f{i}"));
        let sub = child(dir, format!("m{i}"));
        let req = match op {
            "create" => MetaRequest::PutObject {
                path: file.clone(),
                obj: empty_object(),
            },
            "stat" => MetaRequest::Lookup {
                path: file.clone(),
                want: Want::ATTR,
            },
            "unlink" => MetaRequest::Unlink {
                path: file.clone(),
                cred: None,
            },
            "mkdir" => MetaRequest::Mkdir {
                path: sub.clone(),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: None,
            },
            "rmdir" => MetaRequest::Rmdir {
                path: sub.clone(),
                cred: None,
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
        let msgs_before = self.server_msgs().await?;
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
                    if me.one(&op, t, i).await.is_err() {
                        errors += 1;
                    }
                    lat.push(t0.elapsed().as_micros() as u32);
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
        let msgs = self.server_msgs().await? - msgs_before;
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
        })
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
    let channel = saker_rpc::RpcChannel::connect(&args.cluster)
        .await
        .with_context(|| format!("cannot reach the cluster at {}", args.cluster))?;
    let map = channel.cluster_map().await?;
    let raw: BTreeMap<u32, Arc<dyn MetaService>> = map
        .groups
        .iter()
        .map(|&g| (g, Arc::new(channel.meta(g)) as Arc<dyn MetaService>))
        .collect();
    let sent = Arc::new(AtomicU64::new(0));
    let cluster = counted_cluster(map.router()?, raw.clone(), &sent);

    let bucket = format!("bench-meta-{:08x}", rand::random::<u32>());
    let mut dirs = Vec::with_capacity(args.threads);
    for t in 0..args.threads {
        let mut dir = vec![bucket.clone()];
        for level in 1..args.depth {
            dir.push(format!("l{level}"));
        }
        dir.push(format!("t{t}"));
        dirs.push(dir);
    }
    // Directories, top-down (levels shared by all threads exist after the first).
    let root = MetaRequest::CreateBucket {
        name: bucket.clone(),
        uid: 0,
        gid: 0,
    };
    cluster.call(&dirs[0][..1], root).await?;
    for dir in &dirs {
        for depth in 2..=dir.len() {
            let req = MetaRequest::Mkdir {
                path: dir[..depth].to_vec(),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: None,
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
    });
    let per_thread = args.files.div_ceil(args.threads);
    // Warm-up: every group resolves every thread directory once.
    for t in 0..bench.dirs.len() {
        for i in 0..64 {
            let path = child(&bench.dirs[t], format!("warm{i}"));
            let obj = empty_object();
            bench
                .cluster
                .call(
                    &path,
                    MetaRequest::PutObject {
                        path: path.clone(),
                        obj,
                    },
                )
                .await?;
            bench
                .cluster
                .call(
                    &path,
                    MetaRequest::Unlink {
                        path: path.clone(),
                        cred: None,
                    },
                )
                .await?;
        }
    }

    println!(
        "{:<8} {:>9} {:>10} {:>9} {:>9} {:>8} {:>12} {:>7}",
        "op", "ops", "ops/s", "p50 ms", "p99 ms", "rpcs/op", "srv msgs/op", "errors"
    );
    let mut results = Vec::new();
    for op in &args.ops {
        let r = bench.phase(op, per_thread).await?;
        println!(
            "{:<8} {:>9} {:>10.0} {:>9.3} {:>9.3} {:>8.2} {:>12.2} {:>7}",
            r.op,
            r.ops,
            r.ops_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.rpcs_per_op,
            r.server_msgs_per_op,
            r.errors
        );
        results.push(r);
    }
    if let Some(path) = &args.json {
        let report = Report {
            cluster: &args.cluster,
            groups: bench.raw.len(),
            threads: args.threads,
            files: args.files,
            depth: args.depth,
            results: &results,
        };
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
