//! The MNode replicas a node of a replicated cluster hosts, and how that changes while it runs.
//!
//! A node takes a replica of a group when told to ([`MetaRequest::HostReplica`], sent by
//! `saker admin node add` and `node remove`): the replica starts empty and joins its group
//! (learner, caught up from the log or a snapshot, then voter). It gives a replica up
//! ([`MetaRequest::DropReplica`]) once the group has removed it: the replica retires and its
//! data is deleted. Which groups the node hosts, with the members each had when it joined, is
//! kept in `groups.json` in the data directory, so a restart opens the same replicas.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use async_trait::async_trait;
use parking_lot::RwLock;
use saker_mnode::{MetaStore, Mnode, MnodeConfig, RaftPeers};
use saker_rpc::{
    ClientTag, CoordinatorService, MetaError, MetaRequest, MetaResponse, MetaService, ServedGroups,
};

use crate::coordinator_host::CoordinatorHost;

/// Each hosted group with the members it had when this node took its replica (raft id and
/// RPC address): whom the replica asks to admit it, if it has to.
pub type Hosted = BTreeMap<u32, Members>;

/// Raft ids and RPC addresses of a group's members.
pub type Members = Vec<(u64, String)>;

const FILE: &str = "groups.json";

/// What a new replica is connected to, once the process has it.
struct Links {
    peers: BTreeMap<u32, Arc<dyn MetaService>>,
    coordinator: Arc<dyn CoordinatorService>,
    host: Option<Arc<CoordinatorHost>>,
}

pub struct Hosting {
    store: Arc<dyn MetaStore>,
    /// The settings every replica here shares (group and voters are set per replica).
    template: MnodeConfig,
    /// The cluster's groups: the only ones a replica may be made of.
    groups: Vec<u32>,
    file: PathBuf,
    replicas: RwLock<BTreeMap<u32, (Arc<Mnode>, Members)>>,
    served: ServedGroups,
    raft: Arc<RaftPeers>,
    links: OnceLock<Links>,
    /// One change at a time.
    changing: tokio::sync::Mutex<()>,
}

