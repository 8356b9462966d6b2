//! One MNode group: its raft instance, its executor and the [`MetaService`] it serves.
//!
//! This module holds the group's settings, its state and its start; the child modules hold
//! what it does (dispatch, serving, routing, controls, leadership, parent updates, status).

mod backup;
mod controls;
mod dispatch;
mod grants;
mod holds;
mod leader;
mod parents;
mod routing;
mod serve;
mod settings;
mod sse_keys;
mod status;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use saker_namespace::{DentryReplica, Router};
#[cfg(doc)]
use saker_rpc::MetaService;
use saker_rpc::{ChannelPool, ClientTag, CoordinatorService, MetaError};
use tokio::sync::{mpsc, Semaphore};

use crate::capacity::OpsLimit;
use crate::changes::{ChangeLog, Peers};
use crate::dirty::DirtySet;
use crate::engine::Engine;
use crate::error::MnodeError;
use crate::executor::{BatchCounts, Executor, ParentUpdates, Pending};
use crate::frozen::FrozenDirs;
use crate::keys::{Keys, EXCEPTIONS};
use crate::leadership::{Change, Leadership};
use crate::lease::Lease;
use crate::load::LoadRecorder;
use crate::raft::{LogStore, Network, Raft, StateMachine};
use crate::records::{decode, SmMeta};
use crate::store::{MetaStore, TikvStore};
use crate::tickets::Tickets;
use leader::watch_leadership;
use saker_namespace::SharedRouter;

/// How often one request may be handed back by the executor before it fails.
const MAX_ATTEMPTS: usize = 16;

/// Settings of one MNode group.
#[derive(Clone, Debug)]
pub struct MnodeConfig {
    /// Group id, 1-based; also the high 16 bits of every inode id it allocates.
    pub group: u32,
    /// Raft node id of this replica.
    pub node_id: u64,
    /// How long released chunks stay readable before deletion.
    pub gc_grace: Duration,
    /// Upper bound of ops per batch.
    pub max_batch: usize,
    /// Batches in flight (proposed, not yet applied) at most.
    pub pipeline_depth: usize,
    /// Where every name lives (the cluster's ring and exception table).
    pub router: Router,
    /// When ops that change another group's directory are answered.
    pub parent_updates: ParentUpdates,
    /// The group's voters when it is created: raft node id and RPC address, in placement
    /// order. Empty: `node_id` alone, with no network. The first one creates the group (and
    /// so most likely leads it first: each group starts at another node, which spreads the
    /// leaders).
    pub voters: Vec<(u64, String)>,
    /// This replica's RPC address (how its peers reach it).
    pub addr: String,
    /// Connections to peer nodes for raft traffic (shared by the process's groups).
    pub pool: Option<Arc<ChannelPool>>,
    /// Where snapshot files are made (they are unnamed: nothing is left behind).
    pub snapshot_dir: PathBuf,
    /// Raft entries between two snapshots (the log before a snapshot is purged, less a tail;
    /// a replica further behind than the log reaches gets the snapshot).
    pub snapshot_logs: u64,
    /// On the TiKV engine (the store is this one): no raft; the group is served under a
    /// lease in TiKV by one of the processes that may serve it ([`crate::lease`]).
    pub tikv: Option<Arc<TikvStore>>,
    /// Operations per second the group may do (`--group-ops-limit`; `None`: unlimited).
    pub ops_limit: Option<u32>,
    /// The window of the group's cost accounting ([`crate::load`]).
    pub load_window: Duration,
    /// The SSE-S3 master keys (`--sse-key-file`), to give library mounts data keys; without
    /// them such requests, and mounts' sealed commits, are refused.
    pub sse_keys: Option<Arc<dyn saker_rpc::SseKeys>>,
}

impl MnodeConfig {
    /// A group alone in its cluster.
    pub fn new(group: u32) -> Self {
        Self {
            group,
            node_id: 1,
            gc_grace: Duration::from_secs(600),
            max_batch: 512,
            pipeline_depth: 1,
            router: Router::single(group),
            parent_updates: ParentUpdates::Async,
            voters: Vec::new(),
            addr: "local".into(),
            pool: None,
            snapshot_dir: std::env::temp_dir(),
            snapshot_logs: 2000,
            tikv: None,
            ops_limit: None,
            load_window: crate::load::WINDOW,
            sse_keys: None,
        }
    }

