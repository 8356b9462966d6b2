//! The flags of `saker server`, and the settings each role takes from them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::access_log::AccessLog;
use anyhow::Context as _;
use clap::Args;
use saker_client::master_keys::MasterKeys;
use saker_client::sealed::Keyring;
use saker_client::{Cluster, ClusterConfig};
use saker_coordinator::AccessKeyStore;
use saker_gateway::Gateway;
use saker_mnode::{MnodeConfig, ParentUpdates, TikvStore};

use crate::data_dir::StoreEngine;
use crate::server::loops::{BalancePolicy, Passes};
use crate::{parse_duration, parse_size};

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum ParentUpdatesArg {
    Sync,
    Async,
}

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Where all state lives.
    #[arg(long, default_value = "./saker-data")]
    pub(crate) data_dir: PathBuf,
    /// File data on several disks (all-in-one server): one chunkstore per directory, as if
    /// each were a node's. Chunks are written as min(3, N) copies on distinct directories;
    /// erasure-coded storage classes put each shard on its own directory (4+2 needs six).
    /// A directory's path is its id in placement: keep the list and the paths as they are.
    /// Default: DATA_DIR/chunks alone.
    #[arg(long, value_delimiter = ',')]
    pub(crate) chunk_dirs: Vec<PathBuf>,
    /// S3 listener.
    #[arg(long, default_value = "127.0.0.1:9900")]
    pub(crate) s3_addr: SocketAddr,
    /// Admin listener: /health, /metrics and the admin API.
    #[arg(long, default_value = "127.0.0.1:9901")]
    pub(crate) admin_addr: SocketAddr,
    /// RPC listener for library clients (and later other saker processes): every MNode group
    /// and the coordinator of this process, and the cluster map, behind one address.
    #[arg(long, default_value = "127.0.0.1:9902")]
    pub(crate) rpc_addr: SocketAddr,
    /// Base domain for virtual-hosted-style requests (bucket.DOMAIN); path style always works.
    #[arg(long)]
    pub(crate) domain: Option<String>,
    // 16 KiB by measurement: 64 KiB objects stored inline read ~1.7x faster but wrote ~1.5x
    // slower through the raft log than as chunks.
    /// Objects up to this size are stored inside the MNode (its raft log and store) instead
    /// of as chunks: small objects read faster, larger ones would slow writes and grow the
    /// metadata store and its snapshots.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    pub(crate) inline_threshold: u64,
    /// Larger objects are split into chunks of this size.
    #[arg(long, default_value = "8MiB", value_parser = parse_size)]
    pub(crate) chunk_size: u64,
    /// The master key of SSE-S3 encryption (`saker admin master-key FILE`; mode 600,
    /// outside the data directory). Without it, SSE-S3 requests are refused (SSE-C needs none).
    #[arg(long, value_name = "FILE")]
    pub(crate) sse_key_file: Option<PathBuf>,
    /// The keys of SSE-KMS: a keyring file of `KEY-ID HEX` lines (`saker admin kms-key FILE
    /// ID` adds one; mode 600, outside the data directory). Without it, SSE-KMS is refused.
    #[arg(long, value_name = "FILE")]
    pub(crate) sse_kms_keyring: Option<PathBuf>,
    /// How long chunks of overwritten or deleted objects stay readable before deletion.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub(crate) gc_grace: Duration,
    /// Unreferenced chunks older than this are removed by the scrub (covers crashed writes;
    /// must exceed the longest upload).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub(crate) scrub_age: Duration,
    /// MNode executor: batches proposed to raft but not yet applied, at most (1 = no pipeline:
    /// measured faster here, as batches stay larger).
    #[arg(long, default_value_t = 1)]
    pub(crate) pipeline_depth: usize,
    /// When a create or unlink whose parent directory lives on another MNode group is
    /// answered: `async` (at once; the directory's owner pulls pending changes before it shows
    /// the directory's attributes) or `sync` (after the owner applied the change).
    #[arg(long, value_enum, default_value = "async")]
    pub(crate) parent_updates: ParentUpdatesArg,
    /// Concurrent request merging: the MNode executor runs everything queued as one
    /// transaction and one raft entry (`true`), or one request per transaction (`false`, the
    /// ablation baseline).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) merge: bool,
    // fjall by measurement: 1.4-1.7x the S3 PUTs of redb at 16 clients with 4 groups, GETs
    // 0.8-1x (compat_tests/bench/engines/README.md for the engine-level numbers).
    /// Metadata store engine, fixed when the data directory is created: fjall (the default,
    /// for write-heavy namespaces), redb (reads over writes), or tikv (a TiKV cluster, for a
    /// namespace past one machine's disks).
    #[arg(long, value_enum, default_value = "fjall")]
    pub(crate) store: StoreEngine,
    /// With `--store tikv`: PD endpoints of the TiKV cluster (`host:port`, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) pd: Vec<String>,
    /// With `--store tikv`: the keyspace (key prefix `saker/NAME/`) the namespace lives in,
    /// so that several saker clusters share one TiKV; fixed when the data directory is
    /// created.
    #[arg(long)]
    pub(crate) tikv_keyspace: Option<String>,
    /// With `--store tikv`: how saker takes part in TiKV's GC. `tenant` (a shared cluster):
    /// each node registers a PD service safe point trailing the oldest timestamp it reads at,
    /// so the cluster's GC worker (TiDB's) collects the old versions saker leaves behind and
    /// none it still reads; saker never moves the GC safe point nor resolves locks itself.
    /// `global`, only for a TiKV cluster dedicated to saker with no other GC worker: each
    /// node also acts as the GC worker (resolves locks over the whole key space, moves the GC
    /// safe point).
    #[arg(long, value_enum, default_value = "tenant")]
    pub(crate) tikv_gc: crate::data_dir::TikvGc,
    /// With `--store tikv`: how often the service safe point (and with `--tikv-gc global`
    /// the GC safe point) moves on.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) tikv_gc_every: Duration,
    /// When a write is acknowledged: `disk` (on disk first: a synchronous raft log write and a
    /// chunk volume fdatasync per group commit; survives a power loss) or `process` (written
    /// to the kernel first; on disk within 1 s or at the next fsync(2) through a mount:
    /// survives a crash of any saker process, not a power loss — what a local file system
    /// gives an un-fsynced write, and JuiceFS on SQLite by default). Applies to the fjall
    /// engine's raft log journal and to chunk volumes; other writes stay on disk first.
    #[arg(long, default_value = "disk")]
    pub(crate) durability: saker_rpc::Durability,
    /// MNode groups the namespace is spread over (in this process). Fixed when the data
    /// directory is created.
    #[arg(long, default_value_t = 4)]
    pub(crate) mnodes: u32,
    /// Names too common for one group (e.g. `train,val`): each inode of such a name is placed
    /// by hash(parent id, name) instead of hash(name), and requests for it are forwarded by
    /// whichever group receives them. Fixed when the data directory is created.
    #[arg(long, value_delimiter = ',')]
    pub(crate) pathwalk: Vec<String>,
    /// Also mount the namespace here as a FUSE file system (unmounted at shutdown).
    #[arg(long)]
    pub(crate) mount: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) fuse: crate::mount::FuseArgs,
    #[command(flatten)]
    pub(crate) otlp: crate::telemetry::OtlpArgs,
    #[command(flatten)]
    pub(crate) limits: crate::limits::LimitArgs,
    /// How often garbage collection runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(crate) gc_interval: Duration,
    /// How often a repair pass brings the chunks writes noted as short of replicas to all
    /// their replicas (a replicated cluster; 0s: only on `saker admin repair --noted`).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(crate) repair_every: Duration,
    /// How often a full repair pass lists every chunkstore and brings every referenced chunk
    /// to all its replicas (0s: only on `saker admin repair`, and on a node back from a lost
    /// disk).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub(crate) repair_full_every: Duration,
    /// The periodic repair's pace, in MiB/s copied (0: unlimited): re-replicating a lost
    /// disk's chunks leaves the disks and network room for foreground requests
    /// (`saker admin repair` runs unpaced).
    #[arg(long, default_value_t = 64)]
    pub(crate) repair_rate: u64,
    /// How often a scrub reads every copy of every chunk whole, checking its CRC32C, and
    /// rewrites a bad copy from a good one (0s: only on `saker admin scrub`).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub(crate) scrub_every: Duration,
    /// The scrub's pace, in MiB/s (0: unlimited).
    #[arg(long, default_value_t = 16)]
    pub(crate) scrub_rate: u64,
    /// How long a lifecycle "day" is, in seconds (rules' Days count these; 86400 outside
    /// tests, as Ceph's lc_debug_interval shortens them).
    #[arg(long, default_value_t = 86_400)]
    pub(crate) lifecycle_day_secs: u64,
    /// The local cache of objects read through from remote tiers (`tier-cache/` in the data
    /// directory, emptied at start; 0: none).
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub(crate) tier_cache_size: u64,
    /// How often a lifecycle pass applies the buckets' rules (more often when half a
    /// lifecycle day is shorter; 0s: only on `saker admin lifecycle run`).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub(crate) lifecycle_every: Duration,
    /// The most objects, versions and uploads a lifecycle pass looks at per second (0:
    /// unpaced): its share of the machine beside foreground requests.
    #[arg(long, default_value_t = 250)]
    pub(crate) lifecycle_rate: u64,
    /// Run a balancing round (redirect frequent file names so no MNode group holds more than
    /// 1/groups + --balance-epsilon of the inodes) this often, once the namespace holds 100,000
    /// inodes; 0s: only on `saker admin balance`.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub(crate) balance_every: Duration,
    #[arg(long, default_value_t = 0.01)]
    pub(crate) balance_epsilon: f64,
    /// `even` balances inode counts (FalconFS); `benefit` moves names by their predicted
    /// benefit to job completion time (Origami), once per --load-window.
    #[arg(long, value_enum, default_value = "even")]
    pub(crate) balance_policy: BalancePolicy,
    /// The `even` policy's periodic rounds leave namespaces smaller than this alone: a few
    /// thousand inodes spread by a 256-vnode ring are uneven by chance, and no name is worth a
    /// migration (`saker admin balance` still balances them on request).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) balance_min_inodes: u64,
    /// Operations per second each MNode group may do (a token bucket per group): gives each
    /// group a fixed capacity, as a metadata server of its own has, so that on one machine the
    /// balancer's choices show (Origami's setting; benchmarks use it). Unlimited if unset.
    #[arg(long)]
    pub(crate) group_ops_limit: Option<u32>,
    /// The window of each group's cost accounting (`saker admin balance stats`, `/metrics`):
    /// the balancer predicts the next window from the past ones.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) load_window: Duration,
    /// Space kept free on the metadata store's file system: below it, writes that add data
    /// are answered 507 InsufficientStorage (ENOSPC through a mount) before they reach the
    /// raft log, deletes still pass, and writes resume once space is back (0: no reserve).
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub(crate) meta_reserve: u64,
    /// Raft entries between two snapshots of an MNode group: the log before a snapshot is
    /// purged (less a tenth, at most 200 entries), and a replica further behind than the log
    /// reaches is sent the snapshot instead.
    #[arg(long, default_value_t = 2000)]
    pub(crate) raft_snapshot_logs: u64,
    /// Run as one process of a multi-process cluster: the TOML file names this process's
    /// roles, listeners and data directory, and where the other roles run
    /// (deploy/local-cluster/ has examples). It replaces --data-dir, the listener flags and
    /// --mnodes; the tuning flags still apply.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// With --config: check the file (syntax, roles, addresses, this process's place in the
    /// cluster), say what it describes and exit, starting nothing (0: valid).
    #[arg(long, requires = "config")]
    pub(crate) check_config: bool,
    /// With --config: this node's zone (failure domain), in place of the file's `zone`.
    #[arg(long, requires = "config")]
    pub(crate) zone: Option<String>,
    /// Write an S3 access log (a JSON line per request: time, access key, operation, bucket,
    /// key, status, bytes, remote address, request id) to FILE, appending (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub(crate) access_log: Option<PathBuf>,
    /// Serve S3 and the admin API over TLS with this certificate chain (PEM); needs
    /// --tls-key. Without it they serve plain HTTP (meant for loopback).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Run the cluster RPC in plaintext, authenticated by tokens that anyone who sees one
    /// can replay for minutes, instead of mutual TLS: for a closed network only. Warns at
    /// start and on /health. Every node and library client of the cluster must use it.
    #[arg(long)]
    pub(crate) insecure_rpc: bool,
    /// Start from the metadata backup in DIR (`saker admin backup DIR`) on an empty data
    /// directory (its chunks, if any, copied or kept in place). A replicated cluster's nodes
    /// are all started with it; each restores the groups it creates.
    #[arg(long, value_name = "DIR")]
    pub(crate) restore: Option<PathBuf>,
}

