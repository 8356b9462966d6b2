//! The coordinator of a replicated cluster: one replica on every node, active on the node
//! whose replica of group 1 leads it.
//!
//! The coordinator's state (its journals, the exception table, the access keys) is records
//! in the state machine of group 1 (the first group, its home) ([`GroupState`]), so it is replicated with that group. When
//! this node's replica of group 1 starts serving a term, the coordinator here loads the
//! state, finishes what the previous active coordinator left (its logged renames and links,
//! the exception table's install, the holds it left at the MNodes) and takes calls; its
//! writes carry that term, and group 1 refuses them once another leader is elected
//! (`Fenced`), so a coordinator that lost its place changes no state. When the replica stops
//! serving, the coordinator here stops: its loops end and calls go elsewhere.
//!
//! Calls from this process ([`CoordinatorRoute::follow`]) go to the active coordinator: this
//! one, or the one at group 1's leader, following not-leader answers and waiting out an
//! election or a dead node for at most [`FAILOVER_WAIT`]. Calls from other nodes
//! ([`CoordinatorRoute::here`]) are taken only while this coordinator is active, else answered
//! `NotLeader` with the leader this node knows of.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use saker_coordinator::{GroupState, Groups, NamespaceCoordinator};
use saker_mnode::Mnode;
use saker_namespace::Router;
use saker_rpc::{
    Attr, ChannelPool, CoordinatorService, Cred, InodeId, MetaError, MetaRequest, MetaService,
    RemoveCond, RenameVersioning, FAILOVER_WAIT,
};
use std::sync::RwLock;

use crate::server::loops::{Active, Balance};

pub struct CoordinatorHost {
    router: Router,
    groups: Groups,
    /// Group 1 as one service (its leader wherever it is): where the state lives.
    home: Arc<dyn MetaService>,
    /// This node's replica of group 1, if it has one (only then can it be active here).
    local_home: RwLock<Option<Arc<Mnode>>>,
    /// This node's RPC address.
    here: String,
    pool: Arc<ChannelPool>,
    active: Active,
    balance: Balance,
}

