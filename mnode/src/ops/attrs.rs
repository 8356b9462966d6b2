//! Attribute changes: setattr (chmod, chown, utimens, truncate) with its POSIX permission
//! rules, and user metadata (`user.*` xattrs).

use saker_rpc::{
    access, Attr, Cred, FileKind, InodeId, Layout, MetaError, MetaRequest, MetaResponse,
    ObjectMeta, SetTime, XattrMode,
};

use super::common::{check_path, missing_as_not_found, put_attr, release};
use super::{retention, Ctx, OpResult};
use crate::keys::PayloadKind;
use crate::perm;
use crate::records::{decode, encode, encode_bytes};
use crate::tree::{internal, resolve_parents, target, Child, Retry};
use crate::txn::Txn;

/// What a `SetAttr` changes.
struct AttrChange {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<SetTime>,
    mtime: Option<SetTime>,
}

/// MD5 of no bytes: the ETag of an empty file.
pub const EMPTY_ETAG: &str = "d41d8cd98f00b204e9800998ecf8427e";

/// A `SetAttr` (else `Invalid`), see [`set_attr`].
pub(super) fn set_attr_request(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    req: &MetaRequest,
    coordinated: Option<InodeId>,
) -> OpResult {
    let MetaRequest::SetAttr {
        path,
        mode,
        uid,
        gid,
        size,
        atime,
        mtime,
        cred,
        through_handle,
    } = req
    else {
        return Err(MetaError::Invalid("ApplyDirAttr carries a SetAttr".into()));
    };
    let ch = AttrChange {
        mode: *mode,
        uid: *uid,
        gid: *gid,
        size: *size,
        atime: *atime,
        mtime: *mtime,
    };
    // Through a handle, the kernel checked the caller's access when it opened the file.
    let cred = (!through_handle).then_some(cred);
    set_attr(txn, ctx, path, ch, cred, coordinated)
}

/// `coordinated`: the directory the coordinator froze and invalidated for this change
/// (`ApplyDirAttr`); without it, a change of a directory's mode or owner is handed to the
/// coordinator (after the caller's permission is checked, so a refused chmod costs nothing).
fn set_attr(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    ch: AttrChange,
    cred: Option<&Cred>,
    coordinated: Option<InodeId>,
) -> OpResult {
    check_path(path, 1)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match target(txn, ctx.ns, pid, path.last().expect("len"))? {
        Child::Dir(loc) | Child::Other(loc) => loc,
        Child::None => return Err(MetaError::NotFound),
    };
    let mut attr = loc.attr;
    if let Some(cred) = cred {
        check_set_attr(&attr, &ch, cred)?;
    }
    let owner_change = ch.mode.is_some() || ch.uid.is_some() || ch.gid.is_some();
    match coordinated {
        Some(dir) if attr.id != dir || attr.kind != FileKind::Dir => {
            return Err(MetaError::Internal(format!(
                "ApplyDirAttr for directory {dir} found inode {}",
                attr.id
            )))
        }
        None if owner_change && attr.kind == FileKind::Dir => {
            return Err(ctx.ns.retry(Retry::DirAttr))
        }
        _ => {}
    }
    if let Some(size) = ch.size {
        match attr.kind {
            FileKind::Dir => return Err(MetaError::IsDir),
            FileKind::File => {}
            _ => {
                return Err(MetaError::Invalid(
                    "truncate of a symlink or special file".into(),
                ))
            }
        }
        if size != 0 {
            return Err(MetaError::Invalid(
                "SetAttr truncates to 0 only; other sizes are a CommitFile".into(),
            ));
        }
        retention::may_remove(txn, ctx, attr.id, false)?;
        if attr.size != 0 || !attr.layout.chunks().is_empty() {
            release(txn, ctx, &attr.layout);
            attr.layout = Layout::Inline;
            attr.size = 0;
            attr.parts.clear();
            attr.etag = EMPTY_ETAG.to_string();
            txn.put(
                ctx.keys.payload(attr.id, PayloadKind::Data),
                encode_bytes(&[]),
            );
        }
        attr.mtime_ns = ctx.now_ns;
        attr.s3_mtime_ns = ctx.now_ns;
    }
    if let Some(m) = ch.mode {
        attr.mode = m & 0o7777;
        // A non-root caller outside the file's group cannot keep set-group-id.
        if let Some(c) = cred {
            if c.uid != 0 && attr.kind != FileKind::Dir && !c.in_group(attr.gid) {
                attr.mode &= !perm::S_ISGID;
            }
        }
    }
    let owner_changed =
        ch.uid.is_some_and(|u| u != attr.uid) || ch.gid.is_some_and(|g| g != attr.gid);
    if let Some(u) = ch.uid {
        attr.uid = u;
    }
    if let Some(g) = ch.gid {
        attr.gid = g;
    }
    // chown clears set-user-id and set-group-id of files (as Linux does).
    let chown = ch.uid.is_some() || ch.gid.is_some();
    if cred.is_some() && (owner_changed || chown) && ch.mode.is_none() && attr.kind != FileKind::Dir
    {
        attr.mode &= !(perm::S_ISUID | perm::S_ISGID);
    }
    let resolve = |t: SetTime| match t {
        SetTime::Now => ctx.now_ns,
        SetTime::At(ns) => ns,
    };
    if let Some(t) = ch.atime {
        attr.atime_ns = resolve(t);
    }
    if let Some(t) = ch.mtime {
        attr.mtime_ns = resolve(t);
    }
    attr.ctime_ns = ctx.now_ns;
    put_attr(txn, &loc.key.expect("child key"), &attr);
    Ok(MetaResponse::Attr(attr))
}

