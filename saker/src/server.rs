//! `saker server`: every role in one process on an embedded store.
//!
//! Layout of the data directory: `meta.redb` or `meta.fjall/` (raft log + state of every MNode
//! group), `chunks/` (the chunkstore), `access-keys.json`, `cluster.json` (the number of MNode
//! groups and the store engine, fixed at the first start).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hyper_util::rt::{TokioExecutor, TokioIo};
use saker_chunkstore::DiskChunkStore;
use saker_client::{collect_garbage, Cluster, ClusterConfig};
use saker_coordinator::{AccessKeyStore, NamespaceCoordinator};
use saker_gateway::Gateway;
use saker_mnode::{
    FjallStore, LocalGroups, MetaStore, MnodeConfig, ParentUpdates, RedbStore, LOCAL_VNODES,
};
use saker_rpc::{ClusterMap, CoordinatorService, MetaService, RpcServer};
use tokio::net::TcpListener;

use crate::admin::{self, AdminState};
use crate::{parse_duration, parse_size};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ParentUpdatesArg {
    Sync,
    Async,
}

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Where all state lives.
    #[arg(long, default_value = "./saker-data")]
    data_dir: PathBuf,
    /// S3 listener.
    #[arg(long, default_value = "127.0.0.1:9900")]
    s3_addr: SocketAddr,
    /// Admin listener: /health, /metrics and the admin API.
    #[arg(long, default_value = "127.0.0.1:9901")]
    admin_addr: SocketAddr,
    /// RPC listener for library clients (and later other saker processes): every MNode group
    /// and the coordinator of this process, and the cluster map, behind one address.
    #[arg(long, default_value = "127.0.0.1:9902")]
    rpc_addr: SocketAddr,
    /// Base domain for virtual-hosted-style requests (bucket.DOMAIN); path style always works.
    #[arg(long)]
    domain: Option<String>,
    /// Objects up to this size are stored inside the MNode. 16 KiB by measurement: 64 KiB
    /// objects stored inline read ~1.7x faster but write ~1.5x slower through the raft log than
    /// as chunks, and keep the metadata store (and its snapshots) small.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    inline_threshold: u64,
    /// Larger objects are split into chunks of this size.
    #[arg(long, default_value = "8MiB", value_parser = parse_size)]
    chunk_size: u64,
    /// How long chunks of overwritten or deleted objects stay readable before deletion.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    gc_grace: Duration,
    /// Unreferenced chunks older than this are removed by the scrub (covers crashed writes;
    /// must exceed the longest upload).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    scrub_age: Duration,
    /// MNode executor: batches proposed to raft but not yet applied, at most (1 = no pipeline:
    /// measured faster here, as batches stay larger).
    #[arg(long, default_value_t = 1)]
    pipeline_depth: usize,
    /// When a create or unlink whose parent directory lives on another MNode group is
    /// answered: `async` (at once; the directory's owner pulls pending changes before it shows
    /// the directory's attributes) or `sync` (after the owner applied the change).
    #[arg(long, value_enum, default_value = "async")]
    parent_updates: ParentUpdatesArg,
    /// Metadata store engine, fixed when the data directory is created. fjall by measurement:
    /// 1.4-1.7x the S3 PUTs of redb at 16 clients with 4 groups, GETs 0.8-1x
    /// (compat_tests/bench/engines/README.md for the engine-level numbers).
    #[arg(long, value_enum, default_value = "fjall")]
    store: StoreEngine,
    /// MNode groups the namespace is spread over (in this process). Fixed when the data
    /// directory is created.
    #[arg(long, default_value_t = 4)]
    mnodes: u32,
    /// Also mount the namespace here as a FUSE file system (unmounted at shutdown).
    #[arg(long)]
    mount: Option<PathBuf>,
    #[command(flatten)]
    fuse: crate::mount::FuseArgs,
    /// How often garbage collection runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    gc_interval: Duration,
}

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    let env_root = match (
        std::env::var("SAKER_ACCESS_KEY"),
        std::env::var("SAKER_SECRET_KEY"),
    ) {
        (Ok(a), Ok(s)) => Some((a, s)),
        _ => None,
    };
    let root_from_env = env_root.is_some();
    let keys = Arc::new(AccessKeyStore::open(
        &args.data_dir.join("access-keys.json"),
        env_root,
    )?);
    let mnodes = cluster_file(&args.data_dir, args.mnodes, args.store)?.mnodes;
    let store: Arc<dyn MetaStore> = match args.store {
        StoreEngine::Redb => Arc::new(
            RedbStore::open(&args.data_dir.join("meta.redb"))
                .context("cannot open the metadata store")?,
        ),
        StoreEngine::Fjall => Arc::new(
            FjallStore::open(&args.data_dir.join("meta.fjall"))
                .context("cannot open the metadata store")?,
        ),
    };
    let chunks: Arc<dyn saker_chunkstore::ChunkStore> =
        Arc::new(DiskChunkStore::open(&args.data_dir.join("chunks"))?);
    let mut cfg = MnodeConfig::new(1);
    cfg.gc_grace = args.gc_grace;
    cfg.pipeline_depth = args.pipeline_depth;
    cfg.parent_updates = match args.parent_updates {
        ParentUpdatesArg::Sync => ParentUpdates::Sync,
        ParentUpdatesArg::Async => ParentUpdates::Async,
    };
    let local = LocalGroups::start(store, mnodes, cfg).await?;
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = local.services();
    let coordinator: Arc<dyn CoordinatorService> = Arc::new(NamespaceCoordinator::new(
        local.router.clone(),
        groups.clone(),
    ));
    local.connect(coordinator.clone());
    let map = ClusterMap {
        version: 1,
        groups: local.router.ring().groups().to_vec(),
        vnodes: LOCAL_VNODES,
        exceptions: local.router.exceptions().clone(),
    };
    anyhow::ensure!(
        map.router()? == local.router,
        "the cluster map does not describe the in-process groups"
    );
    let rpc = RpcServer::new(groups.clone(), coordinator, map);
    let cluster = Arc::new(Cluster::new(
        local.router.clone(),
        groups,
        chunks.clone(),
        ClusterConfig {
            inline_threshold: args.inline_threshold as usize,
            chunk_size: args.chunk_size as usize,
        },
    ));

    let s3 = Gateway::new(cluster.clone(), keys.clone())
        .into_service(args.domain.as_deref())
        .map_err(|e| anyhow::anyhow!("bad --domain: {e}"))?;
    let s3_listener = TcpListener::bind(args.s3_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.s3_addr))?;
    let admin_listener = TcpListener::bind(args.admin_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.admin_addr))?;
    let rpc_listener = TcpListener::bind(args.rpc_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.rpc_addr))?;
    let s3_addr = s3_listener.local_addr()?;
    let admin_addr = admin_listener.local_addr()?;
    let rpc_addr = rpc_listener.local_addr()?;

    tokio::spawn(serve_s3(s3_listener, s3));
    let admin_app = admin::router(AdminState {
        keys: keys.clone(),
        chunks,
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(admin_listener, admin_app).await {
            tracing::error!(error = %e, "admin listener failed");
        }
    });
    tokio::spawn(async move {
        if let Err(e) = rpc.serve(rpc_listener).await {
            tracing::error!(error = %e, "RPC listener failed");
        }
    });
    tokio::spawn(gc_loop(cluster.clone(), args.scrub_age, args.gc_interval));

    let fuse = match &args.mount {
        Some(path) => Some(crate::mount::spawn(cluster.clone(), path, &args.fuse)?),
        None => None,
    };

    let root = keys.root();
    println!("saker is ready");
    println!("  S3 endpoint:  http://{s3_addr}");
    println!("  admin:        http://{admin_addr}  (/health, /metrics)");
    println!("  RPC (library clients): {rpc_addr}");
    println!("  data dir:     {}", args.data_dir.display());
    println!("  MNode groups: {mnodes}");
    if let Some(path) = &args.mount {
        println!("  mounted at:   {}", path.display());
    }
    println!("  access key:   {}", root.access_key);
    if root_from_env {
        println!("  secret key:   (from SAKER_SECRET_KEY)");
    } else {
        println!("  secret key:   {}", root.secret_key);
    }
    println!("  try: AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY=... aws --endpoint-url http://{s3_addr} s3 ls", root.access_key);

    shutdown_signal().await;
    tracing::info!("shutting down");
    if let (Some(session), Some(path)) = (fuse, &args.mount) {
        crate::mount::unmount(path);
        drop(session);
    }
    local.shutdown().await;
    Ok(())
}

