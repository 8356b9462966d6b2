//! Object tagging (Put/Get/DeleteObjectTagging, and the tags a write sets), and the checks
//! every tag set passes (a bucket's too, [`crate::bucket::tagging`]).

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_rpc::{MetaRequest, Want};

use crate::http::error;
use crate::keys::write_key;
use crate::object::lookup::lookup;
use crate::Gateway;

/// S3's limits: at most 10 tags, keys 1–128 and values 0–256 characters, unique keys.
pub fn validate_tags(tags: &[(String, String)]) -> S3Result<()> {
    if tags.len() > 10 {
        return Err(s3_error!(
            InvalidTag,
            "Object tags cannot be greater than 10"
        ));
    }
    validate_tag_names(tags)
}

/// The checks of a tag set but its size: keys of 1-128 and values of up to 256 characters,
/// no key twice.
pub fn validate_tag_names(tags: &[(String, String)]) -> S3Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > 128 {
            return Err(s3_error!(
                InvalidTag,
                "The TagKey you have provided is invalid"
            ));
        }
        if v.chars().count() > 256 {
            return Err(s3_error!(
                InvalidTag,
                "The TagValue you have provided is invalid"
            ));
        }
        if !seen.insert(k) {
            return Err(s3_error!(
                InvalidTag,
                "Cannot provide multiple Tags with the same key"
            ));
        }
    }
    Ok(())
}

pub(crate) fn pairs(tagging: Tagging) -> Vec<(String, String)> {
    tagging
        .tag_set
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect()
}

pub(crate) fn tag_set(tags: Vec<(String, String)>) -> Vec<Tag> {
    tags.into_iter()
        .map(|(k, v)| Tag {
            key: Some(k),
            value: Some(v),
        })
        .collect()
}

/// Sets (`None`: removes) the tags of object `key` of `bucket`, or of its version `version`:
/// what PutObjectTagging and DeleteObjectTagging share.
async fn set_tags(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    version: Option<&str>,
    tags: Option<Vec<(String, String)>>,
) -> S3Result<()> {
    lookup(gw, bucket, key, version, Want::ATTR).await?;
    let kp = write_key(bucket, key)?;
    let r = MetaRequest::PutTags {
        path: kp.path.clone(),
        dir_marker: kp.dir_marker,
        tags,
        version_id: version.map(str::to_string),
    };
    gw.cluster.call(&kp.path, r).await.map_err(error::meta)?;
    Ok(())
}

pub async fn put(
    gw: &Gateway,
    req: S3Request<PutObjectTaggingInput>,
) -> S3Result<S3Response<PutObjectTaggingOutput>> {
    let input = req.input;
    let tags = pairs(input.tagging);
    validate_tags(&tags)?;
    let version = input.version_id.as_deref();
    set_tags(gw, &input.bucket, &input.key, version, Some(tags)).await?;
    Ok(S3Response::new(PutObjectTaggingOutput {
        version_id: input.version_id,
    }))
}

pub async fn get(
    gw: &Gateway,
    req: S3Request<GetObjectTaggingInput>,
) -> S3Result<S3Response<GetObjectTaggingOutput>> {
    let input = req.input;
    let view = lookup(
        gw,
        &input.bucket,
        &input.key,
        input.version_id.as_deref(),
        Want {
            meta: false,
            data: false,
            tags: true,
            link: false,
            lock: false,
            acl: false,
        },
    )
    .await?;
    let mut tags = view.tags.unwrap_or_default();
    tags.sort();
    Ok(S3Response::new(GetObjectTaggingOutput {
        tag_set: tag_set(tags),
        version_id: input.version_id,
    }))
}

pub async fn delete(
    gw: &Gateway,
    req: S3Request<DeleteObjectTaggingInput>,
) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
    let input = req.input;
    let version = input.version_id.as_deref();
    set_tags(gw, &input.bucket, &input.key, version, None).await?;
    Ok(S3Response::new(DeleteObjectTaggingOutput {
        version_id: input.version_id,
    }))
}
