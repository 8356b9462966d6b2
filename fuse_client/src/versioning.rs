//! What the mount knows of its buckets' versioning and Object Lock (bucket settings, kept by
//! the coordinator in the cluster's first group, as the gateway's copy of them is).
//!
//! The mount reads a bucket's settings when a write first needs them and again after
//! [`REFRESH`], as a gateway does, to choose its requests (a truncation is a commit where
//! versions are kept; link(2) there is refused, EPERM: a second name would share one file's
//! versions between two keys). What a write keeps is the MNode's decision, from its own copy
//! of the settings: in a bucket that keeps versions a write (close, fsync, truncate, unlink,
//! create) keeps what it replaces as a noncurrent version, and in one with a default
//! retention the version a commit makes is locked with it in the commit's batch.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use saker_rpc::{BucketWrites, MetaError, MetaRequest, MetaResponse, Versioning};

use crate::error::Result;
use crate::fs::SakerFs;

/// How long a bucket's settings are used before they are read again (the gateway's refresh).
pub const REFRESH: Duration = Duration::from_secs(2);

/// Each bucket's settings, with when they were read.
#[derive(Default)]
pub struct Settings {
    read: HashMap<String, (BucketWrites, Instant)>,
}

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
        if let Some((w, at)) = self.versioning.lock().read.get(bucket) {
            if at.elapsed() < REFRESH {
                return Ok(w.clone());
            }
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
        self.versioning
            .lock()
            .read
            .insert(bucket.clone(), (w.clone(), Instant::now()));
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_s_words_parse() {
        let records = |v: &[u8]| vec![("buckets/b/versioning".to_string(), v.to_vec())];
        let parse = |v: &[u8]| BucketWrites::from_records(&records(v)).map(|w| w.versioning);
        assert_eq!(parse(b"Enabled").unwrap(), Versioning::Enabled);
        assert_eq!(parse(b"Suspended").unwrap(), Versioning::Suspended);
        assert!(parse(b"enabled").is_err());
    }

    #[test]
    fn a_default_retention_is_read_beside_versioning() {
        let lock = br#"{"default":{"mode":"Compliance","days":3,"years":null}}"#;
        let records = vec![
            ("buckets/b/object-lock".to_string(), lock.to_vec()),
            ("buckets/b/versioning".to_string(), b"Enabled".to_vec()),
        ];
        let w = BucketWrites::from_records(&records).unwrap();
        assert_eq!(w.versioning, Versioning::Enabled);
        let d = w.default_lock.unwrap();
        assert_eq!((d.mode, d.days), (saker_rpc::LockMode::Compliance, Some(3)));
        assert_eq!(
            BucketWrites::from_records(&[]).unwrap(),
            BucketWrites::default()
        );
        let bad = [("buckets/b/object-lock".to_string(), b"{".to_vec())];
        assert!(BucketWrites::from_records(&bad).is_err());
    }
}
