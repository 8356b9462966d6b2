//! `saker bench traverse`: the tree walk of FalconFS §6.4 scaled to one machine. Builds a tree
//! of `--depth` levels below a bucket (`--fanout` directories per level, so fanout^(depth-1)
//! leaf directories) with `--files-per-dir` files of `--size` bytes in each leaf, then reads
//! every file once, in random order, through a fresh client (one DL epoch): a full-path lookup
//! with the data, plus the chunk reads of files above the inline threshold.
//!
//! Reports files/s, `rpcs_per_op` (MNode requests the reading client sent per file read: 1.00
//! means no path walk) and the client's memory: its resident set before and after the epoch
//! (the growth is what the client keeps per file or directory it saw; the file list itself is
//! generated from indices, not stored). Server-side forwards and remote lookups per read come
//! from the groups' counters, as in `saker bench meta`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use futures::StreamExt;
use rand::seq::SliceRandom;
use saker_client::{ChunkWriter, Cluster, ClusterConfig, ReadRange};
use saker_rpc::{
    ClientTag, GroupCounters, Layout, MetaRequest, MetaResponse, MetaService, NewObject, Want,
};
use serde::Serialize;

use crate::units::parse_size;

#[derive(Args, Debug)]
pub struct TraverseBenchArgs {
    /// RPC address of a running server (`saker server --rpc-addr`).
    #[arg(long, default_value = "127.0.0.1:9902")]
    cluster: String,
    /// Levels of the tree, the bucket included (depth 4 = bucket/a/b/c).
    #[arg(long, default_value_t = 4)]
    depth: u32,
    /// Directories per directory.
    #[arg(long, default_value_t = 10)]
    fanout: u32,
    /// Files in each leaf directory.
    #[arg(long, default_value_t = 10)]
    files_per_dir: u32,
    /// Bytes per file.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    size: u64,
    /// Concurrent reads (and writes while building).
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Must match the server's `--inline-threshold`.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    inline_threshold: u64,
    /// Must match the server's `--chunk-size`.
    #[arg(long, default_value = "8MiB", value_parser = parse_size)]
    chunk_size: u64,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report {
    cluster: String,
    groups: usize,
    depth: u32,
    fanout: u32,
    files_per_dir: u32,
    size: u64,
    threads: usize,
    leaf_dirs: u64,
    files: u64,
    build_secs: f64,
    build_files_per_sec: f64,
    read_secs: f64,
    files_per_sec: f64,
    mib_per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
    rpcs_per_op: f64,
    server_msgs_per_op: f64,
    client_rss_before_mib: f64,
    client_rss_after_mib: f64,
    client_rss_growth_mib: f64,
    client_peak_rss_mib: f64,
}

/// Counts the requests sent to each group.
struct Counted {
    inner: Arc<dyn MetaService>,
    sent: Arc<AtomicU64>,
}

#[async_trait::async_trait]
impl MetaService for Counted {
    async fn call(
        &self,
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, saker_rpc::MetaError> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.inner.call(tag, req).await
    }

    fn routing_version(&self) -> u64 {
        self.inner.routing_version()
    }
}

/// The tree's shape: file `i` lives in leaf directory `i / files_per_dir`, whose path is the
/// base-`fanout` digits of its number.
struct Shape {
    bucket: String,
    depth: u32,
    fanout: u32,
    files_per_dir: u32,
}

impl Shape {
    fn leaf_dirs(&self) -> u64 {
        (self.fanout as u64).pow(self.depth - 1)
    }

    fn files(&self) -> u64 {
        self.leaf_dirs() * self.files_per_dir as u64
    }

    fn dir(&self, mut leaf: u64) -> Vec<String> {
        let mut levels = vec![String::new(); self.depth as usize - 1];
        for l in levels.iter_mut().rev() {
            *l = format!("d{}", leaf % self.fanout as u64);
            leaf /= self.fanout as u64;
        }
        let mut path = Vec::with_capacity(self.depth as usize + 1);
        path.push(self.bucket.clone());
        path.extend(levels);
        path
    }

