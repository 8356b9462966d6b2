//! `saker server`: every role in one process on an embedded store (or, with `--config`, the
//! roles of one process of a multi-process cluster: see [`crate::roles`]).
//!
//! Layout of the data directory: `meta.redb` or `meta.fjall/` (raft log + state of every MNode
//! group), `chunks/` (the chunkstore), `access-keys.json`, `cluster.json` (the number of MNode
//! groups and the store engine, fixed at the first start).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::access_log::AccessLog;
use clap::Args;
use saker_chunkstore::{ChunkServer, DiskChunkStore};
use saker_client::master_keys::MasterKeys;
use saker_client::sealed::Keyring;
use saker_client::{Cluster, ClusterConfig};
use saker_coordinator::{AccessKeyStore, NamespaceCoordinator};
use saker_gateway::Gateway;
use saker_mnode::{LocalGroups, MnodeConfig, ParentUpdates, TikvStore};
use saker_rpc::{ClusterMap, CoordinatorService, MetaService, RpcServer};
use tokio::net::TcpListener;

use crate::admin::{self, AdminState};
use crate::coordinator_host::Active;
pub(crate) use crate::data_dir::{cluster_file, open_store, StoreEngine};
pub(crate) use crate::loops::*;
use crate::process_config::ProcessConfig;
use crate::{parse_duration, parse_size};

