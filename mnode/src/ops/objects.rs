//! S3 object ops: putting and deleting an object or a directory marker, and object tags.

use saker_rpc::{
    check_cond, Attr, FileKind, InodeId, MetaError, MetaResponse, NewObject, VersionKind,
    Versioning, WriteCond, NULL_VERSION,
};

use super::common::{
    check_path, delete_payloads, new_attr, put_attr, put_dir, reapable, release, touch_parent,
    write_payloads,
};
use super::files::remove_file;
use super::links::touch_shared;
use super::{retention, versions, Ctx, OpResult};
use crate::keys::PayloadKind;
use crate::records::encode;
use crate::tree::{
    child, has_children_besides, resolve_parents, target, Child, Located, Resolver, Retry,
};
use crate::txn::Txn;

pub(super) fn put_object(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    obj: &NewObject,
    cond: Option<&WriteCond>,
    versioning: Versioning,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = match resolve_parents(txn, ctx.ns, path) {
        // With no parent there is no object: `If-Match` fails as on a missing key.
        Err(e @ MetaError::MissingParent { .. }) if cond.is_some() => {
            check_cond(cond, None)?;
            return Err(e);
        }
        r => r?,
    };
    let name = path.last().expect("checked length");
    let pid = chain.last().expect("root").attr.id;
    let existing = child(txn, ctx.keys, pid, name)?;
    check_cond(cond, current_etag(&existing))?;
    // An empty implicit directory is invisible to S3: the object takes its place once the
    // coordinator has reaped it (its entries may live on any group).
    if let Child::Dir(loc) = &existing {
        if loc.attr.implicit && !ctx.reaped {
            return Err(ctx.ns.retry(Retry::Reap(path.to_vec())));
        }
    }
    if versioning == Versioning::Suspended {
        // The write makes the null version: any other goes.
        let (bucket, key) = versions::object_key(path);
        versions::drop_null(txn, ctx, bucket, &key)?;
    }
    // `fresh`: the object gets an inode id allocated here, which has no payloads yet.
    let (key, mut attr, is_new, fresh) = match existing {
        Child::Dir(_) => {
            return Err(MetaError::Conflict {
                path: path.join("/"),
            })
        }
        Child::Other(loc) => {
            if loc.attr.kind != FileKind::File {
                return Err(MetaError::Conflict {
                    path: path.join("/"),
                });
            }
            let key = loc.key.clone().expect("child has a key");
            if let Some(home) = loc.attr.layout.shared_home() {
                // A hard link: the key gets a new object of its own (as a rename over it
                // would); the file lives on under its other names.
                touch_shared(txn, ctx, home, loc.attr.id, -1)?;
                let attr = new_attr(ctx, FileKind::File, 0o644, obj.uid, obj.gid);
                (key, attr, false, true)
            } else if versioning == Versioning::Off {
                retention::may_remove(txn, ctx, loc.attr.id, false)?;
                release(txn, ctx, &loc.attr.layout);
                (key, loc.attr, false, false)
            } else {
                replace_version(txn, ctx, path, &loc.attr, versioning)?;
                let attr = new_attr(ctx, FileKind::File, 0o644, obj.uid, obj.gid);
                (key, attr, false, true)
            }
        }
        Child::None => {
            let attr = new_attr(ctx, FileKind::File, 0o644, obj.uid, obj.gid);
            (ctx.keys.inode(pid, name, false), attr, true, true)
        }
    };
    if versioning == Versioning::Enabled {
        let (bucket, key) = versions::object_key(path);
        versions::mark_current(txn, ctx, bucket, &key, attr.id);
    }
    attr.size = obj.size;
    attr.etag = obj.etag.clone();
    attr.layout = obj.layout.clone();
    attr.parts = obj.parts.clone();
    attr.sealed = obj.meta.sse.is_some();
    attr.mtime_ns = ctx.now_ns;
    attr.ctime_ns = ctx.now_ns;
    attr.s3_mtime_ns = ctx.now_ns;
    put_attr(txn, &key, &attr);
    write_payloads(txn, ctx.keys, attr.id, obj, fresh);
    if is_new {
        touch_parent(txn, ctx, &mut chain, 1, 0);
    }
    Ok(MetaResponse::Attr(attr))
}

