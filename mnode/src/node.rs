//! One MNode group: its raft instance, its executor and the [`MetaService`] it serves.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use saker_namespace::{DentryReplica, GroupId, Route, Router, ROOT_ID};
use saker_rpc::{
    access, Attr, ChannelPool, ClientTag, CoordinatorService, Entry, GroupCounters, InodeId,
    MetaError, MetaRequest, MetaResponse, MetaService, ObjectMeta, RemoveCond, Want,
};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::changes::{ChangeLog, Peers};
use crate::dirty::{DirtySet, Need};
use crate::error::MnodeError;
use crate::executor::{BatchCounts, Executor, ParentUpdates, Pending, Reply};
use crate::frozen::FrozenDirs;
use crate::keys::{Keys, PayloadKind, EXCEPTIONS};
use crate::leadership::{Change, Leadership};
use crate::metrics;
use crate::raft::{BatchEntry, LogStore, Network, Raft, StateMachine};
use crate::read::{apply_read, dir_usage};
use crate::records::{decode, SmMeta};
use crate::store::MetaStore;
use crate::tickets::Tickets;
use crate::tree::{
    child, for_each_value, resolve_parents, Absence, Child, Resolver, Retry, StoreView,
};
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
        }
    }

    fn replicated(&self) -> bool {
        self.voters.len() > 1
    }

    /// Raft timing: a single voter elects itself at once; replicas on other processes get
    /// room for a loaded machine's scheduling and sync delays before they start an election.
    fn raft_config(&self) -> Result<openraft::Config, MnodeError> {
        let (heartbeat, election) = if self.replicated() {
            (200, 1000)
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
    store: Arc<dyn MetaStore>,
    raft: Raft,
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
        let sm = StateMachine::open(store.clone(), cfg.group, cfg.snapshot_dir.clone())?;
        let log = LogStore::open(store.clone(), cfg.group)?;
        let config = Arc::new(cfg.raft_config()?);
        let replicated = cfg.replicated();
        let network = Network::new(cfg.group, cfg.pool.clone());
        let raft = Raft::new(cfg.node_id, config.clone(), network, log, sm)
            .await
            .map_err(MnodeError::raft)?;
        let leadership = Arc::new(Leadership::new(
            cfg.node_id,
            Duration::from_millis(config.election_timeout_min),
        ));
        if !raft.is_initialized().await.map_err(MnodeError::raft)? {
            // The replica placed first creates the group, as its only voter; the others join
            // it (`membership`). A replica that lost its data (a wiped disk) must not create
            // it again: it joins what its peers hold.
            let first = cfg.voters.first().map_or(cfg.node_id, |(id, _)| *id);
            if first == cfg.node_id && !exists_elsewhere(&cfg).await {
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
            wait.metrics(
                |m| m.last_applied.map(|l| l.leader_id.term) == Some(m.current_term),
                "replay the log through the term's first entry",
            )
            .await
            .map_err(MnodeError::raft)?;
        }

        let sm_meta = SmMeta::load(store.as_ref(), keys)?;
        let next_id = Arc::new(AtomicU64::new(first_free_id(cfg.group, &sm_meta)));
        let router = SharedRouter::new(cfg.router);
        // A table the coordinator pushed before a restart is newer than the configured one.
        if let Some(b) = store.get(&keys.single(EXCEPTIONS))? {
            router.install(&decode(&b)?);
        }
        let replica = Arc::new(Mutex::new(DentryReplica::new()));
        let frozen = Arc::new(FrozenDirs::default());
        let pipeline_depth = cfg.pipeline_depth.clamp(1, 64) as u32;
        let permits = Arc::new(Semaphore::new(pipeline_depth as usize));
        let peers = Arc::new(OnceLock::new());
        let changes = Arc::new(ChangeLog::new(keys, store.clone(), peers.clone()));
        let (tx, rx) = mpsc::unbounded_channel();
        let batch_counts = Arc::new(BatchCounts::default());
        let exec = Executor {
            keys,
            store: store.clone(),
            raft: raft.clone(),
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
        };
        tokio::spawn(exec.run(rx));
        let node = Arc::new(Self {
            keys,
            store,
            raft,
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
        });
        if replicated {
            if let Some(pool) = &cfg.pool {
                let addrs = cfg.voters.iter().map(|(_, a)| a.as_str());
                let group = saker_rpc::ReplicaSet::over(cfg.group, addrs, pool, |_| None)
                    .map_err(|e| MnodeError::Config(e.to_string()))?;
                let (raft, id, addr) = (node.raft.clone(), cfg.node_id, cfg.addr.clone());
                tokio::spawn(crate::membership::join(raft, group, id, addr));
            }
        }
        // A single voter serves at once (it replayed its log above); replicas once elected.
        tokio::spawn(watch_leadership(Arc::downgrade(&node), node.raft.metrics()));
        if !replicated {
            let m = node.raft.metrics().borrow().clone();
            if let Change::Elected(term) = node.leadership.update(&m) {
                node.leadership.serve(term, &m);
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

    /// Restarts what a leader does for the other groups from the replicated state: the dirty
    /// set is rebuilt (it is empty after a start or an election, which says nothing) and the
    /// change-log records not known to be pushed are pushed again.
    fn resume_protocols(self: &Arc<Self>) {
        let Some(peers) = self.peers.get() else {
            return; // not connected yet: `connect` does this
        };
        let others: Vec<GroupId> = peers
            .keys()
            .copied()
            .filter(|g| *g != self.keys.group)
            .collect();
        if self.parent_updates == ParentUpdates::Async && !others.is_empty() {
            self.dirty.lock().await_reports(others);
            let me = self.clone();
            tokio::spawn(async move { me.rebuild_dirty_set().await });
        }
        let me = self.clone();
        tokio::spawn(async move {
            if let Err(e) = me.changes.push_upto(u64::MAX).await {
                tracing::warn!(group = me.group(), error = %e, "leftover change-log not pushed");
            }
        });
    }

    /// Rebuilds what a leader keeps in memory, from the replicated state it has applied
    /// through the blank entry of its term: the exception table it routes by, an empty
    /// dentry replica (it cannot tell which invalidations it missed), no freezes or blocks
    /// (the coordinator re-establishes the ones it still needs), push cursors from the
    /// change-log itself, and the dirty set. The executor reloads its own state (inode ids,
    /// change-log seq) before its first batch of the term.
    async fn on_elected(self: &Arc<Self>, term: u64) {
        match self.store.get(&self.keys.single(EXCEPTIONS)) {
            Ok(Some(b)) => match decode(&b) {
                Ok(table) => {
                    self.router.install(&table);
                }
                Err(e) => tracing::error!(group = self.group(), error = %e, "bad exception table"),
            },
            Ok(None) => {}
            Err(e) => {
                tracing::error!(group = self.group(), error = %e, "exception table unreadable")
            }
        }
        self.replica.lock().clear();
        self.frozen.thaw_all();
        self.changes.restart().await;
        self.resume_protocols();
        tracing::info!(group = self.group(), term, "leader of the group");
    }

    pub fn group(&self) -> u32 {
        self.keys.group
    }

    /// This replica's raft state.
    pub fn raft_status(&self) -> saker_rpc::ReplicaStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let nodes = |ids: &mut dyn Iterator<Item = u64>| -> Vec<(u64, String)> {
            ids.map(|id| {
                let addr = membership.get_node(&id).map(|n| n.addr.clone());
                (id, addr.unwrap_or_default())
            })
            .collect()
        };
        let voters = nodes(&mut membership.voter_ids());
        let learners = nodes(&mut membership.learner_ids());
        saker_rpc::ReplicaStatus {
            node_id: m.id,
            state: match m.state {
                openraft::ServerState::Leader => "leader",
                openraft::ServerState::Follower => "follower",
                openraft::ServerState::Candidate => "candidate",
                openraft::ServerState::Learner => "learner",
                openraft::ServerState::Shutdown => "shutdown",
            }
            .into(),
            serving: self.leadership.ready_term() != 0,
            term: m.current_term,
            leader: m.current_leader,
            last_log: m.last_log_index.unwrap_or(0),
            applied: m.last_applied.map_or(0, |l| l.index),
            snapshot: m.snapshot.map_or(0, |l| l.index),
            voters,
            learners,
            matched: m
                .replication
                .iter()
                .flatten()
                .map(|(id, l)| (*id, l.map_or(0, |l| l.index)))
                .collect(),
        }
    }

    /// The term this replica serves its group in, as it changes (0 while it does not).
    pub fn watch_serving(&self) -> tokio::sync::watch::Receiver<u64> {
        self.leadership.watch()
    }

    /// The RPC address of the group's leader as far as this replica knows.
    pub fn leader_hint(&self) -> Option<String> {
        self.leadership.leader()
    }

    /// The group's raft instance on this node (for the transport's raft traffic).
    pub fn raft_handle(&self) -> Raft {
        self.raft.clone()
    }

    /// Asks every other group which of this group's directories it holds change-log records
    /// for, until all have answered (a group that is down is asked again).
    async fn rebuild_dirty_set(&self) {
        loop {
            let unreported = self.dirty.lock().unreported();
            if unreported.is_empty() {
                return;
            }
            for g in unreported {
                let Ok(peer) = self.peer(g) else { continue };
                let req = MetaRequest::PendingDirs {
                    owner: self.keys.group,
                };
                match peer.call(untagged(), req).await {
                    Ok(MetaResponse::Dirs(dirs)) => self.dirty.lock().reported(g, &dirs),
                    Ok(other) => {
                        tracing::warn!(group = g, "PendingDirs answered {other:?}");
                    }
                    Err(e) => tracing::debug!(group = g, error = %e, "PendingDirs failed"),
                }
            }
            if !self.dirty.lock().unreported().is_empty() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// Brings directory `dir`'s attributes up to date with every change acknowledged before
    /// this call (async mode): pulls from the groups that marked it dirty, then clears the
    /// mark. A group that does not answer leaves its changes for later (the attributes may lag,
    /// never break) and the mark stays.
    async fn aggregate(&self, dir: InodeId) {
        let (sources, token) = match self.dirty.lock().check(dir) {
            Need::Clean => return,
            Need::Pull { sources, token } => (sources, Some(token)),
            Need::PullAll => (
                self.peers
                    .get()
                    .map(|p| {
                        p.keys()
                            .copied()
                            .filter(|g| *g != self.keys.group)
                            .collect()
                    })
                    .unwrap_or_default(),
                None,
            ),
        };
        let calls = sources.iter().filter_map(|g| {
            let peer = self.peer(*g).ok()?;
            self.pulls.fetch_add(1, Ordering::Relaxed);
            Some(async move { peer.call(untagged(), MetaRequest::PushChanges).await })
        });
        let mut all_ok = true;
        for r in futures::future::join_all(calls).await {
            if let Err(e) = r {
                all_ok = false;
                tracing::warn!(error = %e, "a group did not push its changes");
            }
        }
        metrics::AGGREGATIONS.inc();
        if let (true, Some(token)) = (all_ok, token) {
            self.dirty.lock().clear(dir, token);
        }
    }

    /// This group's message counters and sizes.
    pub fn counters(&self) -> Result<GroupCounters, MetaError> {
        let mut inodes = 0u64;
        for_each_value(
            &StoreView(self.store.as_ref()),
            &self.keys.table(crate::keys::INODE),
            &self.keys.table_end(crate::keys::INODE),
            |_| {
                inodes += 1;
                Ok(true)
            },
        )?;
        metrics::INODES
            .with_label_values(&[&self.keys.group.to_string()])
            .set(inodes as i64);
        Ok(GroupCounters {
            forwards: self.forwards.load(Ordering::Relaxed),
            remote_lookups: self.remote_lookups.load(Ordering::Relaxed),
            change_pushes: self.changes.pushes.load(Ordering::Relaxed),
            dirty_marks: self.changes.marks.load(Ordering::Relaxed),
            pulls: self.pulls.load(Ordering::Relaxed),
            dirty_dirs: self.dirty.lock().len() as u64,
            batches: self.batch_counts.batches.load(Ordering::Relaxed),
            batched_ops: self.batch_counts.ops.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            replica_len: self.replica_len() as u64,
            inodes,
        })
    }

    /// Pushes every change-log record this group still owes other groups.
    pub async fn push_changes(&self) -> Result<(), MetaError> {
        self.changes.push_upto(u64::MAX).await
    }

    /// Stops raft; queued writes fail with `Unavailable`.
    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }

    /// Directory entries cached in this group's dentry replica.
    pub fn replica_len(&self) -> usize {
        self.replica.lock().len()
    }

    fn peer(&self, g: u32) -> Result<&Arc<dyn MetaService>, MetaError> {
        self.peers
            .get()
            .and_then(|p| p.get(&g))
            .ok_or_else(|| MetaError::Unavailable(format!("no route to group {g}")))
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

    /// Fills the dentry replica along `path`'s parents by remote lookups, and returns what the
    /// owners found missing (the executor turns that into `MissingParent` or `Conflict`).
    async fn warm(&self, path: &[String]) -> Result<Vec<(u64, String, Absence)>, MetaError> {
        Ok(self.walk_parents(path).await?.0)
    }

    /// [`Mnode::warm`], also returning the parent directory's id when every parent exists.
    async fn walk_parents(
        &self,
        path: &[String],
    ) -> Result<(Vec<(u64, String, Absence)>, Option<InodeId>), MetaError> {
        let mut absent = Vec::new();
        let mut pid = ROOT_ID;
        let mut complete = true;
        let parents = path.len().saturating_sub(1);
        for (depth, name) in path[..parents].iter().enumerate() {
            let owner = self.router.get().owner(pid, name);
            if owner == self.keys.group {
                let view = StoreView(self.store.as_ref());
                let mut found = child(&view, &self.keys, pid, name)?;
                if !matches!(found, Child::Dir(_)) && depth + 1 < parents {
                    // Maybe created by a batch not applied yet: let it land, so the steps below
                    // it can be warmed (else the op would come back for a lookup again).
                    self.drain_inflight().await?;
                    found = child(&view, &self.keys, pid, name)?;
                }
                match found {
                    Child::Dir(loc) => pid = loc.attr.id,
                    // The executor decides (MissingParent or Conflict).
                    _ => {
                        complete = false;
                        break;
                    }
                }
                continue;
            }
            if let Some(d) = self.replica.lock().get(pid, name) {
                pid = d.id;
                continue;
            }
            let epoch = self.replica.lock().epoch();
            metrics::REMOTE_LOOKUPS.inc();
            self.remote_lookups.fetch_add(1, Ordering::Relaxed);
            let req = MetaRequest::LookupDentry {
                pid,
                name: name.clone(),
            };
            match self.peer(owner)?.call(untagged(), req).await {
                Ok(MetaResponse::Dentry(d)) => {
                    let mut replica = self.replica.lock();
                    replica.insert_at(epoch, pid, name, d);
                    metrics::REPLICA_SIZE
                        .with_label_values(&[&self.keys.group.to_string()])
                        .set(replica.len() as i64);
                    pid = d.id;
                }
                Ok(other) => {
                    return Err(MetaError::Internal(format!(
                        "lookup_dentry answered {other:?}"
                    )))
                }
                Err(MetaError::NotFound) => {
                    absent.push((pid, name.clone(), Absence::Missing));
                    complete = false;
                    break;
                }
                Err(MetaError::NotDir) => {
                    absent.push((pid, name.clone(), Absence::NotDir));
                    complete = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok((absent, complete.then_some(pid)))
    }

    /// Answers a remote lookup; a frozen directory is answered once it thaws.
    async fn lookup_dentry(&self, req: &MetaRequest) -> Result<MetaResponse, MetaError> {
        for _ in 0..MAX_ATTEMPTS {
            // A freeze, removal and thaw may all happen between the read and the frozen
            // check: then the read saw a directory that is gone. Any freeze or thaw meanwhile
            // means read again.
            let generation = self.frozen.generation();
            // A dentry lookup resolves no path, so it never asks for a retry.
            let resp = self
                .read(req, Vec::new())
                .unwrap_or_else(|_| Err(MetaError::Unavailable("retry".into())))?;
            if let MetaResponse::Dentry(d) = &resp {
                if self.frozen.is_frozen(d.id) {
                    self.frozen.wait(d.id).await?;
                    continue;
                }
                if self.frozen.generation() != generation {
                    continue;
                }
            }
            return Ok(resp);
        }
        Err(MetaError::Unavailable("directory kept being frozen".into()))
    }

    fn resolver(&self, writing: bool) -> Resolver<'_> {
        Resolver::new(
            &self.keys,
            self.router.get(),
            &self.replica,
            &self.frozen,
            writing,
        )
    }

    /// Serves a read from the applied state; `Err` asks for a retry (see [`Retry`]).
    fn read(
        &self,
        req: &MetaRequest,
        absent: Vec<(u64, String, Absence)>,
    ) -> Result<Result<MetaResponse, MetaError>, Retry> {
        let r = self.resolver(false);
        r.set_absent(absent);
        let result = apply_read(&StoreView(self.store.as_ref()), &r, req);
        match r.take_retry() {
            Some(retry) => Err(retry),
            None => Ok(result),
        }
    }

    /// Freezes the directory at `path` for the rmdir protocol and answers it with its parent.
    async fn freeze(&self, path: &[String]) -> Result<MetaResponse, MetaError> {
        let Some(name) = path.last() else {
            return Err(MetaError::Invalid("the root cannot be removed".into()));
        };
        for _ in 0..MAX_ATTEMPTS {
            let absent = self.warm(path).await?;
            let r = self.resolver(false);
            r.set_absent(absent);
            let view = StoreView(self.store.as_ref());
            let found = resolve_parents(&view, &r, path).and_then(|chain| {
                let pid = chain.last().expect("chain has the root").attr.id;
                Ok((pid, child(&view, &self.keys, pid, name)?))
            });
            if r.take_retry().is_some() {
                continue;
            }
            return match found {
                Ok((parent, Child::Dir(loc))) => {
                    self.frozen.freeze(loc.attr.id);
                    // Writes under it that were evaluated before the freeze finish first.
                    if let Err(e) = self.drain_inflight().await {
                        self.frozen.thaw(loc.attr.id);
                        return Err(e);
                    }
                    Ok(MetaResponse::Frozen {
                        parent,
                        attr: loc.attr,
                    })
                }
                Ok((_, Child::Other(_))) => Err(MetaError::NotDir),
                Ok((_, Child::None)) if path.len() == 1 => Err(MetaError::NoSuchBucket),
                Ok((_, Child::None)) => Err(MetaError::NotFound),
                Err(MetaError::MissingParent { .. }) => Err(MetaError::NotFound),
                Err(MetaError::Conflict { .. }) => Err(MetaError::NotDir),
                Err(e) => Err(e),
            };
        }
        Err(MetaError::Unavailable("freeze retried too often".into()))
    }

    async fn invalidate(&self, pid: u64, name: &str, dir: u64) -> Result<MetaResponse, MetaError> {
        self.replica.lock().invalidate(pid, name);
        metrics::INVALIDATIONS.inc();
        self.invalidations.fetch_add(1, Ordering::Relaxed);
        // A batch that resolved through the old entry is applied before we count entries.
        self.drain_inflight().await?;
        dir_usage(&StoreView(self.store.as_ref()), &self.keys, &[dir])
    }

    /// This group's part of moving the inodes of `name` (see `MetaRequest::MigrateName`): the
    /// coordinator has blocked the name everywhere.
    async fn migrate_name(
        &self,
        name: &str,
        table: &saker_namespace::ExceptionTable,
    ) -> Result<MetaResponse, MetaError> {
        let mut next = (*self.router.get()).clone();
        next.set_exceptions(table.clone());
        // Entries named `name` this group holds, found by a scan of its inode table.
        let mut found = Vec::new();
        let mut dir_named = false;
        self.each_entry(|pid, entry, value| {
            if entry == name.as_bytes() {
                found.push((pid, decode::<Attr>(value)?));
            } else if entry.strip_suffix(b"/") == Some(name.as_bytes()) {
                dir_named = true;
            }
            Ok(())
        })?;
        if dir_named {
            return Err(MetaError::Invalid(format!(
                "directories named {name} exist; only file names are redirected"
            )));
        }
        let view = StoreView(self.store.as_ref());
        let mut moved = 0;
        for (pid, attr) in found {
            let owner = next.owner(pid, name);
            if owner == self.keys.group {
                continue;
            }
            let payload = |kind| crate::tree::read_payload(&view, &self.keys, attr.id, kind);
            let meta = match payload(PayloadKind::Meta)? {
                Some(b) => decode(&b).map_err(|e| MetaError::Internal(e.to_string()))?,
                None => ObjectMeta::default(),
            };
            let data = match payload(PayloadKind::Data)? {
                Some(b) => Some(bytes::Bytes::copy_from_slice(
                    crate::records::decode_bytes(&b)
                        .map_err(|e| MetaError::Internal(e.to_string()))?,
                )),
                None => None,
            };
            let tags = match payload(PayloadKind::Tags)? {
                Some(b) => decode(&b).map_err(|e| MetaError::Internal(e.to_string()))?,
                None => Vec::new(),
            };
            let id = attr.id;
            let adopt = MetaRequest::AdoptEntry {
                pid,
                name: name.to_string(),
                attr: Box::new(attr),
                meta,
                data,
                tags,
            };
            self.peer(owner)?.call(untagged(), adopt).await?;
            let drop = MetaRequest::DropEntry {
                pid,
                name: name.to_string(),
                id,
            };
            self.serve(untagged(), drop).await?;
            moved += 1;
        }
        metrics::MIGRATED.inc_by(moved);
        Ok(MetaResponse::Moved(moved))
    }

    /// Calls `f(pid, entry name (a directory's ends in '/'), record)` for every entry of this
    /// group's inode table, in pages.
    fn each_entry(
        &self,
        mut f: impl FnMut(u64, &[u8], &[u8]) -> Result<(), crate::store::StoreError>,
    ) -> Result<(), MetaError> {
        const PAGE: usize = 4096;
        let prefix = self.keys.table(crate::keys::INODE);
        let end = crate::store::prefix_end(&prefix).expect("a table prefix has an end");
        let mut start = prefix.clone();
        loop {
            let page = self
                .store
                .scan(&start, Some(&end), PAGE)
                .map_err(|e| MetaError::Internal(e.to_string()))?;
            let Some((last, _)) = page.last() else {
                return Ok(());
            };
            start = last.clone();
            start.push(0);
            let full = page.len() == PAGE;
            for (key, value) in &page {
                let (pid, entry) = key[prefix.len()..].split_at(8);
                let pid = u64::from_be_bytes(pid.try_into().expect("8 bytes"));
                f(pid, entry, value).map_err(|e| MetaError::Internal(e.to_string()))?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// The balancer's report: inodes held and the `top` most frequent file names.
    fn name_stats(&self, top: usize) -> Result<MetaResponse, MetaError> {
        let mut inodes = 0u64;
        let mut counts: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        self.each_entry(|_, entry, _| {
            inodes += 1;
            if !entry.ends_with(b"/") {
                *counts.entry(entry.to_vec()).or_default() += 1;
            }
            Ok(())
        })?;
        let mut names: Vec<(String, u64)> = counts
            .into_iter()
            .filter(|(_, c)| *c > 1)
            .filter_map(|(n, c)| String::from_utf8(n).ok().map(|n| (n, c)))
            .collect();
        names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        names.truncate(top);
        Ok(MetaResponse::NameStats { inodes, top: names })
    }

    /// A request for a name this group owns (or a group-wide one).
    async fn serve(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let path = req.path().map(<[String]>::to_vec).unwrap_or_default();
        // A rename resolves its source path too.
        let also = match &req {
            MetaRequest::Rename { from, .. } | MetaRequest::RenameIn { from, .. } => {
                Some(from.clone())
            }
            _ => None,
        };
        let mut reaped = false;
        let mut fetched: Vec<Attr> = Vec::new();
        for _ in 0..MAX_ATTEMPTS {
            let mut absent = self.warm(&path).await?;
            if let Some(from) = &also {
                absent.extend(self.warm(from).await?);
            }
            if !req.is_write() {
                // Reads of a name whose inodes are moving wait for the move (writes wait in
                // the executor). A shared inode is addressed by its id and does not move.
                let by_id = matches!(req, MetaRequest::Shared { .. });
                if let Some(name) = self.frozen.blocked_name(&[&path]).filter(|_| !by_id) {
                    metrics::RETRIES.with_label_values(&["migrating"]).inc();
                    self.frozen.wait_name(&name).await?;
                    // The name may live elsewhere now.
                    if let Some(g) = self.misdirected(&req).await? {
                        return self.forward(g, tag, req).await;
                    }
                    continue;
                }
                match self.read(&req, absent) {
                    Err(Retry::Shared { home, id }) => {
                        return self.forward_shared(home, tag, id, req).await;
                    }
                    Err(_) => {
                        metrics::RETRIES.with_label_values(&["lookup"]).inc();
                        continue;
                    }
                    // A directory, or a file with hard links: the removals of its other
                    // names travel as change-log records too. (A file with one name has
                    // none pending that matters: one more removal would leave no name to
                    // reach it by.)
                    Ok(Ok(MetaResponse::Object(v)))
                        if (v.attr.is_dir()
                            || v.attr.nlink > 1
                            || matches!(req, MetaRequest::Shared { .. }))
                            && self.parent_updates == ParentUpdates::Async
                            && self.dirty.lock().check(v.attr.id) != Need::Clean =>
                    {
                        // Aggregate: the contributors push what they owe, then read again.
                        self.aggregate(v.attr.id).await;
                        let stale = MetaResponse::Object(v);
                        return match self.read(&req, Vec::new()) {
                            Ok(fresh) => fresh.or(Ok(stale)),
                            Err(_) => Ok(stale),
                        };
                    }
                    Ok(Ok(MetaResponse::Entries(entries)))
                        if entries.iter().any(|e| self.remote_link(&e.attr).is_some()) =>
                    {
                        return self.resolve_links(entries).await.map(MetaResponse::Entries);
                    }
                    Ok(other) => return other,
                }
            }
            let (reply, rx) = oneshot::channel();
            let (early, early_rx) = matches!(req, MetaRequest::Create { defer: true, .. })
                .then(oneshot::channel)
                .unzip();
            let pending = Pending {
                tag,
                req: req.clone(),
                reply,
                early,
                absent,
                reaped,
                fetched: fetched.clone(),
            };
            if self.queue.send(pending).is_err() {
                return Err(MetaError::Unavailable("executor stopped".into()));
            }
            // A deferred write is answered as evaluated; its ticket is final when the write
            // is. No early answer (the sender dropped) means the op is to be retried.
            if let Some(early_rx) = early_rx {
                if let Ok(early) = early_rx.await {
                    let resp = early?;
                    let ticket = self.tickets.open(rx);
                    return Ok(MetaResponse::Deferred {
                        resp: Box::new(resp),
                        group: self.keys.group,
                        ticket,
                    });
                }
            }
            let Ok(reply) = rx.await else {
                return Err(MetaError::Unavailable("executor stopped".into()));
            };
            match reply {
                Reply::Done { result, reap } => {
                    if let Some(dir) = reap {
                        self.reap(dir).await;
                    }
                    return result;
                }
                Reply::Retry(Retry::Lookup) => {
                    metrics::RETRIES.with_label_values(&["lookup"]).inc();
                }
                Reply::Retry(Retry::DirAttr) => {
                    return self
                        .coordinator()?
                        .set_dir_attr(req)
                        .await
                        .map(MetaResponse::Attr);
                }
                Reply::Retry(Retry::Frozen(id)) => {
                    metrics::RETRIES.with_label_values(&["frozen"]).inc();
                    self.frozen.wait(id).await?;
                }
                Reply::Retry(Retry::Blocked(path)) => {
                    metrics::RETRIES.with_label_values(&["blocked"]).inc();
                    self.frozen.wait_path(&path).await?;
                }
                Reply::Retry(Retry::NameBlocked(name)) => {
                    metrics::RETRIES.with_label_values(&["migrating"]).inc();
                    self.frozen.wait_name(&name).await?;
                    // The name may live elsewhere now.
                    if let Some(g) = self.misdirected(&req).await? {
                        return self.forward(g, tag, req).await;
                    }
                }
                Reply::Retry(Retry::Shared { home, id }) => {
                    return self.forward_shared(home, tag, id, req).await;
                }
                Reply::Retry(Retry::SharedAttr { home, id }) => {
                    let attrs = self.shared_attrs(home, vec![id]).await?;
                    if attrs.is_empty() {
                        // Gone meanwhile (no link left): said with a count of 0.
                        let mut gone = crate::tree::root_attr();
                        gone.id = id;
                        gone.nlink = 0;
                        fetched.push(gone);
                    }
                    fetched.extend(attrs);
                }
                Reply::Retry(Retry::Reap(dir)) => {
                    metrics::RETRIES.with_label_values(&["reap"]).inc();
                    self.reap(dir).await;
                    reaped = true;
                }
            }
        }
        Err(MetaError::Unavailable(format!(
            "{} retried {MAX_ATTEMPTS} times",
            req.op_name()
        )))
    }

    /// Asks the coordinator to remove `dir` if it is an empty implicit directory; a failed reap
    /// is not an error.
    async fn reap(&self, dir: Vec<String>) {
        let Ok(coordinator) = self.coordinator() else {
            return;
        };
        match coordinator.remove_dir(dir, RemoveCond::ImplicitEmpty).await {
            Ok(()) | Err(MetaError::NotEmpty | MetaError::NotFound) => {}
            Err(e) => tracing::debug!(error = %e, "reap failed"),
        }
    }

    /// The group that owns the request's target, if not this one. A path-walked name is
    /// placed by its parent's id, which this group resolves first (its own records and dentry
    /// replica, else remote lookups); while a parent is missing, the request stays here and
    /// the executor answers for the missing parent.
    async fn misdirected(&self, req: &MetaRequest) -> Result<Option<u32>, MetaError> {
        let Some(path) = req.path() else {
            return Ok(None);
        };
        let Some(name) = path.last() else {
            return Ok(None);
        };
        let router = self.router.get();
        let owner = match router.route_name(name) {
            Route::Group(g) => g,
            Route::PathWalk => match self.walk_parents(path).await?.1 {
                Some(pid) => router.route_pid_name(pid, name),
                None => return Ok(None),
            },
        };
        Ok((owner != self.keys.group).then_some(owner))
    }

    /// The home group of the shared inode `attr` refers to, when that is another group.
    fn remote_link(&self, attr: &Attr) -> Option<u32> {
        attr.layout
            .shared_home()
            .filter(|&home| home != self.keys.group)
    }

    /// Listing entries with the hard links' references replaced by their shared inodes' attributes
    /// (one `SharedAttrs` per home group). A reference whose inode is gone meanwhile is left
    /// as it is.
    async fn resolve_links(&self, mut entries: Vec<Entry>) -> Result<Vec<Entry>, MetaError> {
        let mut by_home: BTreeMap<u32, Vec<InodeId>> = BTreeMap::new();
        for e in &entries {
            if let Some(home) = self.remote_link(&e.attr) {
                by_home.entry(home).or_default().push(e.attr.id);
            }
        }
        let mut found: HashMap<InodeId, Attr> = HashMap::new();
        for (home, ids) in by_home {
            let attrs = self.shared_attrs(home, ids).await?;
            found.extend(attrs.into_iter().map(|a| (a.id, a)));
        }
        for e in &mut entries {
            if self.remote_link(&e.attr).is_some() {
                if let Some(attr) = found.get(&e.attr.id) {
                    e.attr = attr.clone();
                }
            }
        }
        Ok(entries)
    }

    /// The attributes of shared inodes `ids` at their home group (the gone left out).
    async fn shared_attrs(&self, home: u32, ids: Vec<InodeId>) -> Result<Vec<Attr>, MetaError> {
        match self
            .peer(home)?
            .call(untagged(), MetaRequest::SharedAttrs { ids })
            .await?
        {
            MetaResponse::Attrs(attrs) => Ok(attrs),
            other => Err(MetaError::Internal(format!(
                "SharedAttrs answered {other:?}"
            ))),
        }
    }

    /// Publishes the size of the dirty set.
    fn dirty_gauge(&self, dirty: &DirtySet) {
        metrics::DIRTY_DIRS
            .with_label_values(&[&self.keys.group.to_string()])
            .set(dirty.len() as i64);
    }

    /// Sends a path op whose name is a hard link's reference to the home of the shared inode
    /// (in-process, or over the network like any forward).
    async fn forward_shared(
        &self,
        home: u32,
        tag: ClientTag,
        id: InodeId,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        if matches!(req, MetaRequest::Shared { .. }) {
            return Err(MetaError::Internal(format!(
                "shared inode {id} points to another shared inode"
            )));
        }
        self.forwards.fetch_add(1, Ordering::Relaxed);
        let req = MetaRequest::Shared {
            id,
            op: Box::new(req),
        };
        self.peer(home)?.call(tag, req).await
    }

    /// Sends a request to the group that owns it, counting the misdirection.
    async fn forward(
        &self,
        g: u32,
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        metrics::MISDIRECTED.inc();
        self.forwards.fetch_add(1, Ordering::Relaxed);
        self.peer(g)?.call(tag, req).await
    }
}

#[async_trait]
impl MetaService for Mnode {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let op = req.op_name();
        if let MetaRequest::RaftStatus = req {
            return Ok(MetaResponse::Replica(self.raft_status()));
        }
        self.leadership.check(!req.is_write())?;
        req.check_names()?;
        let result = match req {
            MetaRequest::Rmdir { path, cred } => {
                if let Some(cred) = cred {
                    // The caller's permission to remove the entry, checked by the owner.
                    let check = MetaRequest::Access {
                        path: path.clone(),
                        mask: access::DELETE,
                        cred,
                        want: Want::ATTR,
                    };
                    self.call(tag, check).await?;
                }
                self.coordinator()?
                    .remove_dir(path, RemoveCond::Empty)
                    .await
                    .map(|()| MetaResponse::Done)
            }
            MetaRequest::CoordinatedRename {
                from,
                to,
                noreplace,
                cred,
            } => self
                .coordinator()?
                .rename(from, to, noreplace, cred)
                .await
                .map(MetaResponse::Attr),
            MetaRequest::CoordinatedLink {
                from,
                to,
                expect,
                cred,
            } => self
                .coordinator()?
                .link(from, to, expect, cred)
                .await
                .map(MetaResponse::Attr),
            MetaRequest::DeleteBucket { name } => self
                .coordinator()?
                .remove_dir(vec![name], RemoveCond::Bucket)
                .await
                .map(|()| MetaResponse::Done),
            req @ MetaRequest::Freeze { .. } => match self.misdirected(&req).await {
                Err(e) => Err(e),
                Ok(Some(g)) => self.forward(g, tag, req).await,
                Ok(None) => match req {
                    MetaRequest::Freeze { path } => self.freeze(&path).await,
                    _ => unreachable!("matched above"),
                },
            },
            MetaRequest::Unfreeze { dir } => {
                self.frozen.thaw(dir);
                Ok(MetaResponse::Done)
            }
            MetaRequest::ThawAll => {
                let held = self.frozen.thaw_all();
                if held > 0 {
                    tracing::info!(held, "released the holds a stopped coordinator left");
                }
                Ok(MetaResponse::Done)
            }
            req @ MetaRequest::BlockPath { .. } => match self.misdirected(&req).await {
                Err(e) => Err(e),
                Ok(Some(g)) => self.forward(g, tag, req).await,
                Ok(None) => {
                    let path = req.path().expect("BlockPath names a path").to_vec();
                    self.frozen.block(&path);
                    // Writes to it evaluated before the block are applied first.
                    match self.drain_inflight().await {
                        Ok(()) => Ok(MetaResponse::Done),
                        Err(e) => {
                            self.frozen.unblock(&path);
                            Err(e)
                        }
                    }
                }
            },
            req @ MetaRequest::UnblockPath { .. } => match self.misdirected(&req).await {
                Err(e) => Err(e),
                Ok(Some(g)) => self.forward(g, tag, req).await,
                Ok(None) => {
                    self.frozen
                        .unblock(req.path().expect("UnblockPath names a path"));
                    Ok(MetaResponse::Done)
                }
            },
            MetaRequest::Invalidate { pid, name, dir } => self.invalidate(pid, &name, dir).await,
            req @ MetaRequest::LookupDentry { .. } => self.lookup_dentry(&req).await,
            MetaRequest::Counters => self.counters().map(MetaResponse::Counters),
            MetaRequest::SyncToDisk => {
                let store = self.store.clone();
                tokio::task::spawn_blocking(move || store.sync_to_disk())
                    .await
                    .map_err(|e| MetaError::Internal(e.to_string()))?
                    .map_err(|e| MetaError::Unavailable(format!("sync to disk failed: {e}")))?;
                Ok(MetaResponse::Done)
            }
            MetaRequest::PushChanges => self.push_changes().await.map(|()| MetaResponse::Done),
            MetaRequest::MarkDirty { source, dirs, seq } => {
                let mut dirty = self.dirty.lock();
                for d in dirs {
                    dirty.mark(d, source, seq);
                }
                self.dirty_gauge(&dirty);
                Ok(MetaResponse::Done)
            }
            MetaRequest::PendingDirs { owner } => {
                self.changes.pending_dirs(owner).map(MetaResponse::Dirs)
            }
            MetaRequest::BlockName { name } => {
                self.frozen.block_name(&name);
                // Writes of the name evaluated before the block are applied first.
                match self.drain_inflight().await {
                    Ok(()) => Ok(MetaResponse::Done),
                    Err(e) => {
                        self.frozen.unblock_name(&name);
                        Err(e)
                    }
                }
            }
            MetaRequest::UnblockName { name } => {
                self.frozen.unblock_name(&name);
                Ok(MetaResponse::Done)
            }
            MetaRequest::SetExceptions { table } => {
                if self.router.get().exceptions_version() < table.version() {
                    // Through raft, so every replica (and a later leader) routes by it.
                    let mut mutations = crate::store::WriteBatch::default();
                    mutations.put(self.keys.single(EXCEPTIONS), crate::records::encode(&table));
                    self.raft
                        .client_write(BatchEntry {
                            mutations,
                            ..Default::default()
                        })
                        .await
                        .map_err(|e| MetaError::Unavailable(e.to_string()))?;
                    if self.router.install(&table) {
                        tracing::info!(version = table.version(), "exception table installed");
                    }
                }
                Ok(MetaResponse::Done)
            }
            MetaRequest::Exceptions => Ok(MetaResponse::Exceptions(
                self.router.get().exceptions().clone(),
            )),
            MetaRequest::MigrateName { name, table } => self.migrate_name(&name, &table).await,
            MetaRequest::JoinGroup { id, addr } => {
                crate::membership::admit(&self.raft, &self.membership, id, &addr)
                    .await
                    .map(|()| MetaResponse::Done)
            }
            MetaRequest::CoordPut { term, key, value } => {
                crate::coord_records::put(
                    &self.raft,
                    &self.keys,
                    &self.leadership,
                    term,
                    &key,
                    value,
                )
                .await
            }
            MetaRequest::CoordScan { prefix } => {
                crate::coord_records::scan(self.store.as_ref(), &self.keys, &prefix)
            }
            MetaRequest::NameStats { top } => self.name_stats(top as usize),
            MetaRequest::Committed { ticket } => {
                self.tickets.wait(ticket).await.map(|()| MetaResponse::Done)
            }
            MetaRequest::ApplyChanges { source, records } => {
                let upto = records.last().map(|(seq, _)| *seq);
                let result = self
                    .serve(tag, MetaRequest::ApplyChanges { source, records })
                    .await;
                if let (Ok(_), Some(upto)) = (&result, upto) {
                    // Marks of these records are void now.
                    let mut dirty = self.dirty.lock();
                    dirty.applied(source, upto);
                    self.dirty_gauge(&dirty);
                }
                result
            }
            // Addressed to the shared inode's home, not to the owner of the path it carries.
            req @ MetaRequest::Shared { .. } => self.serve(tag, req).await,
            req => match self.misdirected(&req).await {
                Err(e) => Err(e),
                Ok(Some(g)) => self.forward(g, tag, req).await,
                Ok(None) => {
                    let version = self.router.get().exceptions_version();
                    let retry = req.clone();
                    let mut result = self.serve(tag, req).await;
                    // The name's inodes moved to another group while this request was on its
                    // way: follow them.
                    if matches!(
                        result,
                        Err(MetaError::NotFound | MetaError::MissingParent { .. })
                    ) && self.router.get().exceptions_version() != version
                    {
                        if let Ok(Some(g)) = self.misdirected(&retry).await {
                            result = self.forward(g, tag, retry).await;
                        }
                    }
                    result
                }
            },
        };
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::OPS.with_label_values(&[op, outcome]).inc();
        result
    }

    fn routing_version(&self) -> u64 {
        self.router.get().exceptions_version()
    }
}

/// The first inode id a group may hand out after the ids its applied state records.
pub(crate) fn first_free_id(group: u32, sm: &SmMeta) -> u64 {
    (sm.id_high_water + 1).max(((group as u64) << 48) + 1)
}

/// Follows the group's raft metrics for as long as the node lives: stops serving when this
/// replica no longer leads, and rebuilds in-memory state before serving in a new term.
async fn watch_leadership(
    node: Weak<Mnode>,
    mut metrics: tokio::sync::watch::Receiver<openraft::RaftMetrics<u64, openraft::BasicNode>>,
) {
    let gauges = match node.upgrade() {
        Some(n) => metrics::RaftGauges::new(n.group()),
        None => return,
    };
    loop {
        let m = metrics.borrow_and_update().clone();
        let Some(n) = node.upgrade() else { return };
        if m.state == openraft::ServerState::Shutdown {
            if let Err(e) = &m.running_state {
                tracing::error!(group = n.group(), error = %e, "raft stopped");
            }
        }
        if let Change::Elected(term) = n.leadership.update(&m) {
            n.on_elected(term).await;
            n.leadership.serve(term, &n.raft.metrics().borrow());
        }
        gauges.set(n.leadership.ready_term() != 0, &m);
        drop(n);
        if metrics.changed().await.is_err() {
            return;
        }
    }
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
