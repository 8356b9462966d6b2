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
    if req.input.object_lock_enabled_for_bucket == Some(true) {
        // Object Lock needs object versions, which saker does not keep.
        return Err(S3Error::with_message(
            S3ErrorCode::NotImplemented,
            "buckets with Object Lock are not supported",
        ));
    }
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
        Ok(_) => {
            // A deleted bucket's settings are cleared with it; should that have failed, a
            // bucket of the same name must not inherit them.
            gw.settings.clear(&name).await.map_err(settings_error)?;
            Ok(S3Response::new(CreateBucketOutput {
                location: Some(format!("/{name}")),
            }))
        }
        // A single-tenant namespace: the bucket is the caller's; us-east-1 answers 200 then.
        Err(MetaError::Exists) => Ok(S3Response::new(CreateBucketOutput {
            location: Some(format!("/{name}")),
        })),
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
        .call(&path, MetaRequest::DeleteBucket { name: name.clone() })
        .await
        .map_err(error::meta)?;
    if let Err(e) = gw.settings.clear(&name).await {
        // The bucket is gone; its settings are cleared again when the name is taken anew.
        tracing::warn!(bucket = %name, error = %e, "settings of a deleted bucket not cleared");
    }
    Ok(S3Response::new(DeleteBucketOutput {}))
}

pub fn settings_error(e: saker_coordinator::JournalError) -> S3Error {
    tracing::warn!(error = %e, "bucket settings unavailable");
    S3Error::with_message(
        S3ErrorCode::ServiceUnavailable,
        "bucket settings are unavailable",
    )
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
    if let Some(token) = &req.input.continuation_token {
        buckets.retain(|b| b.name.as_deref().is_some_and(|n| n > token.as_str()));
    }
    let mut continuation_token = None;
    if let Some(max) = req.input.max_buckets {
        let max = max.clamp(1, 10_000) as usize;
        if buckets.len() > max {
            buckets.truncate(max);
            continuation_token = buckets.last().and_then(|b| b.name.clone());
        }
    }
    Ok(S3Response::new(ListBucketsOutput {
        buckets: Some(buckets),
        owner: Some(crate::list::owner(gw)),
        prefix: req.input.prefix,
        continuation_token,
    }))
}

/// The default ACL: the owner has full control, nobody else has anything.
pub fn owner_acl(gw: &Gateway) -> (Owner, Vec<Grant>) {
    let owner = crate::list::owner(gw);
    let grant = Grant {
        grantee: Some(Grantee {
            display_name: owner.display_name.clone(),
            email_address: None,
            id: owner.id.clone(),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    };
    (owner, vec![grant])
}

const GROUPS: [&str; 3] = [
    "http://acs.amazonaws.com/groups/global/AllUsers",
    "http://acs.amazonaws.com/groups/global/AuthenticatedUsers",
    "http://acs.amazonaws.com/groups/s3/LogDelivery",
];

/// A grantee must exist: a canonical user id is an access key, saker knows no e-mail
/// addresses, and the groups are S3's. `kind` is the header form's `id`, `emailAddress` or
/// `uri`.
fn check_grantee(gw: &Gateway, kind: &str, value: &str) -> S3Result<()> {
    match kind {
        "id" if gw.keys.get(value).is_some() => Ok(()),
        "id" => Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "Invalid id",
        )),
        "emailAddress" => Err(S3Error::with_message(
            S3ErrorCode::UnresolvableGrantByEmailAddress,
            "The e-mail address you provided does not match any account on record.",
        )),
        "uri" if GROUPS.contains(&value) => Ok(()),
        "uri" => Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "Invalid group uri",
        )),
        _ => Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            format!("grantee type {kind:?} is not one of id, emailAddress, uri"),
        )),
    }
}

/// The grantees of an `x-amz-grant-*` header: `id="…", emailAddress="…", uri="…"`.
fn check_grant_header(gw: &Gateway, h: &str) -> S3Result<()> {
    for g in h.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        let (kind, value) = g.split_once('=').ok_or_else(|| {
            S3Error::with_message(S3ErrorCode::InvalidArgument, "a grant is not key=\"value\"")
        })?;
        check_grantee(gw, kind.trim(), value.trim().trim_matches('"'))?;
    }
    Ok(())
}

/// Only the private ACL exists: granting anything to anyone else is not implemented. Grants
/// to grantees that do not exist are refused first, as S3 refuses them.
pub fn check_private_acl(
    canned: Option<&str>,
    grants: &[Option<&String>],
    policy: Option<&AccessControlPolicy>,
    gw: &Gateway,
) -> S3Result<()> {
    for h in grants.iter().flatten() {
        check_grant_header(gw, h)?;
    }
    if let Some(p) = policy {
        for e in p.grants.iter().flatten().filter_map(|g| g.grantee.as_ref()) {
            match e.type_.as_str() {
                Type::CANONICAL_USER => check_grantee(gw, "id", e.id.as_deref().unwrap_or(""))?,
                Type::AMAZON_CUSTOMER_BY_EMAIL => {
                    check_grantee(gw, "emailAddress", e.email_address.as_deref().unwrap_or(""))?
                }
                Type::GROUP => check_grantee(gw, "uri", e.uri.as_deref().unwrap_or(""))?,
                other => check_grantee(gw, other, "")?,
            }
        }
    }
    if canned.is_some_and(|c| c != "private") || grants.iter().any(|g| g.is_some()) {
        return Err(S3Error::with_message(
            S3ErrorCode::NotImplemented,
            "only the private ACL is supported",
        ));
    }
    if let Some(p) = policy {
        let owner = crate::list::owner(gw).id;
        let only_owner = p
            .grants
            .iter()
            .flatten()
            .all(|g| g.grantee.as_ref().is_some_and(|e| e.id == owner));
        if !only_owner {
            return Err(S3Error::with_message(
                S3ErrorCode::NotImplemented,
                "only the private ACL is supported",
            ));
        }
    }
    Ok(())
}

pub async fn get_bucket_acl(
    gw: &Gateway,
    req: S3Request<GetBucketAclInput>,
) -> S3Result<S3Response<GetBucketAclOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    let (owner, grants) = owner_acl(gw);
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
    bucket_exists(gw, &i.bucket).await?;
    let grants = [
        i.grant_full_control.as_ref(),
        i.grant_read.as_ref(),
        i.grant_read_acp.as_ref(),
        i.grant_write.as_ref(),
        i.grant_write_acp.as_ref(),
    ];
    check_private_acl(
        i.acl.as_ref().map(|a| a.as_str()),
        &grants,
        i.access_control_policy.as_ref(),
        gw,
    )?;
    Ok(S3Response::new(PutBucketAclOutput {}))
}

pub async fn get_bucket_versioning(
    gw: &Gateway,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    // Versioning has never been enabled on any saker bucket.
    Ok(S3Response::new(GetBucketVersioningOutput::default()))
}

pub async fn get_bucket_tagging(
    gw: &Gateway,
    req: S3Request<GetBucketTaggingInput>,
) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Err(S3Error::new(S3ErrorCode::NoSuchTagSet))
}

pub async fn get_bucket_cors(
    gw: &Gateway,
    req: S3Request<GetBucketCorsInput>,
) -> S3Result<S3Response<GetBucketCorsOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Err(S3Error::new(S3ErrorCode::NoSuchCORSConfiguration))
}