    fn replicated(&self) -> bool {
        self.voters.len() > 1
    }

    /// Raft timing: a single voter elects itself at once; replicas on other processes get
    /// room for a loaded machine's scheduling and sync delays before they start an election.
    fn raft_config(&self) -> Result<openraft::Config, MnodeError> {
        let (heartbeat, election) = if self.replicated() {
            use crate::raft::liveness::{DEAD_AFTER, PING_EVERY};
            (PING_EVERY.as_millis() as u64, DEAD_AFTER.as_millis() as u64)
        } else {
            (100, 150)
        };
        openraft::Config {
            cluster_name: format!("saker-mnode-{}", self.group),
            heartbeat_interval: heartbeat,
            election_timeout_min: election,
            election_timeout_max: election * 2,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_logs.max(1)),
            max_in_snapshot_log_to_keep: (self.snapshot_logs / 10).min(200),
            ..Default::default()
        }
        .validate()
        .map_err(|e| MnodeError::Config(e.to_string()))
    }
}

pub struct Mnode {
    keys: Keys,
    node_id: u64,
    store: Arc<dyn MetaStore>,
    /// How batches commit: raft, or a lease in TiKV.
    engine: Engine,
    queue: mpsc::UnboundedSender<Pending>,
    router: SharedRouter,
    replica: Arc<Mutex<DentryReplica>>,
    frozen: Arc<FrozenDirs>,
    permits: Arc<Semaphore>,
    pipeline_depth: u32,
    peers: Arc<OnceLock<Peers>>,
    coordinator: OnceLock<Arc<dyn CoordinatorService>>,
    changes: Arc<ChangeLog>,
    /// This group's directories other groups changed without pushing yet (async mode).
    dirty: Arc<Mutex<DirtySet>>,
    forwards: AtomicU64,
    remote_lookups: AtomicU64,
    invalidations: AtomicU64,
    pulls: AtomicU64,
    batch_counts: Arc<BatchCounts>,
    parent_updates: ParentUpdates,
    /// Deferred creates' outcomes, for `Committed`.
    tickets: Arc<Tickets>,
    /// Whether this replica serves (the caught-up leader).
    leadership: Arc<Leadership>,
    /// Held while the group's membership changes.
    membership: tokio::sync::Mutex<()>,
    /// Held while a read renews the leader lease.
    renewing: tokio::sync::Mutex<()>,
    /// Held while a coordinator's hold changes; the highest coordinator term seen (`holds`).
    holds: tokio::sync::Mutex<u64>,
    /// Backups being read (`saker admin backup`).
    backups: backup::Backups,
    /// Where snapshot and backup files are made.
    snapshot_dir: PathBuf,
    /// What the group's work costs, window by window.
    load: Arc<LoadRecorder>,
    /// The group's capacity, when limited.
    ops_limit: Option<OpsLimit>,
    /// The master keys, on a node started with them ([`MnodeConfig::sse_keys`]).
    sse_keys: Option<Arc<dyn saker_rpc::SseKeys>>,
    /// Raised by the executor when feed records are applied (`FeedRequest::Wait`).
    feed_clock: Arc<crate::feed_clock::FeedClock>,
}

fn untagged() -> ClientTag {
    ClientTag { client: 0, seq: 0 }
}

