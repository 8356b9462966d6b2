//! S3 lifecycle: a bucket's rules (a bucket setting, Put/Get/DeleteBucketLifecycleConfiguration)
//! and the passes that apply them ([`worker`]): expiration of current objects by age or date,
//! of noncurrent versions (keeping the newest N), of delete markers left alone, and aborts of
//! stale multipart uploads. A pass runs once per cluster (the binary schedules it with the
//! active coordinator, or on `saker admin lifecycle run`); its "day" is configurable so tests
//! can age objects in seconds. PUT, GET and HEAD answer `x-amz-expiration` for an object a
//! rule will expire (in real days, as S3 and RGW announce it).

mod cursor;
mod rules;
mod worker;

use std::time::Duration;

use parking_lot::Mutex;
use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use crate::bucket::lookup::bucket_exists;
use crate::bucket::lookup::{settings, store};
use crate::bucket::settings::Setting;
use crate::http::error;
use crate::Gateway;

pub use cursor::Cursor;
pub use rules::Rule;
pub use worker::Summary;

const DAY: Duration = Duration::from_secs(86_400);

/// The lifecycle state of a gateway: how long a day is, a pass's pace, and the last pass.
#[derive(Debug)]
pub struct Lifecycle {
    day: Duration,
    /// Items a pass looks at per second (0: unpaced).
    rate: u64,
    last: Mutex<Option<(i64, Summary)>>,
    running: tokio::sync::Mutex<()>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::new(DAY, 0)
    }
}

impl Lifecycle {
    pub fn new(day: Duration, rate: u64) -> Self {
        Self {
            day: if day.is_zero() { DAY } else { day },
            rate,
            last: Mutex::new(None),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// How long a lifecycle day is.
    pub fn day(&self) -> Duration {
        self.day
    }

    fn day_ns(&self) -> i64 {
        i64::try_from(self.day.as_nanos()).unwrap_or(i64::MAX)
    }
}

impl Gateway {
    /// Runs one lifecycle pass now over every bucket with rules, or only `bucket` (one pass
    /// at a time; a second caller waits for the first). Answers what it did.
    pub async fn lifecycle_pass(&self, bucket: Option<&str>) -> Result<Summary, String> {
        let _one = self.lifecycle.running.lock().await;
        let started = crate::keys::now_ns();
        let (day_ns, rate) = (self.lifecycle.day_ns(), self.lifecycle.rate);
        let sum = worker::pass(self, bucket, started, day_ns, rate).await?;
        crate::metrics::record_lifecycle(&sum);
        *self.lifecycle.last.lock() = Some((started, sum.clone()));
        Ok(sum)
    }

    /// When the last pass started (ns since the epoch) and what it did.
    pub fn lifecycle_status(&self) -> Option<(i64, Summary)> {
        self.lifecycle.last.lock().clone()
    }

    /// Where a pass cut short stopped (a pass over every bucket resumes there).
    pub async fn lifecycle_cursor(&self) -> Option<cursor::Cursor> {
        cursor::load(&self.state).await
    }

    /// How long a lifecycle day is here.
    pub fn lifecycle_day(&self) -> Duration {
        self.lifecycle.day()
    }
}

/// The buckets with rules (only `only` if given), with their rules.
async fn configured(gw: &Gateway, only: Option<&str>) -> Result<Vec<(String, Vec<Rule>)>, String> {
    let all = gw
        .settings
        .all()
        .await
        .map_err(|e| format!("bucket settings: {e}"))?;
    Ok(all
        .into_iter()
        .filter(|(b, _)| only.is_none_or(|o| o == b))
        .filter_map(|(b, s)| s.lifecycle.as_ref().map(|r| (b, r.to_vec())))
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

/// The `x-amz-expiration` of a current object (`expiry-date="…", rule-id="…"`): the earliest
/// expiration any enabled rule gives it.
pub fn expiration_header(
    s: &crate::bucket::settings::Bucket,
    key: &str,
    attr: &saker_rpc::Attr,
    tags: &[(String, String)],
) -> Option<String> {
    let rules = s.lifecycle.as_ref()?;
    let facts = rules::ObjectFacts {
        key,
        size: attr.size,
        tags,
    };
    // Always in real days rounded up to the next midnight UTC, as S3 (and RGW, whatever
    // its lc_debug_interval) announce it.
    let day = DAY.as_nanos() as i64;
    let first = rules
        .iter()
        .filter(|r| r.enabled && r.filter.matches(&facts))
        .filter_map(|r| r.expires_at(attr.s3_mtime_ns, day).map(|t| (t, &r.id)))
        .min();
    let (at, id) = first?;
    let at = at
        .saturating_add(day - 1)
        .div_euclid(day)
        .saturating_mul(day);
    let date = crate::keys::format_http_date(&crate::keys::timestamp(at)).unwrap_or_default();
    Some(format!("expiry-date=\"{date}\", rule-id=\"{id}\""))
}
