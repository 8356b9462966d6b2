//! POSIX modes for keys with a uid: a request signed by a key made with `--uid` (not 0, not
//! the root key) acts on the namespace as that uid and gid would through a mount, checked by
//! the MNode that owns the path (an `Access` request) after the policies allowed it.
//!
//! - Reading an object (GET, HEAD, its attributes, tags, ACL, lock) needs read permission on
//!   the file and search permission on every directory above it.
//! - Writing one (PUT, copy, multipart upload, POST), deleting one, or changing its tags,
//!   retention or legal hold needs write and search permission on its directory (the nearest
//!   one that exists, for a key whose directories a PUT creates); changing tags or locks needs
//!   write permission on the file too.
//! - Listing needs read and search permission on the directory the prefix names (the part up
//!   to its last `/`); names in deeper directories a recursive listing shows are not checked.
//! - A copy's source is read; each key of a multi-object delete is deleted (a key refused is
//!   answered AccessDenied in the delete's errors, the others deleted).
//! - Bucket operations are left to policies.
//!
//! The root key, keys with uid 0 and anonymous requests are not checked here.

use s3s::path::S3Path;
use s3s::{s3_error, S3Result};
use saker_rpc::{access, Cred, MetaError, MetaRequest, Want};

use crate::keys::map_key;
use crate::Gateway;

/// What an operation does to the path it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// Read the object.
    Read,
    /// Create, replace or remove the object: write its directory.
    WriteDir,
    /// Change the object in place: write it and its directory.
    WriteObject,
    /// List under a prefix of the bucket.
    List,
}

fn need(op: &str) -> Option<Need> {
    Some(match op {
        "GetObject"
        | "HeadObject"
        | "GetObjectAttributes"
        | "GetObjectTagging"
        | "GetObjectAcl"
        | "GetObjectRetention"
        | "GetObjectLegalHold"
        | "SelectObjectContent" => Need::Read,
        "PutObject"
        | "CopyObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload"
        | "AbortMultipartUpload"
        | "DeleteObject"
        | "RestoreObject" => Need::WriteDir,
        "PutObjectTagging"
        | "DeleteObjectTagging"
        | "PutObjectRetention"
        | "PutObjectLegalHold"
        | "PutObjectAcl" => Need::WriteObject,
        "ListObjects" | "ListObjectsV2" | "ListObjectVersions" => Need::List,
        _ => return None,
    })
}

/// The identity a key's requests are checked as: `None` for the root key, a key with uid 0,
/// and anonymous requests.
pub fn cred_of(gw: &Gateway, access_key: Option<&str>) -> Option<Cred> {
    gw.keys
        .with(access_key?, |key| {
            (!key.root && key.uid != 0).then(|| Cred {
                uid: key.uid,
                gid: key.gid,
                groups: Vec::new(),
            })
        })
        .flatten()
}

/// Checks operation `op` (s3s's name) on `path` for the holder of `access_key`; `query` is
/// the request's query string (a listing's prefix).
pub async fn check(
    gw: &Gateway,
    access_key: Option<&str>,
    op: &str,
    path: &S3Path,
    query: Option<&str>,
) -> S3Result<()> {
    let Some(need) = need(op) else { return Ok(()) };
    let Some(cred) = cred_of(gw, access_key) else {
        return Ok(());
    };
    let path = match (path, need) {
        (S3Path::Object { bucket, key }, _) => match map_key(bucket, key) {
            Ok(kp) => kp.path,
            // A key that maps to no path is refused by the operation itself.
            Err(_) => return Ok(()),
        },
        (S3Path::Bucket { bucket }, Need::List) => {
            let prefix = query
                .into_iter()
                .flat_map(crate::http::path::query_pairs)
                .find_map(|(k, v)| (k == "prefix").then_some(v))
                .unwrap_or_default();
            let dir = prefix.rfind('/').map_or("", |i| &prefix[..=i]);
            match map_key(bucket, dir) {
                Ok(kp) => kp.path,
                Err(_) => vec![bucket.to_string()],
            }
        }
        _ => return Ok(()),
    };
    let parent = &path[..path.len().max(2) - 1];
    let checked = match need {
        Need::Read => allowed(gw, &path, access::READ, &cred).await,
        Need::List => allowed(gw, &path, access::READ | access::EXEC, &cred).await,
        Need::WriteObject => match allowed(gw, &path, access::WRITE, &cred).await {
            Ok(()) => nearest_dir_writable(gw, parent, &cred).await,
            e => e,
        },
        Need::WriteDir => nearest_dir_writable(gw, parent, &cred).await,
    };
    match checked {
        Ok(())
        // A missing path is the operation's to answer (NoSuchKey, an empty listing, a PUT
        // that makes its directories).
        | Err(MetaError::NotFound | MetaError::NoSuchBucket | MetaError::NotDir) => Ok(()),
        Err(MetaError::AccessDenied | MetaError::NotPermitted) => Err(s3_error!(
            AccessDenied,
            "Access Denied: the file modes do not allow this to the key's uid"
        )),
        Err(e) => Err(crate::http::error::meta(e)),
    }
}

/// The keys of `bucket` among `keys` the holder of `access_key` may not `op` (s3s's name of
/// a one-object operation) by the file modes: for the hooks that name objects in the body or
/// headers (the keys of a multi-object delete, a copy's source).
pub async fn denied_keys<'k>(
    gw: &Gateway,
    access_key: Option<&str>,
    op: &str,
    bucket: &str,
    keys: impl Iterator<Item = &'k str>,
) -> S3Result<Vec<String>> {
    let mut denied = Vec::new();
    if cred_of(gw, access_key).is_none() {
        return Ok(denied);
    }
    for key in keys {
        let path = S3Path::Object {
            bucket: bucket.into(),
            key: key.into(),
        };
        match check(gw, access_key, op, &path, None).await {
            Ok(()) => {}
            Err(e) if *e.code() == s3s::S3ErrorCode::AccessDenied => denied.push(key.to_string()),
            Err(e) => return Err(e),
        }
    }
    Ok(denied)
}

/// Whether `cred` has `mask` on `path` (and search permission on the directories above).
async fn allowed(gw: &Gateway, path: &[String], mask: u32, cred: &Cred) -> Result<(), MetaError> {
    let req = MetaRequest::Access {
        path: path.to_vec(),
        mask,
        cred: cred.clone(),
        want: Want::ATTR,
    };
    gw.cluster.call(path, req).await.map(|_| ())
}

/// Write and search permission on `dir`, or on its nearest ancestor that exists (a PUT makes
/// the missing ones).
async fn nearest_dir_writable(gw: &Gateway, dir: &[String], cred: &Cred) -> Result<(), MetaError> {
    let mut dir = dir;
    loop {
        match allowed(gw, dir, access::WRITE | access::EXEC, cred).await {
            Err(MetaError::NotFound) if dir.len() > 1 => dir = &dir[..dir.len() - 1],
            r => return r,
        }
    }
}
