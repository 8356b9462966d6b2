//! GetBucketAcl and PutBucketAcl: the bucket's ACL, a bucket setting (the private ACL is
//! stored as none), set as the bucket's Object Ownership and Public Access Block allow
//! ([`crate::bucket::acl`] reads and checks ACLs).

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::bucket::lookup::settings_error;
use crate::Gateway;

pub async fn get_bucket_acl(
    gw: &Gateway,
    req: S3Request<GetBucketAclInput>,
) -> S3Result<S3Response<GetBucketAclOutput>> {
    let s = crate::bucket::lookup::settings(gw, &req.input.bucket).await?;
    let acl = match &s.acl {
        Some(acl) => acl.clone(),
        None => saker_policy::Acl::private(&crate::bucket::owner::of_bucket(gw, &s)),
    };
    let (owner, grants) = crate::bucket::acl::to_dto(gw, &acl).await;
    Ok(S3Response::new(GetBucketAclOutput {
        grants: Some(grants),
        owner: Some(owner),
    }))
}

pub async fn put_bucket_acl(
    gw: &Gateway,
    req: S3Request<PutBucketAclInput>,
) -> S3Result<S3Response<PutBucketAclOutput>> {
    let i = &req.input;
    let s = crate::bucket::lookup::settings(gw, &i.bucket).await?;
    let asked = crate::bucket::acl::acl_request!(i, i.access_control_policy.as_ref());
    let owner = crate::bucket::owner::of_bucket(gw, &s);
    let Some(acl) = crate::bucket::acl::requested(gw, &asked, &owner, &owner).await? else {
        return Err(S3Error::with_message(
            S3ErrorCode::MissingSecurityHeader,
            "an ACL, grant headers or an AccessControlPolicy body is needed",
        ));
    };
    set_bucket_acl(gw, &i.bucket, &asked, &acl, &s).await?;
    Ok(S3Response::new(PutBucketAclOutput {}))
}

/// Stores `acl` as the ACL of `bucket` (whose settings are `s`) if the bucket may take it
/// (the private ACL is stored as no ACL at all).
pub(crate) async fn set_bucket_acl(
    gw: &Gateway,
    bucket: &str,
    asked: &crate::bucket::acl::AclRequest<'_>,
    acl: &saker_policy::Acl,
    s: &crate::bucket::settings::Bucket,
) -> S3Result<()> {
    let ownership = crate::bucket::acl::ownership(s.ownership);
    let block = s.public_access_block.as_ref();
    crate::bucket::acl::check_settable(asked, acl, ownership, block, &acl.owner)?;
    let value = (!acl.is_private()).then(|| serde_json::to_vec(acl).expect("ACLs serialize"));
    gw.settings
        .put(bucket, crate::bucket::settings::Setting::Acl, value)
        .await
        .map_err(settings_error)
}
