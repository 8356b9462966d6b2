//! Hard links (SwitchFS §5.5): `LinkSource` moves a file's attributes from its (pid, name)
//! record to the shared table of its group (keyed by the inode id, like its payloads, so
//! nothing else moves) and leaves a reference there ([`Layout::Shared`] with the home group);
//! `LinkTarget` stores another reference at the new name. Ops on the file itself find their
//! target through [`target`]: the shared record when it is here, else a retry that forwards
//! the op to the home (`MetaRequest::Shared`). Removing a name removes its reference and
//! sends the home a link-count change as a change-log record (as for a parent directory); the
//! home drops the file, its payloads and chunks when the count reaches 0. Moves of a name
//! move only the reference.

use saker_namespace::GroupId;
use saker_rpc::{Attr, Cred, DirChange, InodeId, Layout, MetaError, MetaRequest, MetaResponse};

use super::common::{
    check_path, delete_payloads, missing_as_not_found, put_attr, release, touch_parent,
};
use super::{apply_write, Ctx, OpResult};
use crate::perm;
use crate::records::encode;
use crate::tree::{child, internal, resolve_parents, shared_inode, target, Child, Located, Retry};
use crate::txn::Txn;

/// A change of shared inode `id`'s link count by `links`, made now.
fn link_change(ctx: &Ctx<'_>, id: InodeId, links: i64) -> DirChange {
    DirChange {
        dir: id,
        entries: 0,
        links,
        mtime_ns: ctx.now_ns,
    }
}

/// Tells shared inode `id` at `home` that one of its names changed (`links` = -1: went;
/// 0: moved), which changes its ctime: at once when this group is the home, else as a
/// change-log record for the home, like a parent-directory update.
pub(super) fn touch_shared(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    home: GroupId,
    id: InodeId,
    links: i64,
) -> Result<(), MetaError> {
    let change = link_change(ctx, id, links);
    if home == ctx.keys.group {
        apply_link_change(txn, ctx, &change)
    } else {
        ctx.changes.push((home, change));
        Ok(())
    }
}

/// The attributes a removal of the name at `loc` is checked against: for a hard link whose
/// owner matters (the sticky bit on the parent, a caller that owns neither), the shared
/// inode's, as its owner may have changed since the reference was made.
pub(super) fn victim(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    parent: &Attr,
    loc: &Located,
    cred: Option<&Cred>,
) -> Result<Attr, MetaError> {
    let Some(home) = loc.attr.layout.shared_home() else {
        return Ok(loc.attr.clone());
    };
    let owner_matters =
        parent.mode & perm::S_ISVTX != 0 && cred.is_some_and(|c| c.uid != 0 && c.uid != parent.uid);
    if !owner_matters {
        return Ok(loc.attr.clone());
    }
    if home == ctx.keys.group {
        let shared = shared_inode(txn, ctx.keys, loc.attr.id)?;
        return Ok(shared.map_or_else(|| loc.attr.clone(), |s| s.attr));
    }
    match ctx.ns.fetched(loc.attr.id) {
        // A reference to nothing: checked as it is.
        Some(attr) if attr.nlink == 0 => Ok(loc.attr.clone()),
        Some(attr) => Ok(attr),
        None => Err(ctx.ns.retry(Retry::SharedAttr {
            home,
            id: loc.attr.id,
        })),
    }
}

/// Applies a link-count change to a shared inode of this group (a missing one is gone
/// already); the inode goes, with its payloads and chunks, when no name is left.
pub(super) fn apply_link_change(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    c: &DirChange,
) -> Result<(), MetaError> {
    let Some(loc) = shared_inode(txn, ctx.keys, c.dir)? else {
        return Ok(());
    };
    let key = loc.key.expect("a shared inode has a key");
    let mut attr = loc.attr;
    let nlink = attr.nlink as i64 + c.links;
    if nlink <= 0 {
        txn.delete(key);
        delete_payloads(txn, ctx.keys, attr.id);
        release(txn, ctx, &attr.layout);
        return Ok(());
    }
    attr.nlink = nlink as u32;
    attr.ctime_ns = attr.ctime_ns.max(c.mtime_ns);
    put_attr(txn, &key, &attr);
    Ok(())
}

/// The most names one file may have (`EMLINK` beyond).
pub const LINK_MAX: u32 = 65_000;

