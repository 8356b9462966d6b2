//! The buckets themselves: CreateBucket, DeleteBucket, HeadBucket, GetBucketLocation and
//! ListBuckets. A bucket is a top-level directory; its settings are [`crate::bucket::settings`].

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_namespace::validate_bucket_name;
use saker_rpc::{MetaError, MetaRequest};

use crate::bucket::lookup::{bucket_exists, settings_error};
use crate::bucket::owner::identity;
use crate::http::error;
use crate::keys::timestamp;
use crate::Gateway;

pub async fn create_bucket(
    gw: &Gateway,
    req: S3Request<CreateBucketInput>,
) -> S3Result<S3Response<CreateBucketOutput>> {
    let (uid, gid) = identity(gw, req.credentials.as_ref());
    let name = req.input.bucket.clone();
    validate_bucket_name(&name)
        .map_err(|e| S3Error::with_message(S3ErrorCode::InvalidBucketName, e.to_string()))?;
    let object_lock = req.input.object_lock_enabled_for_bucket == Some(true);
    let i = &req.input;
    let ownership = i
        .object_ownership
        .as_ref()
        .map(|o| crate::bucket::access::parse_ownership(o.as_str()))
        .transpose()?;
    let creator =
        crate::bucket::owner::account(gw, req.credentials.as_ref().map(|c| c.access_key.as_str()))
            .ok_or_else(|| s3s::s3_error!(AccessDenied, "a bucket is created by an access key"))?;
    let asked = crate::bucket::acl::acl_request!(i, None);
    let acl = crate::bucket::acl::requested(gw, &asked, &creator, &creator).await?;
    if let Some(acl) = &acl {
        // Refused before the bucket is made, as S3 does.
        let ownership = crate::bucket::acl::ownership(ownership);
        crate::bucket::acl::check_settable(&asked, acl, ownership, None, &creator)?;
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
            if creator != gw.keys.root_account() {
                // Between the create and this record the bucket looks like the root
                // account's: its creator is refused as another account for that moment.
                let value = Some(creator.clone().into_bytes());
                gw.settings
                    .put(&name, crate::bucket::settings::Setting::Owner, value)
                    .await
                    .map_err(settings_error)?;
            }
            if let Some(o) = ownership {
                let value = Some(o.to_string().into_bytes());
                gw.settings
                    .put(&name, crate::bucket::settings::Setting::Ownership, value)
                    .await
                    .map_err(settings_error)?;
            }
            if let Some(acl) = &acl {
                let s = gw.settings.get(&name).await.map_err(settings_error)?;
                crate::bucket::bucket_acl::set_bucket_acl(gw, &name, &asked, acl, &s).await?;
            }
            if object_lock {
                crate::bucket::lock::enable_at_create(gw, &name).await?;
            }
            Ok(S3Response::new(CreateBucketOutput {
                location: Some(format!("/{name}")),
            }))
        }
        // Its owner creating it again with the ACL it has gets 200, as us-east-1 answers;
        // anything else is another's bucket or a change the create cannot make.
        Err(MetaError::Exists) => {
            let s = gw.settings.get(&name).await.map_err(settings_error)?;
            let owner = crate::bucket::owner::of_bucket(gw, &s);
            let has = s
                .acl
                .clone()
                .unwrap_or_else(|| saker_policy::Acl::private(&owner));
            let wants = acl.unwrap_or_else(|| saker_policy::Acl::private(&creator));
            if owner != creator || has != wants {
                return Err(S3Error::new(S3ErrorCode::BucketAlreadyExists));
            }
            Ok(S3Response::new(CreateBucketOutput {
                location: Some(format!("/{name}")),
            }))
        }
        Err(e) => Err(error::meta(e)),
    }
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<S3Response<DeleteBucketOutput>> {
    let name = req.input.bucket;
    let path = vec![name.clone()];
    // The coordinator checks for objects and versions under the bucket's freeze.
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
    let ak = req.credentials.as_ref().map(|c| c.access_key.as_str());
    let account =
        crate::bucket::owner::account(gw, ak).ok_or_else(|| s3s::s3_error!(AccessDenied))?;
    // The root key lists every bucket; another key, its account's.
    let every = ak.is_some_and(|ak| gw.keys.with(ak, |k| k.root) == Some(true));
    let settings = if every {
        Vec::new()
    } else {
        gw.settings.all().await.map_err(settings_error)?
    };
    let owners: std::collections::HashMap<&str, &str> = settings
        .iter()
        .filter_map(|(b, s)| Some((b.as_str(), s.owner.as_deref()?)))
        .collect();
    let root = gw.keys.root_account();
    let owned = |name: &str| {
        every || owners.get(name).copied().unwrap_or(root.as_str()) == account.as_str()
    };
    let all = saker_client::buckets(&gw.cluster)
        .await
        .map_err(error::client)?;
    let mut buckets: Vec<Bucket> = all
        .into_iter()
        .filter(|e| e.name.starts_with(&prefix) && owned(&e.name))
        .map(|e| Bucket {
            creation_date: Some(timestamp(e.attr.ctime_ns.min(e.attr.s3_mtime_ns))),
            name: Some(e.name),
            bucket_region: None,
        })
        .collect();
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
        owner: Some(crate::bucket::owner::dto(gw, &account).await),
        prefix: req.input.prefix,
        continuation_token,
    }))
}
