//! One tier's S3 service through aws-sdk-s3: uploads with CRC32C checksums (single or
//! multipart), ranged downloads as streams, deletes and listings.

use std::time::{Duration, SystemTime};

use aws_sdk_s3::config::{
    timeout::TimeoutConfig, BehaviorVersion, Credentials, Region, ResponseChecksumValidation,
    StalledStreamProtectionConfig,
};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use base64::Engine;
use bytes::Bytes;

use crate::{TierConfig, TierError};

/// The S3 client of one tier.
#[derive(Clone)]
pub struct Remote {
    config: std::sync::Arc<TierConfig>,
    tier: String,
    bucket: String,
    client: aws_sdk_s3::Client,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({} -> {})", self.tier, self.bucket)
    }
}

/// CRC32C as S3 sends it (base64 of the big-endian value).
pub(crate) fn crc_b64(crc: u32) -> String {
    base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes())
}

impl Remote {
    pub fn new(cfg: &TierConfig) -> Self {
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(Duration::from_secs(5))
            .operation_attempt_timeout(Duration::from_secs(120))
            .build();
        let conf = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(cfg.region.clone()))
            .credentials_provider(Credentials::new(
                cfg.access_key.clone(),
                cfg.secret_key.clone(),
                None,
                None,
                "saker-tier",
            ))
            .endpoint_url(&cfg.endpoint)
            .force_path_style(true)
            .timeout_config(timeouts)
            // A read-through GET sends at the pace of the client that reads it.
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            // Reads are checked against the CRC32C recorded at the move (the SDK cannot check
            // a multipart object's part-level checksum, and warns on every such GET).
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        Self {
            config: std::sync::Arc::new(cfg.clone()),
            tier: cfg.name.clone(),
            bucket: cfg.bucket.clone(),
            client: aws_sdk_s3::Client::from_conf(conf),
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> TierError {
        TierError::Remote {
            tier: self.tier.clone(),
            msg: e.to_string(),
        }
    }

    fn sdk_err<E: std::error::Error + 'static>(&self, e: E) -> TierError {
        // The SDK's Display says only "service error"; the source chain says which.
        let mut msg = e.to_string();
        let mut src = e.source();
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        self.err(msg)
    }

    /// Uploads `body` as `key` in one request; the service checks its CRC32C `crc`.
    pub async fn put(&self, key: &str, body: Bytes, crc: u32) -> Result<(), TierError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .checksum_crc32_c(crc_b64(crc))
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|e| self.sdk_err(e))?;
        Ok(())
    }

    /// Starts a multipart upload of `key` (parts carry CRC32C checksums).
    pub async fn create_upload(&self, key: &str) -> Result<String, TierError> {
        let out = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .checksum_algorithm(ChecksumAlgorithm::Crc32C)
            .send()
            .await
            .map_err(|e| self.sdk_err(e))?;
        out.upload_id
            .ok_or_else(|| self.err("CreateMultipartUpload answered no upload id"))
    }

    /// Uploads part `n` of `upload`; the service checks its CRC32C.
    pub async fn put_part(
        &self,
        key: &str,
        upload: &str,
        n: i32,
        body: Bytes,
    ) -> Result<CompletedPart, TierError> {
        let crc = crc_b64(crc32c::crc32c(&body));
        let out = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload)
            .part_number(n)
            .checksum_crc32_c(&crc)
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|e| self.sdk_err(e))?;
        Ok(CompletedPart::builder()
            .part_number(n)
            .set_e_tag(out.e_tag)
            .checksum_crc32_c(crc)
            .build())
    }

    pub async fn complete_upload(
        &self,
        key: &str,
        upload: &str,
        parts: Vec<CompletedPart>,
    ) -> Result<(), TierError> {
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|e| self.sdk_err(e))?;
        Ok(())
    }

    /// Abandons an upload (best effort: the service's own cleanup, or the tier scrub,
    /// takes what is left).
    pub async fn abort_upload(&self, key: &str, upload: &str) {
        if let Err(e) = self
            .client
            .abort_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload)
            .send()
            .await
        {
            tracing::warn!(tier = %self.tier, key, error = %self.sdk_err(e), "abort of a tier upload failed");
        }
    }

    /// Bytes `[start, end)` of `key` (the whole object when `range` is `None`), as the
    /// service streams them.
    pub async fn get(&self, key: &str, range: Option<(u64, u64)>) -> Result<ByteStream, TierError> {
        let mut req = self.client.get_object().bucket(&self.bucket).key(key);
        if let Some((start, end)) = range {
            req = req.range(format!("bytes={start}-{}", end - 1));
        }
        let out = req.send().await.map_err(|e| self.sdk_err(e))?;
        Ok(out.body)
    }

    /// The size of `key`, or `None` if it does not exist.
    pub async fn head(&self, key: &str) -> Result<Option<u64>, TierError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.content_length.unwrap_or(0).max(0) as u64)),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(None),
            Err(e) => Err(self.sdk_err(e)),
        }
    }

    /// Deletes `key` (a missing key is fine).
    pub async fn delete(&self, key: &str) -> Result<(), TierError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| self.sdk_err(e))?;
        Ok(())
    }

    /// One page of the keys under `prefix` after `after`, with their LastModified; the
    /// continuation to pass next, if there is more.
    pub async fn list_page(
        &self,
        prefix: &str,
        token: Option<String>,
    ) -> Result<(Vec<(String, SystemTime)>, Option<String>), TierError> {
        let out = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_continuation_token(token)
            .send()
            .await
            .map_err(|e| self.sdk_err(e))?;
        let keys = out
            .contents
            .unwrap_or_default()
            .into_iter()
            .filter_map(|o| {
                let modified = o
                    .last_modified
                    .and_then(|t| SystemTime::try_from(t).ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                o.key.map(|k| (k, modified))
            })
            .collect();
        let next = out
            .is_truncated
            .unwrap_or(false)
            .then_some(out.next_continuation_token)
            .flatten();
        Ok((keys, next))
    }

    pub fn tier(&self) -> &str {
        &self.tier
    }

    /// The definition this client was made from.
    pub fn config(&self) -> &TierConfig {
        &self.config
    }
}
