//! Multipart uploads. Parts are always chunked; Complete moves their chunk references into the
//! inode in one raft entry (no data is copied).

use md5::{Digest as _, Md5};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Request, S3Response, S3Result};
use saker_rpc::{
    Checksums, MetaError, MetaRequest, MetaResponse, PartRecord, Sse, UploadInfo, Want,
};

use crate::bucket::owner::identity;
use crate::http::body::{discard, ingest};
use crate::http::checksum::{self, Algorithm};
use crate::http::error;
use crate::keys::{timestamp, write_key, KeyPath};
use crate::object::copy::{copy_bytes, copy_range, source, Sealing, SourceConditions};
use crate::object::put::{declared_from_headers, object_meta, parse_tagging_header, Headers};
use crate::Gateway;

/// Smallest part other than the last (S3's limit).
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
const MAX_PART_NUMBER: i32 = 10_000;

fn upload_error(e: MetaError) -> S3Error {
    error::meta(e)
}

fn check_part_number(n: i32) -> S3Result<u32> {
    if (1..=MAX_PART_NUMBER).contains(&n) {
        Ok(n as u32)
    } else {
        Err(s3_error!(
            InvalidArgument,
            "Part number must be an integer between 1 and 10000, inclusive"
        ))
    }
}

async fn get_upload(gw: &Gateway, kp: &KeyPath, upload_id: &str) -> S3Result<UploadInfo> {
    match gw
        .cluster
        .call(
            &kp.path,
            MetaRequest::GetUpload {
                path: kp.path.clone(),
                upload_id: upload_id.to_string(),
            },
        )
        .await
    {
        Ok(MetaResponse::Upload(u)) => Ok(*u),
        Ok(other) => Err(error::internal(format!("get_upload answered {other:?}"))),
        Err(e) => Err(upload_error(e)),
    }
}

/// A new upload id: 32 hex digits, then `-` and the checksum algorithm the upload was created
/// with, if any. An upload keeps its algorithm for life and ids are looked up whole, so the
/// id is where the algorithm is kept.
fn new_upload_id(algorithm: Option<Algorithm>) -> String {
    let id = hex::encode(rand::random::<[u8; 16]>());
    match algorithm {
        Some(a) => format!("{id}-{}", a.as_str().to_ascii_lowercase()),
        None => id,
    }
}

/// The checksum algorithm an upload was created with.
pub fn upload_algorithm(upload_id: &str) -> Option<Algorithm> {
    upload_id
        .split_once('-')
        .and_then(|(_, a)| Algorithm::parse(a))
}

/// The algorithm and checksum type of a new upload, checked as S3 does: a type needs an
/// algorithm, FULL_OBJECT needs a CRC, CRC64NVME is always FULL_OBJECT.
fn checksum_choice(
    algorithm: Option<&ChecksumAlgorithm>,
    checksum_type: Option<&ChecksumType>,
) -> S3Result<(Option<Algorithm>, Option<&'static str>)> {
    let Some(a) = algorithm else {
        if checksum_type.is_some() {
            return Err(s3_error!(
                InvalidRequest,
                "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header."
            ));
        }
        return Ok((None, None));
    };
    let a = Algorithm::parse(a.as_str()).ok_or_else(|| {
        s3_error!(
            InvalidRequest,
            "Checksum algorithm provided is unsupported."
        )
    })?;
    let t = match checksum_type.map(|t| t.as_str()) {
        None => a.default_type(),
        Some(t) if a.allows_type(t) => {
            if t == ChecksumType::FULL_OBJECT {
                ChecksumType::FULL_OBJECT
            } else {
                ChecksumType::COMPOSITE
            }
        }
        Some(t) => {
            return Err(s3_error!(
                InvalidRequest,
                "The {} checksum type cannot be used with the {} checksum algorithm.",
                t,
                a.as_str()
            ))
        }
    };
    Ok((Some(a), Some(t)))
}

