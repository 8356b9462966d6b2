//! Reading the namespace tree of one group: inode records, payloads and path resolution.
//!
//! Works over any [`View`], so the executor resolves against its batch (seeing earlier ops of
//! the same batch) and reads resolve against the applied store.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use parking_lot::Mutex;
use saker_namespace::{DentryReplica, GroupId, Router};
use saker_rpc::{Attr, Dentry, FileKind, InodeId, Layout, MetaError};

use crate::frozen::FrozenDirs;
use crate::keys::{Keys, PayloadKind};
use crate::records::decode;
use crate::store::{KvPairs, MetaStore, StoreError};
use crate::txn::Txn;

/// Read access to a group's keys.
pub trait View {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, StoreError>;
}

impl View for Txn<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Txn::get(self, key)
    }
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, StoreError> {
        Txn::scan(self, start, end, limit)
    }
}

/// The applied state of the store.
pub struct StoreView<'a>(pub &'a dyn MetaStore);

impl View for StoreView<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.0.get(key)
    }
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, StoreError> {
        self.0.scan(start, Some(end), limit)
    }
}

/// A store failure as a request sees it: a store whose service did not answer (TiKV
/// unreachable, a call past its deadline) is transient, `Unavailable` (a 503 its client
/// retries); a disk error or a corrupt record is `Internal`.
pub fn internal(e: StoreError) -> MetaError {
    match e {
        StoreError::Unreachable(_) => MetaError::Unavailable(e.to_string()),
        StoreError::Io(_) | StoreError::Corrupt(_) => MetaError::Internal(e.to_string()),
    }
}

/// The root directory; it has no record of its own.
pub fn root_attr() -> Attr {
    Attr {
        id: saker_namespace::ROOT_ID,
        kind: FileKind::Dir,
        mode: 0o755,
        uid: 0,
        gid: 0,
        nlink: 2,
        size: 0,
        atime_ns: 0,
        mtime_ns: 0,
        ctime_ns: 0,
        etag: String::new(),
        implicit: false,
        children: 0,
        layout: Layout::Inline,
        parts: Vec::new(),
        s3_mtime_ns: 0,
        sealed: false,
    }
}

/// A resolved inode and the key of its record (`None` for the root and for directories owned
/// by another group, known from the dentry replica).
#[derive(Clone, Debug)]
pub struct Located {
    pub key: Option<Vec<u8>>,
    pub attr: Attr,
    /// The group holding the inode record.
    pub owner: GroupId,
}

impl Located {
    fn remote(d: Dentry, owner: GroupId) -> Self {
        let mut attr = root_attr();
        attr.id = d.id;
        attr.mode = d.mode;
        attr.uid = d.uid;
        attr.gid = d.gid;
        Self {
            key: None,
            attr,
            owner,
        }
    }
}

/// Why an op must be retried by the MNode instead of answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Retry {
    /// A directory on another group is not in the replica: look it up, then retry.
    Lookup,
    /// A directory on the path is frozen by the rmdir protocol: wait for it, then retry.
    Frozen(InodeId),
    /// The path is blocked while the coordinator moves the file there: wait, then retry.
    Blocked(Vec<String>),
    /// The name is blocked while its inodes move between groups: wait, then retry.
    NameBlocked(String),
    /// An implicit directory is in the way of a new object: reap it (if empty), then retry.
    Reap(Vec<String>),
    /// chmod/chown of a directory: the coordinator's protocol makes it (replicas hold the
    /// directory's mode and owner).
    DirAttr,
    /// The name is a hard link's reference to shared inode `id` of group `home`: the op goes
    /// there (`MetaRequest::Shared`).
    Shared { home: GroupId, id: InodeId },
    /// The op needs the attributes of shared inode `id` of group `home` (its owner, for the
    /// sticky-bit rule of a removal): fetch them, then retry.
    SharedAttr { home: GroupId, id: InodeId },
}

/// What a remote lookup found where a directory was expected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absence {
    Missing,
    NotDir,
}

/// Path resolution across groups: local inode records for names this group owns, the dentry
/// replica for the others. An unresolvable step asks for a retry (see [`Retry`]) instead of
/// guessing.
pub struct Resolver<'a> {
    pub keys: &'a Keys,
    /// The routing snapshot this op resolves by.
    pub router: Arc<Router>,
    pub replica: &'a Mutex<DentryReplica>,
    pub frozen: &'a FrozenDirs,
    /// Whether frozen directories stop resolution (writes) or not (reads).
    pub writing: bool,
    /// What the remote lookups made for the current op found missing.
    absent: RefCell<Vec<(InodeId, String, Absence)>>,
    retry: Cell<Option<Retry>>,
    /// The current op is a `MetaRequest::Shared`: its target is this shared inode.
    shared: Cell<Option<InodeId>>,
    /// Attributes of shared inodes of other groups fetched for the current op.
    fetched: RefCell<Vec<Attr>>,
}

