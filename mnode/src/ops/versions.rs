//! Object versions of buckets that keep them (S3 versioning).
//!
//! The current object of a key stays the inode record it always is, so GET, PUT and stat of
//! the current version cost what they cost without versions. The other versions live in a
//! table of their own (`w`, [`crate::keys`]) keyed by bucket and object key (a delete marker
//! has no inode; the key's directories may come and go), newest first, in the group that owns
//! the key's name: a write moves the replaced object there in the batch that replaces it.
//!
//! A version's id names a number ([`saker_rpc::version_id`]): an S3 write's is the new
//! object's inode id. The current object has a record of kind `Current`, at its inode id,
//! unless it is the `null` version (written while the bucket did not keep versions, or kept
//! them suspended). A mount's write replaces the bytes of an inode that stays (the kernel
//! knows the file by it), so the version it makes gets a number of its own, newer than every
//! other ([`mark_current_as`]). A noncurrent version is keyed by its number where it can be
//! (the order of version listings and their markers), and keeps its payloads under that key's
//! id and its chunks until the version is deleted.

use saker_rpc::{
    version_id, version_inode, Attr, FileKind, InodeId, MetaError, VersionKind, NULL_VERSION,
};
use serde::{Deserialize, Serialize};

use super::common::{delete_payloads, release};
use super::Ctx;
use crate::keys::{Keys, PAYLOAD_KINDS};
use crate::records::{decode, encode};
use crate::store::prefix_end;
use crate::tree::View;
use crate::txn::Txn;

/// One version as stored (the key holds its bucket, object key and inode id).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Stored {
    pub version_id: String,
    pub kind: VersionKind,
    pub mtime_ns: i64,
}

/// The bucket and object key a path names.
pub(crate) fn object_key(path: &[String]) -> (&str, String) {
    (&path[0], path[1..].join("/"))
}

fn internal(e: impl std::fmt::Display) -> MetaError {
    MetaError::Internal(e.to_string())
}

/// The versions of one key, newest first, with their inode ids.
pub(crate) fn of_key<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    key: &str,
) -> Result<Vec<(InodeId, Stored)>, MetaError> {
    let start = keys.versions_of_key(bucket, key);
    let end = prefix_end(&start).expect("a key prefix has an end");
    let bucket_len = keys.versions_of(bucket).len();
    let mut out = Vec::new();
    let mut from = start;
    loop {
        let batch = v.scan(&from, &end, 256).map_err(crate::tree::internal)?;
        let Some((last, _)) = batch.last() else {
            return Ok(out);
        };
        from = last.clone();
        from.push(0);
        for (k, val) in &batch {
            let (_, id) =
                Keys::version_parts(k, bucket_len).ok_or_else(|| internal("bad version key"))?;
            out.push((id, decode(val).map_err(internal)?));
        }
    }
}

/// The version id of the current object `attr` of `key`: its own, or `null`.
pub(crate) fn current_id<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    key: &str,
    attr: &Attr,
) -> Result<String, MetaError> {
    match v
        .get(&keys.version(bucket, key, attr.id))
        .map_err(crate::tree::internal)?
    {
        Some(val) => {
            let s: Stored = decode(&val).map_err(internal)?;
            Ok(s.version_id)
        }
        None => Ok(NULL_VERSION.to_string()),
    }
}

/// Records the current object `attr` of `key` as a version of its own (a write while the
/// bucket keeps versions).
pub(crate) fn mark_current(txn: &mut Txn<'_>, ctx: &Ctx<'_>, bucket: &str, key: &str, id: InodeId) {
    mark_current_as(txn, ctx, bucket, key, id, id);
}

/// Records the current object, inode `id`, of `key` as version `number` (a mount's write,
/// which keeps the inode).
pub(crate) fn mark_current_as(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    bucket: &str,
    key: &str,
    id: InodeId,
    number: InodeId,
) {
    let s = Stored {
        version_id: version_id(number),
        kind: VersionKind::Current,
        mtime_ns: ctx.now_ns,
    };
    txn.put(ctx.keys.version(bucket, key, id), encode(&s));
}

/// Keeps the current object `attr` of `key`, about to be replaced or deleted, as a
/// noncurrent version (its payloads and chunks stay). `stays`: the inode stays at the key
/// with new bytes (a mount's write), so the version needs a key of its own and a copy of the
/// inode's payloads; otherwise the inode goes.
pub(crate) fn archive(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    bucket: &str,
    key: &str,
    attr: &Attr,
    stays: bool,
) -> Result<(), MetaError> {
    let vid = current_id(txn, ctx.keys, bucket, key, attr)?;
    let at = match version_inode(&vid) {
        // A version a mount's write made: keyed by its own number.
        Some(n) if n != attr.id => n,
        // The inode stays, and its record is where the current object's is.
        _ if stays => ctx.alloc_id(),
        _ => attr.id,
    };
    let mut kept = attr.clone();
    if at != attr.id {
        move_payloads(txn, ctx.keys, attr.id, at, stays)?;
        kept.id = at;
        if !stays {
            txn.delete(ctx.keys.version(bucket, key, attr.id));
        }
    }
    let s = Stored {
        version_id: vid,
        kind: VersionKind::Object(Box::new(kept)),
        mtime_ns: attr.s3_mtime_ns,
    };
    txn.put(ctx.keys.version(bucket, key, at), encode(&s));
    Ok(())
}

