//! One MNode group: its raft instance, its executor and the [`MetaService`] it serves.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use saker_rpc::{ClientTag, MetaError, MetaRequest, MetaResponse, MetaService};
use tokio::sync::{mpsc, oneshot};

use crate::error::MnodeError;
use crate::executor::{Executor, Pending};
use crate::keys::{Keys, SM_META};
use crate::metrics;
use crate::raft::{LogStore, NoNetwork, Raft, StateMachine};
use crate::read::apply_read;
use crate::records::{decode, SmMeta};
use crate::store::MetaStore;
use crate::tree::StoreView;

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
}

impl MnodeConfig {
    pub fn new(group: u32) -> Self {
        Self {
            group,
            node_id: 1,
            gc_grace: Duration::from_secs(600),
            max_batch: 512,
            pipeline_depth: 1,
        }
    }
}

pub struct Mnode {
    keys: Keys,
    store: Arc<dyn MetaStore>,
    raft: Raft,
    queue: mpsc::UnboundedSender<Pending>,
}

impl Mnode {
    /// Opens the group on `store`, becomes leader of its single-voter raft group and replays
    /// the log, then starts the executor.
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
        let sm = StateMachine::open(store.clone(), cfg.group)?;
        let log = LogStore::new(store.clone(), cfg.group);
        let config = openraft::Config {
            cluster_name: format!("saker-mnode-{}", cfg.group),
            heartbeat_interval: 100,
            election_timeout_min: 150,
            election_timeout_max: 300,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(2000),
            max_in_snapshot_log_to_keep: 200,
            ..Default::default()
        }
        .validate()
        .map_err(|e| MnodeError::Config(e.to_string()))?;
        let raft = Raft::new(cfg.node_id, Arc::new(config), NoNetwork, log, sm)
            .await
            .map_err(MnodeError::raft)?;
        if !raft.is_initialized().await.map_err(MnodeError::raft)? {
            let members = BTreeMap::from([(cfg.node_id, openraft::BasicNode::new("local"))]);
            raft.initialize(members).await.map_err(MnodeError::raft)?;
        }
        let wait = raft.wait(Some(Duration::from_secs(30)));
        wait.state(openraft::ServerState::Leader, "become leader")
            .await
            .map_err(MnodeError::raft)?;
        let last_log = raft.metrics().borrow().last_log_index;
        wait.applied_index_at_least(last_log, "replay the log")
            .await
            .map_err(MnodeError::raft)?;

        let sm_meta: SmMeta = match store.get(&keys.single(SM_META))? {
            Some(b) => decode(&b)?,
            None => SmMeta::default(),
        };
        let base = (cfg.group as u64) << 48;
        let next_id = Arc::new(AtomicU64::new((sm_meta.id_high_water + 1).max(base + 1)));
        let (tx, rx) = mpsc::unbounded_channel();
        let exec = Executor {
            keys,
            store: store.clone(),
            raft: raft.clone(),
            next_id,
            gc_grace: cfg.gc_grace,
            max_batch: cfg.max_batch,
            pipeline_depth: cfg.pipeline_depth,
        };
        tokio::spawn(exec.run(rx));
        Ok(Arc::new(Self {
            keys,
            store,
            raft,
            queue: tx,
        }))
    }

    pub fn group(&self) -> u32 {
        self.keys.group
    }

    /// Stops raft; queued writes fail with `Unavailable`.
    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }
}

#[async_trait]
impl MetaService for Mnode {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let op = req.op_name();
        let result = if req.is_write() {
            let (reply, rx) = oneshot::channel();
            if self.queue.send(Pending { tag, req, reply }).is_err() {
                return Err(MetaError::Unavailable("executor stopped".into()));
            }
            rx.await
                .unwrap_or_else(|_| Err(MetaError::Unavailable("executor stopped".into())))
        } else {
            apply_read(&StoreView(self.store.as_ref()), &self.keys, &req)
        };
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::OPS.with_label_values(&[op, outcome]).inc();
        result
    }
}