pub async fn create(
    gw: &Gateway,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let (uid, gid) = identity(gw, req.credentials.as_ref());
    let input = req.input;
    let kp = write_key(&input.bucket, &input.key)?;
    if kp.dir_marker {
        return Err(s3_error!(
            InvalidArgument,
            "a directory marker cannot be uploaded in parts"
        ));
    }
    let tags = parse_tagging_header(input.tagging.as_deref())?;
    let writer = req.credentials.as_ref().map(|c| c.access_key.as_str());
    let settings = crate::bucket::lookup::copy_of(gw, &input.bucket).await?;
    let acl = crate::bucket::acl::upload_acl!(gw, &settings, input, writer)?;
    crate::http::write_headers::check(input.storage_class.as_ref())?;
    let seal = crate::object::sse::for_write_of!(gw, &settings, input)?;
    let lock = crate::bucket::lock::for_write(
        &settings,
        input.object_lock_mode.as_ref(),
        input.object_lock_retain_until_date.as_ref(),
        input.object_lock_legal_hold_status.as_ref(),
    )?;
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
    let (algorithm, checksum_type) = checksum_choice(
        input.checksum_algorithm.as_ref(),
        input.checksum_type.as_ref(),
    )?;
    meta.checksum_type = checksum_type.map(str::to_string);
    // The parts are encrypted with the upload's data key, which waits wrapped in its record.
    meta.sse = seal.map(|(_, sse)| sse);
    let shown_sse = crate::object::sse::shown(meta.sse.as_ref());
    let upload_id = new_upload_id(algorithm);
    let req = MetaRequest::CreateUpload {
        path: kp.path.clone(),
        upload_id: upload_id.clone(),
        meta,
        tags,
        uid,
        gid,
        lock,
        acl,
    };
    gw.cluster.call(&kp.path, req).await.map_err(error::meta)?;
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(upload_id),
        checksum_algorithm: algorithm.map(|a| ChecksumAlgorithm::from_static(a.as_str())),
        checksum_type: checksum_type.map(ChecksumType::from_static),
        server_side_encryption: shown_sse.sse,
        ssekms_key_id: shown_sse.kms_key_id,
        sse_customer_algorithm: shown_sse.customer_algorithm,
        sse_customer_key_md5: shown_sse.customer_key_md5,
        ..Default::default()
    }))
}

async fn store_part(
    gw: &Gateway,
    kp: &KeyPath,
    upload_id: &str,
    number: u32,
    part: PartRecord,
) -> S3Result<()> {
    let req = MetaRequest::PutPart {
        path: kp.path.clone(),
        upload_id: upload_id.to_string(),
        part_number: number,
        part,
    };
    gw.cluster
        .call(&kp.path, req)
        .await
        .map(|_| ())
        .map_err(upload_error)
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
    let part = PartRecord {
        size: got.written.size,
        etag: got.md5_hex.clone(),
        checksums: got.sums.clone(),
        layout: got.written.layout.clone(),
        mtime_ns: 0,
    };
    if let Err(e) = store_part(gw, &kp, &input.upload_id, number, part).await {
        discard(&gw.cluster, &got.written).await;
        return Err(e);
    }
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
    let part = PartRecord {
        size: written.size,
        etag: etag.clone(),
        checksums: sums.clone(),
        layout: written.layout.clone(),
        mtime_ns: 0,
    };
    if let Err(e) = store_part(gw, &kp, &input.upload_id, number, part).await {
        discard(&gw.cluster, &written).await;
        return Err(e);
    }
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

/// A part a CompleteMultipartUpload lists.
struct Listed {
    number: u32,
    etag: String,
    sums: Checksums,
}

fn listed_parts(parts: Vec<CompletedPart>) -> S3Result<Vec<Listed>> {
    if parts.is_empty() {
        return Err(s3_error!(
            MalformedXML,
            "You must specify at least one part"
        ));
    }
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        let n = p
            .part_number
            .ok_or_else(|| s3_error!(MalformedXML, "a part has no PartNumber"))?;
        let etag = p
            .e_tag
            .as_ref()
            .map(|e| e.value().trim_matches('"').to_string())
            .unwrap_or_default();
        out.push(Listed {
            number: check_part_number(n)?,
            etag,
            sums: Checksums {
                crc32: p.checksum_crc32,
                crc32c: p.checksum_crc32c,
                crc64nvme: p.checksum_crc64nvme,
                sha1: p.checksum_sha1,
                sha256: p.checksum_sha256,
            },
        });
    }
    Ok(out)
}

