//! Moves of names: renames within a group and across groups (a file's in and out steps, a
//! directory's), and migration's adopt and drop of an entry.

#[cfg(doc)]
use saker_rpc::MetaRequest;
use saker_rpc::{
    Attr, Cred, FileKind, InodeId, MetaError, MetaResponse, NewObject, RenameVersioning, Versioning,
};

use super::common::{
    check_path, delete_name_payloads, delete_payloads, missing_as_not_found, put_attr, put_dir,
    release, touch_parent, write_payloads,
};
use super::files::remove_name;
use super::links::{touch_shared, victim};
use super::objects::delete_marker;
use super::{retention, versions, Ctx, OpResult};
use crate::perm;
use crate::tree::{child, has_children, internal, resolve_parents, Child, Located};
use crate::txn::Txn;

/// A rename's new name.
struct Target<'a> {
    path: &'a [String],
    /// The inode that moves there.
    moving: InodeId,
    noreplace: bool,
    /// How its bucket keeps versions (a file replaced there stays as a version).
    versioning: Versioning,
}

/// What stands at a rename target: nothing, or a file the caller may replace (removed here).
fn clear_target(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    t: &Target<'_>,
    cred: Option<&Cred>,
) -> Result<bool, MetaError> {
    let pid = chain.last().expect("root").attr.id;
    match child(txn, ctx.keys, pid, t.path.last().expect("len"))? {
        Child::None => Ok(false),
        Child::Dir(_) => Err(MetaError::IsDir),
        Child::Other(loc) if loc.attr.id == t.moving => Ok(true),
        Child::Other(_) if t.noreplace => Err(MetaError::Exists),
        Child::Other(loc) => {
            let parent = &chain.last().expect("root").attr;
            perm::may_delete(parent, &victim(txn, ctx, parent, &loc, cred)?, cred)?;
            if loc.attr.layout.shared_home().is_none() {
                retention::may_remove(txn, ctx, loc.attr.id, false)?;
            }
            remove_name(txn, ctx, chain, t.path, loc, t.versioning)?;
            Ok(false)
        }
    }
}

/// A file `attr` (not a hard link's name) left `from` in a bucket that keeps versions: its
/// version record there goes, and a delete marker takes its place (rename(2) through the
/// mount is a new version at the new name and a delete marker at the old).
fn moved_away(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    attr: &Attr,
    versioning: Versioning,
) -> Result<(), MetaError> {
    if versioning == Versioning::Off || !versioned_file(attr) {
        return Ok(());
    }
    let (bucket, key) = versions::object_key(from);
    txn.delete(ctx.keys.version(bucket, &key, attr.id));
    delete_marker(txn, ctx, from, versioning)?;
    Ok(())
}

/// The file `attr` arrived at `to`: a version of its own there, or the `null` one.
fn moved_in(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    to: &[String],
    attr: &Attr,
    versioning: Versioning,
) -> Result<(), MetaError> {
    if !versioned_file(attr) {
        return Ok(());
    }
    let (bucket, key) = versions::object_key(to);
    match versioning {
        Versioning::Enabled => {
            let number = ctx.alloc_id();
            versions::mark_current_as(txn, ctx, bucket, &key, attr.id, number);
        }
        Versioning::Suspended => versions::drop_null(txn, ctx, bucket, &key)?,
        Versioning::Off => {}
    }
    Ok(())
}

/// Whether `attr` is an object that keeps versions: a regular file, not a hard link's name.
fn versioned_file(attr: &Attr) -> bool {
    attr.kind == FileKind::File && attr.layout.shared_home().is_none()
}