    fn file(&self, i: u64) -> Vec<String> {
        let mut path = self.dir(i / self.files_per_dir as u64);
        path.push(format!("f{}.bin", i % self.files_per_dir as u64));
        path
    }
}

/// This process's resident set and its peak, in MiB (from /proc/self/status).
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn connect(
    addr: &str,
    config: ClusterConfig,
    sent: &Arc<AtomicU64>,
) -> anyhow::Result<(Cluster, BTreeMap<u32, Arc<dyn MetaService>>)> {
    crate::install_credential(None, false)?;
    let channel = saker_rpc::RpcChannel::connect(addr)
        .await
        .with_context(|| format!("cannot reach the cluster at {addr}"))?;
    let map = channel.cluster_map().await?;
    let pool = saker_rpc::ChannelPool::with(channel);
    let raw = saker_rpc::group_services(&map, addr, &pool, |_, _| None)?;
    let mut counted: BTreeMap<u32, Arc<dyn MetaService>> = BTreeMap::new();
    for (&g, inner) in &raw {
        let inner = inner.clone();
        counted.insert(
            g,
            Arc::new(Counted {
                inner,
                sent: sent.clone(),
            }),
        );
    }
    let chunks = Arc::new(saker_client::chunk_stores(&map, addr, &pool)?);
    Ok((Cluster::new(map.router()?, counted, chunks, config), raw))
}

async fn server_msgs(raw: &BTreeMap<u32, Arc<dyn MetaService>>) -> anyhow::Result<u64> {
    let mut total = 0;
    for g in raw.values() {
        match g
            .call(ClientTag { client: 0, seq: 0 }, MetaRequest::Counters)
            .await?
        {
            MetaResponse::Counters(c) => total += GroupCounters::server_msgs(&c),
            other => anyhow::bail!("counters answered {other:?}"),
        }
    }
    Ok(total)
}

/// Runs `work(i)` for every index of `order` on `threads` tasks; returns each call's latency.
async fn run_all<F, Fut>(order: Arc<Vec<u64>>, threads: usize, work: F) -> anyhow::Result<Vec<f64>>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let work = Arc::new(work);
    let tasks: Vec<_> = (0..threads)
        .map(|_| {
            let (order, next, work) = (order.clone(), next.clone(), work.clone());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = order.get(k) else {
                        return Ok::<_, anyhow::Error>(lat);
                    };
                    let t = Instant::now();
                    work(i).await?;
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            })
        })
        .collect();
    let mut all = Vec::with_capacity(order.len());
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}

fn file_bytes(i: u64, size: u64) -> Vec<u8> {
    let seed = i.to_le_bytes();
    (0..size as usize)
        .map(|k| seed[k % 8] ^ (k as u8))
        .collect()
}