impl Hosting {
    /// The groups a node with data directory `data_dir` hosted when it last ran, if it has
    /// run with this file.
    pub fn recorded(data_dir: &Path) -> anyhow::Result<Option<Hosted>> {
        let path = data_dir.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                    format!("cannot parse {}", path.display())
                })?))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Starts a replica of each group in `hosted` on `store`.
    pub async fn open(
        store: Arc<dyn MetaStore>,
        template: MnodeConfig,
        groups: Vec<u32>,
        data_dir: &Path,
        hosted: Hosted,
    ) -> anyhow::Result<Self> {
        let hosting = Self {
            store,
            template,
            groups,
            file: data_dir.join(FILE),
            replicas: RwLock::default(),
            served: ServedGroups::default(),
            raft: Arc::default(),
            links: OnceLock::new(),
            changing: tokio::sync::Mutex::new(()),
        };
        if let Some(pool) = &hosting.template.pool {
            hosting
                .raft
                .start_liveness(hosting.template.addr.clone(), pool.clone());
        }
        for (g, voters) in hosted {
            let m = hosting.start(g, voters.clone()).await?;
            hosting.replicas.write().insert(g, (m, voters));
        }
        hosting.save()?;
        Ok(hosting)
    }

    async fn start(&self, group: u32, voters: Members) -> anyhow::Result<Arc<Mnode>> {
        let mut cfg = self.template.clone();
        cfg.group = group;
        cfg.voters = voters;
        let m = Mnode::start(self.store.clone(), cfg).await?;
        if let Some(raft) = m.raft_handle() {
            self.raft.register(group, raft);
        }
        self.served.insert(group, m.clone());
        Ok(m)
    }

    /// The replicas hosted now.
    pub fn replicas(&self) -> BTreeMap<u32, Arc<Mnode>> {
        let replicas = self.replicas.read();
        replicas.iter().map(|(g, (m, _))| (*g, m.clone())).collect()
    }

    /// The groups served to other nodes (the RPC server's table).
    pub fn served(&self) -> ServedGroups {
        self.served.clone()
    }

    /// The raft traffic's receiving side.
    pub fn raft_peers(&self) -> Arc<RaftPeers> {
        self.raft.clone()
    }

    /// Connects the replicas, present and future, to the other groups and the coordinator;
    /// the coordinator here follows this node's replica of group 1 (`host`).
    pub fn connect(
        &self,
        peers: BTreeMap<u32, Arc<dyn MetaService>>,
        coordinator: Arc<dyn CoordinatorService>,
        host: Option<Arc<CoordinatorHost>>,
    ) {
        let _ = self.links.set(Links {
            peers,
            coordinator,
            host,
        });
        for (g, m) in self.replicas() {
            self.attach(g, m);
        }
    }

    /// Connects replica `m` of `group` as [`Hosting::connect`] says (once it was called).
    fn attach(&self, group: u32, m: Arc<Mnode>) {
        let Some(links) = self.links.get() else {
            return;
        };
        m.connect(links.peers.clone(), links.coordinator.clone());
        if let (Some(h), true) = (&links.host, self.is_home(group)) {
            h.follow_home(m);
        }
    }

    fn is_home(&self, group: u32) -> bool {
        self.groups.first() == Some(&group)
    }

    /// Writes the hosted groups to `groups.json` (atomically, durably).
    fn save(&self) -> anyhow::Result<()> {
        let hosted: Hosted = self
            .replicas
            .read()
            .iter()
            .map(|(g, (_, voters))| (*g, voters.clone()))
            .collect();
        saker_durable::replace_file(&self.file, &serde_json::to_vec_pretty(&hosted)?)?;
        Ok(())
    }

    /// Takes a replica of `group`, which joins the group through `voters`.
    async fn host(&self, group: u32, voters: Members) -> Result<(), MetaError> {
        if !self.groups.contains(&group) {
            return Err(MetaError::Invalid(format!(
                "no group {group} in this cluster"
            )));
        }
        let me = (self.template.node_id, self.template.addr.clone());
        if voters.is_empty() || voters.iter().any(|(id, addr)| *id == me.0 || *addr == me.1) {
            return Err(MetaError::Invalid(format!(
                "group {group}'s members must be other nodes (got {voters:?})"
            )));
        }
        let _one = self.changing.lock().await;
        if self.replicas.read().contains_key(&group) {
            return Ok(());
        }
        // Its own entry makes the replica a replicated group's: it joins instead of creating.
        let mut members = voters;
        members.push(me);
        let m = self.start(group, members.clone()).await.map_err(internal)?;
        self.attach(group, m.clone());
        self.replicas.write().insert(group, (m, members));
        tracing::info!(group, "took a replica of the group");
        self.save().map_err(internal)
    }

    /// Gives up this node's replica of `group`: retires it and deletes its data.
    async fn drop_replica(&self, group: u32) -> Result<(), MetaError> {
        let _one = self.changing.lock().await;
        let Some((m, _)) = self.replicas.write().remove(&group) else {
            return Ok(());
        };
        self.served.remove(group);
        self.raft.unregister(group);
        if let (Some(Links { host: Some(h), .. }), true) = (self.links.get(), self.is_home(group)) {
            h.leave_home();
        }
        // On TiKV the group's records are the namespace's, not this replica's copy.
        let own_copy = m.raft_handle().is_some();
        m.retire().await;
        self.save().map_err(internal)?;
        if own_copy {
            Mnode::erase(self.store.clone(), group)
                .await
                .map_err(internal)?;
        }
        tracing::info!(group, "gave up the replica of the group");
        Ok(())
    }
}

/// This node's replica of a group as the node's own callers reach it: whichever replica the
/// node hosts now (none: not the leader, so they try the group's other replicas).
pub struct LocalReplica {
    served: ServedGroups,
    group: u32,
}

impl LocalReplica {
    pub fn new(hosting: &Hosting, group: u32) -> Self {
        Self {
            served: hosting.served(),
            group,
        }
    }
}

#[async_trait]
impl MetaService for LocalReplica {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        match self.served.get(self.group) {
            Some(replica) => replica.call(tag, req).await,
            None => Err(MetaError::NotLeader { leader: None }),
        }
    }

    fn routing_version(&self) -> u64 {
        self.served
            .get(self.group)
            .map_or(0, |r| r.routing_version())
    }
}

fn internal(e: impl std::fmt::Display) -> MetaError {
    MetaError::Internal(e.to_string())
}

/// The node's handler of the requests addressed to it rather than to a group.
#[async_trait]
impl MetaService for Hosting {
    async fn call(&self, _tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        match req {
            MetaRequest::HostReplica { group, voters } => self.host(group, voters).await,
            MetaRequest::DropReplica { group } => self.drop_replica(group).await,
            other => Err(MetaError::Invalid(format!(
                "{} is not a request for a node",
                other.op_name()
            ))),
        }
        .map(|()| MetaResponse::Done)
    }
}