impl<'a> Resolver<'a> {
    pub fn new(
        keys: &'a Keys,
        router: Arc<Router>,
        replica: &'a Mutex<DentryReplica>,
        frozen: &'a FrozenDirs,
        writing: bool,
    ) -> Self {
        Self {
            keys,
            router,
            replica,
            frozen,
            writing,
            absent: RefCell::new(Vec::new()),
            retry: Cell::new(None),
            shared: Cell::new(None),
            fetched: RefCell::new(Vec::new()),
        }
    }

    pub fn group(&self) -> GroupId {
        self.keys.group
    }

    /// Sets what remote lookups found missing for the next op.
    pub fn set_absent(&self, absent: Vec<(InodeId, String, Absence)>) {
        *self.absent.borrow_mut() = absent;
    }

    /// Asks for a retry; the returned error aborts the op.
    pub fn retry(&self, why: Retry) -> MetaError {
        self.retry.set(Some(why));
        MetaError::Unavailable("retry".into())
    }

    /// Makes shared inode `id` the target of the ops that follow (`None` ends that).
    pub fn set_shared(&self, id: Option<InodeId>) {
        self.shared.set(id);
    }

    /// Sets the shared inodes' attributes fetched for the next op.
    pub fn set_fetched(&self, fetched: Vec<Attr>) {
        *self.fetched.borrow_mut() = fetched;
    }

    /// Shared inode `id`'s attributes as fetched for the current op.
    pub fn fetched(&self, id: InodeId) -> Option<Attr> {
        self.fetched.borrow().iter().find(|a| a.id == id).cloned()
    }

    /// The shared inode the current op targets, if it is a `MetaRequest::Shared`.
    pub fn shared_target(&self) -> Option<InodeId> {
        self.shared.get()
    }

    /// The retry the last op asked for, if any.
    pub fn take_retry(&self) -> Option<Retry> {
        self.retry.take()
    }

    /// Resolves the directory `name` in `pid`, as the step of a walk.
    fn step<V: View + ?Sized>(&self, v: &V, pid: InodeId, name: &str) -> Result<Child, MetaError> {
        let owner = self.router.owner(pid, name);
        if owner == self.keys.group {
            let found = child(v, self.keys, pid, name)?;
            if let Child::Dir(loc) = &found {
                if self.writing && self.frozen.is_frozen(loc.attr.id) {
                    return Err(self.retry(Retry::Frozen(loc.attr.id)));
                }
            }
            return Ok(found);
        }
        if let Some(d) = self.replica.lock().get(pid, name) {
            crate::metrics::REPLICA_HITS.inc();
            return Ok(Child::Dir(Located::remote(d, owner)));
        }
        let absent = self.absent.borrow();
        match absent.iter().find(|(p, n, _)| *p == pid && n == name) {
            Some((_, _, Absence::Missing)) => Ok(Child::None),
            Some((_, _, Absence::NotDir)) => Ok(Child::Other(Located {
                key: None,
                attr: root_attr(),
                owner,
            })),
            None => Err(self.retry(Retry::Lookup)),
        }
    }
}

/// What lives under one name in a directory.
#[derive(Clone, Debug)]
pub enum Child {
    None,
    Dir(Located),
    Other(Located),
}

pub fn read_attr<V: View + ?Sized>(v: &V, key: &[u8]) -> Result<Option<Attr>, MetaError> {
    match v.get(key).map_err(internal)? {
        Some(bytes) => Ok(Some(decode(&bytes).map_err(internal)?)),
        None => Ok(None),
    }
}

/// Looks `name` up in directory `pid`: a directory first, then anything else.
pub fn child<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    pid: InodeId,
    name: &str,
) -> Result<Child, MetaError> {
    let dkey = keys.inode(pid, name, true);
    if let Some(attr) = read_attr(v, &dkey)? {
        return Ok(Child::Dir(Located {
            key: Some(dkey),
            attr,
            owner: keys.group,
        }));
    }
    let fkey = keys.inode(pid, name, false);
    if let Some(attr) = read_attr(v, &fkey)? {
        return Ok(Child::Other(Located {
            key: Some(fkey),
            attr,
            owner: keys.group,
        }));
    }
    Ok(Child::None)
}

/// The shared inode `id` of this group, if it exists.
pub fn shared_inode<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    id: InodeId,
) -> Result<Option<Located>, MetaError> {
    let key = keys.shared(id);
    Ok(read_attr(v, &key)?.map(|attr| Located {
        key: Some(key),
        attr,
        owner: keys.group,
    }))
}

