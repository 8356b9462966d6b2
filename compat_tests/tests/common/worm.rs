//! Object Lock buckets and configurations the tests make.

use aws_sdk_s3::types::{
    DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockRetentionMode,
    ObjectLockRule,
};
use aws_sdk_s3::Client;

/// Object Lock with a default retention of one day in governance mode.
pub fn a_day_of_governance() -> ObjectLockConfiguration {
    let one_day = DefaultRetention::builder()
        .mode(ObjectLockRetentionMode::Governance)
        .days(1)
        .build();
    ObjectLockConfiguration::builder()
        .object_lock_enabled(ObjectLockEnabled::Enabled)
        .rule(ObjectLockRule::builder().default_retention(one_day).build())
        .build()
}

/// Object Lock without a default retention.
pub fn no_default() -> ObjectLockConfiguration {
    ObjectLockConfiguration::builder()
        .object_lock_enabled(ObjectLockEnabled::Enabled)
        .build()
}

/// Makes bucket `b` with Object Lock, and `conf` its configuration.
pub async fn locked_bucket(c: &Client, b: &str, conf: ObjectLockConfiguration) {
    c.create_bucket()
        .bucket(b)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .expect("create a bucket with Object Lock");
    put_lock_config(c, b, conf).await;
}

/// Puts `conf` as `b`'s Object Lock configuration.
pub async fn put_lock_config(c: &Client, b: &str, conf: ObjectLockConfiguration) {
    c.put_object_lock_configuration()
        .bucket(b)
        .object_lock_configuration(conf)
        .send()
        .await
        .expect("put the Object Lock configuration");
}
