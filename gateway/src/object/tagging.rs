//! Object and bucket tagging.

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_rpc::{MetaRequest, Want};

use crate::bucket::lookup::bucket_exists;
use crate::bucket::lookup::{settings, store};
use crate::bucket::settings::Setting;
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

fn pairs(tagging: Tagging) -> Vec<(String, String)> {
    tagging
        .tag_set
        .into_iter()
        .map(|t| (t.key.unwrap_or_default(), t.value.unwrap_or_default()))
        .collect()
}

fn tag_set(tags: Vec<(String, String)>) -> Vec<Tag> {
    tags.into_iter()
        .map(|(k, v)| Tag {
            key: Some(k),
            value: Some(v),
        })
        .collect()
}

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

pub async fn get_object_acl(
    gw: &Gateway,
    req: S3Request<GetObjectAclInput>,
) -> S3Result<S3Response<GetObjectAclOutput>> {
    let want = Want {
        acl: true,
        ..Want::ATTR
    };
    let i = &req.input;
    let view = lookup(gw, &i.bucket, &i.key, i.version_id.as_deref(), want).await?;
    let bucket_owner = crate::bucket::owner::of_bucket_named(gw, &req.input.bucket).await?;
    let acl = crate::bucket::acl::of_object(view.acl.as_deref(), &bucket_owner);
    let (owner, grants) = crate::bucket::acl::to_dto(gw, &acl).await;
    Ok(S3Response::new(GetObjectAclOutput {
        grants: Some(grants),
        owner: Some(owner),
        request_charged: None,
    }))
}

pub async fn put_object_acl(
    gw: &Gateway,
    req: S3Request<PutObjectAclInput>,
) -> S3Result<S3Response<PutObjectAclOutput>> {
    let i = &req.input;
    let want = Want {
        acl: true,
        ..Want::ATTR
    };
    let view = lookup(gw, &i.bucket, &i.key, i.version_id.as_deref(), want).await?;
    // The object was found: its bucket exists.
    let s = crate::bucket::lookup::copy_of(gw, &i.bucket).await?;
    let bucket_owner = crate::bucket::owner::of_bucket(gw, &s);
    // The object keeps its owner; only the grants change.
    let owner = crate::bucket::acl::of_object(view.acl.as_deref(), &bucket_owner).owner;
    let asked = crate::bucket::acl::acl_request!(i, i.access_control_policy.as_ref());
    let Some(acl) = crate::bucket::acl::requested(gw, &asked, &owner, &bucket_owner).await? else {
        return Err(S3Error::with_message(
            S3ErrorCode::MissingSecurityHeader,
            "PutObjectAcl needs a canned ACL, grant headers or an AccessControlPolicy",
        ));
    };
    let ownership = crate::bucket::acl::ownership(s.ownership);
    let block = s.public_access_block.as_ref();
    crate::bucket::acl::check_settable(&asked, &acl, ownership, block, &bucket_owner)?;
    let kp = write_key(&i.bucket, &i.key)?;
    let r = MetaRequest::PutAcl {
        path: kp.path.clone(),
        dir_marker: kp.dir_marker,
        acl: crate::bucket::acl::stored(&acl, &bucket_owner),
        version_id: i.version_id.clone(),
    };
    gw.cluster.call(&kp.path, r).await.map_err(error::meta)?;
    Ok(S3Response::new(PutObjectAclOutput::default()))
}