impl ServerArgs {
    /// The settings of an MNode group from the flags.
    /// The TLS setup of the HTTP listeners, if `--tls-cert` is given.
    pub(crate) fn tls(&self) -> anyhow::Result<Option<tokio_rustls::TlsAcceptor>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(crate::server::listeners::acceptor(cert, key)?)),
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

    pub(crate) fn balance(&self) -> crate::server::loops::Balance {
        crate::server::loops::Balance {
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

    /// The settings of the once-per-cluster passes.
    pub(crate) fn passes(&self) -> Passes {
        Passes {
            scrub_age: self.scrub_age,
            gc_interval: self.gc_interval,
            scrub_every: self.scrub_every,
            scrub_rate: self.scrub_rate,
            repair_every: (self.repair_every, self.repair_full_every),
            repair_rate: self.repair_rate,
            lifecycle_every: self.lifecycle_every(),
        }
    }

    /// The S3 gateway over `cluster`, its tier cache in `data_dir`.
    pub(crate) fn gateway(
        &self,
        cluster: Arc<Cluster>,
        keys: Arc<AccessKeyStore>,
        data_dir: &Path,
    ) -> anyhow::Result<Gateway> {
        Gateway::new(cluster, keys)
            .with_key_limits(self.limits.keys())
            .with_lifecycle(self.lifecycle_day(), self.lifecycle_rate)
            .with_tier_cache(data_dir.join("tier-cache"), self.tier_cache_size)
            .context("cannot make the tier cache")
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

    /// The resource of this server's spans: its node (the node id of its config file, else
    /// its RPC address) and roles.
    pub(crate) fn exporting(&self) -> crate::telemetry::Exporting {
        let all = "gateway,mnode,coordinator,chunkstore".to_string();
        let (node, roles) = match &self.config {
            None => (self.rpc_addr.to_string(), all),
            Some(path) => match crate::server::config::ProcessConfig::load(path) {
                Ok(cfg) => {
                    let node = match (cfg.node, &cfg.rpc_addr) {
                        (Some(n), _) => format!("node{n}"),
                        (None, Some(addr)) => addr.to_string(),
                        (None, None) => path.display().to_string(),
                    };
                    let roles: Vec<String> = cfg
                        .roles
                        .iter()
                        .map(|r| format!("{r:?}").to_lowercase())
                        .collect();
                    (node, roles.join(","))
                }
                // The server reports the bad config file itself.
                Err(_) => (path.display().to_string(), all),
            },
        };
        crate::telemetry::Exporting {
            args: self.otlp.clone(),
            node,
            roles,
        }
    }
}
