//! POSIX file ops: create (files, symlinks, special files), committing written data, and
//! unlink.

use bytes::Bytes;
use saker_rpc::{
    access, Attr, Cred, DefaultLock, FileKind, InodeId, Layout, MetaError, MetaResponse,
    ObjectLock, ObjectMeta, Sse, Versioning, NULL_VERSION,
};

use super::attrs::EMPTY_ETAG;
use super::common::{
    check_path, delete_payloads, missing_as_not_found, new_attr, put_attr, release, touch_parent,
};
use super::links::{touch_shared, victim};
use super::objects::{delete_marker, replace_version};
use super::{retention, versions, Ctx, OpResult};
use crate::keys::PayloadKind;
use crate::perm;
use crate::records::{decode, encode, encode_bytes};
use crate::tree::{child, internal, resolve_parents, target, Child, Located};
use crate::txn::Txn;

pub(super) fn remove_file(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    loc: Located,
) -> Result<(), MetaError> {
    txn.delete(loc.key.expect("child has a key"));
    match loc.attr.layout.shared_home() {
        Some(home) => touch_shared(txn, ctx, home, loc.attr.id, -1)?,
        None => {
            delete_payloads(txn, ctx.keys, loc.attr.id);
            release(txn, ctx, &loc.attr.layout);
        }
    }
    touch_parent(txn, ctx, chain, -1, 0);
    Ok(())
}

/// Removes the file `loc` at `path` (whose parents are `chain`) from the namespace: for good,
/// or, in a bucket that keeps versions, kept as a noncurrent version (answers whether it was;
/// a hard link's name is not: its file has others).
pub(super) fn remove_name(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    path: &[String],
    loc: Located,
    versioning: Versioning,
) -> Result<bool, MetaError> {
    let linked = loc.attr.layout.shared_home().is_some();
    if versioning == Versioning::Off || linked || loc.attr.kind != FileKind::File {
        remove_file(txn, ctx, chain, loc)?;
        return Ok(false);
    }
    replace_version(txn, ctx, path, &loc.attr, versioning)?;
    txn.delete(loc.key.expect("child has a key"));
    touch_parent(txn, ctx, chain, -1, 0);
    Ok(true)
}

pub(super) fn unlink(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    cred: Option<&Cred>,
    versioning: Versioning,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let pid = chain.last().expect("root").attr.id;
    match child(txn, ctx.keys, pid, path.last().expect("len"))? {
        Child::Other(loc) => {
            let parent = &chain.last().expect("root").attr;
            perm::may_delete(parent, &victim(txn, ctx, parent, &loc, cred)?, cred)?;
            let linked = loc.attr.layout.shared_home().is_some();
            if !linked {
                retention::may_remove(txn, ctx, loc.attr.id, false)?;
            }
            let removed = loc.attr.clone();
            if remove_name(txn, ctx, &mut chain, path, loc, versioning)? {
                // As an S3 delete: the file stays as a noncurrent version behind a marker.
                delete_marker(txn, ctx, path, versioning)?;
            }
            Ok(MetaResponse::Attr(removed))
        }
        Child::Dir(_) => Err(MetaError::IsDir),
        Child::None => Err(MetaError::NotFound),
    }
}

/// What a `Create` makes.
pub(super) struct NewFile<'a> {
    pub(super) mode: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) exclusive: bool,
    pub(super) symlink: Option<&'a str>,
    pub(super) special: Option<FileKind>,
    pub(super) versioning: Versioning,
}

