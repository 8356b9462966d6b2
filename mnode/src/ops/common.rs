//! Record-level helpers the op families share: path checks, attribute and payload records,
//! chunk release, parent-directory updates and new inodes' attributes.

use saker_rpc::{
    Attr, ChunkRef, DirChange, FileKind, InodeId, Layout, MetaError, NewObject, TierRef,
};

use super::Ctx;
use crate::keys::{Keys, PayloadKind, PAYLOAD_KINDS};
use crate::records::{encode, encode_bytes};
use crate::tree::Located;
use crate::txn::Txn;

pub(super) fn check_path(path: &[String], min: usize) -> Result<(), MetaError> {
    if path.len() < min {
        return Err(MetaError::Invalid("path too short".into()));
    }
    Ok(())
}

pub(super) fn put_attr(txn: &mut Txn<'_>, key: &[u8], attr: &Attr) {
    txn.put(key.to_vec(), encode(attr));
}

/// Queues `chunks` for deletion after the grace period.
pub(super) fn release_chunks(txn: &mut Txn<'_>, ctx: &Ctx<'_>, chunks: &[ChunkRef]) {
    for c in chunks {
        txn.put(ctx.keys.gc(ctx.now_ns + ctx.gc_grace_ns, c.id), Vec::new());
    }
}

/// Queues what a record stored with `layout` owns for deletion after the grace period: its
/// chunks (a coded chunk's shards), and its remote copy when it lives in a tier (a GC entry
/// whose value names it).
pub(super) fn release(txn: &mut Txn<'_>, ctx: &Ctx<'_>, layout: &Layout) {
    match layout.coded() {
        Some(coded) => {
            for id in coded.shard_ids() {
                txn.put(ctx.keys.gc(ctx.now_ns + ctx.gc_grace_ns, id), Vec::new());
            }
        }
        None => release_chunks(txn, ctx, layout.chunks()),
    }
    if let Some(t) = layout.tiered() {
        let due = ctx.now_ns + ctx.gc_grace_ns;
        txn.put(ctx.keys.gc(due, tier_gc_id(t)), encode(t));
    }
}

/// The GC queue id of a remote copy: a hash of where it is (the queue keys chunks by id).
fn tier_gc_id(t: &TierRef) -> u128 {
    let mut h = [0u8; 16];
    let a = crc32c::crc32c(t.tier.as_bytes());
    let b = crc32c::crc32c(t.key.as_bytes());
    let c = crc32c::crc32c_append(a, t.key.as_bytes());
    h[..4].copy_from_slice(&a.to_be_bytes());
    h[4..8].copy_from_slice(&b.to_be_bytes());
    h[8..12].copy_from_slice(&c.to_be_bytes());
    h[12..].copy_from_slice(&(t.key.len() as u32).to_be_bytes());
    u128::from_be_bytes(h)
}

pub(super) fn delete_payloads(txn: &mut Txn<'_>, keys: &Keys, id: InodeId) {
    for kind in PAYLOAD_KINDS {
        txn.delete(keys.payload(id, kind));
    }
}

/// Deletes the payloads of the inode record `attr` at a name that goes; a hard link's
/// reference has none (they stay with the shared inode).
pub(super) fn delete_name_payloads(txn: &mut Txn<'_>, keys: &Keys, attr: &Attr) {
    if attr.layout.shared_home().is_none() {
        delete_payloads(txn, keys, attr.id);
    }
}

/// Applies a directory-entry change to the parent at the end of `chain`: to its record when this
/// group owns it, else as a change-log entry for its owner.
pub(super) fn touch_parent(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    entries: i64,
    links: i64,
) {
    let parent = chain.last_mut().expect("chain has the root");
    let change = DirChange {
        dir: parent.attr.id,
        entries,
        links,
        mtime_ns: ctx.now_ns,
    };
    match parent.key.clone() {
        Some(key) => {
            change_attr(&mut parent.attr, &change);
            put_attr(txn, &key, &parent.attr);
        }
        // The root keeps no record.
        None if parent.attr.id == saker_namespace::ROOT_ID => {}
        None => ctx.changes.push((parent.owner, change)),
    }
}

pub(super) fn change_attr(a: &mut Attr, c: &DirChange) {
    a.children = (a.children as i64 + c.entries).max(0) as u64;
    a.nlink = (a.nlink as i64 + c.links).max(2) as u32;
    a.mtime_ns = a.mtime_ns.max(c.mtime_ns);
    a.ctime_ns = a.ctime_ns.max(c.mtime_ns);
}

/// Writes a directory's record and its id index.
pub(super) fn put_dir(txn: &mut Txn<'_>, keys: &Keys, key: &[u8], attr: &Attr) {
    put_attr(txn, key, attr);
    txn.put(keys.dir_index(attr.id), key.to_vec());
}

pub(super) fn new_attr(ctx: &mut Ctx<'_>, kind: FileKind, mode: u32, uid: u32, gid: u32) -> Attr {
    Attr {
        id: ctx.alloc_id(),
        kind,
        mode,
        uid,
        gid,
        nlink: if kind == FileKind::Dir { 2 } else { 1 },
        size: 0,
        atime_ns: ctx.now_ns,
        mtime_ns: ctx.now_ns,
        ctime_ns: ctx.now_ns,
        etag: String::new(),
        implicit: false,
        children: 0,
        layout: Layout::Inline,
        parts: Vec::new(),
        s3_mtime_ns: ctx.now_ns,
        sealed: false,
    }
}

/// Writes the payload records of an object or marker, and deletes those it has none of.
/// An inode id the op allocated itself (`fresh`) has no records to delete: the group hands
/// out each id of its range once ([`Ctx::alloc_id`] counts up from above every id its
/// applied log holds, `node::first_free_id`, and only the group allocates in its range), so
/// no record was ever written under it. Its deletes (tombstones in the store) are left out.
pub(super) fn write_payloads(
    txn: &mut Txn<'_>,
    keys: &Keys,
    id: InodeId,
    obj: &NewObject,
    fresh: bool,
) {
    let mut put = |kind, value: Option<Vec<u8>>| match value {
        Some(v) => txn.put(keys.payload(id, kind), v),
        None if fresh => {}
        None => txn.delete(keys.payload(id, kind)),
    };
    put(
        PayloadKind::Data,
        obj.inline.as_ref().map(|d| encode_bytes(d)),
    );
    put(PayloadKind::Meta, Some(encode(&obj.meta)));
    let tags = (!obj.tags.is_empty()).then(|| encode(&obj.tags));
    put(PayloadKind::Tags, tags);
    // An empty lock is no record.
    let lock = obj.lock.as_ref().filter(|l| !l.is_empty());
    put(PayloadKind::Lock, lock.map(encode));
    put(PayloadKind::Acl, obj.acl.as_ref().map(encode));
}

pub(super) fn missing_as_not_found(e: MetaError) -> MetaError {
    match e {
        MetaError::MissingParent { .. } => MetaError::NotFound,
        MetaError::Conflict { .. } => MetaError::NotDir,
        e => e,
    }
}

/// Whether `path` names a directory below a bucket, which S3 may reap.
pub(super) fn reapable(path: &[String]) -> bool {
    path.len() > 1
}
