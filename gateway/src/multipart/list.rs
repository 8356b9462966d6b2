//! ListParts and ListMultipartUploads, with who started each upload.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};
use saker_rpc::{MetaRequest, MetaResponse, UploadInfo};

use crate::http::error;
use crate::keys::{timestamp, write_key};
use crate::multipart::upload::{get_upload, upload_algorithm};
use crate::Gateway;

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
