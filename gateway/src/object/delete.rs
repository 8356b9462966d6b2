//! DeleteObject and DeleteObjects. Deleting a key that does not exist (or cannot exist) is a
//! success; empty implicit parents are reaped by the MNode. In a bucket that keeps versions,
//! a delete without a version id writes a delete marker, one with a version id deletes that
//! version for good.

use futures::StreamExt;
use s3s::dto::*;
use s3s::s3_error;
use s3s::{S3Error, S3Request, S3Response, S3Result};
use saker_rpc::{MetaError, MetaRequest, MetaResponse, WriteCond, NULL_VERSION};

use crate::http::error;
use crate::keys::map_key;
use crate::Gateway;

/// What a delete did, for its answer: the version removed or the delete marker written.
#[derive(Default)]
pub(crate) struct Deleted {
    version_id: Option<String>,
    delete_marker: bool,
}

pub(crate) async fn delete_one(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    cond: Option<WriteCond>,
    version_id: Option<String>,
    bypass_governance: bool,
    lifecycle: bool,
) -> S3Result<Deleted> {
    let kp = match map_key(bucket, key) {
        Ok(kp) => kp,
        Err(saker_namespace::KeyError::Bucket(_)) => {
            return Err(S3Error::new(s3s::S3ErrorCode::NoSuchBucket))
        }
        Err(_) => {
            // No such key can exist; still tell a missing bucket apart.
            crate::bucket::lookup::bucket_exists(gw, bucket).await?;
            return Ok(Deleted::default());
        }
    };
    if let Some(v) = version_id.as_deref() {
        if v != NULL_VERSION && saker_rpc::version_inode(v).is_none() {
            return Err(s3_error!(InvalidArgument, "Invalid version id specified"));
        }
    }
    let mut tries = 0;
    let answer = loop {
        let req = MetaRequest::DeleteObject {
            path: kp.path.clone(),
            dir_marker: kp.dir_marker,
            cond: cond.clone(),
            versioning: crate::bucket::versions::of_bucket(gw, bucket).await?,
            version_id: version_id.clone(),
            bypass_governance,
            lifecycle,
        };
        match gw.cluster.call(&kp.path, req).await {
            // Decided anew from the settings as they are now (a delete brings no bytes).
            Err(MetaError::SettingsChanged { .. })
                if tries + 1 < crate::bucket::versions::REDECIDE =>
            {
                tries += 1;
                gw.settings
                    .reload()
                    .await
                    .map_err(crate::bucket::lookup::settings_error)?;
            }
            answer => break answer,
        }
    };
    match answer.map_err(error::meta)? {
        MetaResponse::Deleted {
            version_id,
            delete_marker,
        } => Ok(Deleted {
            version_id: Some(version_id),
            delete_marker,
        }),
        _ => Ok(Deleted::default()),
    }
}

pub async fn delete_object(
    gw: &Gateway,
    req: S3Request<DeleteObjectInput>,
) -> S3Result<S3Response<DeleteObjectOutput>> {
    let bypass = crate::bucket::lock::bypass(&req);
    let i = req.input;
    let cond = crate::object::conditions::write_cond(i.if_match.as_ref(), None);
    let d = delete_one(gw, &i.bucket, &i.key, cond, i.version_id, bypass, false).await?;
    Ok(S3Response::new(DeleteObjectOutput {
        delete_marker: d.delete_marker.then_some(true),
        version_id: d.version_id,
        ..Default::default()
    }))
}

/// The keys of one DeleteObjects deleted at once.
const DELETES_IN_FLIGHT: usize = 64;

pub async fn delete_objects(
    gw: &Gateway,
    req: S3Request<DeleteObjectsInput>,
) -> S3Result<S3Response<DeleteObjectsOutput>> {
    let denied = req
        .extensions
        .get::<crate::auth::DeniedKeys>()
        .cloned()
        .unwrap_or_default();
    let bypass = crate::bucket::lock::bypass(&req);
    let input = req.input;
    crate::bucket::lookup::bucket_exists(gw, &input.bucket).await?;
    if input.delete.objects.len() > 1000 {
        return Err(s3s::s3_error!(
            MalformedXML,
            "a DeleteObjects request may name at most 1000 keys"
        ));
    }
    let quiet = input.delete.quiet.unwrap_or(false);
    let bucket = &input.bucket;
    // The keys' deletes run together, so that their MNode groups merge them into a few raft
    // entries instead of one each; answers keep the request's order.
    let outcomes: Vec<(ObjectIdentifier, S3Result<Deleted>)> =
        futures::stream::iter(input.delete.objects.into_iter().map(|obj| {
            let denied = denied.0.contains(&obj.key);
            async move {
                if denied {
                    return (obj, Err(s3s::s3_error!(AccessDenied, "Access Denied")));
                }
                // An ETag named with the key must match the object's (S3's conditional
                // delete).
                let named = obj.e_tag.clone().map(ETagCondition::ETag);
                let cond = crate::object::conditions::write_cond(named.as_ref(), None);
                let vid = obj.version_id.clone();
                let r = delete_one(gw, bucket, &obj.key, cond, vid, bypass, false).await;
                (obj, r)
            }
        }))
        .buffered(DELETES_IN_FLIGHT)
        .collect()
        .await;
    let mut deleted = Vec::new();
    let mut errors = Vec::new();
    for (obj, deleted_one) in outcomes {
        match deleted_one {
            Ok(d) => {
                if !quiet {
                    // A marker written answers its own version id; a version deleted, the
                    // one asked for.
                    let (version_id, marker_id) = match (d.delete_marker, obj.version_id) {
                        (true, None) => (None, d.version_id),
                        (true, asked) => (asked.clone(), asked),
                        (false, asked) => (asked, None),
                    };
                    deleted.push(DeletedObject {
                        key: Some(obj.key),
                        version_id,
                        delete_marker: d.delete_marker.then_some(true),
                        delete_marker_version_id: marker_id,
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
