//! Bucket operations: a bucket is a top-level directory.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_namespace::validate_bucket_name;
use saker_rpc::{FileKind, MetaError, MetaRequest, MetaResponse, Want};

use crate::error;
use crate::keys::timestamp;
use crate::put::identity;
use crate::Gateway;

pub async fn create_bucket(
    gw: &Gateway,
    req: S3Request<CreateBucketInput>,
) -> S3Result<S3Response<CreateBucketOutput>> {
    let (uid, gid) = identity(gw, req.credentials.as_ref());
    let name = req.input.bucket;
    validate_bucket_name(&name)
        .map_err(|e| S3Error::with_message(S3ErrorCode::InvalidBucketName, e.to_string()))?;
    let path = vec![name.clone()];
    match gw
        .cluster
        .call(
            &path,
            MetaRequest::CreateBucket {
                name: name.clone(),
                uid,
                gid,
            },
        )
        .await
    {
        Ok(_) => Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{name}")),
        })),
        Err(MetaError::Exists) => Err(S3Error::new(S3ErrorCode::BucketAlreadyOwnedByYou)),
        Err(e) => Err(error::meta(e)),
    }
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<S3Response<DeleteBucketOutput>> {
    let name = req.input.bucket;
    let path = vec![name.clone()];
    gw.cluster
        .call(&path, MetaRequest::DeleteBucket { name })
        .await
        .map_err(error::meta)?;
    Ok(S3Response::new(DeleteBucketOutput {}))
}

pub async fn head_bucket(
    gw: &Gateway,
    req: S3Request<HeadBucketInput>,
) -> S3Result<S3Response<HeadBucketOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Ok(S3Response::new(HeadBucketOutput {
        bucket_region: Some("us-east-1".into()),
        ..Default::default()
    }))
}

pub async fn bucket_exists(gw: &Gateway, name: &str) -> S3Result<()> {
    match gw.cluster.lookup(&[name.to_string()], Want::ATTR).await {
        Ok(v) if v.attr.kind == FileKind::Dir => Ok(()),
        Ok(_) | Err(MetaError::NotFound | MetaError::NoSuchBucket) => {
            Err(S3Error::new(S3ErrorCode::NoSuchBucket))
        }
        Err(e) => Err(error::meta(e)),
    }
}

pub async fn get_bucket_location(
    gw: &Gateway,
    req: S3Request<GetBucketLocationInput>,
) -> S3Result<S3Response<GetBucketLocationOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Ok(S3Response::new(GetBucketLocationOutput {
        location_constraint: None,
    }))
}

pub async fn list_buckets(
    gw: &Gateway,
    req: S3Request<ListBucketsInput>,
) -> S3Result<S3Response<ListBucketsOutput>> {
    let prefix = req.input.prefix.clone().unwrap_or_default();
    let mut buckets = Vec::new();
    let groups: Vec<_> = gw.cluster.groups().map(|(g, _)| *g).collect();
    for g in groups {
        let mut after = Vec::new();
        loop {
            let req = MetaRequest::Scan {
                dir: saker_namespace::ROOT_ID,
                start_after: after.clone(),
                limit: 1000,
            };
            let entries = match gw.cluster.call_group(g, req).await.map_err(error::meta)? {
                MetaResponse::Entries(e) => e,
                other => return Err(error::internal(format!("scan answered {other:?}"))),
            };
            let done = entries.len() < 1000;
            for e in entries {
                after = e.name.clone().into_bytes();
                after.push(b'/');
                if e.attr.kind == FileKind::Dir && e.name.starts_with(&prefix) {
                    buckets.push(Bucket {
                        name: Some(e.name),
                        creation_date: Some(timestamp(e.attr.ctime_ns.min(e.attr.s3_mtime_ns))),
                        bucket_region: None,
                    });
                }
            }
            if done {
                break;
            }
        }
    }
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(S3Response::new(ListBucketsOutput {
        buckets: Some(buckets),
        owner: Some(crate::list::owner()),
        prefix: req.input.prefix,
        continuation_token: None,
    }))
}
