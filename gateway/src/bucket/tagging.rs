//! Bucket tagging: Put/Get/DeleteBucketTagging, a bucket setting (up to 50 tags, checked as
//! object tags are, [`crate::object::tagging`]).

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::bucket::lookup::{bucket_exists, settings, store};
use crate::bucket::settings::Setting;
use crate::object::tagging::{pairs, tag_set, validate_tag_names};
use crate::Gateway;

/// A bucket may have up to 50 tags (S3's limit).
const BUCKET_TAGS: usize = 50;

pub async fn put_bucket(
    gw: &Gateway,
    req: S3Request<PutBucketTaggingInput>,
) -> S3Result<S3Response<PutBucketTaggingOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let tags = pairs(input.tagging);
    if tags.len() > BUCKET_TAGS {
        return Err(s3_error!(
            InvalidTag,
            "Bucket tags cannot be greater than {BUCKET_TAGS}"
        ));
    }
    validate_tag_names(&tags)?;
    let value = serde_json::to_vec(&tags).expect("tags serialize");
    store(gw, &input.bucket, Setting::Tagging, Some(value)).await?;
    Ok(S3Response::new(PutBucketTaggingOutput::default()))
}

pub async fn get_bucket(
    gw: &Gateway,
    req: S3Request<GetBucketTaggingInput>,
) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    match &s.tags {
        Some(tags) => Ok(S3Response::new(GetBucketTaggingOutput {
            tag_set: tag_set(tags.clone()),
        })),
        None => Err(S3Error::new(S3ErrorCode::NoSuchTagSet)),
    }
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketTaggingInput>,
) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::Tagging, None).await?;
    Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
}
