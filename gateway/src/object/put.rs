//! PutObject (files and directory markers): the body ingested, then the shared write
//! sequence ([`crate::object::write`]).

use s3s::dto::{ChecksumType, ETag, PutObjectInput, PutObjectOutput};
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_rpc::NewObject;

use crate::http::body::ingest;
use crate::keys::write_key;
use crate::object::write::{
    declared_from_headers, headers_of, object_meta, parse_tagging_header, store_object,
};
use crate::Gateway;

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
    let mut meta = object_meta(headers_of!(input));
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
        copied: false,
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