pub(super) fn rename(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    to: &[String],
    noreplace: bool,
    cred: Option<&Cred>,
    versioning: RenameVersioning,
) -> OpResult {
    check_path(from, 2)?;
    check_path(to, 2)?;
    let mut from_chain = resolve_parents(txn, ctx.ns, from).map_err(missing_as_not_found)?;
    perm::search(&from_chain, cred)?;
    let from_pid = from_chain.last().expect("root").attr.id;
    let from_name = from.last().expect("len");
    let loc = match child(txn, ctx.keys, from_pid, from_name)? {
        Child::None => return Err(MetaError::NotFound),
        // Moving a directory renames a dentry every replica may hold: not here yet.
        Child::Dir(_) => return Err(MetaError::CrossGroup),
        Child::Other(loc) => loc,
    };
    let from_parent = &from_chain.last().expect("root").attr;
    perm::may_delete(
        from_parent,
        &victim(txn, ctx, from_parent, &loc, cred)?,
        cred,
    )?;
    if from == to {
        return Ok(MetaResponse::Attr(loc.attr));
    }
    // A locked version may not leave its key.
    if loc.attr.layout.shared_home().is_none() {
        retention::may_remove(txn, ctx, loc.attr.id, false)?;
    }
    let mut to_chain = resolve_parents(txn, ctx.ns, to).map_err(missing_as_not_found)?;
    perm::search(&to_chain, cred)?;
    let same_dir = to_chain.last().expect("root").attr.id == from_pid;
    let chain = if same_dir {
        &mut from_chain
    } else {
        &mut to_chain
    };
    perm::may_create(&chain.last().expect("root").attr, cred)?;
    let to_name = to.last().expect("len");
    let target = Target {
        path: to,
        moving: loc.attr.id,
        noreplace,
        versioning: versioning.to,
    };
    if clear_target(txn, ctx, chain, &target, cred)? {
        // Two hard links of one file: rename(2) does nothing.
        return Ok(MetaResponse::Attr(loc.attr));
    }
    let to_pid = chain.last().expect("root").attr.id;
    let mut attr = loc.attr;
    attr.ctime_ns = ctx.now_ns;
    if let Some(home) = attr.layout.shared_home() {
        touch_shared(txn, ctx, home, attr.id, 0)?;
    }
    txn.delete(loc.key.expect("child key"));
    put_attr(txn, &ctx.keys.inode(to_pid, to_name, false), &attr);
    moved_away(txn, ctx, from, &attr, versioning.from)?;
    moved_in(txn, ctx, to, &attr, versioning.to)?;
    if same_dir {
        touch_parent(txn, ctx, &mut from_chain, 0, 0);
    } else {
        touch_parent(txn, ctx, &mut to_chain, 1, 0);
        touch_parent(txn, ctx, &mut from_chain, -1, 0);
    }
    Ok(MetaResponse::Attr(attr))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rename_in(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    to: &[String],
    attr: &Attr,
    payloads: &NewObject,
    noreplace: bool,
    cred: Option<&Cred>,
    versioning: RenameVersioning,
) -> OpResult {
    check_path(from, 2)?;
    check_path(to, 2)?;
    if attr.kind == FileKind::Dir {
        return Err(MetaError::CrossGroup);
    }
    let mut chain = resolve_parents(txn, ctx.ns, to).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    perm::may_create(&chain.last().expect("root").attr, cred)?;
    let name = to.last().expect("len");
    let target = Target {
        path: to,
        moving: attr.id,
        noreplace,
        versioning: versioning.to,
    };
    if clear_target(txn, ctx, &mut chain, &target, cred)? {
        return Ok(MetaResponse::Attr(attr.clone()));
    }
    // The old name in this group too (a path-walked name, or a caller that did not know):
    // remove it in the same step, keeping the payloads, which the new name shares.
    let mut entries = 1;
    if let Ok(mut from_chain) = resolve_parents(txn, ctx.ns, from) {
        let from_pid = from_chain.last().expect("root").attr.id;
        if let Child::Other(loc) = child(txn, ctx.keys, from_pid, from.last().expect("len"))? {
            if loc.attr.id == attr.id {
                txn.delete(loc.key.expect("child has a key"));
                moved_away(txn, ctx, from, attr, versioning.from)?;
                if from_pid == chain.last().expect("root").attr.id {
                    entries = 0;
                } else {
                    touch_parent(txn, ctx, &mut from_chain, -1, 0);
                }
            }
        }
    }
    let pid = chain.last().expect("root").attr.id;
    let mut attr = attr.clone();
    attr.ctime_ns = ctx.now_ns;
    put_attr(txn, &ctx.keys.inode(pid, name, false), &attr);
    match attr.layout.shared_home() {
        // A hard link's payloads stay with the shared inode.
        Some(home) => touch_shared(txn, ctx, home, attr.id, 0)?,
        None => write_payloads(txn, ctx.keys, attr.id, payloads, false),
    }
    moved_in(txn, ctx, to, &attr, versioning.to)?;
    touch_parent(txn, ctx, &mut chain, entries, 0);
    Ok(MetaResponse::Attr(attr))
}

pub(super) fn rename_out(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    id: InodeId,
    versioning: Versioning,
) -> OpResult {
    check_path(from, 2)?;
    let mut chain = match resolve_parents(txn, ctx.ns, from) {
        Ok(c) => c,
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => {
            return Ok(MetaResponse::Done)
        }
        Err(e) => return Err(e),
    };
    let pid = chain.last().expect("root").attr.id;
    if let Child::Other(loc) = child(txn, ctx.keys, pid, from.last().expect("len"))? {
        if loc.attr.id == id {
            // The chunks moved with the inode: only the name and payloads go.
            txn.delete(loc.key.expect("child has a key"));
            delete_name_payloads(txn, ctx.keys, &loc.attr);
            moved_away(txn, ctx, from, &loc.attr, versioning)?;
            touch_parent(txn, ctx, &mut chain, -1, 0);
        }
    }
    Ok(MetaResponse::Done)
}

/// Migration, at the new owner of `name` (see [`MetaRequest::AdoptEntry`]). The parent's
/// entry count does not change: the entry only moves between groups.
pub(super) fn adopt_entry(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    pid: InodeId,
    name: &str,
    attr: &Attr,
    payloads: &NewObject,
) -> OpResult {
    if attr.kind == FileKind::Dir {
        return Err(MetaError::Invalid("directories are not migrated".into()));
    }
    match child(txn, ctx.keys, pid, name)? {
        Child::Other(loc) if loc.attr.id == attr.id => return Ok(MetaResponse::Done),
        Child::None => {}
        _ => {
            return Err(MetaError::Conflict {
                path: format!("{pid}/{name}"),
            })
        }
    }
    put_attr(txn, &ctx.keys.inode(pid, name, false), attr);
    if attr.layout.shared_home().is_none() {
        write_payloads(txn, ctx.keys, attr.id, payloads, false);
    }
    Ok(MetaResponse::Done)
}

/// Migration, at the old owner (see [`MetaRequest::DropEntry`]).
pub(super) fn drop_entry(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    pid: InodeId,
    name: &str,
    id: InodeId,
) -> OpResult {
    if let Child::Other(loc) = child(txn, ctx.keys, pid, name)? {
        if loc.attr.id == id {
            txn.delete(loc.key.expect("child has a key"));
            delete_name_payloads(txn, ctx.keys, &loc.attr);
        }
    }
    Ok(MetaResponse::Done)
}

/// Directory rename, step 1 at the owner of the new name (see [`MetaRequest::RenameDirIn`]).
pub(super) fn rename_dir_in(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    to: &[String],
    attr: &Attr,
    payloads: &NewObject,
    replace: Option<InodeId>,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(to, 2)?;
    if attr.kind != FileKind::Dir {
        return Err(MetaError::NotDir);
    }
    let mut chain = resolve_parents(txn, ctx.ns, to).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let name = to.last().expect("len");
    let pid = chain.last().expect("root").attr.id;
    let mut entries = 1;
    match child(txn, ctx.keys, pid, name)? {
        Child::Dir(loc) if loc.attr.id == attr.id => return Ok(MetaResponse::Attr(loc.attr)),
        Child::Dir(loc) if Some(loc.attr.id) == replace => {
            perm::may_delete(&chain.last().expect("root").attr, &loc.attr, cred)?;
            if has_children(txn, ctx.keys, loc.attr.id)? {
                return Err(MetaError::NotEmpty);
            }
            txn.delete(loc.key.expect("a local directory"));
            txn.delete(ctx.keys.dir_index(loc.attr.id));
            delete_payloads(txn, ctx.keys, loc.attr.id);
            release(txn, ctx, &loc.attr.layout);
            entries = 0;
        }
        // Something else took the name since the coordinator looked.
        Child::Dir(_) => return Err(MetaError::NotEmpty),
        Child::Other(_) => return Err(MetaError::NotDir),
        Child::None => perm::may_create(&chain.last().expect("root").attr, cred)?,
    }
    let mut attr = attr.clone();
    attr.ctime_ns = ctx.now_ns;
    put_dir(txn, ctx.keys, &ctx.keys.inode(pid, name, true), &attr);
    write_payloads(txn, ctx.keys, attr.id, payloads, false);
    touch_parent(txn, ctx, &mut chain, entries, entries);
    Ok(MetaResponse::Attr(attr))
}

/// Directory rename, step 2 at the owner of the old name (see [`MetaRequest::RenameDirOut`]).
pub(super) fn rename_dir_out(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    id: InodeId,
) -> OpResult {
    check_path(from, 2)?;
    let mut chain = match resolve_parents(txn, ctx.ns, from) {
        Ok(c) => c,
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => {
            return Ok(MetaResponse::Done)
        }
        Err(e) => return Err(e),
    };
    let pid = chain.last().expect("root").attr.id;
    if let Child::Dir(loc) = child(txn, ctx.keys, pid, from.last().expect("len"))? {
        if loc.attr.id == id {
            let key = loc.key.expect("a local directory");
            txn.delete(key.clone());
            // When the new name is in this group too, the index and payloads are its now.
            let index = ctx.keys.dir_index(id);
            if txn.get(&index).map_err(internal)?.as_deref() == Some(key.as_slice()) {
                txn.delete(index);
                delete_payloads(txn, ctx.keys, id);
            }
            touch_parent(txn, ctx, &mut chain, -1, -1);
        }
    }
    Ok(MetaResponse::Done)
}
