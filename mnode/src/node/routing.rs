//! Where requests go: the group that owns a name (resolving path-walked parents by remote
//! dentry lookups, and answering other groups' lookups), forwards to it, and hard links'
//! shared inodes at their home group.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use saker_namespace::{Route, ROOT_ID};
use saker_rpc::{
    Attr, ClientTag, CostKind, Entry, InodeId, MetaError, MetaRequest, MetaResponse, MetaService,
};

use super::{untagged, Mnode, MAX_ATTEMPTS};
use crate::metrics;
use crate::tree::{child, Absence, Child, StoreView};

impl Mnode {
    pub(super) fn peer(&self, g: u32) -> Result<&Arc<dyn MetaService>, MetaError> {
        self.peers
            .get()
            .and_then(|p| p.get(&g))
            .ok_or_else(|| MetaError::Unavailable(format!("no route to group {g}")))
    }

    /// Fills the dentry replica along `path`'s parents by remote lookups, and returns what the
    /// owners found missing (the executor turns that into `MissingParent` or `Conflict`).
    pub(super) async fn warm(
        &self,
        path: &[String],
    ) -> Result<Vec<(u64, String, Absence)>, MetaError> {
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
            let dir = path[..=depth].join("/");
            let last = path.last().map(String::as_str);
            self.load
                .record(CostKind::RemoteLookup, 1, last, Some(&dir), 0);
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
    pub(super) async fn lookup_dentry(&self, req: &MetaRequest) -> Result<MetaResponse, MetaError> {
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

    /// The group that owns the request's target, if not this one. A path-walked name is
    /// placed by its parent's id, which this group resolves first (its own records and dentry
    /// replica, else remote lookups); while a parent is missing, the request stays here and
    /// the executor answers for the missing parent.
    pub(super) async fn misdirected(&self, req: &MetaRequest) -> Result<Option<u32>, MetaError> {
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
    pub(super) fn remote_link(&self, attr: &Attr) -> Option<u32> {
        attr.layout
            .shared_home()
            .filter(|&home| home != self.keys.group)
    }

    /// Listing entries with the hard links' references replaced by their shared inodes' attributes
    /// (one `SharedAttrs` per home group). A reference whose inode is gone meanwhile is left
    /// as it is.
    pub(super) async fn resolve_links(
        &self,
        mut entries: Vec<Entry>,
    ) -> Result<Vec<Entry>, MetaError> {
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
    pub(super) async fn shared_attrs(
        &self,
        home: u32,
        ids: Vec<InodeId>,
    ) -> Result<Vec<Attr>, MetaError> {
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

    /// Sends a path op whose name is a hard link's reference to the home of the shared inode
    /// (in-process, or over the network like any forward).
    pub(super) async fn forward_shared(
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
    pub(super) async fn forward(
        &self,
        g: u32,
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        metrics::MISDIRECTED.inc();
        self.forwards.fetch_add(1, Ordering::Relaxed);
        if let Some(path) = req.path() {
            self.load.record_path(CostKind::Forward, path, 0);
        }
        self.peer(g)?.call(tag, req).await
    }
}