pub async fn run(args: TraverseBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.depth >= 2 && args.fanout >= 1 && args.files_per_dir >= 1 && args.threads >= 1,
        "need --depth >= 2 and --fanout, --files-per-dir, --threads >= 1"
    );
    let config = ClusterConfig {
        inline_threshold: args.inline_threshold as usize,
        chunk_size: args.chunk_size as usize,
        ..ClusterConfig::default()
    };
    let shape = Arc::new(Shape {
        bucket: format!("bench-traverse-{:08x}", rand::random::<u32>()),
        depth: args.depth,
        fanout: args.fanout,
        files_per_dir: args.files_per_dir,
    });
    anyhow::ensure!(
        shape.files() <= 50_000_000,
        "{} files is more than this benchmark should build",
        shape.files()
    );

    // Build with its own client.
    let build_sent = Arc::new(AtomicU64::new(0));
    let (builder, _) = connect(&args.cluster, config.clone(), &build_sent).await?;
    let builder = Arc::new(builder);
    builder
        .call(
            std::slice::from_ref(&shape.bucket),
            MetaRequest::CreateBucket {
                name: shape.bucket.clone(),
                uid: 0,
                gid: 0,
            },
        )
        .await?;
    let started = Instant::now();
    let order: Arc<Vec<u64>> = Arc::new((0..shape.files()).collect());
    let size = args.size;
    {
        let (builder, shape) = (builder.clone(), shape.clone());
        run_all(order, args.threads, move |i| {
            let (builder, shape) = (builder.clone(), shape.clone());
            async move {
                let data = file_bytes(i, size);
                let mut w = ChunkWriter::new(&builder);
                w.write(&data).await?;
                let written = w.finish().await?;
                let obj = NewObject {
                    size: written.size,
                    etag: format!("{:x}", i),
                    layout: written.layout,
                    inline: written.inline,
                    ..Default::default()
                };
                // Parents are created on the way (implicit directories, as S3 PUTs do).
                builder
                    .put_object(&shape.file(i), obj, false, None, Default::default())
                    .await?;
                Ok(())
            }
        })
        .await
        .context("building the tree")?;
    }
    let build_secs = started.elapsed().as_secs_f64();
    drop(builder);

    // One epoch through a fresh client, in random order.
    let sent = Arc::new(AtomicU64::new(0));
    let (reader, raw) = connect(&args.cluster, config, &sent).await?;
    let reader = Arc::new(reader);
    let mut order: Vec<u64> = (0..shape.files()).collect();
    order.shuffle(&mut rand::thread_rng());
    let order = Arc::new(order);
    let (rss_before, _) = rss_mib();
    let msgs_before = server_msgs(&raw).await?;
    sent.store(0, Ordering::Relaxed);
    let bytes = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut lat = {
        let (reader, shape, bytes) = (reader.clone(), shape.clone(), bytes.clone());
        run_all(order, args.threads, move |i| {
            let (reader, shape, bytes) = (reader.clone(), shape.clone(), bytes.clone());
            async move {
                let want = Want::DATA;
                let view = reader.lookup(&shape.file(i), want).await?;
                let size = view.attr.size;
                let mut got = 0u64;
                match &view.attr.layout {
                    Layout::Inline => got = view.data.map_or(0, |d| d.len() as u64),
                    layout => {
                        let mut stream = reader.read_data(
                            layout,
                            None,
                            ReadRange {
                                start: 0,
                                end: size,
                            },
                        );
                        while let Some(piece) = stream.next().await {
                            got += piece?.len() as u64;
                        }
                    }
                }
                anyhow::ensure!(got == size, "file {i}: read {got} of {size} bytes");
                bytes.fetch_add(got, Ordering::Relaxed);
                Ok(())
            }
        })
        .await
        .context("reading the tree")?
    };
    let read_secs = started.elapsed().as_secs_f64();
    let rpcs = sent.load(Ordering::Relaxed);
    let msgs = server_msgs(&raw).await? - msgs_before;
    let (rss_after, peak) = rss_mib();
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p).round() as usize];
    let files = shape.files();
    let report = Report {
        cluster: args.cluster.clone(),
        groups: raw.len(),
        depth: args.depth,
        fanout: args.fanout,
        files_per_dir: args.files_per_dir,
        size: args.size,
        threads: args.threads,
        leaf_dirs: shape.leaf_dirs(),
        files,
        build_secs,
        build_files_per_sec: files as f64 / build_secs,
        read_secs,
        files_per_sec: files as f64 / read_secs,
        mib_per_sec: bytes.load(Ordering::Relaxed) as f64 / read_secs / (1024.0 * 1024.0),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        rpcs_per_op: rpcs as f64 / files as f64,
        server_msgs_per_op: msgs as f64 / files as f64,
        client_rss_before_mib: rss_before,
        client_rss_after_mib: rss_after,
        client_rss_growth_mib: rss_after - rss_before,
        client_peak_rss_mib: peak,
    };
    println!(
        "{} files ({} leaf dirs x {}, {} B) built in {:.1}s ({:.0} files/s)",
        files,
        report.leaf_dirs,
        args.files_per_dir,
        args.size,
        build_secs,
        report.build_files_per_sec
    );
    println!(
        "epoch: {:.0} files/s, {:.1} MiB/s, p50 {:.3} ms, p99 {:.3} ms, rpcs/op {:.3}, server msgs/op {:.3}",
        report.files_per_sec,
        report.mib_per_sec,
        report.p50_ms,
        report.p99_ms,
        report.rpcs_per_op,
        report.server_msgs_per_op
    );
    println!(
        "client RSS: {:.1} MiB before the epoch, {:.1} MiB after (+{:.1}), peak {:.1} MiB",
        rss_before, rss_after, report.client_rss_growth_mib, peak
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_paths_cover_the_tree_once() {
        let s = Shape {
            bucket: "b".into(),
            depth: 3,
            fanout: 3,
            files_per_dir: 2,
        };
        assert_eq!((s.leaf_dirs(), s.files()), (9, 18));
        let all: std::collections::BTreeSet<Vec<String>> =
            (0..s.files()).map(|i| s.file(i)).collect();
        assert_eq!(all.len(), 18);
        assert_eq!(s.file(0), ["b", "d0", "d0", "f0.bin"]);
        assert_eq!(s.file(17), ["b", "d2", "d2", "f1.bin"]);
        assert!(all.iter().all(|p| p.len() == 4));
    }
}
