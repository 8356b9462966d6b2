//! A bucket's storage classes by key prefix (`saker admin bucket storage-class`): objects
//! under a prefix are written as replicas, as any others, and erasure-coded afterwards by the
//! lifecycle passes, as a Days-0 transition of current and noncurrent versions to the class
//! would code them ([`ClassRule::as_lifecycle`]), or at once by `saker admin ec run`.
//!
//! The rules are a bucket setting of their own, beside (not inside) the S3 lifecycle
//! configuration, so a client's PutBucketLifecycleConfiguration neither shows nor replaces
//! them. Where both name a class for an object, the later transition wins (an object coded at
//! day 0 still moves to a remote tier at day 30).

use s3s::{s3_error, S3Result};

pub use crate::bucket::class_rules::ClassRule;
use crate::bucket::lookup::{settings, store};
use crate::bucket::settings::Setting;
use crate::http::error;
use crate::Gateway;

/// The storage-class rules of existing bucket `bucket` (none set: empty).
pub async fn get(gw: &Gateway, bucket: &str) -> S3Result<Vec<ClassRule>> {
    let s = settings(gw, bucket).await?;
    Ok(s.storage_class.as_deref().cloned().unwrap_or_default())
}

/// Keeps objects under `prefix` of `bucket` erasure-coded as `k`+`m` (replacing the rule of
/// the same prefix); refused when the cluster's chunkstores cannot hold that layout. Answers
/// the bucket's rules.
pub async fn set(
    gw: &Gateway,
    bucket: &str,
    prefix: &str,
    data: u8,
    parity: u8,
) -> S3Result<Vec<ClassRule>> {
    let class = saker_rpc::ec_class_name(data, parity);
    if let Err(why) = crate::object::tiering::coded_class(gw, &class) {
        return Err(s3_error!(
            InvalidStorageClass,
            "{}+{} cannot be kept here: {}",
            data,
            parity,
            why
        ));
    }
    let mut rules = get(gw, bucket).await?;
    rules.retain(|r| r.prefix != prefix);
    rules.push(ClassRule {
        prefix: prefix.to_string(),
        class,
    });
    rules.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    save(gw, bucket, &rules).await?;
    Ok(rules)
}

/// Drops the rule of `prefix` (every rule: `None`) of `bucket`; objects coded already stay
/// coded. Answers the rules left.
pub async fn clear(gw: &Gateway, bucket: &str, prefix: Option<&str>) -> S3Result<Vec<ClassRule>> {
    let mut rules = get(gw, bucket).await?;
    let before = rules.len();
    rules.retain(|r| prefix.is_some_and(|p| r.prefix != p));
    if rules.len() == before {
        let mut e = s3s::S3Error::with_message(
            s3s::S3ErrorCode::Custom("NoSuchStorageClassRule".into()),
            format!(
                "The bucket has no storage-class rule {}",
                prefix.map_or("at all".to_string(), |p| format!("for prefix {p:?}"))
            ),
        );
        e.set_status_code(http::StatusCode::NOT_FOUND);
        return Err(e);
    }
    save(gw, bucket, &rules).await?;
    Ok(rules)
}

async fn save(gw: &Gateway, bucket: &str, rules: &[ClassRule]) -> S3Result<()> {
    let value = match rules.is_empty() {
        true => None,
        false => Some(serde_json::to_vec(rules).map_err(error::internal)?),
    };
    store(gw, bucket, Setting::StorageClass, value).await
}