/// The POSIX rules of chmod, chown, utimens and truncate for a non-S3 caller.
fn check_set_attr(attr: &Attr, ch: &AttrChange, cred: &Cred) -> Result<(), MetaError> {
    let root = cred.uid == 0;
    let owner = root || cred.uid == attr.uid;
    // Anyone who may write the file may drop its set-user-id and set-group-id bits, one or
    // both (a write by a non-owner drops them).
    let drops_only_setid = ch.mode.is_some_and(|m| {
        let (old, new) = (attr.mode & 0o7777, m & 0o7777);
        let dropped = old & !new;
        new & !old == 0 && dropped != 0 && dropped & !(perm::S_ISUID | perm::S_ISGID) == 0
    });
    if drops_only_setid && !owner {
        perm::check(attr, cred, access::WRITE)?;
    } else if ch.mode.is_some() && !owner {
        return Err(MetaError::NotPermitted);
    }
    if let Some(u) = ch.uid {
        if u != attr.uid && !root {
            return Err(MetaError::NotPermitted);
        }
    }
    if let Some(g) = ch.gid {
        if g != attr.gid && !(root || cred.uid == attr.uid && cred.in_group(g)) {
            return Err(MetaError::NotPermitted);
        }
        if !owner {
            return Err(MetaError::NotPermitted);
        }
    }
    let explicit_time =
        matches!(ch.atime, Some(SetTime::At(_))) || matches!(ch.mtime, Some(SetTime::At(_)));
    let any_time = ch.atime.is_some() || ch.mtime.is_some();
    if explicit_time && !owner {
        return Err(MetaError::NotPermitted);
    }
    if any_time && !owner {
        perm::check(attr, cred, access::WRITE)?;
    }
    if ch.size.is_some() {
        perm::check(attr, cred, access::WRITE)?;
    }
    Ok(())
}

/// S3's limit on user metadata: names and values together, in bytes.
pub const USER_META_LIMIT: usize = 2048;

/// One user-metadata pair of a file or directory (a FUSE `user.*` xattr): needs write
/// permission, as Linux asks for `user.*` attributes; symlinks have none (EPERM).
pub(super) fn set_user_meta(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    name: &str,
    value: Option<&str>,
    mode: XattrMode,
    cred: &Cred,
) -> OpResult {
    check_path(path, 1)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, Some(cred))?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match target(txn, ctx.ns, pid, path.last().expect("len"))? {
        Child::Dir(loc) | Child::Other(loc) => loc,
        Child::None => return Err(MetaError::NotFound),
    };
    let mut attr = loc.attr;
    if attr.kind == FileKind::Symlink {
        return Err(MetaError::NotPermitted);
    }
    perm::check(&attr, cred, access::WRITE)?;
    let key = ctx.keys.payload(attr.id, PayloadKind::Meta);
    let mut meta: ObjectMeta = match txn.get(&key).map_err(internal)? {
        Some(v) => decode(&v).map_err(internal)?,
        None => ObjectMeta::default(),
    };
    let at = meta.user.binary_search_by(|(k, _)| k.as_str().cmp(name));
    match (at, value) {
        (Ok(_), Some(_)) if mode == XattrMode::Create => return Err(MetaError::Exists),
        (Ok(i), Some(v)) => meta.user[i].1 = v.to_string(),
        (Err(_), Some(_)) if mode == XattrMode::Replace => return Err(MetaError::NoAttr),
        (Err(i), Some(v)) => meta.user.insert(i, (name.to_string(), v.to_string())),
        (Ok(i), None) => {
            meta.user.remove(i);
        }
        (Err(_), None) => return Err(MetaError::NoAttr),
    }
    let used: usize = meta.user.iter().map(|(k, v)| k.len() + v.len()).sum();
    if used > USER_META_LIMIT {
        return Err(MetaError::MetadataTooLarge);
    }
    txn.put(key, encode(&meta));
    attr.ctime_ns = ctx.now_ns;
    put_attr(txn, &loc.key.expect("child key"), &attr);
    Ok(MetaResponse::Attr(attr))
}