/// The current object `old` of the key at `path` is about to be replaced or deleted in a
/// bucket that keeps versions: it stays as a noncurrent version, except a `null` one while
/// versioning is suspended, which goes for good. (A noncurrent `null` version is the
/// caller's to drop, [`versions::drop_null`].)
pub(super) fn replace_version(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    old: &Attr,
    versioning: Versioning,
) -> Result<(), MetaError> {
    let (bucket, key) = versions::object_key(path);
    let null = versions::current_id(txn, ctx.keys, bucket, &key, old)? == NULL_VERSION;
    if versioning == Versioning::Suspended && null {
        retention::may_remove(txn, ctx, old.id, false)?;
        delete_payloads(txn, ctx.keys, old.id);
        release(txn, ctx, &old.layout);
        return Ok(());
    }
    versions::archive(txn, ctx, bucket, &key, old, false)
}

/// The ETag of the object a key names now, for conditional writes (`None`: no object).
fn current_etag(c: &Child) -> Option<&str> {
    match c {
        Child::Other(loc) if loc.attr.kind == FileKind::File => Some(&loc.attr.etag),
        _ => None,
    }
}

pub(super) fn put_dir_marker(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    obj: &NewObject,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path)?;
    let name = path.last().expect("checked length");
    let pid = chain.last().expect("root").attr.id;
    let (key, mut attr, is_new) = match child(txn, ctx.keys, pid, name)? {
        Child::Other(_) => {
            return Err(MetaError::Conflict {
                path: path.join("/"),
            })
        }
        Child::Dir(loc) => (loc.key.expect("child has a key"), loc.attr, false),
        Child::None => {
            let attr = new_attr(ctx, FileKind::Dir, 0o755, obj.uid, obj.gid);
            (ctx.keys.inode(pid, name, true), attr, true)
        }
    };
    release(txn, ctx, &attr.layout);
    attr.implicit = false;
    attr.etag = obj.etag.clone();
    attr.size = obj.size;
    attr.layout = obj.layout.clone();
    attr.s3_mtime_ns = ctx.now_ns;
    attr.ctime_ns = ctx.now_ns;
    put_dir(txn, ctx.keys, &key, &attr);
    // A new marker's inode id is allocated here: it has no payloads yet.
    write_payloads(txn, ctx.keys, attr.id, obj, is_new);
    if is_new {
        touch_parent(txn, ctx, &mut chain, 1, 1);
    }
    Ok(MetaResponse::Attr(attr))
}

