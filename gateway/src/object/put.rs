//! PutObject (files and directory markers) and the S3 headers stored with an object.

use s3s::dto::{ChecksumType, ETag, Metadata, PutObjectInput, PutObjectOutput, Timestamp};
use s3s::{s3_error, S3Request, S3Response, S3Result};
use std::sync::Arc;

use saker_client::{ClientError, Written};
use saker_rpc::{Attr, Decided, MetaError, NewObject, ObjectMeta, WriteCond};

use crate::bucket::settings::Bucket;
use crate::http::body::{discard, ingest};
use crate::http::error;
use crate::keys::{format_http_date, write_key, KeyPath};
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

pub async fn put_object(
    gw: &Gateway,
    req: S3Request<PutObjectInput>,
) -> S3Result<S3Response<PutObjectOutput>> {
    let (uid, gid) = crate::bucket::owner::identity(gw, req.credentials.as_ref());
    let (algorithm, trailer) = declared_from_headers(&req.headers);
    let input = req.input;
    let kp = write_key(&input.bucket, &input.key)?;
    let tags = parse_tagging_header(input.tagging.as_deref())?;
    let writer = req.credentials.as_ref().map(|c| c.access_key.as_str());
    let settings = crate::bucket::lookup::copy_of(gw, &input.bucket).await?;
    let acl = crate::bucket::acl::upload_acl!(gw, &settings, input, writer)?;
    let tier =
        crate::object::tiering::requested_tier(gw, input.storage_class.as_ref(), kp.dir_marker)
            .await?;
    let seal = crate::object::sse::for_write_of!(gw, &settings, input)?;
    let lock = crate::bucket::lock::for_write(
        &settings,
        input.object_lock_mode.as_ref(),
        input.object_lock_retain_until_date.as_ref(),
        input.object_lock_legal_hold_status.as_ref(),
    )?;
    let cond = crate::object::conditions::write_cond(
        input.if_match.as_ref(),
        input.if_none_match.as_ref(),
    );
    if cond.is_some() && kp.dir_marker {
        return Err(s3_error!(
            NotImplemented,
            "conditional writes of keys ending in '/' are not supported"
        ));
    }
    let declared = crate::declared_checksums!(input, algorithm);
    let got = ingest(
        &gw.cluster,
        input.body,
        declared,
        req.trailing_headers,
        trailer.as_deref(),
        false,
        seal.as_ref().map(|(k, sse)| k.sealing(sse, 0)),
    )
    .await?;
    let mut meta = object_meta(Headers {
        content_type: input.content_type,
        content_encoding: input.content_encoding,
        content_disposition: input.content_disposition,
        content_language: input.content_language,
        cache_control: input.cache_control,
        expires: input.expires,
        website_redirect: input.website_redirect_location,
        metadata: input.metadata,
    });
    meta.checksums = got.sums.clone();
    meta.sse = seal.map(|(_, sse)| sse);
    let shown_sse = crate::object::sse::shown(meta.sse.as_ref());
    let obj = NewObject {
        size: got.written.size,
        etag: got.md5_hex.clone(),
        layout: got.written.layout.clone(),
        parts: Vec::new(),
        meta,
        inline: got.written.inline.clone(),
        tags: tags.clone(),
        uid,
        gid,
        // Directory markers keep no versions, and so no locks.
        lock: lock.filter(|_| !kp.dir_marker),
        acl,
    };
    let (attr, versioning) = store_object(
        gw,
        &input.bucket,
        &kp,
        obj,
        cond,
        settings.clone(),
        &got.written,
        tier.as_deref(),
    )
    .await?;
    let expiration = match kp.dir_marker {
        false => crate::bucket::lifecycle::rules::expiration_header(
            settings.lifecycle.as_deref().map(|r| r.as_slice()),
            &input.key,
            &attr,
            &tags,
        ),
        true => None,
    };
    let s = got.sums;
    let checksum_type =
        (!s.is_empty()).then(|| ChecksumType::from_static(ChecksumType::FULL_OBJECT));
    Ok(S3Response::new(PutObjectOutput {
        e_tag: Some(ETag::Strong(got.md5_hex)),
        checksum_type,
        checksum_crc32: s.crc32,
        checksum_crc32c: s.crc32c,
        checksum_crc64nvme: s.crc64nvme,
        checksum_sha1: s.sha1,
        checksum_sha256: s.sha256,
        version_id: crate::bucket::versions::written(versioning, attr.id),
        expiration,
        server_side_encryption: shown_sse.sse,
        ssekms_key_id: shown_sse.kms_key_id,
        sse_customer_algorithm: shown_sse.customer_algorithm,
        sse_customer_key_md5: shown_sse.customer_key_md5,
        ..Default::default()
    }))
}

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
