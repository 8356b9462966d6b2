//! Remote archive tiers for tests: a second `saker server` on loopback is the tier.

use aws_sdk_s3::operation::restore_object::{RestoreObjectError, RestoreObjectOutput};
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, GlacierJobParameters, LifecycleRule,
    LifecycleRuleFilter, RestoreRequest, Tier, Transition, TransitionStorageClass,
};
use aws_sdk_s3::Client;

use super::{saker_bin, Server, ROOT_AK, ROOT_SK};

/// Defines tier `name` on `hot`: bucket `bucket` of `cold`, under `lake/`.
pub fn add_tier(
    hot: &Server,
    cold: &Server,
    name: &str,
    bucket: &str,
    secret: &str,
) -> std::process::Output {
    hot.admin_cmd(&[
        "tier",
        "add",
        name,
        "--endpoint",
        &cold.endpoint,
        "--bucket",
        bucket,
        "--prefix",
        "lake/",
        "--access-key",
        ROOT_AK,
        "--secret-key",
        secret,
    ])
}

/// Keys and sizes in the tier's bucket.
pub async fn remote_keys(cold: &Client, bucket: &str) -> Vec<(String, i64)> {
    let r = cold.list_objects_v2().bucket(bucket).send().await.unwrap();
    r.contents()
        .iter()
        .map(|o| (o.key().unwrap().to_string(), o.size().unwrap()))
        .collect()
}

/// The `saker archive` command against `hot`.
pub fn archive_cmd(hot: &Server, target: &str, extra: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(saker_bin());
    cmd.args([
        "archive",
        target,
        "--tier",
        "COLD",
        "--admin-endpoint",
        &hot.admin,
    ])
    .args(extra)
    .env("SAKER_ACCESS_KEY", ROOT_AK)
    .env("SAKER_SECRET_KEY", ROOT_SK)
    .stdin(std::process::Stdio::null());
    cmd
}

/// RestoreObject of `k` for `days` (the Standard retrieval tier).
pub async fn restore(
    c: &Client,
    b: &str,
    k: &str,
    days: i32,
) -> Result<RestoreObjectOutput, aws_sdk_s3::error::SdkError<RestoreObjectError>> {
    let job = GlacierJobParameters::builder()
        .tier(Tier::Standard)
        .build()
        .unwrap();
    let request = RestoreRequest::builder()
        .days(days)
        .glacier_job_parameters(job)
        .build();
    c.restore_object()
        .bucket(b)
        .key(k)
        .restore_request(request)
        .send()
        .await
}

/// A lifecycle rule moving `logs/` to storage class `class` (a tier, or an erasure-coding
/// class) `days` after creation; the S3 error's text if refused.
pub async fn transition_rule(c: &Client, b: &str, class: &str, days: i32) -> Result<(), String> {
    let rule = LifecycleRule::builder()
        .id("to-cold")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
        .transitions(
            Transition::builder()
                .days(days)
                .storage_class(TransitionStorageClass::from(class))
                .build(),
        )
        .build()
        .unwrap();
    put_rule(c, b, rule).await
}

/// PutBucketLifecycleConfiguration of the one rule `rule`; the S3 error's text if refused.
pub async fn put_rule(c: &Client, b: &str, rule: LifecycleRule) -> Result<(), String> {
    c.put_bucket_lifecycle_configuration()
        .bucket(b)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(rule)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .map(|_| ())
        .map_err(|e| format!("{:?}", e.into_service_error()))
}
