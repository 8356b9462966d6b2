//! The namespace coordinator ([`NamespaceCoordinator`]): the MNode groups, the router, the
//! path locks, the logged intents and the exception table its protocols share, how it starts
//! (finishing what a previous run left) and the [`CoordinatorService`] it answers. The
//! protocols themselves live beside it: rmdir ([`crate::rmdir`]), rename ([`crate::rename`]),
//! hard links ([`crate::link`]), directory attributes ([`crate::dir_attr`]), the exception
//! table ([`crate::exceptions`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::join_all;
use parking_lot::RwLock;
use saker_namespace::{GroupId, Route, Router};
use saker_rpc::{
    Attr, CoordinatorService, Cred, DirUsage, InodeId, MetaError, MetaRequest, MetaResponse,
    MetaService, RemoveCond, RenameVersioning,
};
use tracing::Instrument;

use crate::calls::tag;
use crate::exception_store::ExceptionStore;
use crate::intents::{LinkJournal, RenameJournal, LINKS, RENAMES};
use crate::journal::JournalError;
use crate::locks::PathLocks;
use crate::state::{DirState, StateStore};

/// The coordinator's view of the MNode groups.
pub type Groups = BTreeMap<GroupId, Arc<dyn MetaService>>;

pub struct NamespaceCoordinator {
    /// Routes by the exception table below (replaced when it changes).
    pub(crate) router: RwLock<Router>,
    pub(crate) groups: Groups,
    /// Path locks of operations in progress.
    pub(crate) locks: PathLocks,
    /// Renames between their two steps.
    pub(crate) journal: RenameJournal,
    /// Links between their steps.
    pub(crate) links: LinkJournal,
    /// The exception table this coordinator owns.
    pub(crate) exceptions: ExceptionStore,
    /// Exception-table changes, one at a time.
    pub(crate) table_lock: tokio::sync::Mutex<()>,
    /// The term this coordinator is active in (0: one process); its holds at the MNodes carry
    /// it.
    pub(crate) term: u64,
    /// False from a persistent coordinator's start until [`NamespaceCoordinator::resolve_pending`]
    /// has finished what the previous run left and released its holds; protocol calls wait.
    ready: tokio::sync::watch::Sender<bool>,
}