pub(super) fn delete_object(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir_marker: bool,
    cond: Option<&WriteCond>,
    versioning: Versioning,
) -> OpResult {
    check_path(path, 2)?;
    // Keys ending in '/' (directory markers) keep no versions.
    let versioning = if dir_marker {
        Versioning::Off
    } else {
        versioning
    };
    let mut chain = match resolve_parents(txn, ctx.ns, path) {
        Ok(chain) => chain,
        Err(MetaError::NoSuchBucket) => return Err(MetaError::NoSuchBucket),
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => {
            check_cond(cond, None)?;
            return delete_marker(txn, ctx, path, versioning);
        }
        Err(e) => return Err(e),
    };
    let name = path.last().expect("checked length");
    let pid = chain.last().expect("root").attr.id;
    let existing = child(txn, ctx.keys, pid, name)?;
    let current = match (&existing, dir_marker) {
        (Child::Dir(loc), true) if !loc.attr.implicit => Some(loc.attr.etag.as_str()),
        (c, false) => current_etag(c),
        _ => None,
    };
    check_cond(cond, current)?;
    match (existing, dir_marker) {
        (Child::Other(loc), false)
            if loc.attr.kind == FileKind::File
                && versioning != Versioning::Off
                && loc.attr.layout.shared_home().is_none() =>
        {
            // The object stays as a noncurrent version (a `null` one goes while versioning
            // is suspended); the key's versions keep its directories from being reaped.
            replace_version(txn, ctx, path, &loc.attr, versioning)?;
            txn.delete(loc.key.expect("child has a key"));
            touch_parent(txn, ctx, &mut chain, -1, 0);
        }
        (Child::Other(loc), false) if loc.attr.kind == FileKind::File => {
            if loc.attr.layout.shared_home().is_none() {
                retention::may_remove(txn, ctx, loc.attr.id, false)?;
            }
            let gone = loc.key.clone().expect("child has a key");
            remove_file(txn, ctx, &mut chain, loc)?;
            let parent = path[..path.len() - 1].to_vec();
            if reapable(&parent) && !has_children_besides(txn, ctx.keys, pid, &gone)? {
                ctx.reap = Some(parent);
            }
        }
        (Child::Dir(loc), true) if !loc.attr.implicit => {
            // The marker goes; the directory stays as implicit until the coordinator finds it
            // empty on every group and reaps it.
            let mut attr = loc.attr;
            let marker = std::mem::take(&mut attr.layout);
            attr.implicit = true;
            attr.etag.clear();
            attr.size = 0;
            release(txn, ctx, &marker);
            put_attr(txn, &loc.key.expect("a local directory"), &attr);
            delete_payloads(txn, ctx.keys, attr.id);
            ctx.reap = Some(path.to_vec());
        }
        _ => {}
    }
    delete_marker(txn, ctx, path, versioning)
}

/// The end of a delete without a version id: in a bucket that keeps versions, a delete
/// marker (the `null` one, replacing any other `null` version, while suspended).
pub(super) fn delete_marker(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    versioning: Versioning,
) -> OpResult {
    if versioning == Versioning::Off {
        return Ok(MetaResponse::Done);
    }
    let (bucket, key) = versions::object_key(path);
    if versioning == Versioning::Suspended {
        versions::drop_null(txn, ctx, bucket, &key)?;
    }
    let own = versioning == Versioning::Enabled;
    let version_id = versions::add_marker(txn, ctx, bucket, &key, own);
    Ok(MetaResponse::Deleted {
        version_id,
        delete_marker: true,
    })
}

/// DELETE with a version id: that version goes for good. If it was the current object (or
/// the delete marker in its place), the newest remaining version becomes current if it is
/// an object. A version id no version has deletes nothing.
pub(super) fn delete_version(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    vid: &str,
    dir_marker: bool,
    bypass: bool,
) -> OpResult {
    check_path(path, 2)?;
    let deleted = |marker| {
        Ok(MetaResponse::Deleted {
            version_id: vid.to_string(),
            delete_marker: marker,
        })
    };
    if dir_marker {
        // A directory marker keeps no versions: its only one is `null`.
        if vid == NULL_VERSION {
            delete_object(txn, ctx, path, true, None, Versioning::Off)?;
        }
        return deleted(false);
    }
    let (bucket, key) = versions::object_key(path);
    let mut chain = match resolve_parents(txn, ctx.ns, path) {
        Ok(chain) => Some(chain),
        Err(MetaError::NoSuchBucket) => return Err(MetaError::NoSuchBucket),
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => None,
        Err(e) => return Err(e),
    };
    let existing = match &chain {
        Some(chain) => {
            let pid = chain.last().expect("root").attr.id;
            child(txn, ctx.keys, pid, path.last().expect("checked length"))?
        }
        None => Child::None,
    };
    if let (Child::Other(loc), Some(chain)) = (&existing, chain.as_mut()) {
        if loc.attr.kind == FileKind::File
            && versions::current_id(txn, ctx.keys, bucket, &key, &loc.attr)? == vid
        {
            retention::may_remove(txn, ctx, loc.attr.id, bypass)?;
            txn.delete(ctx.keys.version(bucket, &key, loc.attr.id));
            let key_record = loc.key.clone().expect("child has a key");
            remove_file(txn, ctx, chain, loc.clone())?;
            if let Some(attr) = versions::promote(txn, ctx, bucket, &key)? {
                put_attr(txn, &key_record, &attr);
                touch_parent(txn, ctx, chain, 1, 0);
            }
            return deleted(false);
        }
    }
    let Some(found) = versions::find(txn, ctx.keys, bucket, &key, vid)? else {
        return deleted(false);
    };
    if let VersionKind::Object(attr) = &found.stored.kind {
        retention::may_remove(txn, ctx, attr.id, bypass)?;
    }
    let marker = matches!(found.stored.kind, VersionKind::DeleteMarker);
    versions::remove(txn, ctx, bucket, &key, &found);
    if let (Child::None, Some(chain), true) = (&existing, chain.as_mut(), found.newest) {
        // The key had no current object: the next newest version may be one.
        if let Some(attr) = versions::promote(txn, ctx, bucket, &key)? {
            let pid = chain.last().expect("root").attr.id;
            let name = path.last().expect("checked length");
            put_attr(txn, &ctx.keys.inode(pid, name, false), &attr);
            touch_parent(txn, ctx, chain, 1, 0);
        }
    }
    deleted(marker)
}

