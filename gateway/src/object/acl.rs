//! GetObjectAcl and PutObjectAcl: an object's (or version's) ACL, kept with it by the MNode
//! and checked as the bucket's Object Ownership allows ([`crate::bucket::acl`]).

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_rpc::{MetaRequest, Want};

use crate::http::error;
use crate::keys::write_key;
use crate::object::lookup::lookup;
use crate::Gateway;

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
