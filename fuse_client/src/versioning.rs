//! What the mount knows of its buckets' versioning (a bucket setting, kept by the
//! coordinator in the cluster's first group, as the gateway's copy of it is).
//!
//! The mount reads a bucket's setting when a write first needs it and again after
//! [`REFRESH`], as a gateway does; an MNode takes the writes' word for it, as it takes the
//! gateway's. A write in a bucket that keeps versions (close, fsync, truncate, unlink,
//! create) keeps what it replaces as a noncurrent version; link(2) there is refused (EPERM):
//! a second name would share one file's versions between two keys.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use saker_rpc::{MetaError, MetaRequest, MetaResponse, Versioning};

use crate::error::Result;
use crate::fs::SakerFs;

/// How long a bucket's setting is used before it is read again (the gateway's refresh).
pub const REFRESH: Duration = Duration::from_secs(2);

/// Each bucket's setting, with when it was read.
#[derive(Default)]
pub struct Settings {
    read: HashMap<String, (Versioning, Instant)>,
}

/// The setting as the gateway stores it.
fn parse(value: &[u8]) -> Result<Versioning> {
    Versioning::from_setting(value).ok_or_else(|| {
        let text = String::from_utf8_lossy(value);
        MetaError::Internal(format!("versioning status {text:?}")).into()
    })
}

impl SakerFs {
    /// How the bucket of `path` keeps versions.
    pub(crate) fn versioning(&self, path: &[String]) -> Result<Versioning> {
        let Some(bucket) = path.first() else {
            return Ok(Versioning::Off);
        };
        if let Some((v, at)) = self.versioning.lock().read.get(bucket) {
            if at.elapsed() < REFRESH {
                return Ok(*v);
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
        let v = match self.block(self.cluster.call_group(*first, req))? {
            MetaResponse::Records(r) => match r.first() {
                Some((_, value)) => parse(value)?,
                None => Versioning::Off,
            },
            other => {
                return Err(
                    MetaError::Internal(format!("BucketVersioning answered {other:?}")).into(),
                )
            }
        };
        self.versioning
            .lock()
            .read
            .insert(bucket.clone(), (v, Instant::now()));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_s_words_parse() {
        assert_eq!(parse(b"Enabled").unwrap(), Versioning::Enabled);
        assert_eq!(parse(b"Suspended").unwrap(), Versioning::Suspended);
        assert!(parse(b"enabled").is_err());
    }
}
