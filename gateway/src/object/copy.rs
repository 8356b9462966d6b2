//! CopyObject and UploadPartCopy. A copy copies bytes: exactly one record references each chunk.

use futures::StreamExt;
use s3s::checksum::ChecksumHasher;
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_client::sealed::{self, DataKey};
use saker_client::{ChunkWriter, ReadRange, Written};
use saker_rpc::{Checksums, NewObject, ObjectView, Sse, Want};

use crate::bucket::owner::identity;
use crate::http::checksum::Algorithm;
use crate::http::error;
use crate::keys::{timestamp, write_key};
use crate::object::conditions::check_read_conditions;
use crate::object::write::{headers_of, object_meta, parse_tagging_header};
use crate::Gateway;

pub struct SourceConditions<'a> {
    pub if_match: Option<&'a ETagCondition>,
    pub if_none_match: Option<&'a ETagCondition>,
    pub if_modified_since: Option<&'a Timestamp>,
    pub if_unmodified_since: Option<&'a Timestamp>,
}

/// Resolves a copy source and checks the x-amz-copy-source-if-* conditions (all 412).
pub async fn source(
    gw: &Gateway,
    src: &CopySource,
    cond: SourceConditions<'_>,
    want: Want,
) -> S3Result<(String, String, ObjectView)> {
    let (bucket, key, version) = match src {
        CopySource::Bucket {
            bucket,
            key,
            version_id,
        } => (
            bucket.to_string(),
            key.to_string(),
            version_id.as_deref().map(str::to_string),
        ),
        _ => {
            return Err(s3_error!(
                NotImplemented,
                "only bucket copy sources are supported"
            ))
        }
    };
    let view = crate::object::lookup::lookup(gw, &bucket, &key, version.as_deref(), want).await?;
    check_read_conditions(
        &view.attr.etag,
        view.attr.s3_mtime_ns,
        cond.if_match,
        cond.if_none_match,
        cond.if_modified_since,
        cond.if_unmodified_since,
        S3ErrorCode::PreconditionFailed,
    )?;
    Ok((bucket, key, view))
}

/// The encryption of a copy's two ends: the source's data key (when it is encrypted) and the
/// sealing the copy is stored with (when it is to be).
pub struct Sealing<'a> {
    pub source: Option<&'a (DataKey, Sse)>,
    pub target: Option<sealed::Sealing>,
}

/// Copies `range` of the source's bytes into new storage; returns it with its MD5 and its
/// checksum of `algorithm` (both of the plaintext).
pub async fn copy_bytes(
    gw: &Gateway,
    view: &ObjectView,
    range: ReadRange,
    chunked: bool,
    algorithm: Option<Algorithm>,
    sealing: Sealing<'_>,
) -> S3Result<(Written, [u8; 16], Checksums)> {
    use md5::{Digest as _, Md5};
    let mut writer = ChunkWriter::new(&gw.cluster).sealed(sealing.target);
    let mut md5 = Md5::new();
    let mut hasher = ChecksumHasher::default();
    if let Some(a) = algorithm {
        a.enable(&mut hasher);
    }
    let mut stream = crate::object::sse::read_plain(&gw.cluster, view, sealing.source, range);
    while let Some(piece) = stream.next().await {
        let piece = match piece {
            Ok(p) => p,
            Err(e) => {
                writer.abort().await;
                return Err(error::client(e));
            }
        };
        md5.update(&piece);
        hasher.update(&piece);
        if let Err(e) = writer.write(&piece).await {
            writer.abort().await;
            return Err(error::client(e));
        }
    }
    let written = if chunked {
        writer.finish_chunked().await
    } else {
        writer.finish().await
    }
    .map_err(error::client)?;
    let c = hasher.finalize();
    let sums = Checksums {
        crc32: c.checksum_crc32,
        crc32c: c.checksum_crc32c,
        crc64nvme: c.checksum_crc64nvme,
        sha1: c.checksum_sha1,
        sha256: c.checksum_sha256,
    };
    Ok((written, md5.finalize().into(), sums))
}