/// Copies inode `from`'s payloads to `to` (and deletes them from `from` unless `keep`).
fn move_payloads(
    txn: &mut Txn<'_>,
    keys: &Keys,
    from: InodeId,
    to: InodeId,
    keep: bool,
) -> Result<(), MetaError> {
    for kind in PAYLOAD_KINDS {
        let k = keys.payload(from, kind);
        if let Some(v) = txn.get(&k).map_err(crate::tree::internal)? {
            txn.put(keys.payload(to, kind), v);
            if !keep {
                txn.delete(k);
            }
        }
    }
    Ok(())
}

/// Deletes a noncurrent version for good: its record, and an object's payloads and chunks.
fn forget(txn: &mut Txn<'_>, ctx: &Ctx<'_>, bucket: &str, key: &str, id: InodeId, s: &Stored) {
    txn.delete(ctx.keys.version(bucket, key, id));
    if let VersionKind::Object(attr) = &s.kind {
        delete_payloads(txn, ctx.keys, attr.id);
        release(txn, ctx, &attr.layout);
    }
}

/// Deletes the noncurrent `null` version of `key`, if there is one (a write or delete while
/// versioning is suspended replaces it).
pub(crate) fn drop_null(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    bucket: &str,
    key: &str,
) -> Result<(), MetaError> {
    for (id, s) in of_key(txn, ctx.keys, bucket, key)? {
        if s.version_id == NULL_VERSION && !matches!(s.kind, VersionKind::Current) {
            if let VersionKind::Object(attr) = &s.kind {
                super::retention::may_remove(txn, ctx, attr.id, false)?;
            }
            forget(txn, ctx, bucket, key, id, &s);
        }
    }
    Ok(())
}

/// Writes a delete marker for `key`: a version of its own, or the `null` one. Answers its
/// version id.
pub(crate) fn add_marker(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    bucket: &str,
    key: &str,
    own_version: bool,
) -> String {
    let id = ctx.alloc_id();
    let vid = if own_version {
        version_id(id)
    } else {
        NULL_VERSION.to_string()
    };
    let s = Stored {
        version_id: vid.clone(),
        kind: VersionKind::DeleteMarker,
        mtime_ns: ctx.now_ns,
    };
    txn.put(ctx.keys.version(bucket, key, id), encode(&s));
    vid
}

/// A noncurrent version found by its version id.
pub(crate) struct Found {
    pub id: InodeId,
    pub stored: Stored,
    /// Whether it is the newest of the key's noncurrent versions.
    pub newest: bool,
}

/// The noncurrent version of `key` with version id `vid`.
pub(crate) fn find<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    key: &str,
    vid: &str,
) -> Result<Option<Found>, MetaError> {
    if vid != NULL_VERSION && version_inode(vid).is_none() {
        return Ok(None);
    }
    let all = of_key(v, keys, bucket, key)?;
    let noncurrent = all
        .into_iter()
        .filter(|(_, s)| !matches!(s.kind, VersionKind::Current));
    let mut newest = true;
    for (id, s) in noncurrent {
        if s.version_id == vid {
            return Ok(Some(Found {
                id,
                stored: s,
                newest,
            }));
        }
        newest = false;
    }
    Ok(None)
}

/// Removes a noncurrent version for good (DELETE with its version id).
pub(crate) fn remove(txn: &mut Txn<'_>, ctx: &Ctx<'_>, bucket: &str, key: &str, f: &Found) {
    forget(txn, ctx, bucket, key, f.id, &f.stored);
}

/// After the key's current object went for good: the newest noncurrent version, if it is an
/// object, becomes the current one again. Answers the attributes to store at the key.
pub(crate) fn promote(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    bucket: &str,
    key: &str,
) -> Result<Option<Attr>, MetaError> {
    let newest = of_key(txn, ctx.keys, bucket, key)?
        .into_iter()
        .find(|(_, s)| !matches!(s.kind, VersionKind::Current));
    let Some((id, s)) = newest else {
        return Ok(None);
    };
    let VersionKind::Object(attr) = s.kind else {
        return Ok(None);
    };
    if s.version_id == NULL_VERSION {
        txn.delete(ctx.keys.version(bucket, key, id));
    } else {
        let current = Stored {
            version_id: s.version_id,
            kind: VersionKind::Current,
            mtime_ns: s.mtime_ns,
        };
        txn.put(ctx.keys.version(bucket, key, id), encode(&current));
    }
    debug_assert_eq!(attr.kind, FileKind::File);
    Ok(Some(*attr))
}