/// How the balancer picks exception-table entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BalancePolicy {
    /// FalconFS: redirect frequent file names while a group holds more than 1/groups +
    /// epsilon of the inodes.
    Even,
    /// Origami: every cost window, the moves with the largest predicted cut of the job
    /// completion time (the most loaded group's work), their own cost counted.
    Benefit,
}

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
    pub(crate) rpc_addr: SocketAddr,
    /// Base domain for virtual-hosted-style requests (bucket.DOMAIN); path style always works.
    #[arg(long)]
    domain: Option<String>,
    // 16 KiB by measurement: 64 KiB objects stored inline read ~1.7x faster but wrote ~1.5x
    // slower through the raft log than as chunks.
    /// Objects up to this size are stored inside the MNode (its raft log and store) instead
    /// of as chunks: small objects read faster, larger ones would slow writes and grow the
    /// metadata store and its snapshots.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    inline_threshold: u64,
    /// Larger objects are split into chunks of this size.
    #[arg(long, default_value = "8MiB", value_parser = parse_size)]
    chunk_size: u64,
    /// The master key of SSE-S3 encryption (`saker admin master-key FILE`; mode 600,
    /// outside the data directory). Without it, SSE-S3 requests are refused (SSE-C needs none).
    #[arg(long, value_name = "FILE")]
    sse_key_file: Option<PathBuf>,
    /// The keys of SSE-KMS: a keyring file of `KEY-ID HEX` lines (`saker admin kms-key FILE
    /// ID` adds one; mode 600, outside the data directory). Without it, SSE-KMS is refused.
    #[arg(long, value_name = "FILE")]
    sse_kms_keyring: Option<PathBuf>,
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
    /// Concurrent request merging: the MNode executor runs everything queued as one
    /// transaction and one raft entry (`true`), or one request per transaction (`false`, the
    /// ablation baseline).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    merge: bool,
    // fjall by measurement: 1.4-1.7x the S3 PUTs of redb at 16 clients with 4 groups, GETs
    // 0.8-1x (compat_tests/bench/engines/README.md for the engine-level numbers).
    /// Metadata store engine, fixed when the data directory is created: fjall (the default,
    /// for write-heavy namespaces), redb (reads over writes), or tikv (a TiKV cluster, for a
    /// namespace past one machine's disks).
    #[arg(long, value_enum, default_value = "fjall")]
    store: StoreEngine,
    /// With `--store tikv`: PD endpoints of the TiKV cluster (`host:port`, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pd: Vec<String>,
    /// With `--store tikv`: the keyspace (key prefix `saker/NAME/`) the namespace lives in,
    /// so that several saker clusters share one TiKV; fixed when the data directory is
    /// created.
    #[arg(long)]
    tikv_keyspace: Option<String>,
    /// With `--store tikv`: how saker takes part in TiKV's GC. `tenant` (a shared cluster):
    /// each node registers a PD service safe point trailing the oldest timestamp it reads at,
    /// so the cluster's GC worker (TiDB's) collects the old versions saker leaves behind and
    /// none it still reads; saker never moves the GC safe point nor resolves locks itself.
    /// `global`, only for a TiKV cluster dedicated to saker with no other GC worker: each
    /// node also acts as the GC worker (resolves locks over the whole key space, moves the GC
    /// safe point).
    #[arg(long, value_enum, default_value = "tenant")]
    tikv_gc: crate::data_dir::TikvGc,
    /// With `--store tikv`: how often the service safe point (and with `--tikv-gc global`
    /// the GC safe point) moves on.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    tikv_gc_every: Duration,
    /// When a write is acknowledged: `disk` (on disk first: a synchronous raft log write and a
    /// chunk volume fdatasync per group commit; survives a power loss) or `process` (written
    /// to the kernel first; on disk within 1 s or at the next fsync(2) through a mount:
    /// survives a crash of any saker process, not a power loss — what a local file system
    /// gives an un-fsynced write, and JuiceFS on SQLite by default). Applies to the fjall
    /// engine's raft log journal and to chunk volumes; other writes stay on disk first.
    #[arg(long, default_value = "disk")]
    durability: saker_rpc::Durability,
    /// MNode groups the namespace is spread over (in this process). Fixed when the data
    /// directory is created.
    #[arg(long, default_value_t = 4)]
    mnodes: u32,
    /// Names too common for one group (e.g. `train,val`): each inode of such a name is placed
    /// by hash(parent id, name) instead of hash(name), and requests for it are forwarded by
    /// whichever group receives them. Fixed when the data directory is created.
    #[arg(long, value_delimiter = ',')]
    pathwalk: Vec<String>,
    /// Also mount the namespace here as a FUSE file system (unmounted at shutdown).
    #[arg(long)]
    mount: Option<PathBuf>,
    #[command(flatten)]
    fuse: crate::mount::FuseArgs,
    #[command(flatten)]
    pub(crate) otlp: crate::telemetry::OtlpArgs,
    #[command(flatten)]
    pub(crate) limits: crate::limits::LimitArgs,
    /// How often garbage collection runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    gc_interval: Duration,
    /// How often a repair pass brings the chunks writes noted as short of replicas to all
    /// their replicas (a replicated cluster; 0s: only on `saker admin repair --noted`).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub repair_every: Duration,
    /// How often a full repair pass lists every chunkstore and brings every referenced chunk
    /// to all its replicas (0s: only on `saker admin repair`, and on a node back from a lost
    /// disk).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub repair_full_every: Duration,
    /// The periodic repair's pace, in MiB/s copied (0: unlimited): re-replicating a lost
    /// disk's chunks leaves the disks and network room for foreground requests
    /// (`saker admin repair` runs unpaced).
    #[arg(long, default_value_t = 64)]
    pub repair_rate: u64,
    /// How often a scrub reads every copy of every chunk whole, checking its CRC32C, and
    /// rewrites a bad copy from a good one (0s: only on `saker admin scrub`).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub scrub_every: Duration,
    /// The scrub's pace, in MiB/s (0: unlimited).
    #[arg(long, default_value_t = 16)]
    pub scrub_rate: u64,
    /// How long a lifecycle "day" is, in seconds (rules' Days count these; 86400 outside
    /// tests, as Ceph's lc_debug_interval shortens them).
    #[arg(long, default_value_t = 86_400)]
    pub lifecycle_day_secs: u64,
    /// The local cache of objects read through from remote tiers (`tier-cache/` in the data
    /// directory, emptied at start; 0: none).
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub tier_cache_size: u64,
    /// How often a lifecycle pass applies the buckets' rules (more often when half a
    /// lifecycle day is shorter; 0s: only on `saker admin lifecycle run`).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub lifecycle_every: Duration,
    /// The most objects, versions and uploads a lifecycle pass looks at per second (0:
    /// unpaced): its share of the machine beside foreground requests.
    #[arg(long, default_value_t = 250)]
    pub lifecycle_rate: u64,
    /// Run a balancing round (redirect frequent file names so no MNode group holds more than
    /// 1/groups + --balance-epsilon of the inodes) this often, once the namespace holds 100,000
    /// inodes; 0s: only on `saker admin balance`.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub balance_every: Duration,
    #[arg(long, default_value_t = 0.01)]
    pub balance_epsilon: f64,
    /// `even` balances inode counts (FalconFS); `benefit` moves names by their predicted
    /// benefit to job completion time (Origami), once per --load-window.
    #[arg(long, value_enum, default_value = "even")]
    pub balance_policy: BalancePolicy,
    /// The `even` policy's periodic rounds leave namespaces smaller than this alone: a few
    /// thousand inodes spread by a 256-vnode ring are uneven by chance, and no name is worth a
    /// migration (`saker admin balance` still balances them on request).
    #[arg(long, default_value_t = 100_000)]
    pub balance_min_inodes: u64,
    /// Operations per second each MNode group may do (a token bucket per group): gives each
    /// group a fixed capacity, as a metadata server of its own has, so that on one machine the
    /// balancer's choices show (Origami's setting; benchmarks use it). Unlimited if unset.
    #[arg(long)]
    pub group_ops_limit: Option<u32>,
    /// The window of each group's cost accounting (`saker admin balance stats`, `/metrics`):
    /// the balancer predicts the next window from the past ones.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub load_window: Duration,
    /// Space kept free on the metadata store's file system: below it, writes that add data
    /// are answered 507 InsufficientStorage (ENOSPC through a mount) before they reach the
    /// raft log, deletes still pass, and writes resume once space is back (0: no reserve).
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub meta_reserve: u64,
    /// Raft entries between two snapshots of an MNode group: the log before a snapshot is
    /// purged (less a tenth, at most 200 entries), and a replica further behind than the log
    /// reaches is sent the snapshot instead.
    #[arg(long, default_value_t = 2000)]
    raft_snapshot_logs: u64,
    /// Run as one process of a multi-process cluster: the TOML file names this process's
    /// roles, listeners and data directory, and where the other roles run
    /// (deploy/local-cluster/ has examples). It replaces --data-dir, the listener flags and
    /// --mnodes; the tuning flags still apply.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// With --config: check the file (syntax, roles, addresses, this process's place in the
    /// cluster), say what it describes and exit, starting nothing (0: valid).
    #[arg(long, requires = "config")]
    pub check_config: bool,
    /// With --config: this node's zone (failure domain), in place of the file's `zone`.
    #[arg(long, requires = "config")]
    pub zone: Option<String>,
    /// Write an S3 access log (a JSON line per request: time, access key, operation, bucket,
    /// key, status, bytes, remote address, request id) to FILE, appending (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Serve S3 and the admin API over TLS with this certificate chain (PEM); needs
    /// --tls-key. Without it they serve plain HTTP (meant for loopback).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Run the cluster RPC in plaintext, authenticated by tokens that anyone who sees one
    /// can replay for minutes, instead of mutual TLS: for a closed network only. Warns at
    /// start and on /health. Every node and library client of the cluster must use it.
    #[arg(long)]
    pub insecure_rpc: bool,
    /// Start from the metadata backup in DIR (`saker admin backup DIR`) on an empty data
    /// directory (its chunks, if any, copied or kept in place). A replicated cluster's nodes
    /// are all started with it; each restores the groups it creates.
    #[arg(long, value_name = "DIR")]
    pub restore: Option<PathBuf>,
}

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.config {
        let cfg = ProcessConfig::load_in_zone(path, args.zone.clone())?;
        if args.check_config {
            println!("{}: ok, {}", path.display(), cfg.summary());
            return Ok(());
        }
        return crate::roles::run(cfg, args).await;
    }
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    crate::disk_space::watch(&args.data_dir);
    crate::disk_space::keep_reserve(&args.data_dir, args.meta_reserve);
    // The RPC listener serves holders of this cluster's credential only.
    crate::cluster_credential::install_node(
        &args.data_dir.join(crate::cluster_credential::FILE_NAME),
        true,
        args.insecure_rpc,
    )?;
    let env_root = env_root_key();
    let root_from_env = env_root.is_some();
    let keys = Arc::new(AccessKeyStore::open(
        &args.data_dir.join("access-keys.json"),
        env_root,
    )?);
    let recorded = cluster_file(
        &args.data_dir,
        args.mnodes,
        args.store,
        None,
        &args.pathwalk,
        args.tikv_keyspace.as_deref(),
    )?;
    let mnodes = recorded.mnodes;
    let opened = open_store(
        &args.data_dir,
        &recorded,
        args.durability,
        &args.pd,
        args.tikv_gc(),
    )?;
    let store = opened.store;
    if let Some(dir) = &args.restore {
        let groups: Vec<u32> = (1..=mnodes).collect();
        crate::backup::restore(dir, &store, &groups, &groups, Some(&args.data_dir)).await?;
    }
    let chunks: Arc<dyn saker_chunkstore::ChunkStore> = Arc::new(
        DiskChunkStore::open_with_durability(&args.data_dir.join("chunks"), args.durability)?,
    );
    let tikv = opened.tikv.clone();
    let mut mnode_config = args.mnode_config(1, opened.tikv);
    mnode_config.sse_keys = sse_keys(args.master_keys(&args.data_dir)?);
    let local = LocalGroups::start_placed(
        store,
        mnodes,
        mnode_config,
        recorded.vnodes,
        pathwalk_table(&args.pathwalk),
    )
    .await?;
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = local.services();
    let namespace = Arc::new(
        NamespaceCoordinator::persistent(local.router.clone(), groups.clone(), &args.data_dir)
            .await?,
    );
    let coordinator: Arc<dyn CoordinatorService> = namespace.clone();
    local.connect(coordinator.clone());
    // Renames a crash left half done are finished before serving (or, if an MNode keeps
    // failing them, in the background, as are renames whose MNodes stop answering later).
    let resolving = tokio::spawn({
        let namespace = namespace.clone();
        async move { namespace.resolve_pending().await }
    });
    if tokio::time::timeout(std::time::Duration::from_secs(10), resolving)
        .await
        .is_err()
    {
        tracing::warn!("logged renames are still unresolved; retrying in the background");
    }
    tokio::spawn(namespace.clone().run_resolver());
    tokio::spawn(balance_loop(namespace.clone(), args.balance()));
    let map = ClusterMap {
        version: 1,
        groups: local.router.ring().groups().to_vec(),
        vnodes: recorded.vnodes,
        exceptions: local.router.exceptions().clone(),
        endpoints: Default::default(),
    };
    anyhow::ensure!(
        map.router()? == local.router,
        "the cluster map does not describe the in-process groups"
    );
    let cluster = Arc::new(Cluster::new(
        local.router.clone(),
        groups.clone(),
        chunks.clone(),
        args.client_config(&args.data_dir)?,
    ));

    let gateway = Gateway::new(cluster.clone(), keys.clone())
        .with_key_limits(args.limits.keys())
        .with_lifecycle(args.lifecycle_day(), args.lifecycle_rate)
        .with_tier_cache(args.data_dir.join("tier-cache"), args.tier_cache_size)
        .context("cannot make the tier cache")?;
    // Library mounts read tiered versions through this node, which holds the tiers' keys.
    let rpc = RpcServer::new(groups.clone(), coordinator, map)
        .with_chunks(Arc::new(ChunkServer(chunks.clone())))
        .with_tier_reads(gateway.tiers().clone());
    let s3 = gateway
        .clone()
        .into_front(args.domain.as_deref())
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

    let tls = args.tls()?;
    let scheme = crate::listen::scheme(&tls);
    tokio::spawn(crate::listen::serve_s3(
        s3_listener,
        tls.clone(),
        args.limits.connections(),
        s3,
        args.access_log()?,
    ));
    let sets = local
        .mnodes
        .iter()
        .map(|m| {
            let replica = saker_rpc::Replica {
                addr: "local".into(),
                service: m.clone(),
            };
            (
                m.group(),
                Arc::new(saker_rpc::ReplicaSet::new(vec![replica])),
            )
        })
        .collect();
    let admin_app = admin::router(AdminState {
        keys: keys.clone(),
        chunks,
        cluster: cluster.clone(),
        nonces: Default::default(),
        nodes: None,
        namespace: Active::fixed(namespace.clone()),
        groups: Arc::new(sets),
        gateway: Some(gateway.clone()),
        forward: Default::default(),
        plain_public: admin::plain_public(tls.is_some(), Some(admin_addr)),
    });
    tokio::spawn(crate::listen::serve_router(admin_listener, tls, admin_app));
    tokio::spawn(async move {
        if let Err(e) = rpc.serve(rpc_listener).await {
            tracing::error!(error = %e, "RPC listener failed");
        }
    });
    tokio::spawn(gc_loop(
        cluster.clone(),
        gateway.tiers().clone(),
        args.scrub_age,
        args.gc_interval,
        None,
    ));
    tokio::spawn(scrub_loop(
        cluster.clone(),
        args.scrub_every,
        args.scrub_rate,
        None,
    ));
    tokio::spawn(lifecycle_loop(gateway, args.lifecycle_every(), None));

    let fuse = match &args.mount {
        Some(path) => Some(crate::mount::spawn(
            cluster.clone(),
            path,
            &args.fuse,
            args.durability,
        )?),
        None => None,
    };

    let root = keys.root();
    println!("saker is ready");
    println!("  S3 endpoint:  {scheme}://{s3_addr}");
    println!("  admin:        {scheme}://{admin_addr}  (/health, /metrics)");
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
        println!(
            "  secret key:   {}",
            shown_secret(&root.secret_key, &args.data_dir)
        );
    }
    println!("  try: AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY=... aws --endpoint-url {scheme}://{s3_addr} s3 ls", root.access_key);

    shutdown_signal().await;
    tracing::info!("shutting down");
    if let (Some((session, guard)), Some(path)) = (fuse, &args.mount) {
        crate::mount::unmount(path);
        // Wait for the session's threads, so every op's span has ended before telemetry's
        // last flush; a lazy unmount with files still open keeps them, so not for long.
        let served = tokio::task::spawn_blocking(move || session.join());
        match tokio::time::timeout(std::time::Duration::from_secs(5), served).await {
            Ok(Ok(Ok(()))) => {}
            Ok(r) => tracing::warn!(?r, "the FUSE session ended badly"),
            Err(_) => {
                tracing::warn!("the FUSE session is still open (files held open); leaving it")
            }
        }
        drop(guard);
    }
    local.shutdown().await;
    crate::data_dir::leave_tikv_gc(tikv.as_ref());
    Ok(())
}

