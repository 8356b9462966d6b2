//! Finding the object a key names, or one of its versions: what every read, copy, delete and
//! authorization check starts from. A key without a current object whose latest version is
//! a delete marker answers the 404 that says so.

use s3s::{s3_error, S3Error, S3ErrorCode, S3Result};
use saker_rpc::{
    FileKind, MetaError, MetaRequest, MetaResponse, ObjectView, VersionKind, Versioning, Want,
    NULL_VERSION,
};

use crate::bucket::versions::of_bucket;
use crate::http::error;
use crate::keys::map_key;
use crate::Gateway;

/// Looks up the object a key names: a file, or an explicit directory's marker for `d/`.
/// An unmappable key, a directory for a plain key, or an implicit directory is NoSuchKey.
pub async fn lookup_object(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    want: Want,
) -> S3Result<ObjectView> {
    let kp = match map_key(bucket, key) {
        Ok(kp) => kp,
        Err(saker_namespace::KeyError::Bucket(_)) => {
            return Err(S3Error::new(S3ErrorCode::NoSuchBucket))
        }
        Err(_) => return Err(S3Error::new(S3ErrorCode::NoSuchKey)),
    };
    let view = gw
        .cluster
        .lookup(&kp.path, want)
        .await
        .map_err(|e| match e {
            MetaError::NoSuchBucket => S3Error::new(S3ErrorCode::NoSuchBucket),
            e => error::meta(e),
        })?;
    let is_object = match view.attr.kind {
        FileKind::File => !kp.dir_marker,
        FileKind::Dir => kp.dir_marker && !view.attr.implicit,
        FileKind::Symlink
        | FileKind::Fifo
        | FileKind::Socket
        | FileKind::CharDevice(_)
        | FileKind::BlockDevice(_) => false,
    };
    if !is_object {
        return Err(S3Error::new(S3ErrorCode::NoSuchKey));
    }
    Ok(view)
}

/// The object `key` of `bucket`, or its version `version_id`.
pub async fn lookup(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    version: Option<&str>,
    want: Want,
) -> S3Result<ObjectView> {
    let Some(vid) = version else {
        let found = lookup_object(gw, bucket, key, want).await;
        return match found {
            Err(e) if e.code() == &s3s::S3ErrorCode::NoSuchKey => {
                let marker = match of_bucket(gw, bucket).await?.versioning {
                    Versioning::Off => None,
                    _ => latest_marker(gw, bucket, key).await,
                };
                // The 404 says whether a delete marker is why, as RGW does (`false` too).
                Err(marker.unwrap_or_else(|| not_a_marker(e)))
            }
            r => r,
        };
    };
    let kp = map_key(bucket, key).map_err(|_| s3_error!(NoSuchKey))?;
    if kp.dir_marker {
        // Directory markers keep no versions: only the current one, as `null`.
        if vid != NULL_VERSION {
            return Err(no_such_version());
        }
        return lookup_object(gw, bucket, key, want).await;
    }
    let req = MetaRequest::LookupVersion {
        path: kp.path.clone(),
        version_id: vid.to_string(),
        want,
    };
    match gw.cluster.call(&kp.path, req).await {
        Ok(MetaResponse::Object(v)) => Ok(*v),
        Ok(other) => Err(error::internal(format!("LookupVersion answered {other:?}"))),
        Err(MetaError::NoSuchVersion) => Err(no_such_version()),
        Err(e) => Err(error::meta(e)),
    }
}

/// For a key without a current object whose latest version is a delete marker: S3's 404
/// that says so (`x-amz-delete-marker`, and the marker's version id).
async fn latest_marker(gw: &Gateway, bucket: &str, key: &str) -> Option<s3s::S3Error> {
    let kp = map_key(bucket, key).ok().filter(|kp| !kp.dir_marker)?;
    // The key's versions are in the group that owns its name, first in its key range.
    let r = scan_request(bucket, key, "", None, 1, false);
    let Ok(MetaResponse::Versions(v)) = gw.cluster.call(&kp.path, r).await else {
        return None;
    };
    let newest = v.into_iter().next().filter(|v| v.key == key)?;
    if !matches!(newest.kind, VersionKind::DeleteMarker) {
        return None;
    }
    let mut e = s3_error!(NoSuchKey, "The specified key does not exist.");
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "x-amz-delete-marker",
        http::HeaderValue::from_static("true"),
    );
    if let Ok(v) = http::HeaderValue::from_str(&newest.version_id) {
        headers.insert("x-amz-version-id", v);
    }
    e.set_headers(headers);
    Some(e)
}

/// A 404 with `x-amz-delete-marker: false`.
fn not_a_marker(mut e: s3s::S3Error) -> s3s::S3Error {
    let mut headers = e.headers().cloned().unwrap_or_default();
    headers.insert(
        "x-amz-delete-marker",
        http::HeaderValue::from_static("false"),
    );
    e.set_headers(headers);
    e
}

fn no_such_version() -> s3s::S3Error {
    s3_error!(NoSuchVersion, "The specified version does not exist.")
}

/// The request for the versions of `bucket` under `prefix` after the marker.
pub(crate) fn scan_request(
    bucket: &str,
    prefix: &str,
    key_marker: &str,
    id_marker: Option<u64>,
    limit: u32,
    with_current: bool,
) -> MetaRequest {
    MetaRequest::ScanVersions {
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
        key_marker: key_marker.to_string(),
        id_marker,
        limit,
        with_current,
    }
}
