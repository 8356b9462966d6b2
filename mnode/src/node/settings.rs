//! What the MNode itself decides of a POSIX write, instead of taking its sender's word: how
//! the buckets it touches keep versions (its own copy of the bucket's settings, read from the
//! coordinator's records in group 1 and refreshed as a gateway refreshes its copy), and
//! whether a commit may replace the bytes it replaces without keeping them (the receipt the
//! open's last commit got, checked here). Every request is decided where it enters an MNode
//! ([`Mnode::decide`]); S3-shaped requests, which only nodes send, carry their gateway's.

use std::time::Duration;

use saker_rpc::{
    BucketWrites, CommitReceipt, MetaError, MetaRequest, MetaResponse, RenameVersioning,
    Versioning, SETTINGS_REFRESH,
};

use super::{untagged, Mnode};

/// How long a copy stands in when group 1 cannot be asked; past it a write is refused
/// (retried by the client) rather than decided on settings that may have changed.
const STALE_FOR: Duration = Duration::from_secs(60);

impl Mnode {
    /// What writes into `bucket` need of its settings.
    pub(super) async fn bucket_writes(&self, bucket: &str) -> Result<BucketWrites, MetaError> {
        if let Some(w) = self.settings.get(bucket, SETTINGS_REFRESH) {
            return Ok(w);
        }
        match self.read_bucket_writes(bucket).await {
            Ok(w) => {
                self.settings.put(bucket, w.clone());
                Ok(w)
            }
            Err(e) => self.settings.get(bucket, STALE_FOR).ok_or_else(|| {
                MetaError::Unavailable(format!("the settings of bucket {bucket}: {e}"))
            }),
        }
    }

    async fn read_bucket_writes(&self, bucket: &str) -> Result<BucketWrites, MetaError> {
        // Only a valid bucket name has settings (S3 made it).
        if saker_namespace::validate_bucket_name(bucket).is_err() {
            return Ok(BucketWrites::default());
        }
        let answer = if self.keys.group == 1 {
            crate::coord_records::bucket_versioning(self.store.as_ref(), &self.keys, bucket)?
        } else {
            let req = MetaRequest::BucketVersioning {
                bucket: bucket.to_string(),
            };
            self.peer(1)?.call(untagged(), req).await?
        };
        match answer {
            MetaResponse::Records(r) => BucketWrites::from_records(&r),
            other => Err(MetaError::Internal(format!(
                "BucketVersioning answered {other:?}"
            ))),
        }
    }

    /// What writes need of the settings of the bucket of `path`.
    async fn writes_of(&self, path: &[String]) -> Result<BucketWrites, MetaError> {
        match path.first() {
            Some(bucket) => self.bucket_writes(bucket).await,
            None => Ok(BucketWrites::default()),
        }
    }

    /// How the bucket of `path` keeps versions.
    async fn versioning_of(&self, path: &[String]) -> Result<Versioning, MetaError> {
        Ok(self.writes_of(path).await?.versioning)
    }

    /// Fills in what the MNode decides of `req` (alone or as a shared inode's op), whatever
    /// its sender said: how the buckets of a create, commit, unlink or rename keep versions,
    /// and what a commit's receipt proves. A truncation to 0 by `SetAttr` (which keeps no
    /// version) is refused in a bucket that keeps versions: there it is a commit.
    pub(super) async fn decide(&self, req: &mut MetaRequest) -> Result<(), MetaError> {
        let req = match req {
            MetaRequest::Shared { op, .. } => op.as_mut(),
            req => req,
        };
        match req {
            MetaRequest::CommitFile {
                path,
                id,
                receipt,
                versioning,
                replaces,
                default_lock,
                sse,
                ..
            } => {
                let w = self.writes_of(path).await?;
                self.check_commit_sse(&w, *id, sse.as_ref())?;
                *versioning = w.versioning;
                *default_lock = w
                    .default_lock
                    .filter(|_| w.versioning == Versioning::Enabled);
                *replaces = receipt.and_then(|r| r.verify(*id));
            }
            MetaRequest::Create {
                path, versioning, ..
            }
            | MetaRequest::Unlink {
                path, versioning, ..
            } => *versioning = self.versioning_of(path).await?,
            MetaRequest::Rename {
                from,
                to,
                versioning,
                ..
            }
            | MetaRequest::CoordinatedRename {
                from,
                to,
                versioning,
                ..
            } => {
                *versioning = RenameVersioning {
                    from: self.versioning_of(from).await?,
                    to: self.versioning_of(to).await?,
                }
            }
            MetaRequest::SetAttr {
                path,
                size: Some(0),
                ..
            } if self.versioning_of(path).await? != Versioning::Off => {
                return Err(MetaError::Invalid(
                    "in a bucket that keeps versions a truncation is a commit".into(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// The file whose commit `req` is (alone or as a shared inode's op): its answer gets a
/// receipt.
pub(super) fn commit_of(req: &MetaRequest) -> Option<u64> {
    let req = match req {
        MetaRequest::Shared { op, .. } => op.as_ref(),
        req => req,
    };
    match req {
        MetaRequest::CommitFile { id, .. } => Some(*id),
        _ => None,
    }
}

/// A commit's answer, with the receipt of the version it made.
pub(super) fn with_receipt(id: u64, answer: MetaResponse) -> MetaResponse {
    match answer {
        MetaResponse::Attr(attr) => MetaResponse::Committed {
            receipt: CommitReceipt::sign(id, attr.s3_mtime_ns),
            attr,
        },
        other => other,
    }
}