impl ServerArgs {
    /// The settings of an MNode group from the flags.
    /// The TLS setup of the HTTP listeners, if `--tls-cert` is given.
    pub(crate) fn tls(&self) -> anyhow::Result<Option<tokio_rustls::TlsAcceptor>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(crate::listen::acceptor(cert, key)?)),
            _ => Ok(None),
        }
    }

    /// The access log `--access-log` names, opened.
    pub(crate) fn access_log(&self) -> anyhow::Result<Option<Arc<AccessLog>>> {
        self.access_log
            .as_deref()
            .map(|p| AccessLog::open(p).map(Arc::new))
            .transpose()
    }

    pub(crate) fn balance(&self) -> crate::coordinator_host::Balance {
        crate::coordinator_host::Balance {
            every: self.balance_every,
            epsilon: self.balance_epsilon,
            policy: self.balance_policy,
            min_inodes: self.balance_min_inodes,
            window: self.load_window,
        }
    }

    pub(crate) fn mnode_config(&self, group: u32, tikv: Option<Arc<TikvStore>>) -> MnodeConfig {
        let mut cfg = MnodeConfig::new(group);
        cfg.tikv = tikv;
        cfg.gc_grace = self.gc_grace;
        cfg.pipeline_depth = self.pipeline_depth;
        cfg.snapshot_logs = self.raft_snapshot_logs;
        cfg.ops_limit = self.group_ops_limit.filter(|&n| n > 0);
        cfg.load_window = self.load_window;
        if !self.merge {
            cfg.max_batch = 1;
        }
        cfg.parent_updates = match self.parent_updates {
            ParentUpdatesArg::Sync => ParentUpdates::Sync,
            ParentUpdatesArg::Async => ParentUpdates::Async,
        };
        cfg
    }

    /// The SSE-S3 master keys of `--sse-key-file` (which must not lie in `data_dir`): the
    /// gateway's, and the MNodes', which give library mounts data keys.
    pub(crate) fn master_keys(&self, data_dir: &Path) -> anyhow::Result<Option<Arc<MasterKeys>>> {
        Ok(match &self.sse_key_file {
            Some(path) => Some(Arc::new(MasterKeys::load(path, Some(data_dir))?)),
            None => None,
        })
    }

    /// The data-path settings of a front end from the flags, with the master key read (it
    /// must not lie in `data_dir`).
    pub(crate) fn client_config(&self, data_dir: &Path) -> anyhow::Result<ClusterConfig> {
        let master_key = self.master_keys(data_dir)?;
        let kms_keys = match &self.sse_kms_keyring {
            Some(path) => Some(Arc::new(Keyring::load(path, Some(data_dir))?)),
            None => None,
        };
        Ok(ClusterConfig {
            inline_threshold: self.inline_threshold as usize,
            chunk_size: self.chunk_size as usize,
            master_key,
            kms_keys,
        })
    }

    pub(crate) fn store(&self) -> StoreEngine {
        self.store
    }

    /// The PD endpoints and TiKV keyspace flags (`--store tikv`).
    pub(crate) fn tikv(&self) -> (&[String], Option<&str>) {
        (&self.pd, self.tikv_keyspace.as_deref())
    }

    /// How the TiKV engine takes part in TiKV's GC (`--tikv-gc`, `--tikv-gc-every`).
    pub(crate) fn tikv_gc(&self) -> saker_mnode::GcPart {
        saker_mnode::GcPart {
            global: self.tikv_gc == crate::data_dir::TikvGc::Global,
            every: self.tikv_gc_every,
        }
    }

    pub(crate) fn durability(&self) -> saker_rpc::Durability {
        self.durability
    }

    pub(crate) fn gc(&self) -> (Duration, Duration) {
        (self.scrub_age, self.gc_interval)
    }

    pub(crate) fn domain(&self) -> Option<&str> {
        self.domain.as_deref()
    }

    pub(crate) fn lifecycle_day(&self) -> Duration {
        Duration::from_secs(self.lifecycle_day_secs.max(1))
    }

    /// How often the lifecycle pass runs (zero: never by itself).
    pub(crate) fn lifecycle_every(&self) -> Duration {
        match self.lifecycle_every {
            Duration::ZERO => Duration::ZERO,
            every => every.min(self.lifecycle_day() / 2),
        }
    }
}

