//! Remote archive tiers: a version's bytes moved to a tier (`SetTier`, compare-and-set on
//! the version) and a restored local copy of them kept or dropped.

use saker_rpc::{InodeId, Layout, MetaError, MetaResponse, TierRef};

use super::common::{check_path, put_attr, release_chunks};
use super::objects::find_object;
use super::{Ctx, OpResult};
use crate::keys::PayloadKind;
use crate::txn::Txn;

/// Points the object at `path` to `to`, if it is still version (`inode`, `mtime_ns`). The
/// local bytes it had are released (its chunks to the GC queue, its inline bytes deleted); a
/// change of a tiered version's restored copy releases the copy it replaces.
pub(super) fn set_tier(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    inode: InodeId,
    mtime_ns: i64,
    to: &TierRef,
) -> OpResult {
    check_path(path, 2)?;
    let loc = find_object(txn, ctx.ns, path, false)?;
    let mut attr = loc.attr;
    if attr.id != inode || attr.s3_mtime_ns != mtime_ns {
        return Err(MetaError::PreconditionFailed);
    }
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
        Layout::Tiered(cur) if cur.tier != to.tier || cur.key != to.key => {
            return Err(MetaError::Invalid(format!(
                "the object already lives in tier {} at another key",
                cur.tier
            )))
        }
        Layout::Tiered(cur) if **cur == *to => return Ok(MetaResponse::Done),
        Layout::Tiered(cur) => {
            let kept = to.restored.as_ref().map_or(&[][..], |r| &r.chunks[..]);
            let gone: Vec<_> = attr
                .layout
                .chunks()
                .iter()
                .filter(|c| !kept.contains(c))
                .copied()
                .collect();
            debug_assert!(cur.restored.is_some() || gone.is_empty());
            release_chunks(txn, ctx, &gone);
        }
        Layout::Inline => txn.delete(ctx.keys.payload(attr.id, PayloadKind::Data)),
        Layout::Chunks(c) => release_chunks(txn, ctx, c),
    }
    attr.layout = Layout::Tiered(Box::new(to.clone()));
    let key = loc
        .key
        .ok_or_else(|| MetaError::Internal("an object without a local record".into()))?;
    put_attr(txn, &key, &attr);
    Ok(MetaResponse::Done)
}
