//! Directory ops: mkdir (implicit, POSIX, bucket), the owner's steps of rmdir and
//! DeleteBucket, and the parent-directory changes other groups push (change-log records).

use saker_rpc::{Attr, Cred, DirChange, FileKind, InodeId, MetaError, MetaResponse, RemoveCond};

use super::common::{
    change_attr, check_path, delete_payloads, missing_as_not_found, new_attr, put_attr, put_dir,
    release, touch_parent,
};
use super::links::apply_link_change;
use super::uploads::drop_upload_parts;
use super::{Ctx, OpResult};
use crate::perm;
use crate::records::{decode, encode};
use crate::store::prefix_end;
use crate::tree::{child, has_children, internal, resolve_parents, Child, Located};
use crate::txn::Txn;

pub(super) struct DirSpec {
    mode: u32,
    uid: u32,
    gid: u32,
    implicit: bool,
    /// An existing directory is success (idempotent implicit creation).
    exist_ok: bool,
    pub(super) bucket: bool,
}

impl DirSpec {
    pub(super) fn implicit(uid: u32, gid: u32) -> Self {
        Self {
            mode: 0o755,
            uid,
            gid,
            implicit: true,
            exist_ok: true,
            bucket: false,
        }
    }
    pub(super) fn posix(mode: u32, uid: u32, gid: u32) -> Self {
        Self {
            mode,
            uid,
            gid,
            implicit: false,
            exist_ok: false,
            bucket: false,
        }
    }
    pub(super) fn bucket(uid: u32, gid: u32) -> Self {
        Self {
            mode: 0o755,
            uid,
            gid,
            implicit: false,
            exist_ok: false,
            bucket: true,
        }
    }
}

pub(super) fn mkdir(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    mut spec: DirSpec,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(path, 1)?;
    if path.len() == 1 && !spec.bucket {
        return Err(MetaError::Invalid(
            "a top-level directory is a bucket".into(),
        ));
    }
    let mut chain = if cred.is_some() {
        resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?
    } else {
        resolve_parents(txn, ctx.ns, path)?
    };
    perm::search(&chain, cred)?;
    let parent = &chain.last().expect("root").attr;
    perm::may_create(parent, cred)?;
    if cred.is_some() && parent.mode & perm::S_ISGID != 0 {
        spec.gid = parent.gid;
        spec.mode |= perm::S_ISGID;
    }
    let name = path.last().expect("checked length");
    let pid = parent.id;
    match child(txn, ctx.keys, pid, name)? {
        Child::Dir(loc) if spec.exist_ok => return Ok(MetaResponse::Attr(loc.attr)),
        Child::Dir(_) => return Err(MetaError::Exists),
        Child::Other(_) if spec.exist_ok => {
            return Err(MetaError::Conflict {
                path: path.join("/"),
            })
        }
        Child::Other(_) => return Err(MetaError::Exists),
        Child::None => {}
    }
    let mut attr = new_attr(ctx, FileKind::Dir, spec.mode, spec.uid, spec.gid);
    attr.implicit = spec.implicit;
    put_dir(txn, ctx.keys, &ctx.keys.inode(pid, name, true), &attr);
    touch_parent(txn, ctx, &mut chain, 1, 1);
    Ok(MetaResponse::Attr(attr))
}

/// Removes the directory at the end of `chain` (which must be empty) from its parent.
fn remove_dir(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, chain: &mut Vec<Located>) {
    let dir = chain.pop().expect("chain has the directory");
    txn.delete(dir.key.expect("a local directory"));
    txn.delete(ctx.keys.dir_index(dir.attr.id));
    delete_payloads(txn, ctx.keys, dir.attr.id);
    release(txn, ctx, &dir.attr.layout);
    touch_parent(txn, ctx, chain, -1, -1);
}

/// The last step of the coordinator's rmdir protocol, at the directory's owner: the directory
/// is frozen and every group has reported its entries; check what this group holds once more
/// and remove it.
pub(super) fn remove_dir_op(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir: InodeId,
    cond: RemoveCond,
) -> OpResult {
    check_path(path, 1)?;
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match child(txn, ctx.keys, pid, path.last().expect("len"))? {
        Child::Dir(loc) if loc.attr.id == dir => loc,
        Child::Dir(_) | Child::None if path.len() == 1 => return Err(MetaError::NoSuchBucket),
        Child::Dir(_) | Child::None => return Err(MetaError::NotFound),
        Child::Other(_) => return Err(MetaError::NotDir),
    };
    if cond == RemoveCond::ImplicitEmpty && !loc.attr.implicit {
        return Err(MetaError::NotEmpty);
    }
    if has_children(txn, ctx.keys, dir)? {
        return Err(MetaError::NotEmpty);
    }
    chain.push(loc);
    remove_dir(txn, ctx, &mut chain);
    Ok(MetaResponse::Done)
}

/// DeleteBucket's sweep on one group: the implicit directories under `dirs` (the coordinator
/// found no object below the frozen bucket) and the bucket's unfinished uploads.
pub(super) fn purge_dirs(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    bucket: &str,
    dirs: &[InodeId],
) -> OpResult {
    for &dir in dirs {
        let start = ctx.keys.children(dir);
        let end = prefix_end(&start).expect("prefix end");
        for (key, value) in txn.scan(&start, &end, usize::MAX).map_err(internal)? {
            let attr: Attr = decode(&value).map_err(internal)?;
            if attr.kind != FileKind::Dir || !attr.implicit {
                return Err(MetaError::NotEmpty);
            }
            txn.delete(key);
            txn.delete(ctx.keys.dir_index(attr.id));
            delete_payloads(txn, ctx.keys, attr.id);
        }
    }
    let upload_prefix = ctx.keys.uploads_of(bucket);
    let upload_end = prefix_end(&upload_prefix).expect("prefix end");
    for (key, value) in txn
        .scan(&upload_prefix, &upload_end, usize::MAX)
        .map_err(internal)?
    {
        let info = crate::ops::decode_upload(&value).map_err(internal)?;
        drop_upload_parts(txn, ctx, &info.upload_id)?;
        txn.delete(key);
    }
    Ok(MetaResponse::Done)
}

/// Change-log records pushed by group `source`, applied once each (by seq).
pub(super) fn apply_changes(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    source: u32,
    records: &[(u64, Vec<DirChange>)],
) -> OpResult {
    let akey = ctx.keys.applied(source);
    let mut applied: u64 = match txn.get(&akey).map_err(internal)? {
        Some(v) => decode(&v).map_err(internal)?,
        None => 0,
    };
    for (seq, changes) in records {
        if *seq <= applied {
            continue;
        }
        for c in changes {
            // A directory removed since is skipped: its deltas no longer matter.
            let Some(key) = txn.get(&ctx.keys.dir_index(c.dir)).map_err(internal)? else {
                apply_link_change(txn, ctx, c)?;
                continue;
            };
            let Some(bytes) = txn.get(&key).map_err(internal)? else {
                continue;
            };
            let mut attr: Attr = decode(&bytes).map_err(internal)?;
            change_attr(&mut attr, c);
            put_attr(txn, &key, &attr);
        }
        applied = *seq;
    }
    txn.put(akey, encode(&applied));
    Ok(MetaResponse::Done)
}
