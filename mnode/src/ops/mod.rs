//! Evaluation of write operations: the sans-IO core of the executor.
//!
//! Each op reads through a [`Txn`] (store + earlier ops of the batch), checks, and records its
//! physical mutations. Nothing here does I/O beyond the store reads, so every rule of the
//! namespace (implicit directories, reaping, conflicts, multipart) is unit-testable.
//!
//! This module holds the per-batch context and the dispatch of a write to its op family; the
//! families (objects, files, directories, attributes, renames, links, uploads) are its children.

mod attrs;
mod common;
mod dirs;
pub(crate) mod feed;
mod feed_events;
mod files;
mod links;
mod objects;
mod renames;
pub(crate) mod retention;
pub(crate) mod settings;
mod tiers;
pub(crate) mod uploads;
pub(crate) mod versions;

use saker_namespace::GroupId;
use saker_rpc::{
    DirChange, FeedRequest, InodeId, MetaError, MetaRequest, MetaResponse, NewObject, SealedRecord,
    SettingsRequest,
};

use crate::keys::Keys;
use crate::tree::Resolver;
use crate::txn::Txn;
use attrs::{set_attr_request, set_user_meta};
use dirs::{apply_changes, mkdir, purge_dirs, remove_dir_op, DirSpec};
use files::{commit_file, create, rewrap_sse, unlink, Committed, NewFile};
use links::{link_source, link_target, settle_link, shared_op};
use objects::{delete_object, delete_version, put_acl, put_dir_marker, put_object, put_tags};
use renames::{
    adopt_entry, drop_entry, rename, rename_dir_in, rename_dir_out, rename_in, rename_out,
};
use uploads::{abort_upload, complete_upload, create_upload, put_part, rewrap_upload};

pub use attrs::{EMPTY_ETAG, USER_META_LIMIT};
pub use links::LINK_MAX;
pub(crate) use uploads::decode_upload;
pub use uploads::upload_parts;

/// Per-batch context of the executor.
pub struct Ctx<'k> {
    pub keys: &'k Keys,
    pub ns: &'k Resolver<'k>,
    pub now_ns: i64,
    /// How long a released chunk stays readable before it is deleted.
    pub gc_grace_ns: i64,
    /// Next inode id to hand out (advanced by ops that allocate).
    pub next_id: u64,
    /// Parent-directory changes of the current op for directories other groups own.
    pub changes: Vec<(GroupId, DirChange)>,
    /// A directory the current op may have left empty: the MNode asks the coordinator to reap
    /// it after the op commits.
    pub reap: Option<Vec<String>>,
    /// The current op already had an implicit directory in its way reaped: if one is still
    /// there, it is not empty.
    pub reaped: bool,
    /// The batch wrote change-feed records: its leader raises the group's feed clock once it
    /// is applied (consumers long-poll it).
    pub fed: bool,
}

impl Ctx<'_> {
    fn alloc_id(&mut self) -> InodeId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

type OpResult = Result<MetaResponse, MetaError>;

/// After a write failed its `If-Match`/`If-None-Match`, or met an Object Lock (and was rolled
/// back): the chunks it brought are referenced by nothing, so they are queued for collection in the same batch
/// (the gateway leaves them to this).
pub fn abandon(txn: &mut Txn<'_>, ctx: &Ctx<'_>, req: &MetaRequest, result: &OpResult) {
    match (req, result) {
        (MetaRequest::PutObject { obj, .. }, Err(MetaError::PreconditionFailed)) => {
            common::release(txn, ctx, &obj.layout);
        }
        // A write into a locked file (the mount's close or fsync) brought chunks too.
        (MetaRequest::CommitFile { layout, .. }, Err(MetaError::ObjectLocked)) => {
            common::release(txn, ctx, layout);
        }
        // A restore's copy that did not land.
        (MetaRequest::SetTier { to, .. }, Err(_)) => {
            if let Some(r) = &to.restored {
                common::release_chunks(txn, ctx, &r.chunks);
            }
        }
        // (The shards written for a `SetCoded` that did not land are left to the leak scrub,
        // which deletes only what no record references: a refusal here may be a resend's, for
        // a version that the first one coded and a later write made noncurrent.)
        _ => {}
    }
}

/// Evaluates one write op against `txn`, with its change-feed record if its bucket keeps a
/// feed. On error the caller rolls the op back.
pub fn apply_write(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, req: &MetaRequest) -> OpResult {
    let (req, copies) = settings::decided(txn, ctx, req)?;
    let result = apply(txn, ctx, &req)?;
    feed::after(txn, ctx, &req, &copies, &result)?;
    Ok(result)
}