/// Finds the file (or explicit directory marker) an S3 key names.
pub(super) fn find_object<V: crate::tree::View + ?Sized>(
    v: &V,
    ns: &Resolver<'_>,
    path: &[String],
    dir_marker: bool,
) -> Result<Located, MetaError> {
    let chain = resolve_parents(v, ns, path).map_err(|e| match e {
        MetaError::NoSuchBucket | MetaError::Unavailable(_) | MetaError::NotLeader { .. } => e,
        _ => MetaError::NotFound,
    })?;
    let pid = chain.last().expect("root").attr.id;
    match (target(v, ns, pid, path.last().expect("len"))?, dir_marker) {
        (Child::Other(loc), false) if loc.attr.kind == FileKind::File => Ok(loc),
        (Child::Dir(loc), true) if !loc.attr.implicit => Ok(loc),
        _ => Err(MetaError::NotFound),
    }
}

/// The inode whose payloads are those of the object at `path` (a file or directory marker)
/// or of its version `version_id`.
fn payloads_of(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    path: &[String],
    dir_marker: bool,
    version_id: Option<&str>,
) -> Result<InodeId, MetaError> {
    match version_id {
        // A directory marker keeps no versions: its only one is `null`.
        Some(v) if dir_marker && v != NULL_VERSION => Err(MetaError::NoSuchVersion),
        Some(v) if !dir_marker => retention::version_inode(txn, ctx, path, Some(v)),
        _ => Ok(find_object(txn, ctx.ns, path, dir_marker)?.attr.id),
    }
}

pub(super) fn put_acl(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir_marker: bool,
    version_id: Option<&str>,
    acl: Option<&String>,
) -> OpResult {
    check_path(path, 2)?;
    let id = payloads_of(txn, ctx, path, dir_marker, version_id)?;
    let key = ctx.keys.payload(id, PayloadKind::Acl);
    match acl {
        Some(a) => txn.put(key, encode(a)),
        None => txn.delete(key),
    }
    Ok(MetaResponse::Done)
}

pub(super) fn put_tags(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir_marker: bool,
    version_id: Option<&str>,
    tags: Option<&Vec<(String, String)>>,
) -> OpResult {
    check_path(path, 2)?;
    let id = payloads_of(txn, ctx, path, dir_marker, version_id)?;
    let key = ctx.keys.payload(id, PayloadKind::Tags);
    match tags {
        Some(t) if !t.is_empty() => txn.put(key, encode(t)),
        _ => txn.delete(key),
    }
    Ok(MetaResponse::Done)
}
