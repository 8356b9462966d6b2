//! `saker mount MOUNTPOINT --cluster ADDR`: the namespace of a running cluster as a FUSE file
//! system, and the in-process mount of `saker server --mount`.
//!
//! The mount needs only the cluster's RPC address: metadata goes to the MNodes, file data
//! to the chunkstores the cluster map names, and reads of versions moved to a remote tier to
//! the node at that address, which reads them through. A killed `saker mount` is unmounted by its guard
//! process (`crate::mount_guard`) and by `fusermount3` (auto_unmount), so no hung mount point
//! stays behind.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use saker_client::{Cluster, ClusterConfig};
use saker_fuse::MountConfig;
use saker_rpc::Durability;

use crate::{parse_duration, parse_size};

/// FUSE settings shared by `saker mount` and `saker server --mount`.
#[derive(Args, Debug, Clone)]
pub struct FuseArgs {
    /// How long the kernel trusts a name lookup (other clients' creates and deletes show after
    /// at most this long).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub entry_ttl: Duration,
    /// How long the kernel trusts attributes (size, mode, times).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub attr_ttl: Duration,
    // Measured: 16 threads creating files, 32 serving threads made ~1.8x the creates of 8.
    /// Threads serving kernel requests: as many requests as this are in flight at once, which
    /// the MNodes merge into shared transactions. Raise it for many concurrent writers.
    #[arg(long, default_value_t = 32)]
    pub fuse_threads: usize,
    /// Where files being written keep their local buffer until close (default: the temp dir).
    #[arg(long)]
    pub buffer_dir: Option<PathBuf>,
    // Measured with `--durability process`: the single CREATE made 1.09x the one-thread
    // creates, 1.06x at 16 threads and 1.04x the writes
    // (compat_tests/bench/results/2026-11-26-session21-experiments.json).
    /// open(O_CREAT) as MKNOD then OPEN, the sync between them, so creates in one directory
    /// do not wait for each other's syncs (mounts run as root; see `saker_fuse::created`).
    /// Default: true where creates wait for a disk sync (`--durability disk`, and `saker
    /// mount`, which cannot tell), false where they do not (`saker server --durability
    /// process`). Set it only to compare the two.
    #[arg(long, action = clap::ArgAction::Set)]
    pub split_create: Option<bool>,
}

impl FuseArgs {
    /// The mount's configuration, for a cluster whose writes are as durable as `durability`
    /// says.
    pub fn config(&self, durability: Durability) -> MountConfig {
        let mut cfg = MountConfig {
            entry_ttl: self.entry_ttl,
            attr_ttl: self.attr_ttl,
            threads: self.fuse_threads,
            split_create: self.split_create.unwrap_or(durability == Durability::Disk),
            ..MountConfig::default()
        };
        if let Some(d) = &self.buffer_dir {
            cfg.buffer_dir = d.clone();
        }
        cfg
    }
}

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Directory to mount on.
    mountpoint: PathBuf,
    /// RPC address of a running server (`saker server --rpc-addr`).
    #[arg(long, default_value = "127.0.0.1:9902")]
    cluster: String,
    /// The cluster's credential (`saker admin cluster-credential export FILE --client`; or
    /// $SAKER_CLUSTER_CREDENTIAL). The all-in-one server keeps its own in its data directory.
    #[arg(long)]
    credential: Option<PathBuf>,
    /// The cluster runs `--insecure-rpc`: speak plaintext RPC with tokens (or set
    /// SAKER_INSECURE_RPC=1). Warns.
    #[arg(long)]
    insecure_rpc: bool,
    /// Must match the server's `--inline-threshold`.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    inline_threshold: u64,
    /// Must match the server's `--chunk-size`.
    #[arg(long, default_value = "8MiB", value_parser = parse_size)]
    chunk_size: u64,
    /// Deprecated and ignored: the master key never leaves the nodes. The mount asks a node
    /// for each encrypted file's data key over mutual TLS.
    #[arg(long, value_name = "FILE", hide = true)]
    sse_key_file: Option<PathBuf>,
    #[command(flatten)]
    fuse: FuseArgs,
    #[command(flatten)]
    pub(crate) otlp: crate::telemetry::OtlpArgs,
}

impl MountArgs {
    /// The resource of this mount's spans: the mount point, role `mount`.
    pub(crate) fn exporting(&self) -> crate::telemetry::Exporting {
        crate::telemetry::Exporting {
            args: self.otlp.clone(),
            node: format!("mount:{}", self.mountpoint.display()),
            roles: "mount".into(),
        }
    }
}