/// How long a protocol call waits for a starting coordinator to be ready.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl NamespaceCoordinator {
    pub fn new(router: Router, groups: Groups) -> Self {
        let exceptions = ExceptionStore::in_memory(router.exceptions().clone());
        let me = Self::assemble(
            router,
            groups,
            RenameJournal::in_memory(RENAMES),
            LinkJournal::in_memory(LINKS),
            exceptions,
        );
        // Nothing was left by an earlier run.
        me.ready.send_replace(true);
        me
    }

    /// A coordinator whose state lives in `dir` (one process): the rename and link journals
    /// (`renames/`, `links/`) and the exception table (`exceptions.json`).
    pub async fn persistent(
        router: Router,
        groups: Groups,
        dir: &Path,
    ) -> Result<Self, JournalError> {
        Self::load(router, groups, Arc::new(DirState::new(dir))).await
    }

    /// A coordinator whose state lives in `state`: its journals and the exception table
    /// (starting from `router`'s when there is none). Call
    /// [`NamespaceCoordinator::resolve_pending`] once the groups are reachable.
    pub async fn load(
        router: Router,
        groups: Groups,
        state: Arc<dyn StateStore>,
    ) -> Result<Self, JournalError> {
        let term = state.term();
        let journal = RenameJournal::load(state.clone(), RENAMES).await?;
        let links = LinkJournal::load(state.clone(), LINKS).await?;
        let exceptions = ExceptionStore::load(state, router.exceptions().clone()).await?;
        let mut me = Self::assemble(router, groups, journal, links, exceptions);
        me.term = term;
        Ok(me)
    }

    fn assemble(
        mut router: Router,
        groups: Groups,
        journal: RenameJournal,
        links: LinkJournal,
        exceptions: ExceptionStore,
    ) -> Self {
        router.set_exceptions(exceptions.table());
        Self {
            router: RwLock::new(router),
            groups,
            locks: PathLocks::default(),
            term: 0,
            journal,
            links,
            exceptions,
            table_lock: tokio::sync::Mutex::new(()),
            ready: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Waits until the coordinator has finished what its previous run left
    /// ([`NamespaceCoordinator::resolve_pending`]), for at most [`READY_WAIT`].
    pub(crate) async fn until_ready(&self) -> Result<(), MetaError> {
        let mut rx = self.ready.subscribe();
        let ready = tokio::time::timeout(READY_WAIT, rx.wait_for(|ready| *ready))
            .await
            .is_ok_and(|r| r.is_ok());
        if ready {
            Ok(())
        } else {
            Err(MetaError::Unavailable(
                "the coordinator is still finishing what its previous run left".into(),
            ))
        }
    }

    /// What a crash or an unreachable group left unfinished: the exception table's install
    /// and migration, buckets' write settings in every group, then logged renames; then every group releases the freezes and blocks
    /// the previous run still held there (an rmdir cut between its freeze and its thaw), logged
    /// links are finished, and protocol calls are taken. Returns once nothing is left.
    pub async fn resolve_pending(&self) {
        while let Err(e) = self.resolve_exceptions().await {
            tracing::debug!(error = %e, "the exception table waits for its groups");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        while let Err(e) = self.resolve_bucket_writes().await {
            tracing::debug!(error = %e, "buckets' settings wait for their groups");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        self.resolve_renames().await;
        let mut left: Vec<_> = self.groups.iter().collect();
        while !left.is_empty() {
            let calls = left
                .iter()
                .map(|(_, g)| g.call(tag(), MetaRequest::ThawAll { coord: self.term }));
            let results = join_all(calls).await;
            left = left
                .into_iter()
                .zip(results)
                .filter_map(|(g, r)| match r {
                    Ok(_) => None,
                    Err(e) => {
                        tracing::debug!(group = g.0, error = %e, "ThawAll waits for its group");
                        Some(g)
                    }
                })
                .collect();
            if !left.is_empty() {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
        // After the thaw: a link needs no hold, and one that met a freeze the previous run
        // left would wait for it.
        self.resolve_links().await;
        self.ready.send_replace(true);
    }

    /// The group that owns `path`'s last component for a request (a path-walked name goes to
    /// any group, which forwards it).
    pub(crate) fn owner(&self, path: &[String]) -> Result<&Arc<dyn MetaService>, MetaError> {
        let name = path
            .last()
            .ok_or_else(|| MetaError::Invalid("the root cannot be removed".into()))?;
        let route = self.router.read().route_name(name);
        let g = match route {
            Route::Group(g) => g,
            // Path-walked names are forwarded by whichever group receives them.
            Route::PathWalk => *self.groups.keys().next().expect("at least one group"),
        };
        self.groups
            .get(&g)
            .ok_or_else(|| MetaError::Unavailable(format!("no route to group {g}")))
    }

    /// Sends `req` to every group and collects their usage reports.
    pub(crate) async fn usage_everywhere(
        &self,
        req: impl Fn() -> MetaRequest,
    ) -> Result<Vec<DirUsage>, MetaError> {
        let calls = self.groups.values().map(|g| g.call(tag(), req()));
        let mut out = Vec::with_capacity(self.groups.len());
        for r in join_all(calls).await {
            match r? {
                MetaResponse::Usage(u) => out.push(u),
                other => return Err(MetaError::Internal(format!("usage answered {other:?}"))),
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl CoordinatorService for NamespaceCoordinator {
    async fn remove_dir(&self, path: Vec<String>, cond: RemoveCond) -> Result<(), MetaError> {
        let span = tracing::debug_span!("coordinator.remove_dir", depth = path.len());
        self.remove_dir_cascading(path, cond).instrument(span).await
    }

    async fn rename(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    ) -> Result<Attr, MetaError> {
        let span = tracing::debug_span!("coordinator.rename");
        async {
            self.until_ready().await?;
            self.rename_protocol(from, to, noreplace, cred, versioning)
                .await
        }
        .instrument(span)
        .await
    }

    async fn set_dir_attr(&self, set: MetaRequest) -> Result<Attr, MetaError> {
        let span = tracing::debug_span!("coordinator.set_dir_attr");
        async {
            self.until_ready().await?;
            self.set_dir_attr_protocol(set).await
        }
        .instrument(span)
        .await
    }

    async fn link(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<InodeId>,
        cred: Cred,
    ) -> Result<Attr, MetaError> {
        let span = tracing::debug_span!("coordinator.link");
        async {
            self.until_ready().await?;
            self.link_protocol(from, to, expect, cred).await
        }
        .instrument(span)
        .await
    }
}
