//! Which change-feed records a write makes ([`super::feed`]): from the request as it was
//! decided and what it answered, the object changes it made, one each (two for a rename of
//! a file within a group: a removal at the old key and a new object at the new).
//!
//! S3 writes: PUT, CopyObject, CompleteMultipartUpload, DELETE (a removal, a delete marker,
//! a version by id; a lifecycle rule's expiration as such), tagging, retention and legal
//! hold, a restored copy ready. The mount's:
//! a commit (close or fsync of written bytes) is a PUT of the file's key, an unlink a DELETE,
//! a rename of a file a DELETE and a PUT (across groups, each side by its own op).

use saker_rpc::{
    version_id, Attr, FeedKind, MetaError, MetaRequest, MetaResponse, Versioning, NULL_VERSION,
};

use super::versions::{self, object_key};
use super::Ctx;
use crate::txn::Txn;

/// One object change, for its bucket's feed.
pub(super) struct Change<'a> {
    pub bucket: &'a str,
    pub key: String,
    pub kind: FeedKind,
    pub size: u64,
    pub etag: String,
    pub version_id: Option<String>,
}

impl<'a> Change<'a> {
    fn at(path: &'a [String], kind: FeedKind) -> Self {
        let (bucket, key) = object_key(path);
        Change {
            bucket,
            key,
            kind,
            size: 0,
            etag: String::new(),
            version_id: None,
        }
    }

    /// The object `attr` now current at the key.
    fn object(mut self, attr: &Attr) -> Self {
        self.size = attr.size;
        self.etag = attr.etag.trim_matches('"').to_string();
        self
    }
}

/// The paths whose keys `req` may change (their buckets' settings say whether it records).
pub(super) fn paths_of(req: &MetaRequest) -> Vec<&[String]> {
    match req {
        MetaRequest::PutObject { path, .. }
        | MetaRequest::CompleteUpload { path, .. }
        | MetaRequest::DeleteObject { path, .. }
        | MetaRequest::PutTags { path, .. }
        | MetaRequest::SetObjectLock { path, .. }
        | MetaRequest::SetTier { path, .. }
        | MetaRequest::CommitFile { path, .. }
        | MetaRequest::Unlink { path, .. }
        | MetaRequest::RenameOut { from: path, .. }
        | MetaRequest::RenameIn { to: path, .. } => vec![path],
        MetaRequest::Rename { from, to, .. } => vec![from, to],
        _ => Vec::new(),
    }
}

/// The version id a new current object `id` has in a bucket that keeps versions as
/// `versioning` says (an S3 write's version is its inode's number).
fn new_version(versioning: Versioning, id: saker_rpc::InodeId) -> Option<String> {
    match versioning {
        Versioning::Off => None,
        Versioning::Enabled => Some(version_id(id)),
        Versioning::Suspended => Some(NULL_VERSION.to_string()),
    }
}

/// The version id of the current object `attr` of `path` after a mount's write (which
/// numbers its versions apart from the inode), read from the version record.
fn current_version(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    path: &[String],
    attr: &Attr,
    versioning: Versioning,
) -> Result<Option<String>, MetaError> {
    if versioning == Versioning::Off {
        return Ok(None);
    }
    let (bucket, key) = object_key(path);
    versions::current_id(txn, ctx.keys, bucket, &key, attr).map(Some)
}

/// A key removed by the mount: a delete marker where the bucket keeps versions (with its
/// version id: the key's newest version).
fn removal<'a>(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    path: &'a [String],
    versioning: Versioning,
) -> Result<Change<'a>, MetaError> {
    if versioning == Versioning::Off {
        return Ok(Change::at(path, FeedKind::Delete));
    }
    let mut c = Change::at(path, FeedKind::DeleteMarker);
    let newest = versions::of_key(txn, ctx.keys, c.bucket, &c.key)?;
    c.version_id = newest
        .into_iter()
        .next()
        .filter(|(_, s)| matches!(s.kind, saker_rpc::VersionKind::DeleteMarker))
        .map(|(_, s)| s.version_id);
    Ok(c)
}

