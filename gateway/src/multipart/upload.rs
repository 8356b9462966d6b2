//! An upload's record: its id (which keeps the upload's checksum algorithm), part numbers,
//! the record looked up, and the abort that releases its parts.

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Request, S3Response, S3Result};
use saker_rpc::{MetaError, MetaRequest, MetaResponse, UploadInfo};

use crate::http::checksum::Algorithm;
use crate::http::error;
use crate::keys::{write_key, KeyPath};
use crate::Gateway;

/// Smallest part other than the last (S3's limit).
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;

/// The highest part number (S3's limit).
const MAX_PART_NUMBER: i32 = 10_000;

pub(crate) fn upload_error(e: MetaError) -> S3Error {
    error::meta(e)
}

pub(crate) fn check_part_number(n: i32) -> S3Result<u32> {
    if (1..=MAX_PART_NUMBER).contains(&n) {
        Ok(n as u32)
    } else {
        Err(s3_error!(
            InvalidArgument,
            "Part number must be an integer between 1 and 10000, inclusive"
        ))
    }
}

pub(crate) async fn get_upload(
    gw: &Gateway,
    kp: &KeyPath,
    upload_id: &str,
) -> S3Result<UploadInfo> {
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
pub(crate) fn new_upload_id(algorithm: Option<Algorithm>) -> String {
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
