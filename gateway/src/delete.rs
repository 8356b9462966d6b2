//! DeleteObject and DeleteObjects. Deleting a key that does not exist (or cannot exist) is a
//! success; empty implicit parents are reaped by the MNode.

use s3s::dto::*;
use s3s::{S3Error, S3Request, S3Response, S3Result};
use saker_rpc::{EtagCond, MetaRequest, WriteCond};

use crate::error;
use crate::keys::map_key;
use crate::Gateway;

async fn delete_one(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    cond: Option<WriteCond>,
) -> S3Result<()> {
    let kp = match map_key(bucket, key) {
        Ok(kp) => kp,
        Err(saker_namespace::KeyError::Bucket(_)) => {
            return Err(S3Error::new(s3s::S3ErrorCode::NoSuchBucket))
        }
        Err(_) => {
            // No such key can exist; still tell a missing bucket apart.
            crate::bucket::bucket_exists(gw, bucket).await?;
            return Ok(());
        }
    };
    let req = MetaRequest::DeleteObject {
        path: kp.path.clone(),
        dir_marker: kp.dir_marker,
        cond,
    };
    gw.cluster
        .call(&kp.path, req)
        .await
        .map(|_| ())
        .map_err(error::meta)
}

pub async fn delete_object(
    gw: &Gateway,
    req: S3Request<DeleteObjectInput>,
) -> S3Result<S3Response<DeleteObjectOutput>> {
    let cond = crate::get::write_cond(req.input.if_match.as_ref(), None);
    delete_one(gw, &req.input.bucket, &req.input.key, cond).await?;
    Ok(S3Response::new(DeleteObjectOutput::default()))
}

pub async fn delete_objects(
    gw: &Gateway,
    req: S3Request<DeleteObjectsInput>,
) -> S3Result<S3Response<DeleteObjectsOutput>> {
    let denied = req
        .extensions
        .get::<crate::auth::DeniedKeys>()
        .cloned()
        .unwrap_or_default();
    let input = req.input;
    crate::bucket::bucket_exists(gw, &input.bucket).await?;
    if input.delete.objects.len() > 1000 {
        return Err(s3s::s3_error!(
            MalformedXML,
            "a DeleteObjects request may name at most 1000 keys"
        ));
    }
    let quiet = input.delete.quiet.unwrap_or(false);
    let mut deleted = Vec::new();
    let mut errors = Vec::new();
    for obj in input.delete.objects {
        let deleted_one = if denied.0.contains(&obj.key) {
            Err(s3s::s3_error!(AccessDenied, "Access Denied"))
        } else {
            // An ETag named with the key must match the object's (S3's conditional delete).
            let cond = obj.e_tag.as_ref().map(|e| WriteCond {
                if_match: Some(EtagCond::Is(e.value().trim_matches('"').to_string())),
                if_none_match: None,
            });
            delete_one(gw, &input.bucket, &obj.key, cond).await
        };
        match deleted_one {
            Ok(()) => {
                if !quiet {
                    deleted.push(DeletedObject {
                        key: Some(obj.key),
                        version_id: obj.version_id,
                        ..Default::default()
                    });
                }
            }
            Err(e) => errors.push(Error {
                code: Some(e.code().as_str().to_string()),
                key: Some(obj.key),
                message: e.message().map(str::to_string),
                version_id: obj.version_id,
            }),
        }
    }
    Ok(S3Response::new(DeleteObjectsOutput {
        deleted: (!deleted.is_empty()).then_some(deleted),
        errors: (!errors.is_empty()).then_some(errors),
        ..Default::default()
    }))
}