pub async fn run(args: MountArgs) -> anyhow::Result<()> {
    crate::cluster_credential::install_client(args.credential.as_deref(), args.insecure_rpc)?;
    // File data goes to the cluster's chunkstore over RPC, as the map says.
    if let Some(path) = &args.sse_key_file {
        // Not even read: the master key belongs on the nodes only.
        tracing::warn!(
            file = %path.display(),
            "--sse-key-file is ignored by `saker mount`: encrypted files' data keys come from \
             the nodes (over mutual TLS); keep the master key off client hosts"
        );
    }
    let config = ClusterConfig {
        inline_threshold: args.inline_threshold as usize,
        chunk_size: args.chunk_size as usize,
        master_key: None,
        ..ClusterConfig::default()
    };
    let cluster = connect(&args.cluster, config)
        .await
        .with_context(|| format!("cannot reach the cluster at {}", args.cluster))?;
    // The cluster's durability is not known here: creates are taken to wait for a sync.
    let (session, _guard) = spawn(
        Arc::new(cluster),
        &args.mountpoint,
        &args.fuse,
        Durability::Disk,
    )?;
    println!("saker mounted at {}", args.mountpoint.display());
    let mut served = tokio::task::spawn_blocking(move || session.join());
    tokio::select! {
        r = &mut served => {
            r.context("the FUSE session thread")??;
            return Ok(());
        }
        _ = crate::signal::shutdown_signal() => {}
    }
    tracing::info!("unmounting");
    unmount(&args.mountpoint);
    served.await.context("the FUSE session thread")??;
    Ok(())
}

/// Mounts `cluster`, whose writes are as durable as `durability` says, at `mountpoint` in this
/// process (the runtime must be a multi-thread one), with the guard that detaches it should
/// this process die. Keep both until the mount is detached.
pub fn spawn(
    cluster: Arc<Cluster>,
    mountpoint: &Path,
    fuse: &FuseArgs,
    durability: Durability,
) -> anyhow::Result<(fuser::BackgroundSession, crate::mount_guard::Guard)> {
    let session = saker_fuse::spawn_mount(
        cluster,
        tokio::runtime::Handle::current(),
        mountpoint,
        fuse.config(durability),
    )
    .with_context(|| format!("cannot mount on {}", mountpoint.display()))?;
    let guard = crate::mount_guard::start(mountpoint)?;
    Ok((session, guard))
}

/// Detaches the mount so the session loop ends (root: umount2; others: fusermount3 -u).
pub fn unmount(mountpoint: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        return;
    }
    match std::process::Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(mountpoint)
        .status()
    {
        Ok(s) if s.success() => {}
        other => tracing::warn!(?other, "could not unmount"),
    }
}

/// The cluster behind `addr`, its file data placed on the chunkstores the cluster map names
/// and then on those the cluster records as nodes come and go ([`crate::chunk_members`]).
async fn connect(addr: &str, config: ClusterConfig) -> anyhow::Result<Cluster> {
    let channel = saker_rpc::RpcChannel::connect(addr).await?;
    let map = channel.cluster_map().await?;
    let pool = saker_rpc::ChannelPool::with(channel.clone());
    let chunks = Arc::new(saker_client::chunk_stores(&map, addr, &pool)?);
    let cluster = Cluster::from_map(&map, addr, &pool, chunks.clone(), config)?;
    // Tiered versions are read through the node this mount was pointed at: it holds the
    // tiers' keys, which a client credential may not read.
    cluster.set_tier_reader(Arc::new(saker_client::NodeTierReads::new(channel)));
    if map.endpoints.chunk_replicas > 1 {
        chunks.set_repair_log(Arc::new(saker_client::GroupsRepairLog::new(&cluster)));
    }
    if let Some((_, home)) = cluster.groups().next() {
        let state = Arc::new(saker_coordinator::GroupState::new(home.clone(), 0));
        // Placed by the record (ids, addresses, zones) from the first write on.
        if let Err(e) = crate::chunk_members::refresh(state.as_ref(), &chunks, None).await {
            tracing::debug!(error = %e, "chunkstore members not read yet");
        }
        tokio::spawn(crate::chunk_members::follow(state, chunks, None));
    }
    Ok(cluster)
}
