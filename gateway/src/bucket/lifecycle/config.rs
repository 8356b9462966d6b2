//! The lifecycle configuration on the S3 API: Put/Get/DeleteBucketLifecycleConfiguration
//! (a bucket setting), and the buckets a pass looks at.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::rules::{self, Rule};
use crate::bucket::lookup::{bucket_exists, settings, store};
use crate::bucket::settings::Setting;
use crate::http::error;
use crate::Gateway;

/// Which rules a pass applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The buckets' lifecycle rules and their storage classes.
    All,
    /// Only the storage classes (`saker admin ec run`).
    Coding,
}

/// The buckets with rules (only `only` if given), with their rules: the lifecycle
/// configuration's (with [`Scope::All`]), then a rule for each storage class
/// ([`crate::bucket::storage_class`]).
pub(super) async fn configured(
    gw: &Gateway,
    only: Option<&str>,
    scope: Scope,
) -> Result<Vec<(String, Vec<Rule>)>, String> {
    let all = gw
        .settings
        .all()
        .await
        .map_err(|e| format!("bucket settings: {e}"))?;
    Ok(all
        .into_iter()
        .filter(|(b, _)| only.is_none_or(|o| o == b))
        .filter_map(|(b, s)| {
            let lifecycle = s.lifecycle.as_deref().filter(|_| scope == Scope::All);
            let classes = s.storage_class.as_deref();
            let rules: Vec<Rule> = lifecycle
                .into_iter()
                .flatten()
                .cloned()
                .chain(classes.into_iter().flatten().map(|c| c.as_lifecycle()))
                .collect();
            (!rules.is_empty()).then_some((b, rules))
        })
        .collect())
}

pub async fn put_configuration(
    gw: &Gateway,
    req: S3Request<PutBucketLifecycleConfigurationInput>,
) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
    let i = &req.input;
    bucket_exists(gw, &i.bucket).await?;
    let Some(c) = &i.lifecycle_configuration else {
        return Err(s3_error!(
            MalformedXML,
            "The request has no LifecycleConfiguration"
        ));
    };
    let rules = rules::parse(c)?;
    for tier in rules.iter().flat_map(Rule::tiers) {
        match crate::object::tiering::coded_class(gw, tier) {
            Ok(Some(_)) => continue,
            Ok(None) => {}
            Err(why) => {
                return Err(s3_error!(
                    InvalidStorageClass,
                    "The storage class {} cannot be kept here: {}",
                    tier,
                    why
                ))
            }
        }
        match saker_tier::config::get(&gw.state, tier).await {
            Ok(_) => {}
            Err(saker_tier::TierError::NoSuchTier(_)) => {
                return Err(s3_error!(
                    InvalidStorageClass,
                    "The storage class {} names no tier here (saker admin tier list)",
                    tier
                ))
            }
            Err(e) => return Err(error::internal(e)),
        }
    }
    let value = serde_json::to_vec(&rules).map_err(error::internal)?;
    store(gw, &i.bucket, Setting::Lifecycle, Some(value)).await?;
    Ok(S3Response::new(
        PutBucketLifecycleConfigurationOutput::default(),
    ))
}

pub async fn get_configuration(
    gw: &Gateway,
    req: S3Request<GetBucketLifecycleConfigurationInput>,
) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let Some(rules) = &s.lifecycle else {
        return Err(s3_error!(
            NoSuchLifecycleConfiguration,
            "The lifecycle configuration does not exist"
        ));
    };
    Ok(S3Response::new(GetBucketLifecycleConfigurationOutput {
        rules: Some(rules::to_dto(rules)),
        ..Default::default()
    }))
}

pub async fn delete_configuration(
    gw: &Gateway,
    req: S3Request<DeleteBucketLifecycleInput>,
) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::Lifecycle, None).await?;
    Ok(S3Response::new(DeleteBucketLifecycleOutput::default()))
}