pub(super) fn create(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    spec: NewFile<'_>,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let parent = chain.last().expect("root").attr.clone();
    let name = path.last().expect("checked length");
    if spec.special.is_some_and(|k| !k.is_special()) {
        return Err(MetaError::Invalid(
            "special must be a FIFO, socket or device".into(),
        ));
    }
    let new_name_only = spec.exclusive || spec.symlink.is_some() || spec.special.is_some();
    // Whether the name is taken is this group's to say; a hard link's file is looked up at
    // its home only when it is to be answered.
    let found = match ctx.ns.shared_target() {
        Some(_) => target(txn, ctx.ns, parent.id, name)?,
        None => child(txn, ctx.keys, parent.id, name)?,
    };
    match found {
        Child::Dir(_) if new_name_only => return Err(MetaError::Exists),
        Child::Dir(_) => return Err(MetaError::IsDir),
        Child::Other(_) if new_name_only => return Err(MetaError::Exists),
        Child::Other(_) => {
            let Child::Other(loc) = target(txn, ctx.ns, parent.id, name)? else {
                return Err(MetaError::NotFound);
            };
            if let Some(c) = cred {
                let mut want = 0;
                if loc.attr.kind == FileKind::File {
                    want = access::READ;
                }
                perm::check(&loc.attr, c, want)?;
            }
            return Ok(MetaResponse::Attr(loc.attr));
        }
        // The shared inode went since its home was asked.
        Child::None if ctx.ns.shared_target().is_some() => return Err(MetaError::NotFound),
        Child::None => {}
    }
    perm::may_create(&parent, cred)?;
    let gid = if parent.mode & perm::S_ISGID != 0 {
        parent.gid
    } else {
        spec.gid
    };
    let (kind, mode, data): (FileKind, u32, &[u8]) = match (spec.symlink, spec.special) {
        (Some(target), _) => (FileKind::Symlink, 0o777, target.as_bytes()),
        (None, Some(kind)) => (kind, spec.mode & 0o7777, &[]),
        (None, None) => (FileKind::File, spec.mode & 0o7777, &[]),
    };
    let mut attr = new_attr(ctx, kind, mode, spec.uid, gid);
    attr.size = data.len() as u64;
    if kind == FileKind::File {
        attr.etag = EMPTY_ETAG.to_string();
    }
    put_attr(txn, &ctx.keys.inode(parent.id, name, false), &attr);
    txn.put(
        ctx.keys.payload(attr.id, PayloadKind::Data),
        encode_bytes(data),
    );
    if kind == FileKind::File {
        // A new file of a bucket that keeps versions is a version of its own (or the `null`
        // one, which replaces any other while versioning is suspended).
        let (bucket, key) = versions::object_key(path);
        match spec.versioning {
            Versioning::Enabled => versions::mark_current(txn, ctx, bucket, &key, attr.id),
            Versioning::Suspended => versions::drop_null(txn, ctx, bucket, &key)?,
            Versioning::Off => {}
        }
    }
    touch_parent(txn, ctx, &mut chain, 1, 0);
    Ok(MetaResponse::Attr(attr))
}

/// What a `CommitFile` brings.
pub(super) struct Committed<'a> {
    pub(super) id: InodeId,
    pub(super) size: u64,
    pub(super) etag: &'a str,
    pub(super) layout: &'a Layout,
    pub(super) inline: Option<&'a Bytes>,
    pub(super) cred: &'a Cred,
    pub(super) versioning: Versioning,
    /// The S3 mtime of the bytes this open committed last.
    pub(super) replaces: Option<i64>,
    /// The bucket's default retention: the new version's lock.
    pub(super) default_lock: Option<&'a DefaultLock>,
    /// The new bytes' SSE-S3 record (checked by the serving MNode), if they are sealed.
    pub(super) sse: Option<&'a Sse>,
}

pub(super) fn commit_file(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    c: Committed<'_>,
) -> OpResult {
    check_path(path, 2)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match target(txn, ctx.ns, pid, path.last().expect("len"))? {
        Child::Other(loc) if loc.attr.id == c.id && loc.attr.kind == FileKind::File => loc,
        _ => return Err(MetaError::NotFound),
    };
    // The owner may commit whatever the mode (a file created read-only is written through
    // the descriptor that created it; the owner could chmod it anyway), others if they may
    // write it.
    if c.cred.uid != loc.attr.uid {
        perm::check(&loc.attr, c.cred, access::WRITE)?;
    }
    // Chunks the file holds now would be released (or locked in a version) while the new
    // bytes use them; refused before the retention check, whose refusal releases the
    // commit's chunks.
    let held = loc.attr.layout.chunks();
    if let Some(dup) = c
        .layout
        .chunks()
        .iter()
        .find(|n| held.iter().any(|h| h.id == n.id))
    {
        return Err(MetaError::Invalid(format!(
            "chunk {:032x} is in the bytes this commit replaces",
            dup.id
        )));
    }
    // Bytes under a lock are never replaced in place: the commit keeps them as a version
    // (where the bucket keeps versions) or is refused.
    let locked = retention::may_remove(txn, ctx, c.id, false);
    let mut attr = loc.attr;
    let new_version = c.versioning != Versioning::Off
        && attr.size > 0
        && (c.replaces != Some(attr.s3_mtime_ns) || locked.is_err())
        && attr.layout.shared_home().is_none();
    if !(new_version && version_before_write(txn, ctx, path, &attr, c.versioning)?) {
        locked?;
        release(txn, ctx, &attr.layout);
    }
    // The version made here gets the bucket's default retention (and nothing of the lock of
    // the bytes it replaced, which stayed with them).
    let lock = c.default_lock.map(|d| ObjectLock {
        retention: Some(d.retention(ctx.now_ns)),
        legal_hold: false,
    });
    retention::put_lock(txn, ctx.keys, c.id, lock.as_ref());
    attr.size = c.size;
    attr.etag = c.etag.to_string();
    attr.layout = c.layout.clone();
    attr.parts.clear();
    attr.sealed = c.sse.is_some();
    attr.mtime_ns = ctx.now_ns;
    attr.ctime_ns = ctx.now_ns;
    attr.s3_mtime_ns = ctx.now_ns;
    put_attr(txn, &loc.key.expect("child key"), &attr);
    match c.inline {
        Some(data) => txn.put(
            ctx.keys.payload(c.id, PayloadKind::Data),
            encode_bytes(data),
        ),
        None => txn.delete(ctx.keys.payload(c.id, PayloadKind::Data)),
    }
    replace_byte_meta(txn, ctx, c.id, c.sse)?;
    Ok(MetaResponse::Attr(attr))
}

