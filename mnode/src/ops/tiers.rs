//! Where a version's bytes live, changed by compare-and-set on the version (current or
//! noncurrent): moved to a remote archive tier (`SetTier`), a restored local copy of them kept
//! or dropped, or their chunks erasure-coded (`SetCoded`).

use saker_rpc::{Attr, Coded, InodeId, Layout, MetaError, MetaResponse, TierRef, VersionKind};

use super::common::{check_path, put_attr, release, release_chunks};
use super::objects::find_object;
use super::versions::{object_key, Stored};
use super::{Ctx, OpResult};
use crate::keys::PayloadKind;
use crate::records::{decode, encode};
use crate::tree::internal;
use crate::txn::Txn;

/// Points `version` to `to`, if it is still that version.
pub(super) fn set_tier(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    version: Version<'_>,
    to: &TierRef,
) -> OpResult {
    change_version(txn, ctx, version, |txn, ctx, attr| {
        retarget(txn, ctx, attr, to)
    })
}

/// Codes the chunks of `version` as `coded` says, if it is still that version with those
/// chunks.
pub(super) fn set_coded(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    version: Version<'_>,
    coded: &Coded,
) -> OpResult {
    change_version(txn, ctx, version, |txn, ctx, attr| {
        match &attr.layout {
            Layout::Coded(cur) if **cur == *coded => return Ok(false),
            Layout::Chunks(chunks) if *chunks == coded.chunks => release_chunks(txn, ctx, chunks),
            // Another layout since the encoder read it (tiered, recoded, rewritten in place).
            _ => return Err(MetaError::PreconditionFailed),
        }
        attr.layout = Layout::Coded(Box::new(coded.clone()));
        Ok(true)
    })
}

/// One version of an object: its path, inode id and S3 mtime, and whether it is noncurrent.
#[derive(Clone, Copy)]
pub(super) struct Version<'a> {
    pub path: &'a [String],
    pub inode: InodeId,
    pub mtime_ns: i64,
    pub noncurrent: bool,
}

impl<'a> Version<'a> {
    pub fn of(path: &'a [String], inode: InodeId, mtime_ns: i64, noncurrent: bool) -> Self {
        Version {
            path,
            inode,
            mtime_ns,
            noncurrent,
        }
    }
}

/// Changes `version` with `change` (which answers whether it changed the attributes), if it is
/// still that version: `PreconditionFailed` otherwise.
fn change_version(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    version: Version<'_>,
    change: impl FnOnce(&mut Txn<'_>, &Ctx<'_>, &mut Attr) -> Result<bool, MetaError>,
) -> OpResult {
    let Version {
        path,
        inode,
        mtime_ns,
        noncurrent,
    } = version;
    check_path(path, 2)?;
    if noncurrent {
        let (bucket, key) = object_key(path);
        let k = ctx.keys.version(bucket, &key, inode);
        let val = txn
            .get(&k)
            .map_err(internal)?
            .ok_or(MetaError::PreconditionFailed)?;
        let mut stored: Stored = decode(&val).map_err(internal)?;
        let VersionKind::Object(attr) = &mut stored.kind else {
            return Err(MetaError::PreconditionFailed);
        };
        if attr.s3_mtime_ns != mtime_ns {
            return Err(MetaError::PreconditionFailed);
        }
        if change(txn, ctx, attr)? {
            txn.put(k, encode(&stored));
        }
        return Ok(MetaResponse::Done);
    }
    let loc = find_object(txn, ctx.ns, path, false)?;
    let mut attr = loc.attr;
    if attr.id != inode || attr.s3_mtime_ns != mtime_ns {
        return Err(MetaError::PreconditionFailed);
    }
    if change(txn, ctx, &mut attr)? {
        let key = loc
            .key
            .ok_or_else(|| MetaError::Internal("an object without a local record".into()))?;
        put_attr(txn, &key, &attr);
    }
    Ok(MetaResponse::Done)
}

/// Points `attr` to `to`, releasing what it no longer needs: its local bytes (chunks to the
/// GC queue, inline bytes deleted), the copy in a tier it leaves, or the restored copy a
/// restore's change replaces. Answers whether `attr` changed.
fn retarget(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    attr: &mut Attr,
    to: &TierRef,
) -> Result<bool, MetaError> {
    if to.size != attr.size {
        return Err(MetaError::Invalid(format!(
            "a tier copy of {} bytes for an object of {}",
            to.size, attr.size
        )));
    }
    match &attr.layout {
        Layout::Shared { .. } => {
            return Err(MetaError::Invalid(
                "a file with hard links is not moved to a tier".into(),
            ))
        }
        Layout::Tiered(cur) if **cur == *to => return Ok(false),
        // The same copy, its restored one kept, changed or dropped.
        Layout::Tiered(cur) if cur.tier == to.tier && cur.key == to.key => {
            let kept = to.restored.as_ref().map_or(&[][..], |r| &r.chunks[..]);
            let gone: Vec<_> = attr
                .layout
                .chunks()
                .iter()
                .filter(|c| !kept.contains(c))
                .copied()
                .collect();
            release_chunks(txn, ctx, &gone);
        }
        // Another copy (another tier): it goes with its restored copy.
        Layout::Tiered(_) | Layout::Coded(_) => release(txn, ctx, &attr.layout),
        Layout::Inline => txn.delete(ctx.keys.payload(attr.id, PayloadKind::Data)),
        Layout::Chunks(c) => release_chunks(txn, ctx, c),
    }
    attr.layout = Layout::Tiered(Box::new(to.clone()));
    Ok(true)
}