impl Mnode {
    /// Opens the group on `store`, becomes leader of its single-voter raft group and replays
    /// the log, then starts the executor. It serves requests for its own names at once; paths
    /// through other groups' directories, parent updates and the rmdir protocol work once
    /// [`Mnode::connect`] has introduced the peers and the coordinator.
    pub async fn start(
        store: Arc<dyn MetaStore>,
        cfg: MnodeConfig,
    ) -> Result<Arc<Self>, MnodeError> {
        if cfg.group == 0 || cfg.group > u16::MAX as u32 {
            return Err(MnodeError::Config(format!(
                "group id {} out of range 1..=65535",
                cfg.group
            )));
        }
        let keys = Keys::new(cfg.group);
        let mut applied_bytes = None;
        let (engine, leadership) = match &cfg.tikv {
            Some(tikv) => {
                let leadership = Arc::new(Leadership::new(cfg.node_id, crate::lease::LEASE_FOR));
                let (id, addr) = (cfg.node_id, cfg.addr.clone());
                let lease = Lease::new(tikv.clone(), keys, id, addr, leadership.clone());
                (Engine::Lease(Arc::new(lease)), leadership)
            }
            None => {
                let (raft, leadership, applied) = start_raft(&store, &cfg).await?;
                applied_bytes = Some(applied);
                (Engine::Raft(raft), Arc::new(leadership))
            }
        };
        let replicated = cfg.replicated() && cfg.tikv.is_none();
        let sm_meta = SmMeta::load(store.as_ref(), keys)?;
        let next_id = Arc::new(AtomicU64::new(first_free_id(cfg.group, &sm_meta)));
        let router = SharedRouter::new(cfg.router);
        // A table the coordinator pushed before a restart is newer than the configured one.
        if let Some(b) = store.get(&keys.single(EXCEPTIONS))? {
            router.install(&decode(&b)?);
        }
        let replica = Arc::new(Mutex::new(DentryReplica::new()));
        let frozen = Arc::new(FrozenDirs::default());
        // On TiKV every batch locks the group's fence key: batches of one group commit one at a
        // time (each still merges every request queued meanwhile).
        let pipeline_depth = match cfg.tikv {
            Some(_) => 1,
            None => cfg.pipeline_depth.clamp(1, 64) as u32,
        };
        let permits = Arc::new(Semaphore::new(pipeline_depth as usize));
        let peers = Arc::new(OnceLock::new());
        let load = Arc::new(LoadRecorder::new(cfg.group, cfg.load_window));
        let changes = Arc::new(ChangeLog::new(keys, store.clone(), peers.clone()));
        changes.observe(load.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let batch_counts = Arc::new(BatchCounts::default());
        let feed_clock = Arc::new(crate::feed_clock::FeedClock::default());
        let exec = Executor {
            keys,
            store: store.clone(),
            engine: engine.clone(),
            next_id,
            gc_grace: cfg.gc_grace,
            max_batch: cfg.max_batch,
            permits: permits.clone(),
            router: router.clone(),
            replica: replica.clone(),
            frozen: frozen.clone(),
            changes: changes.clone(),
            parent_updates: cfg.parent_updates,
            batch_counts: batch_counts.clone(),
            dedupe_trimmed: Default::default(),
            leadership: leadership.clone(),
            pipeline_depth,
            feed_clock: feed_clock.clone(),
        };
        tokio::spawn(exec.run(rx));
        let node = Arc::new(Self {
            keys,
            node_id: cfg.node_id,
            store,
            engine,
            queue: tx,
            router,
            replica,
            frozen,
            permits,
            pipeline_depth,
            peers,
            coordinator: OnceLock::new(),
            changes,
            dirty: Arc::new(Mutex::new(DirtySet::rebuilding([]))),
            forwards: AtomicU64::new(0),
            remote_lookups: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            pulls: AtomicU64::new(0),
            batch_counts,
            parent_updates: cfg.parent_updates,
            tickets: Arc::default(),
            leadership,
            membership: tokio::sync::Mutex::new(()),
            renewing: tokio::sync::Mutex::new(()),
            holds: tokio::sync::Mutex::new(0),
            backups: Default::default(),
            snapshot_dir: cfg.snapshot_dir.clone(),
            load,
            ops_limit: cfg.ops_limit.map(OpsLimit::new),
            sse_keys: cfg.sse_keys.clone(),
            feed_clock,
        });
        match &node.engine {
            Engine::Raft(raft) => {
                if replicated {
                    if let Some(pool) = &cfg.pool {
                        let addrs = cfg.voters.iter().map(|(_, a)| a.as_str());
                        let group = saker_rpc::ReplicaSet::over(cfg.group, addrs, pool, |_| None)
                            .map_err(|e| MnodeError::Config(e.to_string()))?;
                        let (raft, id, addr) = (raft.clone(), cfg.node_id, cfg.addr.clone());
                        tokio::spawn(crate::membership::join(raft, group, id, addr));
                    }
                }
                // A single voter serves at once (it replayed its log above); replicas once
                // elected.
                tokio::spawn(watch_leadership(Arc::downgrade(&node), raft.metrics()));
                if let Some(applied) = applied_bytes {
                    tokio::spawn(snapshot_when_large(Arc::downgrade(&node), applied));
                }
                if !replicated {
                    // The holds a coordinator took before a restart are kept (`holds`).
                    node.rebuild_holds()
                        .await
                        .map_err(|e| MnodeError::State(format!("the coordinator's holds: {e}")))?;
                    let m = raft.metrics().borrow().clone();
                    if let Change::Elected(term) = node.leadership.update(&m) {
                        node.leadership.serve(term, &m);
                    }
                }
            }
            Engine::Lease(lease) => {
                // The group serves at once if its lease is free (or ours from before and
                // lapsed); a process that finds it held waits in the background.
                crate::lease::step(&node, lease, &node.leadership).await;
                tokio::spawn(crate::lease::drive(
                    Arc::downgrade(&node),
                    lease.clone(),
                    node.leadership.clone(),
                ));
            }
        }
        // The inode count for /metrics: a full scan, so once a minute, and only while the
        // node is alive.
        let weak = Arc::downgrade(&node);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            loop {
                tick.tick().await;
                let Some(node) = weak.upgrade() else { return };
                if let Err(e) = node.counters() {
                    tracing::debug!(error = %e, "inode count failed");
                }
            }
        });
        Ok(node)
    }

    /// Introduces the other groups (this one may be among them) and the coordinator, then
    /// pushes change-log records a previous run left behind.
    pub fn connect(self: &Arc<Self>, peers: Peers, coordinator: Arc<dyn CoordinatorService>) {
        let _ = self.peers.set(peers);
        let _ = self.coordinator.set(coordinator);
        if self.leadership.ready_term() != 0 {
            self.resume_protocols();
        }
    }

    pub fn group(&self) -> u32 {
        self.keys.group
    }

    /// The group's raft instance on this node (for the transport's raft traffic); none on
    /// the TiKV engine.
    pub fn raft_handle(&self) -> Option<Raft> {
        self.engine.raft().cloned()
    }

    /// The group's raft instance, or the answer to a raft-only request on the TiKV engine.
    fn raft(&self) -> Result<&Raft, MetaError> {
        self.engine.raft().ok_or_else(|| {
            MetaError::Invalid("the group has no raft membership on the TiKV engine".into())
        })
    }

    /// Pushes every change-log record this group still owes other groups.
    pub async fn push_changes(&self) -> Result<(), MetaError> {
        self.changes.push_upto(u64::MAX).await
    }

    /// Stops raft; queued writes fail with `Unavailable`.
    pub async fn shutdown(&self) {
        match &self.engine {
            Engine::Raft(raft) => {
                let _ = raft.shutdown().await;
            }
            // The lease is given up: another process (or this one restarted) takes the
            // group over at once.
            Engine::Lease(lease) => {
                let l = lease.clone();
                match tokio::task::spawn_blocking(move || l.release()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(group = self.group(), error = %e, "lease not released; it lapses")
                    }
                    Err(e) => {
                        tracing::warn!(group = self.group(), error = %e, "lease release failed")
                    }
                }
                self.leadership.retire();
            }
        }
    }

    /// Stops this replica for good, after the group removed it: it answers every request
    /// `NotLeader` from now on, and its raft stops.
    pub async fn retire(&self) {
        self.leadership.retire();
        self.shutdown().await;
    }

    /// Deletes everything of `group` in `store`: its raft log, vote and state machine (a
    /// retired replica's data).
    pub async fn erase(store: Arc<dyn MetaStore>, group: u32) -> Result<(), MnodeError> {
        LogStore::open(store.clone(), group)?.erase().await?;
        tokio::task::spawn_blocking(move || {
            let start = group.to_be_bytes();
            let end = crate::store::prefix_end(&start);
            crate::store::delete_range(store.as_ref(), &start, end.as_deref(), true)
                .map_err(MnodeError::from)
        })
        .await
        .map_err(|e| MnodeError::Raft(format!("erase task failed: {e}")))?
    }

    fn coordinator(&self) -> Result<&Arc<dyn CoordinatorService>, MetaError> {
        self.coordinator
            .get()
            .ok_or_else(|| MetaError::Unavailable("no coordinator connected".into()))
    }

    /// Waits until no batch is between evaluation and apply.
    async fn drain_inflight(&self) -> Result<(), MetaError> {
        let all = self
            .permits
            .acquire_many(self.pipeline_depth)
            .await
            .map_err(|_| MetaError::Unavailable("executor stopped".into()))?;
        drop(all);
        Ok(())
    }
}

