//! What the mount knows of its buckets' versioning and Object Lock (bucket settings, kept by
//! the coordinator in the cluster's first group, as the gateway's copy of them is).
//!
//! The mount reads a bucket's settings when a write first needs them and again after
//! [`SETTINGS_REFRESH`], as a gateway does, to choose its requests (a truncation is a commit where
//! versions are kept; link(2) there is refused, EPERM: a second name would share one file's
//! versions between two keys). What a write keeps is the MNode's decision, from its own copy
//! of the settings: in a bucket that keeps versions a write (close, fsync, truncate, unlink,
//! create) keeps what it replaces as a noncurrent version, and in one with a default
//! retention the version a commit makes is locked with it in the commit's batch.

use saker_rpc::{BucketWrites, MetaError, MetaRequest, MetaResponse, Versioning, SETTINGS_REFRESH};

use crate::error::Result;
use crate::fs::SakerFs;

impl SakerFs {
    /// How the bucket of `path` keeps versions.
    pub(crate) fn versioning(&self, path: &[String]) -> Result<Versioning> {
        Ok(self.bucket_writes(path)?.versioning)
    }

    /// What writes need of the settings of the bucket of `path`.
    pub(crate) fn bucket_writes(&self, path: &[String]) -> Result<BucketWrites> {
        let Some(bucket) = path.first() else {
            return Ok(BucketWrites::default());
        };
        if let Some(w) = self.versioning.get(bucket, SETTINGS_REFRESH) {
            return Ok(w);
        }
        let (first, _) = self
            .cluster
            .groups()
            .next()
            .ok_or_else(|| MetaError::Internal("a cluster without groups".into()))?;
        let req = MetaRequest::BucketVersioning {
            bucket: bucket.clone(),
        };
        let w = match self.block(self.cluster.call_group(*first, req))? {
            MetaResponse::Records(r) => BucketWrites::from_records(&r)?,
            other => {
                return Err(
                    MetaError::Internal(format!("BucketVersioning answered {other:?}")).into(),
                )
            }
        };
        self.versioning.put(bucket, w.clone());
        Ok(w)
    }
}
