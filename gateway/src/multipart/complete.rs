//! CompleteMultipartUpload: the listed parts checked against the uploaded ones, the
//! whole-object checksum and multipart ETag computed, and the parts moved into the object.

use md5::{Digest as _, Md5};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Request, S3Response, S3Result};
use saker_rpc::{Checksums, MetaRequest, Sse, UploadInfo, Want};

use crate::http::checksum::{self, Algorithm};
use crate::http::error;
use crate::keys::write_key;
use crate::multipart::upload::{check_part_number, get_upload, upload_algorithm, MIN_PART_SIZE};
use crate::Gateway;

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