/// The first inode id a group may hand out after the ids its applied state records.
/// Starts the group's raft instance (the embedded engines): a single voter elects itself
/// and replays its log before this returns; replicas join their peers.
async fn start_raft(
    store: &Arc<dyn MetaStore>,
    cfg: &MnodeConfig,
) -> Result<(Raft, Leadership, Arc<AtomicU64>), MnodeError> {
    let sm = StateMachine::open(store.clone(), cfg.group, cfg.snapshot_dir.clone())?;
    let applied = sm.applied_bytes();
    let log = LogStore::open(store.clone(), cfg.group)?;
    let config = Arc::new(cfg.raft_config()?);
    let network = Network::new(cfg.group, cfg.pool.clone());
    let raft = Raft::new(cfg.node_id, config.clone(), network, log, sm)
        .await
        .map_err(MnodeError::raft)?;
    let leadership = Leadership::new(
        cfg.node_id,
        Duration::from_millis(config.election_timeout_min),
    );
    if !raft.is_initialized().await.map_err(MnodeError::raft)? {
        // The replica placed first creates the group, as its only voter; the others join
        // it (`membership`). A replica that lost its data (a wiped disk) must not create
        // it again: it joins what its peers hold.
        let first = cfg.voters.first().map_or(cfg.node_id, |(id, _)| *id);
        if first == cfg.node_id && !exists_elsewhere(cfg).await {
            let me = BTreeMap::from([(cfg.node_id, openraft::BasicNode::new(&cfg.addr))]);
            raft.initialize(me).await.map_err(MnodeError::raft)?;
        }
    }
    if !cfg.replicated() {
        // A single voter elects itself and replays its log before it is started.
        let wait = raft.wait(Some(Duration::from_secs(30)));
        wait.state(openraft::ServerState::Leader, "become leader")
            .await
            .map_err(MnodeError::raft)?;
        wait.metrics(crate::leadership::caught_up, "replay the whole log")
            .await
            .map_err(MnodeError::raft)?;
    }
    Ok((raft, leadership, applied))
}

