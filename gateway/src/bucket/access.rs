//! The bucket's access settings on the S3 API: bucket policy (Put/Get/Delete, and
//! GetBucketPolicyStatus), Public Access Block and Object Ownership. They are stored by
//! [`crate::bucket::settings`] and enforced by [`crate::auth`].

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::bucket::lookup::{settings, store};
use crate::bucket::settings::Setting;
use crate::Gateway;

fn not_found(code: &'static str, msg: &'static str) -> S3Error {
    let mut e = S3Error::with_message(S3ErrorCode::Custom(code.into()), msg);
    e.set_status_code(http::StatusCode::NOT_FOUND);
    e
}

pub async fn put_bucket_policy(
    gw: &Gateway,
    req: S3Request<PutBucketPolicyInput>,
) -> S3Result<S3Response<PutBucketPolicyOutput>> {
    let i = req.input;
    let current = settings(gw, &i.bucket).await?;
    let policy = saker_policy::Policy::parse_bucket(&i.policy)
        .map_err(|e| S3Error::with_message(S3ErrorCode::MalformedPolicy, e.to_string()))?;
    if let Some(bad) = policy
        .resources()
        .find(|r| !saker_policy::resource_in_bucket(r, &i.bucket))
    {
        return Err(S3Error::with_message(
            S3ErrorCode::MalformedPolicy,
            format!(
                "Policy has invalid resource: {bad} is not in bucket {}",
                i.bucket
            ),
        ));
    }
    if let Some(block) = &current.public_access_block {
        block.check_policy(&policy).map_err(|_| {
            S3Error::with_message(
                S3ErrorCode::AccessDenied,
                "the bucket's public access block refuses public bucket policies",
            )
        })?;
    }
    store(gw, &i.bucket, Setting::Policy, Some(i.policy.into_bytes())).await?;
    Ok(S3Response::new(PutBucketPolicyOutput {}))
}

pub async fn get_bucket_policy(
    gw: &Gateway,
    req: S3Request<GetBucketPolicyInput>,
) -> S3Result<S3Response<GetBucketPolicyOutput>> {
    match &settings(gw, &req.input.bucket).await?.policy {
        Some((text, _)) => Ok(S3Response::new(GetBucketPolicyOutput {
            policy: Some(text.clone()),
        })),
        None => Err(S3Error::with_message(
            S3ErrorCode::NoSuchBucketPolicy,
            "The bucket policy does not exist",
        )),
    }
}

pub async fn delete_bucket_policy(
    gw: &Gateway,
    req: S3Request<DeleteBucketPolicyInput>,
) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
    settings(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::Policy, None).await?;
    Ok(S3Response::new(DeleteBucketPolicyOutput {}))
}

/// Public when its policy grants anyone access or its ACL grants AllUsers or
/// AuthenticatedUsers anything.
pub async fn get_bucket_policy_status(
    gw: &Gateway,
    req: S3Request<GetBucketPolicyStatusInput>,
) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let public = s.policy.as_ref().is_some_and(|(_, p)| p.is_public())
        || s.acl.as_ref().is_some_and(|a| a.is_public());
    Ok(S3Response::new(GetBucketPolicyStatusOutput {
        policy_status: Some(PolicyStatus {
            is_public: Some(public),
        }),
    }))
}

pub async fn put_public_access_block(
    gw: &Gateway,
    req: S3Request<PutPublicAccessBlockInput>,
) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
    let i = req.input;
    settings(gw, &i.bucket).await?;
    let c = i.public_access_block_configuration;
    let block = saker_policy::PublicAccessBlock {
        block_public_acls: c.block_public_acls.unwrap_or(false),
        ignore_public_acls: c.ignore_public_acls.unwrap_or(false),
        block_public_policy: c.block_public_policy.unwrap_or(false),
        restrict_public_buckets: c.restrict_public_buckets.unwrap_or(false),
    };
    let body = serde_json::to_vec(&block).expect("settings serialize");
    store(gw, &i.bucket, Setting::PublicAccessBlock, Some(body)).await?;
    Ok(S3Response::new(PutPublicAccessBlockOutput {}))
}

pub async fn get_public_access_block(
    gw: &Gateway,
    req: S3Request<GetPublicAccessBlockInput>,
) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let Some(b) = &s.public_access_block else {
        return Err(not_found(
            "NoSuchPublicAccessBlockConfiguration",
            "The public access block configuration was not found",
        ));
    };
    Ok(S3Response::new(GetPublicAccessBlockOutput {
        public_access_block_configuration: Some(PublicAccessBlockConfiguration {
            block_public_acls: Some(b.block_public_acls),
            ignore_public_acls: Some(b.ignore_public_acls),
            block_public_policy: Some(b.block_public_policy),
            restrict_public_buckets: Some(b.restrict_public_buckets),
        }),
    }))
}

pub async fn delete_public_access_block(
    gw: &Gateway,
    req: S3Request<DeletePublicAccessBlockInput>,
) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
    settings(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::PublicAccessBlock, None).await?;
    Ok(S3Response::new(DeletePublicAccessBlockOutput {}))
}

/// The one Object Ownership rule of a request, checked.
pub fn ownership_rule(c: &OwnershipControls) -> S3Result<saker_policy::ObjectOwnership> {
    let [rule] = c.rules.as_slice() else {
        return Err(S3Error::with_message(
            S3ErrorCode::MalformedXML,
            "OwnershipControls takes exactly one rule",
        ));
    };
    parse_ownership(rule.object_ownership.as_str())
}

pub fn parse_ownership(s: &str) -> S3Result<saker_policy::ObjectOwnership> {
    s.parse().map_err(|_| {
        S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("{s:?} is not an Object Ownership setting"),
        )
    })
}

pub async fn put_bucket_ownership_controls(
    gw: &Gateway,
    req: S3Request<PutBucketOwnershipControlsInput>,
) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
    let i = req.input;
    let s = settings(gw, &i.bucket).await?;
    let ownership = ownership_rule(&i.ownership_controls)?;
    if ownership == saker_policy::ObjectOwnership::BucketOwnerEnforced
        && s.acl.as_ref().is_some_and(|a| !a.is_private())
    {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidBucketAclWithObjectOwnership,
            "Bucket ACLs are not supported with BucketOwnerEnforced: set the private ACL first",
        ));
    }
    let body = ownership.to_string().into_bytes();
    store(gw, &i.bucket, Setting::Ownership, Some(body)).await?;
    Ok(S3Response::new(PutBucketOwnershipControlsOutput {}))
}

pub async fn get_bucket_ownership_controls(
    gw: &Gateway,
    req: S3Request<GetBucketOwnershipControlsInput>,
) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let Some(o) = s.ownership else {
        return Err(not_found(
            "OwnershipControlsNotFoundError",
            "The bucket ownership controls were not found",
        ));
    };
    Ok(S3Response::new(GetBucketOwnershipControlsOutput {
        ownership_controls: Some(OwnershipControls {
            rules: vec![OwnershipControlsRule {
                object_ownership: ObjectOwnership::from(o.to_string()),
            }],
        }),
    }))
}

pub async fn delete_bucket_ownership_controls(
    gw: &Gateway,
    req: S3Request<DeleteBucketOwnershipControlsInput>,
) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
    settings(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::Ownership, None).await?;
    Ok(S3Response::new(DeleteBucketOwnershipControlsOutput {}))
}