/// Whether the client's whole-object checksum is `computed`; a composite one may leave out
/// its `-N`.
fn same_checksum(declared: &str, computed: &str) -> bool {
    declared == computed
        || computed
            .split_once('-')
            .is_some_and(|(b64, _)| b64 == declared)
}

/// The whole-object checksum a Complete stores, and its type. The listed parts must be the
/// uploaded ones (number, ETag, and any checksum they name), and a whole-object checksum the
/// client sends must be the computed one (BadDigest otherwise). The algorithm is the upload's,
/// else the one the client's whole-object checksum uses; without either there is none.
fn completed_checksum(
    upload: &UploadInfo,
    listed: &[Listed],
    declared: &Checksums,
    declared_type: Option<&ChecksumType>,
) -> S3Result<Option<(Algorithm, String, &'static str)>> {
    if listed.windows(2).any(|w| w[0].number >= w[1].number) {
        return Err(S3Error::new(s3s::S3ErrorCode::InvalidPartOrder));
    }
    let mut stored = Vec::with_capacity(listed.len());
    for p in listed {
        let rec = upload
            .parts
            .iter()
            .find(|(n, _)| *n == p.number)
            .map(|(_, r)| r)
            .ok_or_else(|| s3_error!(InvalidPart, "part {} was not uploaded", p.number))?;
        if rec.etag.trim_matches('"') != p.etag {
            return Err(s3_error!(
                InvalidPart,
                "part {} has a different ETag",
                p.number
            ));
        }
        for a in Algorithm::ALL {
            if let Some(v) = a.get(&p.sums) {
                if a.get(&rec.checksums) != Some(v) {
                    return Err(s3_error!(
                        InvalidPart,
                        "the {} checksum of part {} is not the uploaded part's",
                        a.as_str(),
                        p.number
                    ));
                }
            }
        }
        stored.push(rec);
    }
    let declared_alg = Algorithm::ALL
        .into_iter()
        .find(|a| a.get(declared).is_some());
    let upload_alg = upload_algorithm(&upload.upload_id);
    let Some(alg) = upload_alg.or(declared_alg) else {
        return Ok(None);
    };
    if let Some(d) = declared_alg.filter(|d| *d != alg) {
        return Err(s3_error!(
            InvalidRequest,
            "The upload was created using the {} checksum algorithm; the complete request names {}",
            alg.as_str(),
            d.as_str()
        ));
    }
    let ctype = match (&upload.meta.checksum_type, declared_type) {
        (Some(t), Some(d)) if t.as_str() != d.as_str() => {
            return Err(s3_error!(
                BadDigest,
                "The upload was created with the {} checksum type, not {}",
                t,
                d.as_str()
            ))
        }
        (Some(t), _) => t.as_str(),
        (None, Some(d)) => d.as_str(),
        (None, None) => alg.default_type(),
    };
    if !alg.allows_type(ctype) {
        return Err(s3_error!(
            InvalidRequest,
            "The {} checksum type cannot be used with the {} checksum algorithm.",
            ctype,
            alg.as_str()
        ));
    }
    let full_object = ctype == ChecksumType::FULL_OBJECT;
    let mut sums = Vec::with_capacity(stored.len());
    for (p, rec) in listed.iter().zip(&stored) {
        let v = alg.get(&rec.checksums).ok_or_else(|| {
            s3_error!(
                InvalidRequest,
                "part {} was uploaded without a {} checksum",
                p.number,
                alg.as_str()
            )
        })?;
        sums.push((v.as_str(), rec.size));
    }
    let whole = checksum::multipart(alg, full_object, &sums)?;
    if let Some(d) = alg.get(declared) {
        if !same_checksum(d, &whole) {
            return Err(s3_error!(
                BadDigest,
                "The {} you specified did not match the calculated checksum.",
                alg.as_str()
            ));
        }
    }
    let ctype = if full_object {
        ChecksumType::FULL_OBJECT
    } else {
        ChecksumType::COMPOSITE
    };
    Ok(Some((alg, whole, ctype)))
}