/// The metadata store engine.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
enum StoreEngine {
    /// B-tree (redb): faster reads, slower commits.
    Redb,
    /// LSM (fjall): 2-6x faster raft commits, slower scans.
    Fjall,
}

fn legacy_engine() -> StoreEngine {
    StoreEngine::Redb
}

/// What a data directory was created with: recorded at the first start; asking for another
/// is an error (moving a namespace between group counts or engines is not supported yet).
#[derive(serde::Serialize, serde::Deserialize)]
struct ClusterFile {
    version: u32,
    mnodes: u32,
    /// Absent in files written before the engine was recorded: those are redb.
    #[serde(default = "legacy_engine")]
    store: StoreEngine,
}

fn cluster_file(
    data_dir: &std::path::Path,
    mnodes: u32,
    store: StoreEngine,
) -> anyhow::Result<ClusterFile> {
    anyhow::ensure!((1..=256).contains(&mnodes), "--mnodes must be 1..=256");
    let path = data_dir.join("cluster.json");
    let recorded = match std::fs::read(&path) {
        Ok(bytes) => {
            let f: ClusterFile = serde_json::from_slice(&bytes)
                .with_context(|| format!("cannot parse {}", path.display()))?;
            anyhow::ensure!(
                f.version == 1,
                "{}: unknown version {}",
                path.display(),
                f.version
            );
            f
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A data directory from before anything was recorded: one group on redb.
            let legacy = data_dir.join("meta.redb").exists();
            let f = ClusterFile {
                version: 1,
                mnodes: if legacy { 1 } else { mnodes },
                store: if legacy { StoreEngine::Redb } else { store },
            };
            let tmp = data_dir.join("cluster.json.tmp");
            std::fs::write(&tmp, serde_json::to_vec_pretty(&f)?)?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(data_dir)?.sync_all()?;
            f
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    anyhow::ensure!(
        recorded.mnodes == mnodes && recorded.store == store,
        "{} holds a namespace of {} MNode groups on {:?}; start it with --mnodes {} --store {}",
        data_dir.display(),
        recorded.mnodes,
        recorded.store,
        recorded.mnodes,
        format!("{:?}", recorded.store).to_lowercase()
    );
    Ok(recorded)
}

async fn serve_s3(listener: TcpListener, service: s3s::service::S3Service) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let svc = service.clone();
        tokio::spawn(async move {
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), svc).await {
                tracing::debug!(error = %e, "S3 connection ended with an error");
            }
        });
    }
}

async fn gc_loop(cluster: Arc<Cluster>, scrub_age: Duration, interval: Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match collect_garbage(&cluster, scrub_age, true).await {
            Ok(r) if r.released + r.leaked > 0 => {
                tracing::info!(
                    released = r.released,
                    leaked = r.leaked,
                    "garbage collected"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "garbage collection failed"),
        }
    }
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