/// Looks up the target of an op on the inode itself (its attributes, payloads or bytes), as
/// [`child`] does but through a hard link's reference: the shared inode when this group is its
/// home (or the op is a `Shared` one, whose target it is), else a retry at the home.
pub fn target<V: View + ?Sized>(
    v: &V,
    r: &Resolver<'_>,
    pid: InodeId,
    name: &str,
) -> Result<Child, MetaError> {
    if let Some(id) = r.shared.get() {
        return Ok(match shared_inode(v, r.keys, id)? {
            Some(loc) => Child::Other(loc),
            None => Child::None,
        });
    }
    match child(v, r.keys, pid, name)? {
        Child::Other(loc) => match loc.attr.layout.shared_home() {
            None => Ok(Child::Other(loc)),
            Some(home) if home == r.keys.group => Ok(match shared_inode(v, r.keys, loc.attr.id)? {
                Some(shared) => Child::Other(shared),
                None => Child::None,
            }),
            Some(home) => Err(r.retry(Retry::Shared {
                home,
                id: loc.attr.id,
            })),
        },
        found => Ok(found),
    }
}

/// Resolves the directories of `path[..path.len() - 1]` and returns them root first (the root
/// included). Errors say where the walk stopped: `NoSuchBucket` at depth 0, `MissingParent` for
/// a missing directory, `Conflict` where a file stands in the way.
pub fn resolve_parents<V: View + ?Sized>(
    v: &V,
    r: &Resolver<'_>,
    path: &[String],
) -> Result<Vec<Located>, MetaError> {
    let mut chain = vec![Located {
        key: None,
        attr: root_attr(),
        owner: r.keys.group,
    }];
    let parents = path.len().saturating_sub(1);
    for (depth, name) in path[..parents].iter().enumerate() {
        let pid = chain.last().expect("chain starts with the root").attr.id;
        match r.step(v, pid, name)? {
            Child::Dir(loc) => chain.push(loc),
            Child::Other(_) if depth == 0 => return Err(MetaError::NoSuchBucket),
            Child::Other(_) => {
                return Err(MetaError::Conflict {
                    path: path[..=depth].join("/"),
                })
            }
            Child::None if depth == 0 => return Err(MetaError::NoSuchBucket),
            Child::None => return Err(MetaError::MissingParent { depth }),
        }
    }
    Ok(chain)
}

pub fn read_payload<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    id: InodeId,
    kind: PayloadKind,
) -> Result<Option<Vec<u8>>, MetaError> {
    v.get(&keys.payload(id, kind)).map_err(internal)
}

/// Whether directory `id` has any entry on this group.
pub fn has_children<V: View + ?Sized>(v: &V, keys: &Keys, id: InodeId) -> Result<bool, MetaError> {
    let start = keys.children(id);
    let end = crate::store::prefix_end(&start).expect("inode prefix has an end");
    Ok(!v.scan(&start, &end, 1).map_err(internal)?.is_empty())
}

/// Whether directory `id` still has an entry in this group, just after its entry at `gone`
/// (a key of [`Keys::children`]`(id)`) went: entries after it are looked for first, so that a
/// directory emptied in key order (a bulk delete) does not read past the tombstones of all
/// the entries it lost before each one (an LSM store keeps them until compaction), only once.
pub fn has_children_besides<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    id: InodeId,
    gone: &[u8],
) -> Result<bool, MetaError> {
    let start = keys.children(id);
    let end = crate::store::prefix_end(&start).expect("inode prefix has an end");
    let mut after = gone.to_vec();
    after.push(0);
    if !v.scan(&after, &end, 1).map_err(internal)?.is_empty() {
        return Ok(true);
    }
    Ok(!v.scan(&start, gone, 1).map_err(internal)?.is_empty())
}

/// Calls `f` on every value in `[start, end)`, reading in pages; `f` answers whether to go on.
pub fn for_each_value<V: View + ?Sized>(
    v: &V,
    start: &[u8],
    end: &[u8],
    mut f: impl FnMut(&[u8]) -> Result<bool, MetaError>,
) -> Result<(), MetaError> {
    for_each_entry(v, start, end, |_, val| f(val))
}

/// Calls `f` on every key and value in `[start, end)`, reading in pages; `f` answers whether
/// to go on.
pub fn for_each_entry<V: View + ?Sized>(
    v: &V,
    start: &[u8],
    end: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, MetaError>,
) -> Result<(), MetaError> {
    let mut from = start.to_vec();
    loop {
        let page = v.scan(&from, end, 1024).map_err(internal)?;
        let Some((last, _)) = page.last() else {
            return Ok(());
        };
        for (key, val) in &page {
            if !f(key, val)? {
                return Ok(());
            }
        }
        from = last.clone();
        from.push(0);
    }
}