pub async fn complete(
    gw: &Gateway,
    req: S3Request<CompleteMultipartUploadInput>,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let input = req.input;
    let kp = write_key(&input.bucket, &input.key)?;
    let listed = listed_parts(
        input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default(),
    )?;
    // The multipart ETag: md5 of the parts' binary md5s, then "-N". The listed ETags are
    // checked against the stored ones, so the listed ones can be used here.
    let mut md5 = Md5::new();
    for p in &listed {
        md5.update(hex::decode(&p.etag).unwrap_or_default());
    }
    let etag = format!("{}-{}", hex::encode(md5.finalize()), listed.len());
    let output = |sums: &Checksums, ctype: Option<ChecksumType>, sse: Option<&Sse>| {
        let shown_sse = crate::object::sse::shown(sse);
        CompleteMultipartUploadOutput {
            bucket: Some(input.bucket.clone()),
            key: Some(input.key.clone()),
            e_tag: Some(ETag::Strong(etag.clone())),
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            checksum_crc32: sums.crc32.clone(),
            checksum_crc32c: sums.crc32c.clone(),
            checksum_crc64nvme: sums.crc64nvme.clone(),
            checksum_sha1: sums.sha1.clone(),
            checksum_sha256: sums.sha256.clone(),
            checksum_type: ctype,
            server_side_encryption: shown_sse.sse,
            ssekms_key_id: shown_sse.kms_key_id,
            ..Default::default()
        }
    };
    let upload = match get_upload(gw, &kp, &input.upload_id).await {
        Ok(u) => u,
        Err(e) => {
            // A retried Complete of an upload that already completed answers like the first:
            // the object these parts made is there.
            if e.code() == &s3s::S3ErrorCode::NoSuchUpload {
                if let Ok(v) = gw.cluster.lookup(&kp.path, Want::HEAD).await {
                    if v.attr.etag == etag && v.attr.kind == saker_rpc::FileKind::File {
                        let meta = v.meta.unwrap_or_default();
                        let ctype = checksum::object_type(&meta);
                        return Ok(S3Response::new(output(
                            &meta.checksums,
                            ctype,
                            meta.sse.as_ref(),
                        )));
                    }
                }
            }
            return Err(e);
        }
    };
    // An SSE-C upload completes only with its key (S3 asks for it too).
    crate::object::sse::for_read(
        gw,
        Some(&upload.meta),
        crate::object::sse::customer_key_of!(input)?,
    )?;
    let cond = crate::object::conditions::write_cond(
        input.if_match.as_ref(),
        input.if_none_match.as_ref(),
    );
    let versioning = crate::bucket::versions::of_bucket(gw, &input.bucket).await?;
    let declared = Checksums {
        crc32: input.checksum_crc32.clone(),
        crc32c: input.checksum_crc32c.clone(),
        crc64nvme: input.checksum_crc64nvme.clone(),
        sha1: input.checksum_sha1.clone(),
        sha256: input.checksum_sha256.clone(),
    };
    let mut sums = Checksums::default();
    let mut ctype = None;
    if let Some((alg, whole, t)) =
        completed_checksum(&upload, &listed, &declared, input.checksum_type.as_ref())?
    {
        *alg.slot(&mut sums) = Some(whole);
        ctype = Some(ChecksumType::from_static(t));
    }
    let wanted: Vec<(u32, String)> = listed.iter().map(|p| (p.number, p.etag.clone())).collect();
    let (uid, gid) = (upload.uid, upload.gid);
    let make = || MetaRequest::CompleteUpload {
        path: kp.path.clone(),
        upload_id: input.upload_id.clone(),
        parts: wanted.clone(),
        etag: etag.clone(),
        checksums: sums.clone(),
        min_part_size: MIN_PART_SIZE,
        cond: cond.clone(),
        versioning,
    };
    let done = gw
        .cluster
        .call_creating_parents(&kp.path, uid, gid, make)
        .await
        .map_err(error::client)?;
    let mut out = output(&sums, ctype, upload.meta.sse.as_ref());
    if let saker_rpc::MetaResponse::Attr(a) = done {
        out.version_id = crate::bucket::versions::written(versioning, a.id);
    }
    let mut resp = S3Response::new(out);
    // CompleteMultipartUploadOutput has no SSE-C fields, but S3 sends them.
    let shown_sse = crate::object::sse::shown(upload.meta.sse.as_ref());
    if let (Some(algorithm), Some(md5)) = (shown_sse.customer_algorithm, shown_sse.customer_key_md5)
    {
        for (name, value) in [
            ("x-amz-server-side-encryption-customer-algorithm", algorithm),
            ("x-amz-server-side-encryption-customer-key-md5", md5),
        ] {
            if let Ok(v) = http::HeaderValue::from_str(&value) {
                resp.headers.insert(name, v);
            }
        }
    }
    Ok(resp)
}