/// Evaluates one write op, decided.
fn apply(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, req: &MetaRequest) -> OpResult {
    match req {
        MetaRequest::PutObject {
            path,
            obj,
            cond,
            versioning,
        } => put_object(txn, ctx, path, obj, cond.as_ref(), versioning.versioning),
        MetaRequest::PutDirMarker { path, obj } => put_dir_marker(txn, ctx, path, obj),
        MetaRequest::MkdirImplicit { path, uid, gid } => {
            mkdir(txn, ctx, path, DirSpec::implicit(*uid, *gid), None)
        }
        MetaRequest::Mkdir {
            path,
            mode,
            uid,
            gid,
            cred,
        } => {
            let mut spec = DirSpec::posix(*mode, *uid, *gid);
            if path.len() == 1 {
                saker_namespace::validate_bucket_name(&path[0])
                    .map_err(|e| MetaError::Invalid(e.to_string()))?;
                spec.bucket = true;
            }
            mkdir(txn, ctx, path, spec, Some(cred))
        }
        MetaRequest::CreateBucket { name, uid, gid } => mkdir(
            txn,
            ctx,
            std::slice::from_ref(name),
            DirSpec::bucket(*uid, *gid),
            None,
        ),
        MetaRequest::Create {
            path,
            mode,
            uid,
            gid,
            exclusive,
            symlink,
            special,
            cred,
            defer: _,
            versioning,
        } => create(
            txn,
            ctx,
            path,
            NewFile {
                mode: *mode,
                uid: *uid,
                gid: *gid,
                exclusive: *exclusive,
                symlink: symlink.as_deref(),
                special: *special,
                versioning: *versioning,
            },
            Some(cred),
        ),
        MetaRequest::Rename {
            from,
            to,
            noreplace,
            cred,
            versioning,
        } => rename(txn, ctx, from, to, *noreplace, Some(cred), *versioning),
        MetaRequest::RenameIn {
            from,
            to,
            attr,
            meta,
            data,
            tags,
            noreplace,
            cred,
            versioning,
        } => rename_in(
            txn,
            ctx,
            from,
            to,
            attr,
            &NewObject {
                meta: meta.clone(),
                inline: data.clone(),
                tags: tags.clone(),
                ..Default::default()
            },
            *noreplace,
            Some(cred),
            *versioning,
        ),
        MetaRequest::RenameOut {
            from,
            id,
            versioning,
        } => rename_out(txn, ctx, from, *id, *versioning),
        MetaRequest::AdoptEntry {
            pid,
            name,
            attr,
            meta,
            data,
            tags,
            lock,
            acl,
        } => {
            let payloads = NewObject {
                meta: meta.clone(),
                inline: data.clone(),
                tags: tags.clone(),
                lock: *lock,
                acl: acl.clone(),
                ..Default::default()
            };
            adopt_entry(txn, ctx, *pid, name, attr, &payloads)
        }
        MetaRequest::DropEntry { pid, name, id } => drop_entry(txn, ctx, *pid, name, *id),
        MetaRequest::RenameDirIn {
            to,
            attr,
            meta,
            data,
            tags,
            replace,
            cred,
        } => {
            let payloads = NewObject {
                meta: meta.clone(),
                inline: data.clone(),
                tags: tags.clone(),
                ..Default::default()
            };
            rename_dir_in(txn, ctx, to, attr, &payloads, *replace, Some(cred))
        }
        MetaRequest::RenameDirOut { from, id } => rename_dir_out(txn, ctx, from, *id),
        MetaRequest::CommitFile {
            path,
            id,
            size,
            etag,
            layout,
            inline,
            cred,
            versioning,
            replaces,
            default_lock,
            sse,
            ..
        } => commit_file(
            txn,
            ctx,
            path,
            Committed {
                id: *id,
                size: *size,
                etag,
                layout,
                inline: inline.as_ref(),
                cred,
                versioning: *versioning,
                replaces: *replaces,
                default_lock: default_lock.as_ref(),
                sse: sse.as_ref().map(|s| &s.sse),
            },
        ),
        MetaRequest::RewrapSse {
            path,
            record,
            from,
            to,
        } => match record {
            SealedRecord::Version(id) => rewrap_sse(txn, ctx, *id, from, to),
            SealedRecord::Upload(upload_id) => rewrap_upload(txn, ctx, path, upload_id, from, to),
        },
        MetaRequest::DeleteObject {
            path,
            version_id: Some(vid),
            dir_marker,
            bypass_governance,
            ..
        } => delete_version(txn, ctx, path, vid, *dir_marker, *bypass_governance),
        MetaRequest::DeleteObject {
            path,
            dir_marker,
            cond,
            versioning,
            version_id: None,
            ..
        } => delete_object(
            txn,
            ctx,
            path,
            *dir_marker,
            cond.as_ref(),
            versioning.versioning,
        ),
        MetaRequest::SetObjectLock {
            path,
            version_id,
            retention,
            legal_hold,
            bypass_governance,
        } => retention::set_object_lock(
            txn,
            ctx,
            path,
            version_id.as_deref(),
            retention.as_ref(),
            *legal_hold,
            *bypass_governance,
        ),
        MetaRequest::Unlink {
            path,
            cred,
            versioning,
        } => unlink(txn, ctx, path, Some(cred), *versioning),
        set @ MetaRequest::SetAttr { .. } => set_attr_request(txn, ctx, set, None),
        MetaRequest::ApplyDirAttr { dir, set } => set_attr_request(txn, ctx, set, Some(*dir)),
        MetaRequest::PutTags {
            path,
            dir_marker,
            tags,
            version_id,
        } => put_tags(
            txn,
            ctx,
            path,
            *dir_marker,
            version_id.as_deref(),
            tags.as_ref(),
        ),
        MetaRequest::PutAcl {
            path,
            dir_marker,
            acl,
            version_id,
        } => put_acl(
            txn,
            ctx,
            path,
            *dir_marker,
            version_id.as_deref(),
            acl.as_ref(),
        ),
        MetaRequest::SetUserMeta {
            path,
            name,
            value,
            mode,
            cred,
        } => set_user_meta(txn, ctx, path, name, value.as_deref(), *mode, cred),
        MetaRequest::CreateUpload {
            path,
            upload_id,
            meta,
            tags,
            uid,
            gid,
            lock,
            acl,
        } => {
            let owner = (*uid, *gid, acl.clone());
            create_upload(txn, ctx, path, upload_id, meta, tags, owner, *lock)
        }
        MetaRequest::PutPart {
            path,
            upload_id,
            part_number,
            part,
        } => put_part(txn, ctx, path, upload_id, *part_number, part),
        MetaRequest::CompleteUpload {
            path,
            upload_id,
            parts,
            etag,
            checksums,
            min_part_size,
            cond,
            versioning,
        } => complete_upload(
            txn,
            ctx,
            path,
            upload_id,
            parts,
            etag,
            checksums,
            *min_part_size,
            cond.as_ref(),
            versioning.versioning,
        ),
        MetaRequest::AbortUpload { path, upload_id } => abort_upload(txn, ctx, path, upload_id),
        MetaRequest::GcDone { keys } => drop_queued(txn, ctx, crate::keys::GC, keys),
        MetaRequest::RepairDone { keys } => drop_queued(txn, ctx, crate::keys::REPAIR, keys),
        MetaRequest::RepairNote { chunks } => {
            for &c in chunks {
                txn.put(ctx.keys.repair(c), Vec::new());
            }
            Ok(MetaResponse::Done)
        }
        MetaRequest::SetTier {
            path,
            inode,
            mtime_ns,
            to,
            noncurrent,
        } => tiers::set_tier(
            txn,
            ctx,
            tiers::Version::of(path, *inode, *mtime_ns, *noncurrent),
            to,
        ),
        MetaRequest::SetCoded {
            path,
            inode,
            mtime_ns,
            coded,
            noncurrent,
        } => tiers::set_coded(
            txn,
            ctx,
            tiers::Version::of(path, *inode, *mtime_ns, *noncurrent),
            coded,
        ),
        MetaRequest::ApplyChanges { source, records } => apply_changes(txn, ctx, *source, records),
        MetaRequest::RemoveDir { path, dir, cond } => remove_dir_op(txn, ctx, path, *dir, *cond),
        MetaRequest::PurgeDirs { bucket, dirs } => purge_dirs(txn, ctx, bucket, dirs),
        MetaRequest::LinkSource {
            path,
            cred,
            expect,
            token,
        } => link_source(txn, ctx, path, Some(cred), *expect, *token),
        MetaRequest::LinkTarget {
            path,
            attr,
            cred,
            token,
        } => link_target(txn, ctx, path, attr, Some(cred), *token),
        MetaRequest::ForgetLink { token } => {
            txn.delete(ctx.keys.link_stored(*token));
            Ok(MetaResponse::Done)
        }
        MetaRequest::SettleLink { id, token, kept } => settle_link(txn, ctx, *id, *token, *kept),
        MetaRequest::Shared { id, op } => shared_op(txn, ctx, *id, op),
        MetaRequest::BucketSettings(SettingsRequest::Seal { bucket }) => {
            settings::seal(txn, ctx, bucket)
        }
        MetaRequest::BucketSettings(SettingsRequest::Install { bucket, sealed }) => {
            settings::install(txn, ctx, bucket, sealed)
        }
        MetaRequest::Feed(FeedRequest::Ack { bucket, upto }) => feed::ack(txn, ctx, bucket, *upto),
        other => Err(MetaError::Invalid(format!(
            "{} is not a write",
            other.op_name()
        ))),
    }
}

/// Drops `keys` of queue `table` (the GC queue, the repair records): refused whole if one is
/// not that queue's.
fn drop_queued(txn: &mut Txn, ctx: &Ctx, table: u8, keys: &[Vec<u8>]) -> OpResult {
    let queue = ctx.keys.table(table);
    if let Some(k) = keys.iter().find(|k| !k.starts_with(&queue)) {
        return Err(MetaError::Invalid(format!(
            "{k:?} is not a key of queue {:?}",
            table as char
        )));
    }
    for k in keys {
        txn.delete(k.clone());
    }
    Ok(MetaResponse::Done)
}
