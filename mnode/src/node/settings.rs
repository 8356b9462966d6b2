//! What the MNode itself decides of a write before the executor takes it, instead of taking
//! its sender's word: whether a commit may replace the bytes it replaces without keeping them
//! (the receipt the open's last commit got, checked here), and how the buckets of a
//! coordinated rename keep versions. Versioning and default retention of every other write
//! are decided in the batch that applies it, from the group's replicated copy of the
//! bucket's settings ([`crate::ops::settings`]).
//!
//! A gateway's write decided under settings newer than this group's copy (an install that
//! has not reached this group: it was down while the settings changed) first brings the
//! copy up to date from group 1, where settings are sealed, so the write is not refused
//! until the next change of the bucket's settings.

use saker_rpc::{
    CommitReceipt, MetaError, MetaRequest, MetaResponse, RenameVersioning, SettingsRequest,
};

use super::{untagged, Mnode};
use crate::ops::settings::{copy_for, copy_of};
use crate::tree::StoreView;

impl Mnode {
    /// This group's copy of `bucket`'s write settings (`SettingsRequest::Get`).
    pub(super) fn bucket_writes(&self, bucket: &str) -> Result<MetaResponse, MetaError> {
        copy_of(&StoreView(self.store.as_ref()), &self.keys, bucket).map(MetaResponse::Sealed)
    }

    /// Fills in what the MNode decides of `req` (alone or as a shared inode's op) before
    /// the executor takes it, whatever its sender said: what a commit's receipt proves and
    /// whether its SSE record is one this bucket takes (from this group's copy of the
    /// bucket's default encryption), how the buckets of a coordinated rename keep versions.
    /// Brings this group's copy of a bucket's settings up to date when a gateway decided
    /// under newer ones.
    pub(super) async fn decide(&self, req: &mut MetaRequest) -> Result<(), MetaError> {
        let req = match req {
            MetaRequest::Shared { op, .. } => op.as_mut(),
            req => req,
        };
        match req {
            MetaRequest::CommitFile {
                id,
                receipt,
                replaces,
                sse,
                path,
                ..
            } => {
                let copy = copy_for(&StoreView(self.store.as_ref()), &self.keys, path)?;
                self.check_commit_sse(&copy.writes, *id, sse.as_ref())?;
                *replaces = receipt.and_then(|r| r.verify(*id));
            }
            MetaRequest::CoordinatedRename {
                from,
                to,
                versioning,
                ..
            } => {
                let view = StoreView(self.store.as_ref());
                let (from, to) = (
                    copy_for(&view, &self.keys, from)?,
                    copy_for(&view, &self.keys, to)?,
                );
                *versioning = RenameVersioning {
                    from: from.writes.versioning,
                    to: to.writes.versioning,
                    feed: from.writes.feed.is_some() || to.writes.feed.is_some(),
                }
            }
            _ => {}
        }
        let behind = req
            .gateway_decided()
            .and_then(|(path, d)| Some((path.first()?.clone(), d.settings?)));
        if let Some((bucket, decided)) = behind {
            self.catch_up(&bucket, decided).await?;
        }
        Ok(())
    }

    /// Installs group 1's copy of `bucket`'s settings here if this group's is older than
    /// `decided` (what a gateway read from group 1).
    async fn catch_up(&self, bucket: &str, decided: u64) -> Result<(), MetaError> {
        let local = copy_of(&StoreView(self.store.as_ref()), &self.keys, bucket)?;
        if self.keys.group == 1 || local.version >= decided {
            return Ok(());
        }
        let get = SettingsRequest::Get {
            bucket: bucket.to_string(),
        };
        let sealed = match self
            .peer(1)?
            .call(untagged(), MetaRequest::BucketSettings(get))
            .await?
        {
            MetaResponse::Sealed(s) => s,
            other => {
                return Err(MetaError::Internal(format!(
                    "bucket settings answered {other:?}"
                )))
            }
        };
        tracing::info!(
            group = self.keys.group,
            from = local.version,
            to = sealed.version,
            "bucket settings caught up from group 1"
        );
        let install = SettingsRequest::Install {
            bucket: bucket.to_string(),
            sealed,
        };
        self.serve(untagged(), MetaRequest::BucketSettings(install))
            .await
            .map(|_| ())
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
