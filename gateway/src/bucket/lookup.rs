//! Finding a bucket and its settings: whether it exists (one metadata lookup), the settings
//! of an existing bucket, this gateway's copy of them, and storing one of them. Every bucket
//! and object handler starts here, so this sits below them all.

use s3s::{S3Error, S3ErrorCode, S3Result};
use saker_rpc::{FileKind, MetaError, Want};

use crate::bucket::settings::{Bucket, Setting};
use crate::http::error;
use crate::Gateway;

pub async fn bucket_exists(gw: &Gateway, name: &str) -> S3Result<()> {
    match gw.cluster.lookup(&[name.to_string()], Want::ATTR).await {
        Ok(v) if v.attr.kind == FileKind::Dir => Ok(()),
        Ok(_) | Err(MetaError::NotFound | MetaError::NoSuchBucket) => {
            Err(S3Error::new(S3ErrorCode::NoSuchBucket))
        }
        Err(e) => Err(error::meta(e)),
    }
}

pub fn settings_error(e: saker_coordinator::JournalError) -> S3Error {
    tracing::warn!(error = %e, "bucket settings unavailable");
    S3Error::with_message(
        S3ErrorCode::ServiceUnavailable,
        "bucket settings are unavailable",
    )
}

/// The settings of an existing bucket.
pub async fn settings(gw: &Gateway, bucket: &str) -> S3Result<std::sync::Arc<Bucket>> {
    bucket_exists(gw, bucket).await?;
    copy_of(gw, bucket).await
}

/// This gateway's copy of the settings of `bucket`, without asking a metadata node whether
/// it exists (a bucket that does not has the defaults): for the object read and write paths,
/// whose own request answers NoSuchBucket.
pub async fn copy_of(gw: &Gateway, bucket: &str) -> S3Result<std::sync::Arc<Bucket>> {
    gw.settings.get(bucket).await.map_err(settings_error)
}

/// Stores one setting of a bucket (`None` removes it).
pub async fn store(gw: &Gateway, bucket: &str, s: Setting, value: Option<Vec<u8>>) -> S3Result<()> {
    gw.settings
        .put(bucket, s, value)
        .await
        .map_err(settings_error)
}