pub async fn abort(
    gw: &Gateway,
    req: S3Request<AbortMultipartUploadInput>,
) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let input = req.input;
    abort_upload(gw, &input.bucket, &input.key, &input.upload_id).await?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

/// Aborts upload `upload_id` of `key`: its parts' chunks are released.
pub async fn abort_upload(gw: &Gateway, bucket: &str, key: &str, upload_id: &str) -> S3Result<()> {
    let kp = write_key(bucket, key)?;
    let r = MetaRequest::AbortUpload {
        path: kp.path.clone(),
        upload_id: upload_id.to_string(),
    };
    gw.cluster.call(&kp.path, r).await.map_err(upload_error)?;
    Ok(())
}

pub async fn list_parts(
    gw: &Gateway,
    req: S3Request<ListPartsInput>,
) -> S3Result<S3Response<ListPartsOutput>> {
    let input = req.input;
    let kp = write_key(&input.bucket, &input.key)?;
    let upload = get_upload(gw, &kp, &input.upload_id).await?;
    let of_bucket = crate::bucket::owner::of_bucket_named(gw, &input.bucket).await?;
    let (owner, initiator) = initiator(gw, &upload, &of_bucket).await;
    let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
    let marker = input.part_number_marker.unwrap_or(0).max(0) as u32;
    let after: Vec<_> = upload.parts.iter().filter(|(n, _)| *n > marker).collect();
    let truncated = after.len() > max;
    let shown: Vec<_> = after.into_iter().take(max).collect();
    let next = shown.last().map(|(n, _)| *n as i32);
    let parts = shown
        .into_iter()
        .map(|(n, r)| Part {
            part_number: Some(*n as i32),
            e_tag: Some(ETag::Strong(r.etag.clone())),
            size: Some(r.size as i64),
            last_modified: Some(timestamp(r.mtime_ns)),
            checksum_crc32: r.checksums.crc32.clone(),
            checksum_crc32c: r.checksums.crc32c.clone(),
            checksum_crc64nvme: r.checksums.crc64nvme.clone(),
            checksum_sha1: r.checksums.sha1.clone(),
            checksum_sha256: r.checksums.sha256.clone(),
        })
        .collect();
    Ok(S3Response::new(ListPartsOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(input.upload_id),
        max_parts: Some(max as i32),
        part_number_marker: input.part_number_marker,
        next_part_number_marker: next,
        is_truncated: Some(truncated),
        parts: Some(parts),
        owner: Some(owner),
        initiator: Some(initiator),
        storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
        checksum_algorithm: upload_algorithm(&upload.upload_id)
            .map(|a| ChecksumAlgorithm::from_static(a.as_str())),
        checksum_type: upload.meta.checksum_type.clone().map(ChecksumType::from),
        ..Default::default()
    }))
}