/// Bytes a group applies before it snapshots however few its entries: the log before a
/// snapshot is purged, and the raft log journal holds every unpurged entry in memory (and
/// reads them all back at a restart). 2,000 merged entries of inline 4 KiB objects held
/// ~100 MiB per group; a snapshot costs one synced write of the applied state.
const SNAPSHOT_BYTES: u64 = 32 << 20;

/// Triggers a snapshot of the node's group whenever `applied` passes [`SNAPSHOT_BYTES`],
/// while the node is alive.
async fn snapshot_when_large(node: std::sync::Weak<Mnode>, applied: Arc<AtomicU64>) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let Some(node) = node.upgrade() else { return };
        if applied.load(Ordering::Relaxed) < SNAPSHOT_BYTES {
            continue;
        }
        let Engine::Raft(raft) = &node.engine else {
            return;
        };
        // Counted again from zero once the snapshot is built; until then, not asked twice.
        applied.store(0, Ordering::Relaxed);
        if let Err(e) = raft.trigger().snapshot().await {
            tracing::debug!(error = %e, "snapshot trigger failed");
            return;
        }
    }
}

pub(crate) fn first_free_id(group: u32, sm: &SmMeta) -> u64 {
    (sm.id_high_water + 1).max(((group as u64) << 48) + 1)
}

/// Whether another replica of `cfg`'s group has it already (a peer that answers reports
/// voters). Peers that do not answer within a second say nothing.
async fn exists_elsewhere(cfg: &MnodeConfig) -> bool {
    let Some(pool) = &cfg.pool else {
        return false;
    };
    let asks = cfg
        .voters
        .iter()
        .filter(|(id, _)| *id != cfg.node_id)
        .filter_map(|(_, addr)| pool.get(addr).ok())
        .map(|ch| async move {
            let peer = ch.meta(cfg.group);
            saker_rpc::raft_status(&peer, Duration::from_secs(1))
                .await
                .is_ok_and(|s| !s.voters.is_empty())
        });
    futures::future::join_all(asks).await.into_iter().any(|b| b)
}