impl CoordinatorHost {
    pub fn new(
        router: Router,
        groups: Groups,
        here: String,
        pool: Arc<ChannelPool>,
        balance: Balance,
    ) -> anyhow::Result<Arc<Self>> {
        let home = groups
            .values()
            .next()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("a cluster has a group"))?;
        Ok(Arc::new(Self {
            router,
            groups,
            home,
            local_home: RwLock::default(),
            here,
            pool,
            active: Active::default(),
            balance,
        }))
    }

    /// The coordinator active here, as the admin API sees it.
    pub fn active(&self) -> Active {
        self.active.clone()
    }

    /// Group 1's state as unfenced records (the access keys: any node writes them).
    pub fn shared_state(&self) -> Arc<GroupState> {
        Arc::new(GroupState::new(self.home.clone(), 0))
    }

    /// Makes `replica` (of group 1, on this node) the one the coordinator here follows: it
    /// is active here for each term `replica` serves, and stops when it stops serving (or
    /// retires: [`CoordinatorHost::leave_home`]).
    pub fn follow_home(self: &Arc<Self>, replica: Arc<Mnode>) {
        let serving = replica.watch_serving();
        *self.local_home.write().expect("home lock") = Some(replica);
        tokio::spawn(self.clone().run(serving));
    }

    /// This node no longer has a replica of group 1.
    pub fn leave_home(&self) {
        self.local_home.write().expect("home lock").take();
    }

    async fn run(self: Arc<Self>, mut serving: tokio::sync::watch::Receiver<u64>) {
        loop {
            let term = *serving.borrow_and_update();
            if term != 0 {
                tokio::select! {
                    () = self.serve_term(term) => {}
                    _ = serving.changed() => {}
                }
                // Deactivated: calls go to the next coordinator from now on.
                if self.active.set(None).is_some() {
                    tracing::info!(term, "coordinator stopped here");
                }
                continue;
            }
            if serving.changed().await.is_err() {
                return;
            }
        }
    }

    /// The coordinator of group-1 term `term`: loads the state, activates, finishes what was
    /// left, then runs its resolver and balancer until cancelled (the term ends).
    async fn serve_term(&self, term: u64) {
        let state = Arc::new(GroupState::new(self.home.clone(), term));
        let ns = loop {
            let load =
                NamespaceCoordinator::load(self.router.clone(), self.groups.clone(), state.clone());
            match load.await {
                Ok(ns) => break Arc::new(ns),
                Err(e) => {
                    tracing::warn!(term, error = %e, "coordinator state not loaded yet");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        self.active.set(Some(ns.clone()));
        tracing::info!(term, "coordinator active here");
        ns.resolve_pending().await;
        tokio::join!(
            ns.clone().run_resolver(),
            crate::server::loops::balance_loop(ns.clone(), self.balance),
        );
    }

    /// The RPC address of group 1's leader as far as this node knows.
    async fn leader_hint(&self) -> Option<String> {
        let local = self.local_home.read().expect("home lock").clone();
        if let Some(local_home) = local {
            return local_home.leader_hint();
        }
        let status = saker_rpc::raft_status(self.home.as_ref(), Duration::from_secs(2)).await;
        let s = status.ok()?;
        let leader = s.leader?;
        s.voters
            .into_iter()
            .find(|(id, _)| *id == leader)
            .map(|(_, addr)| addr)
    }

    /// Runs `call` at the active coordinator (module docs).
    async fn route<T, F, Fut>(&self, call: F) -> Result<T, MetaError>
    where
        F: Fn(Arc<dyn CoordinatorService>) -> Fut,
        Fut: Future<Output = Result<T, MetaError>>,
    {
        let deadline = tokio::time::Instant::now() + FAILOVER_WAIT;
        let mut pause = Duration::from_millis(10);
        let mut hint = None;
        loop {
            if let Some(ns) = self.active.get() {
                return call(ns).await;
            }
            let target = match hint.take() {
                Some(h) => Some(h),
                None => self.leader_hint().await,
            };
            let result = match target.filter(|addr| *addr != self.here) {
                Some(addr) => match self.pool.get(&addr) {
                    Ok(channel) => call(Arc::new(channel.coordinator())).await,
                    Err(e) => Err(e),
                },
                // No leader known, or it is this node and its coordinator is not active yet.
                None => Err(MetaError::NotLeader { leader: None }),
            };
            match &result {
                Err(MetaError::NotLeader { leader }) => hint = leader.clone(),
                // The call never reached a node (it is down): ask again once it is replaced.
                Err(MetaError::Unavailable(m)) if never_sent(m) => {}
                _ => return result,
            }
            if tokio::time::Instant::now() + pause > deadline {
                return result;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }
}

/// Whether a transport failure happened before the call left (the connection was refused).
fn never_sent(message: &str) -> bool {
    message.contains("tcp connect error") || message.contains("Connection refused")
}

/// The coordinator as this process's gateway and MNodes call it ([`CoordinatorRoute::follow`]:
/// wherever it is active), or as other nodes call it over RPC ([`CoordinatorRoute::here`]:
/// only while it is active here, else `NotLeader` naming group 1's leader).
pub struct CoordinatorRoute {
    host: Arc<CoordinatorHost>,
    follow: bool,
}

impl CoordinatorRoute {
    pub fn follow(host: Arc<CoordinatorHost>) -> Self {
        Self { host, follow: true }
    }

    pub fn here(host: Arc<CoordinatorHost>) -> Self {
        Self {
            host,
            follow: false,
        }
    }

    async fn route<T, F, Fut>(&self, call: F) -> Result<T, MetaError>
    where
        F: Fn(Arc<dyn CoordinatorService>) -> Fut,
        Fut: Future<Output = Result<T, MetaError>>,
    {
        if self.follow {
            return self.host.route(call).await;
        }
        match self.host.active.get() {
            Some(ns) => call(ns).await,
            None => Err(MetaError::NotLeader {
                leader: self
                    .host
                    .leader_hint()
                    .await
                    .filter(|a| *a != self.host.here),
            }),
        }
    }
}

#[async_trait]
impl CoordinatorService for CoordinatorRoute {
    async fn remove_dir(&self, path: Vec<String>, cond: RemoveCond) -> Result<(), MetaError> {
        self.route(|c| {
            let path = path.clone();
            async move { c.remove_dir(path, cond).await }
        })
        .await
    }

    async fn rename(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    ) -> Result<Attr, MetaError> {
        self.route(|c| {
            let (from, to, cred) = (from.clone(), to.clone(), cred.clone());
            async move { c.rename(from, to, noreplace, cred, versioning).await }
        })
        .await
    }

    async fn set_dir_attr(&self, set: MetaRequest) -> Result<Attr, MetaError> {
        self.route(|c| {
            let set = set.clone();
            async move { c.set_dir_attr(set).await }
        })
        .await
    }

    async fn link(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<InodeId>,
        cred: Cred,
    ) -> Result<Attr, MetaError> {
        self.route(|c| {
            let (from, to, cred) = (from.clone(), to.clone(), cred.clone());
            async move { c.link(from, to, expect, cred).await }
        })
        .await
    }
}