/// The exception table that places `names` by path walk.
pub(crate) fn pathwalk_table(names: &[String]) -> saker_namespace::ExceptionTable {
    let mut t = saker_namespace::ExceptionTable::new();
    for n in names {
        t.set(n.clone(), saker_namespace::Exception::PathWalk);
    }
    t
}

/// The root access key from `SAKER_ACCESS_KEY` / `SAKER_SECRET_KEY`, if both are set and not
/// empty.
pub(crate) fn env_root_key() -> Option<(String, String)> {
    match (
        std::env::var("SAKER_ACCESS_KEY"),
        std::env::var("SAKER_SECRET_KEY"),
    ) {
        (Ok(a), Ok(s)) if !a.is_empty() && !s.is_empty() => Some((a, s)),
        _ => None,
    }
}

/// How a generated root secret is shown at start: itself on a terminal; in a log (stdout
/// redirected) only where it is kept, `DATA_DIR/access-keys.json` (mode 0600).
pub(crate) fn shown_secret(secret: &str, data_dir: &std::path::Path) -> String {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        secret.to_string()
    } else {
        format!(
            "(not printed into a log: the root key's secret_key in {}, mode 0600)",
            data_dir.join("access-keys.json").display()
        )
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

/// The master keys as the MNodes use them.
pub(crate) fn sse_keys(keys: Option<Arc<MasterKeys>>) -> Option<Arc<dyn saker_rpc::SseKeys>> {
    keys.map(|k| k as Arc<dyn saker_rpc::SseKeys>)
}
