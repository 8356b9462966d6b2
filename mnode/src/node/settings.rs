//! What the MNode itself decides of a client's write, instead of taking the client's word:
//! how the file's bucket keeps versions (its own copy of the bucket's settings, read from the
//! coordinator's records in group 1 and refreshed as a gateway refreshes its copy), and
//! whether a commit may replace the bytes it replaces without keeping them (the receipt the
//! open's last commit got, checked here).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use saker_rpc::{BucketWrites, CommitReceipt, MetaError, MetaRequest, MetaResponse};

use super::{untagged, Mnode};

/// How long a copy of a bucket's settings is used before it is read again (a gateway's
/// refresh: a change reaches the MNodes as soon as it reaches the gateways).
pub(super) const REFRESH: Duration = Duration::from_secs(2);
/// How long a copy stands in when group 1 cannot be asked; past it a write is refused
/// (retried by the client) rather than decided on settings that may have changed.
const STALE_FOR: Duration = Duration::from_secs(60);

/// Each bucket's settings as last read, with when.
#[derive(Default)]
pub(super) struct Settings(Mutex<HashMap<String, (BucketWrites, Instant)>>);

impl Mnode {
    /// What writes into `bucket` need of its settings.
    pub(super) async fn bucket_writes(&self, bucket: &str) -> Result<BucketWrites, MetaError> {
        let cached = self.settings.0.lock().get(bucket).cloned();
        if let Some((w, at)) = &cached {
            if at.elapsed() < REFRESH {
                return Ok(w.clone());
            }
        }
        let read = match self.read_bucket_writes(bucket).await {
            Ok(w) => w,
            Err(e) => {
                return match cached {
                    Some((w, at)) if at.elapsed() < STALE_FOR => Ok(w),
                    _ => Err(MetaError::Unavailable(format!(
                        "the settings of bucket {bucket}: {e}"
                    ))),
                };
            }
        };
        let mut map = self.settings.0.lock();
        if map.len() >= 4096 {
            map.retain(|_, (_, at)| at.elapsed() < REFRESH);
        }
        map.insert(bucket.to_string(), (read.clone(), Instant::now()));
        Ok(read)
    }

    async fn read_bucket_writes(&self, bucket: &str) -> Result<BucketWrites, MetaError> {
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

    /// Fills in what the MNode decides of `req` (a `CommitFile`, alone or as a shared
    /// inode's op): the bucket's versioning, and what a valid receipt proves. Answers the
    /// file a commit's answer gets a receipt for.
    pub(super) async fn decide(&self, req: &mut MetaRequest) -> Result<Option<u64>, MetaError> {
        let req = match req {
            MetaRequest::Shared { op, .. } => op.as_mut(),
            req => req,
        };
        let MetaRequest::CommitFile {
            path,
            id,
            receipt,
            versioning,
            replaces,
            ..
        } = req
        else {
            return Ok(None);
        };
        *versioning = match path.first() {
            Some(bucket) => self.bucket_writes(bucket).await?.versioning,
            None => Default::default(),
        };
        *replaces = receipt.and_then(|r| r.verify(*id));
        Ok(Some(*id))
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
