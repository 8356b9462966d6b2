//! Object Lock in the MNode: each version's lock is a payload of its inode
//! ([`PayloadKind::Lock`]), so it travels with the version when it becomes noncurrent and
//! goes with its payloads. Every op that would delete, overwrite, truncate or move away a
//! version checks it here, in the batch, against the batch's clock
//! ([`saker_rpc::ObjectLock`] holds the rules).

use saker_rpc::{FileKind, InodeId, MetaError, MetaResponse, ObjectLock, Retention, VersionKind};

use super::common::check_path;
use super::{versions, Ctx, OpResult};
use crate::keys::{Keys, PayloadKind};
use crate::records::{decode, encode};
use crate::tree::{child, internal, read_payload, resolve_parents, Child, View};
use crate::txn::Txn;

/// The lock of the version stored as inode `id` (empty if it has none).
pub(crate) fn lock_of<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    id: InodeId,
) -> Result<ObjectLock, MetaError> {
    match read_payload(v, keys, id, PayloadKind::Lock)? {
        Some(b) => decode(&b).map_err(internal),
        None => Ok(ObjectLock::default()),
    }
}

/// `Ok` if the version stored as inode `id` may go now (`ObjectLocked` otherwise).
pub(super) fn may_remove<V: View + ?Sized>(
    v: &V,
    ctx: &Ctx<'_>,
    id: InodeId,
    bypass: bool,
) -> Result<(), MetaError> {
    lock_of(v, ctx.keys, id)?.check_delete(ctx.now_ns, bypass)
}

/// Stores `lock` as the lock of inode `id` (an empty one is no record).
pub(super) fn put_lock(txn: &mut Txn<'_>, keys: &Keys, id: InodeId, lock: Option<&ObjectLock>) {
    let key = keys.payload(id, PayloadKind::Lock);
    match lock {
        Some(l) if !l.is_empty() => txn.put(key, encode(l)),
        _ => txn.delete(key),
    }
}

/// `SetObjectLock`: the version's retention and/or legal hold change, if its lock allows it.
pub(super) fn set_object_lock(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    version_id: Option<&str>,
    retention: Option<&Retention>,
    legal_hold: Option<bool>,
    bypass: bool,
) -> OpResult {
    check_path(path, 2)?;
    let id = version_inode(txn, ctx, path, version_id)?;
    let mut lock = lock_of(txn, ctx.keys, id)?;
    if let Some(r) = retention {
        lock.check_retention(r, ctx.now_ns, bypass)?;
        lock.retention = Some(*r);
    }
    if let Some(on) = legal_hold {
        lock.legal_hold = on;
    }
    put_lock(txn, ctx.keys, id, Some(&lock));
    Ok(MetaResponse::Done)
}

/// The inode of the object version `version_id` (the current object without one) of the
/// key at `path`: `NotFound`/`NoSuchVersion` if there is none, `DeleteMarker` for a marker.
pub(super) fn version_inode(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    path: &[String],
    version_id: Option<&str>,
) -> Result<InodeId, MetaError> {
    let (bucket, key) = versions::object_key(path);
    let current = match resolve_parents(txn, ctx.ns, path) {
        Ok(chain) => {
            let pid = chain.last().expect("root").attr.id;
            match child(txn, ctx.keys, pid, path.last().expect("checked length"))? {
                Child::Other(loc)
                    if loc.attr.kind == FileKind::File
                        && loc.attr.layout.shared_home().is_none() =>
                {
                    Some(loc.attr)
                }
                _ => None,
            }
        }
        Err(MetaError::NoSuchBucket) => return Err(MetaError::NoSuchBucket),
        Err(_) => None,
    };
    let Some(vid) = version_id else {
        return current.map(|a| a.id).ok_or(MetaError::NotFound);
    };
    if let Some(attr) = current {
        if versions::current_id(txn, ctx.keys, bucket, &key, &attr)? == vid {
            return Ok(attr.id);
        }
    }
    let found =
        versions::find(txn, ctx.keys, bucket, &key, vid)?.ok_or(MetaError::NoSuchVersion)?;
    match found.stored.kind {
        VersionKind::Object(attr) => Ok(attr.id),
        VersionKind::DeleteMarker => Err(MetaError::DeleteMarker(vid.to_string())),
        VersionKind::Current => Err(MetaError::NoSuchVersion),
    }
}