pub async fn copy_object(
    gw: &Gateway,
    req: S3Request<CopyObjectInput>,
) -> S3Result<S3Response<CopyObjectOutput>> {
    let (uid, gid) = identity(gw, req.credentials.as_ref());
    let dst_cond = crate::object::conditions::header_write_cond(&req.headers)?;
    let input = req.input;
    let dst = write_key(&input.bucket, &input.key)?;
    let writer = req.credentials.as_ref().map(|c| c.access_key.as_str());
    let settings = crate::bucket::lookup::copy_of(gw, &input.bucket).await?;
    let acl = crate::bucket::acl::upload_acl!(gw, &settings, input, writer)?;
    let tier =
        crate::object::tiering::requested_tier(gw, input.storage_class.as_ref(), dst.dir_marker)
            .await?;
    let customer = crate::object::sse::customer_key_of!(input)?;
    let source_key = crate::object::sse::copy_source_key_of!(input)?;
    let reencrypts = input.server_side_encryption.is_some()
        || input.ssekms_key_id.is_some()
        || customer.is_some();
    let seal = crate::object::sse::for_write(
        gw,
        &settings,
        input.server_side_encryption.as_ref(),
        input.ssekms_key_id.as_deref(),
        customer,
    )?;
    let lock = crate::bucket::lock::for_write(
        &settings,
        input.object_lock_mode.as_ref(),
        input.object_lock_retain_until_date.as_ref(),
        input.object_lock_legal_hold_status.as_ref(),
    )?;
    let want = Want {
        meta: true,
        data: true,
        tags: true,
        link: false,
        lock: false,
        acl: false,
    };
    let src_cond = SourceConditions {
        if_match: input.copy_source_if_match.as_ref(),
        if_none_match: input.copy_source_if_none_match.as_ref(),
        if_modified_since: input.copy_source_if_modified_since.as_ref(),
        if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
    };
    let (src_bucket, src_key, view) = source(gw, &input.copy_source, src_cond, want).await?;
    let unsealed = crate::object::sse::for_read(gw, view.meta.as_ref(), source_key)?;
    let replace_meta = input
        .metadata_directive
        .as_ref()
        .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
    let replace_tags = input
        .tagging_directive
        .as_ref()
        .is_some_and(|d| d.as_str() == TaggingDirective::REPLACE);
    if src_bucket == input.bucket
        && src_key == input.key
        && !replace_meta
        && input.storage_class.is_none()
        && !reencrypts
    {
        return Err(s3_error!(
            InvalidRequest,
            "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
        ));
    }
    let src_meta = view.meta.clone().unwrap_or_default();
    let mut meta = if replace_meta {
        object_meta(headers_of!(input))
    } else {
        src_meta.clone()
    };
    // The copy is one part: a multipart source's checksum (of its parts) does not carry over.
    meta.checksums = if view.attr.parts.is_empty() {
        src_meta.checksums.clone()
    } else {
        Default::default()
    };
    meta.checksum_type = None;
    // The copy has a data key of its own (or none): the source's encryption does not carry.
    let target = seal.as_ref().map(|(k, sse)| k.sealing(sse, 0));
    meta.sse = seal.map(|(_, sse)| sse);
    let shown_sse = crate::object::sse::shown(meta.sse.as_ref());
    let tags = if replace_tags {
        parse_tagging_header(input.tagging.as_deref())?
    } else {
        view.tags.clone().unwrap_or_default()
    };
    let (written, md5, _) = copy_bytes(
        gw,
        &view,
        ReadRange {
            start: 0,
            end: view.attr.size,
        },
        false,
        None,
        Sealing {
            source: unsealed.as_ref(),
            target,
        },
    )
    .await?;
    let etag = hex::encode(md5);
    let obj = NewObject {
        size: written.size,
        etag: etag.clone(),
        layout: written.layout.clone(),
        parts: Vec::new(),
        meta,
        inline: written.inline.clone(),
        tags,
        uid,
        gid,
        lock: lock.filter(|_| !dst.dir_marker),
        acl,
        copied: true,
    };
    let (attr, versioning) = crate::object::write::store_object(
        gw,
        &input.bucket,
        &dst,
        obj,
        dst_cond,
        settings.clone(),
        &written,
        tier.as_deref(),
    )
    .await?;
    let src_versioning = crate::bucket::versions::of_bucket(gw, &src_bucket).await?;
    Ok(S3Response::new(CopyObjectOutput {
        copy_object_result: Some(CopyObjectResult {
            e_tag: Some(ETag::Strong(etag)),
            last_modified: Some(timestamp(attr.s3_mtime_ns)),
            ..Default::default()
        }),
        copy_source_version_id: crate::bucket::versions::shown(&view, src_versioning),
        version_id: crate::bucket::versions::written(versioning, attr.id),
        server_side_encryption: shown_sse.sse,
        ssekms_key_id: shown_sse.kms_key_id,
        sse_customer_algorithm: shown_sse.customer_algorithm,
        sse_customer_key_md5: shown_sse.customer_key_md5,
        ..Default::default()
    }))
}

/// Parses `bytes=first-last` of x-amz-copy-source-range against the source size.
pub fn copy_range(spec: Option<&str>, size: u64) -> S3Result<ReadRange> {
    let Some(spec) = spec else {
        return Ok(ReadRange {
            start: 0,
            end: size,
        });
    };
    let bad = || {
        s3_error!(InvalidArgument, "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy")
    };
    let r = spec.strip_prefix("bytes=").ok_or_else(bad)?;
    let (a, b) = r.split_once('-').ok_or_else(bad)?;
    let first: u64 = a.parse().map_err(|_| bad())?;
    let last: u64 = b.parse().map_err(|_| bad())?;
    if first > last || last >= size {
        return Err(S3Error::new(S3ErrorCode::InvalidRange));
    }
    Ok(ReadRange {
        start: first,
        end: last + 1,
    })
}
