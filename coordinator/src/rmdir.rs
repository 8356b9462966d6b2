//! The rmdir protocol (FalconFS §4.3): removing a directory needs every MNode's agreement,
//! because its entries may live on any of them.
//!
//! 1. Lock the path (exclusive, its ancestors shared, in the coordinator).
//! 2. Freeze the directory at its owner: writes that resolve through it wait, and so do remote
//!    lookups of it, so no new entry can appear under it.
//! 3. Invalidate the dentry on every MNode. Each drops its replica entry, waits for batches that
//!    resolved through it, and reports what it holds under the directory.
//! 4. Decide by the condition; for DeleteBucket, walk the implicit directories below (they can
//!    only be reached through the frozen bucket), check that no group keeps a version of a key
//!    in it, and sweep them and the bucket's uploads.
//! 5. Remove the directory at its owner (which re-checks its own entries), then thaw.
//!
//! Reaping (S3's removal of empty implicit directories) is the same protocol with the
//! condition "implicit and empty", cascading to the parent after each success.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::join_all;
use parking_lot::RwLock;
use saker_namespace::{GroupId, Route, Router};
use saker_rpc::{
    Attr, ClientTag, CoordinatorService, Cred, DirUsage, InodeId, MetaError, MetaRequest,
    MetaResponse, MetaService, RemoveCond, RenameVersioning, VersionKind,
};
use tracing::Instrument;

use crate::exceptions::ExceptionStore;
use crate::journal::JournalError;
use crate::link::{LinkJournal, LINKS};
use crate::locks::PathLocks;
use crate::rename::{RenameJournal, RENAMES};
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