/// The S3 checksums and encryption key an upload stored for file `id` are for bytes a
/// commit replaced: they go, and the commit's own encryption key (`sse`) takes the key's
/// place (the rest of its S3 metadata stays).
fn replace_byte_meta(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    id: InodeId,
    sse: Option<&Sse>,
) -> Result<(), MetaError> {
    let key = ctx.keys.payload(id, PayloadKind::Meta);
    let mut meta: ObjectMeta = match txn.get(&key).map_err(internal)? {
        Some(v) => decode(&v).map_err(internal)?,
        None if sse.is_none() => return Ok(()),
        None => ObjectMeta::default(),
    };
    if meta.checksums.is_empty()
        && meta.checksum_type.is_none()
        && meta.sse.is_none()
        && sse.is_none()
    {
        return Ok(());
    }
    meta.checksums = Default::default();
    meta.checksum_type = None;
    meta.sse = sse.cloned();
    txn.put(key, encode(&meta));
    Ok(())
}

/// `saker admin sse rewrap`: version `id`'s data key, wrapped as `from`, is wrapped as `to`
/// from now on ([`rewrap_in`]).
pub(super) fn rewrap_sse(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    id: InodeId,
    from: &[u8],
    to: &[u8],
) -> OpResult {
    let key = ctx.keys.payload(id, PayloadKind::Meta);
    let v = txn
        .get(&key)
        .map_err(internal)?
        .ok_or(MetaError::NotFound)?;
    let mut meta: ObjectMeta = decode(&v).map_err(internal)?;
    if rewrap_in(&mut meta, from, to)? {
        txn.put(key, encode(&meta));
    }
    Ok(MetaResponse::Done)
}

/// Sets the wrapped key of `meta`'s SSE-S3 record from `from` to `to`: whether it changed
/// (not if it is `to` already); `NotFound` without such a record, `Conflict` if it is neither.
pub(super) fn rewrap_in(meta: &mut ObjectMeta, from: &[u8], to: &[u8]) -> Result<bool, MetaError> {
    let Some(sse) = meta.sse.as_mut().filter(|s| saker_rpc::is_sse_s3(s)) else {
        return Err(MetaError::NotFound);
    };
    if sse.wrapped == to {
        return Ok(false);
    }
    if sse.wrapped != from {
        return Err(MetaError::Conflict {
            path: "a data key rewrapped since it was read".into(),
        });
    }
    sse.wrapped = to.to_vec();
    Ok(true)
}

/// Before a mount's write replaces the bytes of `attr`, the current object at `path`, in a
/// bucket that keeps versions: they stay as a noncurrent version, and the write makes a
/// version of its own, or the `null` one while versioning is suspended (replacing a `null`
/// current object's bytes in place). Answers whether the bytes stayed (not to be released).
fn version_before_write(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    attr: &Attr,
    versioning: Versioning,
) -> Result<bool, MetaError> {
    let (bucket, key) = versions::object_key(path);
    if versioning == Versioning::Suspended {
        if versions::current_id(txn, ctx.keys, bucket, &key, attr)? == NULL_VERSION {
            return Ok(false);
        }
        versions::drop_null(txn, ctx, bucket, &key)?;
    }
    versions::archive(txn, ctx, bucket, &key, attr, true)?;
    if versioning == Versioning::Enabled {
        let number = ctx.alloc_id();
        versions::mark_current_as(txn, ctx, bucket, &key, attr.id, number);
    } else {
        txn.delete(ctx.keys.version(bucket, &key, attr.id));
    }
    Ok(true)
}
