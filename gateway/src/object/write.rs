//! What every object write shares (PutObject, CopyObject, and multipart uploads for their
//! headers and parts): the stored headers of a new object, the `x-amz-tagging` header, the
//! checksum a request declares, and the one write sequence ([`store_object`]): put, decided
//! again when the bucket's settings changed meanwhile, discard bytes no version refers to on
//! failure, move to a requested tier.

use std::sync::Arc;

use s3s::dto::{Metadata, Timestamp};
use s3s::{s3_error, S3Result};
use saker_client::{ClientError, Written};
use saker_rpc::{Attr, Decided, MetaError, NewObject, ObjectMeta, WriteCond};

use crate::bucket::settings::Bucket;
use crate::http::body::discard;
use crate::http::error;
use crate::keys::{format_http_date, KeyPath};
use crate::Gateway;

/// The standard headers and user metadata of a new object.
pub struct Headers {
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    pub content_disposition: Option<String>,
    pub content_language: Option<String>,
    pub cache_control: Option<String>,
    pub expires: Option<Timestamp>,
    pub website_redirect: Option<String>,
    pub metadata: Option<Metadata>,
}

/// `aws-chunked` describes the upload's framing, not the object: it is not stored.
fn stored_encoding(e: Option<String>) -> Option<String> {
    let kept: Vec<&str> = e
        .as_deref()?
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.eq_ignore_ascii_case("aws-chunked"))
        .collect();
    (!kept.is_empty()).then(|| kept.join(", "))
}

pub fn object_meta(h: Headers) -> ObjectMeta {
    let mut user: Vec<(String, String)> = h
        .metadata
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    user.sort();
    ObjectMeta {
        content_type: h.content_type,
        content_encoding: stored_encoding(h.content_encoding),
        content_disposition: h.content_disposition,
        content_language: h.content_language,
        cache_control: h.cache_control,
        expires: h.expires.as_ref().and_then(format_http_date),
        website_redirect: h.website_redirect,
        user,
        checksums: Default::default(),
        checksum_type: None,
        sse: None,
    }
}

/// Parses an `x-amz-tagging` header (URL query form) into validated tags.
pub fn parse_tagging_header(h: Option<&str>) -> S3Result<Vec<(String, String)>> {
    let Some(h) = h else { return Ok(Vec::new()) };
    let mut tags = Vec::new();
    for pair in h.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| s3_error!(InvalidArgument, "x-amz-tagging is not valid UTF-8"))
        };
        tags.push((dec(k)?, dec(v)?));
    }
    crate::object::tagging::validate_tags(&tags)?;
    Ok(tags)
}

pub fn declared_from_headers(req_headers: &http::HeaderMap) -> (Option<String>, Option<String>) {
    let alg = req_headers
        .get("x-amz-sdk-checksum-algorithm")
        .or_else(|| req_headers.get("x-amz-checksum-algorithm"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let trailer = req_headers
        .get("x-amz-trailer")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (alg, trailer)
}

/// Stores `obj` (its bytes are `written`) at `kp` in `bucket` as a new version, with
/// condition `cond`, decided under `settings`: the write an object's PUT and copy share. A
/// write refused because the bucket's settings changed since is decided again under the new
/// ones while its lock and encryption still stand (else 503); bytes no version refers to are
/// discarded; a `tier` asked for takes the version. The version as stored, and how it was
/// decided.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn store_object(
    gw: &Gateway,
    bucket: &str,
    kp: &KeyPath,
    obj: NewObject,
    cond: Option<WriteCond>,
    settings: Arc<Bucket>,
    written: &Written,
    tier: Option<&str>,
) -> S3Result<(Attr, Decided)> {
    let mut decided_from = settings;
    let mut versioning = crate::bucket::versions::of_key(&decided_from, kp);
    let mut tries = 0;
    let put = loop {
        let put = gw
            .cluster
            .put_object(
                &kp.path,
                obj.clone(),
                kp.dir_marker,
                cond.clone(),
                versioning,
            )
            .await;
        if let Err(ClientError::Meta(MetaError::SettingsChanged { .. })) = &put {
            tries += 1;
            if tries < crate::bucket::versions::REDECIDE {
                if let Some(now) =
                    crate::bucket::versions::redecide(gw, bucket, &decided_from).await?
                {
                    versioning = crate::bucket::versions::of_key(&now, kp);
                    decided_from = now;
                    continue;
                }
            }
        }
        break put;
    };
    let attr = match put {
        Ok(attr) => attr,
        Err(e) => {
            // A write whose condition failed had its chunks queued for collection by the
            // MNode.
            if !matches!(e, ClientError::Meta(MetaError::PreconditionFailed)) {
                discard(&gw.cluster, written).await;
            }
            return Err(error::client(e));
        }
    };
    if let Some(tier) = tier {
        crate::object::tiering::move_written(gw, tier, &kp.path, &attr).await?;
    }
    Ok((attr, versioning))
}

/// The [`Headers`] of a write request (`PutObjectInput`, `CopyObjectInput`,
/// `CreateMultipartUploadInput`), its fields moved out.
macro_rules! headers_of {
    ($input:expr) => {
        $crate::object::write::Headers {
            content_type: $input.content_type,
            content_encoding: $input.content_encoding,
            content_disposition: $input.content_disposition,
            content_language: $input.content_language,
            cache_control: $input.cache_control,
            expires: $input.expires,
            website_redirect: $input.website_redirect_location,
            metadata: $input.metadata,
        }
    };
}
pub(crate) use headers_of;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_chunked_is_not_stored_as_content_encoding() {
        assert_eq!(
            stored_encoding(Some("gzip, aws-chunked".into())).as_deref(),
            Some("gzip")
        );
        assert_eq!(stored_encoding(Some("aws-chunked".into())), None);
        assert_eq!(stored_encoding(Some("br".into())).as_deref(), Some("br"));
        assert_eq!(stored_encoding(None), None);
    }
}