pub async fn list_uploads(
    gw: &Gateway,
    req: S3Request<ListMultipartUploadsInput>,
) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let input = req.input;
    crate::bucket::lookup::bucket_exists(gw, &input.bucket).await?;
    let of_bucket = crate::bucket::owner::of_bucket_named(gw, &input.bucket).await?;
    let max = input.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
    let prefix = input.prefix.clone().unwrap_or_default();
    let key_marker = input.key_marker.clone().unwrap_or_default();
    let id_marker = input.upload_id_marker.clone().unwrap_or_default();
    let mut all: Vec<UploadInfo> = Vec::new();
    let groups: Vec<_> = gw.cluster.groups().map(|(g, _)| *g).collect();
    for g in groups {
        let r = MetaRequest::ListUploads {
            bucket: input.bucket.clone(),
            prefix: prefix.clone(),
            key_marker: key_marker.clone(),
            upload_id_marker: id_marker.clone(),
            limit: (max + 1) as u32 * 4 + 1000,
        };
        match gw.cluster.call_group(g, r).await.map_err(error::meta)? {
            MetaResponse::Uploads(u) => all.extend(u),
            other => return Err(error::internal(format!("list_uploads answered {other:?}"))),
        }
    }
    all.sort_by(|a, b| {
        (&a.key, a.initiated_ns, &a.upload_id).cmp(&(&b.key, b.initiated_ns, &b.upload_id))
    });
    let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
    let mut uploads = Vec::new();
    let mut common: Vec<String> = Vec::new();
    let mut truncated = false;
    let mut last: Option<(String, String)> = None;
    for u in all {
        if let Some(d) = &delimiter {
            if let Some(i) = u.key[prefix.len()..].find(d.as_str()) {
                let cp = u.key[..prefix.len() + i + d.len()].to_string();
                if common.last() != Some(&cp) {
                    if uploads.len() + common.len() == max {
                        truncated = true;
                        break;
                    }
                    last = Some((cp.clone(), String::new()));
                    common.push(cp);
                }
                continue;
            }
        }
        if uploads.len() + common.len() == max {
            truncated = true;
            break;
        }
        last = Some((u.key.clone(), u.upload_id.clone()));
        let (owner, initiator) = initiator(gw, &u, &of_bucket).await;
        uploads.push(MultipartUpload {
            checksum_algorithm: upload_algorithm(&u.upload_id)
                .map(|a| ChecksumAlgorithm::from_static(a.as_str())),
            checksum_type: u.meta.checksum_type.clone().map(ChecksumType::from),
            key: Some(u.key),
            upload_id: Some(u.upload_id),
            initiated: Some(timestamp(u.initiated_ns)),
            initiator: Some(initiator),
            owner: Some(owner),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
        });
    }
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(input.bucket),
        prefix: input.prefix,
        delimiter: input.delimiter,
        key_marker: input.key_marker,
        upload_id_marker: input.upload_id_marker,
        max_uploads: Some(max as i32),
        is_truncated: Some(truncated),
        next_key_marker: if truncated {
            last.as_ref().map(|l| l.0.clone())
        } else {
            None
        },
        next_upload_id_marker: if truncated {
            last.map(|l| l.1).filter(|s| !s.is_empty())
        } else {
            None
        },
        uploads: Some(uploads),
        common_prefixes: Some(
            common
                .into_iter()
                .map(|p| CommonPrefix { prefix: Some(p) })
                .collect(),
        ),
        ..Default::default()
    }))
}

/// Who started upload `u` in a bucket of `bucket_owner`, as the listings show it (as owner
/// and as initiator): the owner of the ACL its object gets, by its canonical user.
async fn initiator(gw: &Gateway, u: &UploadInfo, bucket_owner: &str) -> (Owner, Initiator) {
    let account = crate::bucket::acl::of_object(u.acl.as_deref(), bucket_owner).owner;
    let owner = crate::bucket::owner::dto(gw, &account).await;
    let initiator = Initiator {
        display_name: owner.display_name.clone(),
        id: owner.id.clone(),
    };
    (owner, initiator)
}
