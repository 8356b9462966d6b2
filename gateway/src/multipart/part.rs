//! UploadPart and UploadPartCopy: a part's bytes (ingested, or copied from an object), then
//! stored the same way ([`store_part`]): its record in the upload, the bytes discarded if that
//! fails.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};
use saker_client::Written;
use saker_rpc::{Checksums, MetaRequest, PartRecord, Want};

use crate::http::body::{discard, ingest};
use crate::keys::{write_key, KeyPath};
use crate::multipart::upload::{check_part_number, get_upload, upload_algorithm, upload_error};
use crate::object::copy::{copy_bytes, copy_range, source, Sealing, SourceConditions};
use crate::object::write::declared_from_headers;
use crate::Gateway;

/// Stores a part whose bytes are `written` (MD5 `etag`, checksums `sums`) as part `number`
/// of upload `upload_id` of `kp`: the step UploadPart and UploadPartCopy share. Bytes no part
/// refers to are discarded when the record is refused.
async fn store_part(
    gw: &Gateway,
    kp: &KeyPath,
    upload_id: &str,
    number: u32,
    written: &Written,
    etag: String,
    sums: Checksums,
) -> S3Result<()> {
    let part = PartRecord {
        size: written.size,
        etag,
        checksums: sums,
        layout: written.layout.clone(),
        mtime_ns: 0,
    };
    let req = MetaRequest::PutPart {
        path: kp.path.clone(),
        upload_id: upload_id.to_string(),
        part_number: number,
        part,
    };
    let stored = gw.cluster.call(&kp.path, req).await.map(|_| ());
    if stored.is_err() {
        discard(&gw.cluster, written).await;
    }
    stored.map_err(upload_error)
}

pub async fn upload_part(
    gw: &Gateway,
    req: S3Request<UploadPartInput>,
) -> S3Result<S3Response<UploadPartOutput>> {
    let (algorithm, trailer) = declared_from_headers(&req.headers);
    let input = req.input;
    let customer = crate::object::sse::customer_key_of!(input)?;
    let kp = write_key(&input.bucket, &input.key)?;
    let number = check_part_number(input.part_number)?;
    // Fail before reading the body when the upload is unknown.
    let upload = get_upload(gw, &kp, &input.upload_id).await?;
    let seal = crate::object::sse::for_read(gw, Some(&upload.meta), customer)?;
    let mut declared = crate::declared_checksums!(input, algorithm);
    declared.required = upload_algorithm(&input.upload_id);
    let got = ingest(
        &gw.cluster,
        input.body,
        declared,
        req.trailing_headers,
        trailer.as_deref(),
        true,
        seal.as_ref().map(|(k, sse)| k.sealing(sse, number)),
    )
    .await?;
    let (etag, sums) = (got.md5_hex.clone(), got.sums.clone());
    store_part(gw, &kp, &input.upload_id, number, &got.written, etag, sums).await?;
    let s = got.sums;
    let shown_sse = crate::object::sse::shown(upload.meta.sse.as_ref());
    Ok(S3Response::new(UploadPartOutput {
        e_tag: Some(ETag::Strong(got.md5_hex)),
        server_side_encryption: shown_sse.sse,
        ssekms_key_id: shown_sse.kms_key_id,
        sse_customer_algorithm: shown_sse.customer_algorithm,
        sse_customer_key_md5: shown_sse.customer_key_md5,
        checksum_crc32: s.crc32,
        checksum_crc32c: s.crc32c,
        checksum_crc64nvme: s.crc64nvme,
        checksum_sha1: s.sha1,
        checksum_sha256: s.sha256,
        ..Default::default()
    }))
}

pub async fn upload_part_copy(
    gw: &Gateway,
    req: S3Request<UploadPartCopyInput>,
) -> S3Result<S3Response<UploadPartCopyOutput>> {
    let input = req.input;
    let customer = crate::object::sse::customer_key_of!(input)?;
    let source_key = crate::object::sse::copy_source_key_of!(input)?;
    let kp = write_key(&input.bucket, &input.key)?;
    let number = check_part_number(input.part_number)?;
    let upload = get_upload(gw, &kp, &input.upload_id).await?;
    let seal = crate::object::sse::for_read(gw, Some(&upload.meta), customer)?;
    let cond = SourceConditions {
        if_match: input.copy_source_if_match.as_ref(),
        if_none_match: input.copy_source_if_none_match.as_ref(),
        if_modified_since: input.copy_source_if_modified_since.as_ref(),
        if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
    };
    let (_, _, view) = source(gw, &input.copy_source, cond, Want::OBJECT).await?;
    let unsealed = crate::object::sse::for_read(gw, view.meta.as_ref(), source_key)?;
    let range = copy_range(input.copy_source_range.as_deref(), view.attr.size)?;
    let algorithm = upload_algorithm(&input.upload_id);
    let sealing = Sealing {
        source: unsealed.as_ref(),
        target: seal.as_ref().map(|(k, sse)| k.sealing(sse, number)),
    };
    let (written, md5, sums) = copy_bytes(gw, &view, range, true, algorithm, sealing).await?;
    let etag = hex::encode(md5);
    let (part_etag, part_sums) = (etag.clone(), sums.clone());
    store_part(
        gw,
        &kp,
        &input.upload_id,
        number,
        &written,
        part_etag,
        part_sums,
    )
    .await?;
    let shown_sse = crate::object::sse::shown(upload.meta.sse.as_ref());
    Ok(S3Response::new(UploadPartCopyOutput {
        server_side_encryption: shown_sse.sse,
        ssekms_key_id: shown_sse.kms_key_id,
        sse_customer_algorithm: shown_sse.customer_algorithm,
        sse_customer_key_md5: shown_sse.customer_key_md5,
        copy_part_result: Some(CopyPartResult {
            e_tag: Some(ETag::Strong(etag)),
            last_modified: Some(Timestamp::from(std::time::SystemTime::now())),
            checksum_crc32: sums.crc32,
            checksum_crc32c: sums.crc32c,
            checksum_crc64nvme: sums.crc64nvme,
            checksum_sha1: sums.sha1,
            checksum_sha256: sums.sha256,
        }),
        ..Default::default()
    }))
}