/// link(2) step 1 (see [`MetaRequest::LinkSource`]).
pub(super) fn link_source(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    cred: Option<&Cred>,
    expect: Option<InodeId>,
    token: u128,
) -> OpResult {
    check_path(path, 2)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let pid = chain.last().expect("root").attr.id;
    let name = path.last().expect("len");
    let loc = match target(txn, ctx.ns, pid, name)? {
        Child::None => return Err(MetaError::NotFound),
        Child::Dir(_) => return Err(MetaError::NotPermitted),
        Child::Other(loc) if expect.is_some_and(|id| id != loc.attr.id) => {
            return Err(MetaError::NotFound)
        }
        Child::Other(loc) => loc,
    };
    let mut attr = loc.attr;
    let key = loc.key.expect("a file has a key");
    let shared_key = ctx.keys.shared(attr.id);
    let mark = ctx.keys.link_token(attr.id, token);
    // The reference to the file, as its names hold it.
    let reference = |attr: &Attr| Attr {
        layout: Layout::Shared {
            home: ctx.keys.group,
        },
        ..attr.clone()
    };
    if key == shared_key && txn.get(&mark).map_err(internal)?.is_some() {
        // Counted already (a replay of the logged intent).
        return Ok(MetaResponse::Attr(reference(&attr)));
    }
    if attr.nlink >= LINK_MAX {
        return Err(MetaError::TooManyLinks);
    }
    attr.nlink += 1;
    attr.ctime_ns = ctx.now_ns;
    txn.put(mark, Vec::new());
    if key != shared_key {
        // A plain inode: its attributes move to the shared table (its payloads are keyed by
        // its id and stay), and its name becomes a reference.
        put_attr(txn, &key, &reference(&attr));
    }
    put_attr(txn, &shared_key, &attr);
    Ok(MetaResponse::Attr(reference(&attr)))
}

/// link(2) step 2 (see [`MetaRequest::LinkTarget`]).
pub(super) fn link_target(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    attr: &Attr,
    cred: Option<&Cred>,
    token: u128,
) -> OpResult {
    check_path(path, 2)?;
    let stored = ctx.keys.link_stored(token);
    if txn.get(&stored).map_err(internal)?.is_some() {
        // Stored already (a replay of the logged intent).
        return Ok(MetaResponse::Attr(attr.clone()));
    }
    let home = attr.layout.shared_home();
    if attr.is_dir() || home.is_none_or(|h| !ctx.ns.router.ring().groups().contains(&h)) {
        return Err(MetaError::Invalid(
            "LinkTarget stores a reference to a file of a known group".into(),
        ));
    }
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let name = path.last().expect("len");
    let pid = chain.last().expect("root").attr.id;
    if !matches!(child(txn, ctx.keys, pid, name)?, Child::None) {
        return Err(MetaError::Exists);
    }
    perm::may_create(&chain.last().expect("root").attr, cred)?;
    put_attr(txn, &ctx.keys.inode(pid, name, false), attr);
    txn.put(stored, encode(&attr.id));
    touch_parent(txn, ctx, &mut chain, 1, 0);
    Ok(MetaResponse::Attr(attr.clone()))
}

/// link(2) step 3 (see [`MetaRequest::SettleLink`]).
pub(super) fn settle_link(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    id: InodeId,
    token: u128,
    kept: bool,
) -> OpResult {
    let mark = ctx.keys.link_token(id, token);
    if txn.get(&mark).map_err(internal)?.is_none() {
        return Ok(MetaResponse::Done);
    }
    txn.delete(mark);
    if !kept {
        let change = link_change(ctx, id, -1);
        apply_link_change(txn, ctx, &change)?;
    }
    Ok(MetaResponse::Done)
}

/// A path op on shared inode `id` of this group (see [`MetaRequest::Shared`]).
pub(super) fn shared_op(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    id: InodeId,
    op: &MetaRequest,
) -> OpResult {
    match op {
        MetaRequest::SetAttr { .. }
        | MetaRequest::CommitFile { .. }
        | MetaRequest::SetUserMeta { .. }
        | MetaRequest::PutTags { .. }
        | MetaRequest::PutAcl { .. }
        | MetaRequest::Create { .. }
        | MetaRequest::LinkSource { .. } => {}
        other => {
            return Err(MetaError::Invalid(format!(
                "{} does not apply to a shared inode",
                other.op_name()
            )))
        }
    }
    ctx.ns.set_shared(Some(id));
    let result = apply_write(txn, ctx, op);
    ctx.ns.set_shared(None);
    result
}