/// The changes `req` made, answered `result`.
pub(super) fn changes_of<'a>(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    req: &'a MetaRequest,
    result: &MetaResponse,
    versioning_of: &dyn Fn(&str) -> Versioning,
) -> Result<Vec<Change<'a>>, MetaError> {
    if paths_of(req).iter().any(|p| p.len() < 2) {
        return Ok(Vec::new());
    }
    let change = match (req, result) {
        (
            MetaRequest::PutObject { versioning, .. }
            | MetaRequest::CompleteUpload { versioning, .. },
            MetaResponse::Attr(attr),
        ) => {
            let (path, kind) = match req {
                MetaRequest::CompleteUpload { path, .. } => (path, FeedKind::CompleteUpload),
                MetaRequest::PutObject { path, obj, .. } if obj.copied => (path, FeedKind::Copy),
                MetaRequest::PutObject { path, .. } => (path, FeedKind::Put),
                _ => return Ok(Vec::new()),
            };
            let mut c = Change::at(path, kind).object(attr);
            c.version_id = new_version(versioning.versioning, attr.id);
            c
        }
        (
            MetaRequest::DeleteObject {
                path,
                dir_marker,
                version_id,
                lifecycle,
                ..
            },
            r,
        ) => {
            let mut c = Change::at(path, FeedKind::Delete);
            if *dir_marker {
                c.key.push('/');
            }
            if let MetaResponse::Deleted {
                version_id: removed,
                delete_marker,
            } = r
            {
                // A DELETE without a version id that made a marker, or a version (which may
                // itself be a marker) removed by id.
                if *delete_marker && version_id.is_none() {
                    c.kind = FeedKind::DeleteMarker;
                }
                c.version_id = Some(removed.clone());
            }
            if *lifecycle {
                c.kind = match c.kind {
                    FeedKind::DeleteMarker => FeedKind::ExpiredToMarker,
                    _ => FeedKind::Expired,
                };
            }
            c
        }
        (
            MetaRequest::PutTags {
                path,
                tags,
                version_id,
                dir_marker,
            },
            _,
        ) => {
            let kind = match tags {
                Some(t) if !t.is_empty() => FeedKind::TagsPut,
                _ => FeedKind::TagsDeleted,
            };
            let mut c = Change::at(path, kind);
            if *dir_marker {
                c.key.push('/');
            }
            c.version_id = match version_id {
                Some(v) => Some(v.clone()),
                // The current version's, in a bucket that keeps (or kept) versions.
                None if versioning_of(c.bucket) != Versioning::Off && !*dir_marker => {
                    let attr = super::objects::find_object(txn, ctx.ns, path, false)?.attr;
                    let (bucket, key) = object_key(path);
                    Some(versions::current_id(txn, ctx.keys, bucket, &key, &attr)?)
                }
                None => None,
            };
            c
        }
        (
            MetaRequest::SetObjectLock {
                path, version_id, ..
            },
            _,
        ) => {
            let mut c = Change::at(path, FeedKind::Retention);
            c.version_id = version_id.clone();
            c
        }
        (
            MetaRequest::SetTier {
                path,
                to,
                inode,
                noncurrent,
                ..
            },
            _,
        ) => {
            // A restore's copy ready; the transitions themselves are not object changes S3
            // notifies of.
            if to.restored.is_none() {
                return Ok(Vec::new());
            }
            let mut c = Change::at(path, FeedKind::Restored);
            c.size = to.size;
            c.version_id = noncurrent.then(|| version_id(*inode));
            c
        }
        (
            MetaRequest::CommitFile {
                path, versioning, ..
            },
            MetaResponse::Attr(attr) | MetaResponse::Committed { attr, .. },
        ) => {
            let mut c = Change::at(path, FeedKind::Put).object(attr);
            c.version_id = current_version(txn, ctx, path, attr, *versioning)?;
            c
        }
        (
            MetaRequest::Unlink {
                path, versioning, ..
            },
            MetaResponse::Attr(attr),
        ) if attr.kind == saker_rpc::FileKind::File => removal(txn, ctx, path, *versioning)?,
        (
            MetaRequest::RenameOut {
                from, versioning, ..
            },
            _,
        ) => removal(txn, ctx, from, *versioning)?,
        (MetaRequest::RenameIn { to, versioning, .. }, MetaResponse::Attr(attr))
            if attr.kind == saker_rpc::FileKind::File =>
        {
            let mut c = Change::at(to, FeedKind::Put).object(attr);
            c.version_id = current_version(txn, ctx, to, attr, versioning.to)?;
            c
        }
        (
            MetaRequest::Rename {
                from,
                to,
                versioning,
                ..
            },
            MetaResponse::Attr(attr),
        ) if from != to && attr.kind == saker_rpc::FileKind::File => {
            let mut put = Change::at(to, FeedKind::Put).object(attr);
            put.version_id = current_version(txn, ctx, to, attr, versioning.to)?;
            return Ok(vec![removal(txn, ctx, from, versioning.from)?, put]);
        }
        _ => return Ok(Vec::new()),
    };
    Ok(vec![change])
}