/// A tag for one call of the coordinator's to an MNode group: the coordinator is a client like
/// any other (a random id per process, a counter), so a call its group resends to a new leader
/// after a failover is applied once.
pub(crate) fn tag() -> ClientTag {
    static CLIENT: std::sync::LazyLock<u128> =
        std::sync::LazyLock::new(|| rand::random::<u128>() | 1);
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    ClientTag {
        client: *CLIENT,
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    }
}

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

    /// Whether any group holds a version (not a current object's record) of a key below the
    /// directory `path` of a bucket, or in the bucket `path`. Records of current objects do
    /// not count: a directory or bucket with current objects is not empty anyway.
    async fn versions_below(&self, path: &[String]) -> Result<bool, MetaError> {
        let prefix = match path {
            [] => return Ok(false),
            [_bucket] => String::new(),
            [_bucket, dirs @ ..] => format!("{}/", dirs.join("/")),
        };
        let found = self
            .groups
            .values()
            .map(|g| versions_in(g.as_ref(), &path[0], &prefix));
        for r in join_all(found).await {
            if r? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn remove_one(&self, path: &[String], cond: RemoveCond) -> Result<(), MetaError> {
        let _held = self.locks.lock(&[path]).await;
        self.remove_locked(path, cond).await
    }

    async fn remove_locked(&self, path: &[String], cond: RemoveCond) -> Result<(), MetaError> {
        let freeze = MetaRequest::Freeze {
            path: path.to_vec(),
            coord: self.term,
        };
        let (parent, attr) = match self.owner(path)?.call(tag(), freeze).await? {
            MetaResponse::Frozen { parent, attr } => (parent, attr),
            other => return Err(MetaError::Internal(format!("freeze answered {other:?}"))),
        };
        crate::rename::fail_point("rmdir_frozen");
        // Now that the parent is known, the owner is known even for a path-walked name (the
        // freeze itself reached it by forwarding).
        let name = path.last().expect("checked by owner()");
        let g = self.router.read().owner(parent, name);
        let owner = self
            .groups
            .get(&g)
            .ok_or_else(|| MetaError::Unavailable(format!("no route to group {g}")))?;
        let result = self
            .check_and_remove(path, cond, parent, &attr, owner)
            .await;
        let thaw = MetaRequest::Unfreeze {
            dir: attr.id,
            coord: self.term,
        };
        if let Err(e) = owner.call(tag(), thaw).await {
            tracing::warn!(error = %e, "unfreeze failed");
        }
        result
    }

    async fn check_and_remove(
        &self,
        path: &[String],
        cond: RemoveCond,
        parent: InodeId,
        attr: &saker_rpc::Attr,
        owner: &Arc<dyn MetaService>,
    ) -> Result<(), MetaError> {
        if cond == RemoveCond::ImplicitEmpty && !attr.implicit {
            return Err(MetaError::NotEmpty);
        }
        let name = path.last().expect("checked by owner()").clone();
        let dir = attr.id;
        let reports = self
            .usage_everywhere(|| MetaRequest::Invalidate {
                pid: parent,
                name: name.clone(),
                dir,
            })
            .await?;
        let mut objects = reports.iter().any(|u| u.objects);
        let mut frontier: Vec<InodeId> =
            reports.into_iter().flat_map(|u| u.implicit_dirs).collect();
        match cond {
            RemoveCond::Empty | RemoveCond::ImplicitEmpty => {
                if objects || !frontier.is_empty() {
                    return Err(MetaError::NotEmpty);
                }
                // rmdir(2): noncurrent versions and delete markers of keys below keep a
                // directory of a bucket that keeps versions, as its files would.
                if cond == RemoveCond::Empty && self.versions_below(path).await? {
                    return Err(MetaError::NotEmpty);
                }
            }
            RemoveCond::Bucket => {
                let mut swept = vec![dir];
                while !objects && !frontier.is_empty() {
                    swept.extend_from_slice(&frontier);
                    let dirs = std::mem::take(&mut frontier);
                    let reports = self
                        .usage_everywhere(|| MetaRequest::DirUsage { dirs: dirs.clone() })
                        .await?;
                    objects = reports.iter().any(|u| u.objects);
                    frontier = reports.into_iter().flat_map(|u| u.implicit_dirs).collect();
                }
                // Versions of its keys (noncurrent ones, delete markers) keep a bucket from
                // being empty; checked under the freeze, so none can appear meanwhile.
                if objects || self.versions_below(path).await? {
                    return Err(MetaError::NotEmpty);
                }
                let calls = self.groups.values().map(|g| {
                    g.call(
                        tag(),
                        MetaRequest::PurgeDirs {
                            bucket: name.clone(),
                            dirs: swept.clone(),
                        },
                    )
                });
                for r in join_all(calls).await {
                    r?;
                }
            }
        }
        let remove = MetaRequest::RemoveDir {
            path: path.to_vec(),
            dir,
            cond,
        };
        owner.call(tag(), remove).await?;
        Ok(())
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

impl NamespaceCoordinator {
    /// rmdir of `path`, then (for an implicit directory) of each parent it left empty.
    async fn remove_dir_cascading(
        &self,
        path: Vec<String>,
        cond: RemoveCond,
    ) -> Result<(), MetaError> {
        self.until_ready().await?;
        self.remove_one(&path, cond).await?;
        if cond == RemoveCond::ImplicitEmpty {
            // Cascade: the parent may be an implicit directory left empty. Never the bucket.
            let mut parent = path;
            parent.pop();
            while parent.len() > 1 {
                if self
                    .remove_one(&parent, RemoveCond::ImplicitEmpty)
                    .await
                    .is_err()
                {
                    break;
                }
                parent.pop();
            }
        }
        Ok(())
    }
}

/// Whether `group` holds a version (not a current object's record) of a key of `bucket` that
/// starts with `prefix`, reading its version records page by page until one is found.
async fn versions_in(
    group: &dyn MetaService,
    bucket: &str,
    prefix: &str,
) -> Result<bool, MetaError> {
    const PAGE: u32 = 256;
    let (mut key_marker, mut id_marker) = (String::new(), None);
    loop {
        let req = MetaRequest::ScanVersions {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            key_marker: key_marker.clone(),
            id_marker,
            limit: PAGE,
            with_current: false,
        };
        let page = match group.call(tag(), req).await? {
            MetaResponse::Versions(v) => v,
            other => return Err(MetaError::Internal(format!("versions answered {other:?}"))),
        };
        if page.iter().any(|e| !matches!(e.kind, VersionKind::Current)) {
            return Ok(true);
        }
        match page.last() {
            Some(last) if page.len() == PAGE as usize => {
                (key_marker, id_marker) = (last.key.clone(), Some(last.id));
            }
            _ => return Ok(false),
        }
    }
}
