//! Reading the namespace tree of one group: inode records, payloads and path resolution.
//!
//! Works over any [`View`], so the executor resolves against its batch (seeing earlier ops of
//! the same batch) and reads resolve against the applied store.

use saker_rpc::{Attr, FileKind, InodeId, Layout, MetaError};

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

pub fn internal(e: StoreError) -> MetaError {
    MetaError::Internal(e.to_string())
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
    }
}

/// A resolved inode and the key of its record (`None` for the root).
#[derive(Clone, Debug)]
pub struct Located {
    pub key: Option<Vec<u8>>,
    pub attr: Attr,
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
        }));
    }
    let fkey = keys.inode(pid, name, false);
    if let Some(attr) = read_attr(v, &fkey)? {
        return Ok(Child::Other(Located {
            key: Some(fkey),
            attr,
        }));
    }
    Ok(Child::None)
}

/// Resolves the directories of `path[..path.len() - 1]` and returns them root first (the root
/// included). Errors say where the walk stopped: `NoSuchBucket` at depth 0, `MissingParent` for
/// a missing directory, `Conflict` where a file stands in the way.
pub fn resolve_parents<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    path: &[String],
) -> Result<Vec<Located>, MetaError> {
    let mut chain = vec![Located {
        key: None,
        attr: root_attr(),
    }];
    let parents = path.len().saturating_sub(1);
    for (depth, name) in path[..parents].iter().enumerate() {
        let pid = chain.last().expect("chain starts with the root").attr.id;
        match child(v, keys, pid, name)? {
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

/// Whether directory `id` has any entry.
pub fn has_children<V: View + ?Sized>(v: &V, keys: &Keys, id: InodeId) -> Result<bool, MetaError> {
    let start = keys.children(id);
    let end = crate::store::prefix_end(&start).expect("inode prefix has an end");
    Ok(!v.scan(&start, &end, 1).map_err(internal)?.is_empty())
}
