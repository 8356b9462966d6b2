//! Object Lock on the S3 API: a bucket's configuration (a bucket setting: enabled, and a
//! default retention), the lock a write gives its version (headers, else the default), and
//! Put/Get of a version's retention and legal hold. The MNode keeps each version's lock and
//! enforces it in the batch ([`saker_rpc::ObjectLock`]); a bucket with Object Lock keeps
//! versions for good.

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_rpc::{
    DefaultLock, LockConfig, LockMode, MetaRequest, ObjectLock, ObjectView, Retention, Versioning,
    Want,
};

use crate::bucket::lookup::bucket_exists;
use crate::bucket::lookup::{copy_of, settings, store};
use crate::bucket::settings::Bucket;
use crate::bucket::settings::Setting;
use crate::http::error;
use crate::keys::{now_ns, timestamp, timestamp_ns, write_key};
use crate::Gateway;

fn no_lock_configuration() -> S3Error {
    s3_error!(
        InvalidRequest,
        "Bucket is missing Object Lock Configuration"
    )
}

fn mode_of(m: &str) -> Option<LockMode> {
    match m {
        ObjectLockRetentionMode::GOVERNANCE => Some(LockMode::Governance),
        ObjectLockRetentionMode::COMPLIANCE => Some(LockMode::Compliance),
        _ => None,
    }
}

fn mode_name(m: LockMode) -> &'static str {
    match m {
        LockMode::Governance => ObjectLockRetentionMode::GOVERNANCE,
        LockMode::Compliance => ObjectLockRetentionMode::COMPLIANCE,
    }
}

fn valid_mode(mode: Option<&ObjectLockRetentionMode>) -> S3Result<LockMode> {
    mode.and_then(|m| mode_of(m.as_str())).ok_or_else(|| {
        s3_error!(
            MalformedXML,
            "The retention mode must be GOVERNANCE or COMPLIANCE"
        )
    })
}

/// The checks S3 makes of an Object Lock configuration before it looks at the bucket; its
/// default retention.
pub fn validate_configuration(c: Option<&ObjectLockConfiguration>) -> S3Result<LockConfig> {
    let Some(c) = c else {
        return Err(s3_error!(
            MalformedXML,
            "The request has no ObjectLockConfiguration"
        ));
    };
    if c.object_lock_enabled.as_ref().map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED) {
        return Err(s3_error!(MalformedXML, "ObjectLockEnabled must be Enabled"));
    }
    let Some(r) = c.rule.as_ref().and_then(|r| r.default_retention.as_ref()) else {
        return Ok(LockConfig::default());
    };
    let mode = valid_mode(r.mode.as_ref())?;
    let period = match (r.days, r.years) {
        (Some(d), None) => d,
        (None, Some(y)) => y,
        _ => {
            return Err(s3_error!(
                MalformedXML,
                "A default retention needs either Days or Years"
            ))
        }
    };
    if period <= 0 {
        let mut e = S3Error::with_message(
            S3ErrorCode::Custom("InvalidRetentionPeriod".into()),
            "The default retention period must be a positive integer",
        );
        e.set_status_code(http::StatusCode::BAD_REQUEST);
        return Err(e);
    }
    Ok(LockConfig {
        default: Some(DefaultLock {
            mode,
            days: r.days,
            years: r.years,
        }),
    })
}

/// Enables Object Lock on a bucket being created with it: versioning on, for good.
pub async fn enable_at_create(gw: &Gateway, bucket: &str) -> S3Result<()> {
    store(gw, bucket, Setting::Versioning, Some(b"Enabled".to_vec())).await?;
    let config = serde_json::to_vec(&LockConfig::default()).map_err(error::internal)?;
    store(gw, bucket, Setting::ObjectLock, Some(config)).await
}

/// The lock a write to a bucket with settings `s` gives its new version: from the write's
/// `x-amz-object-lock-*` headers, else the bucket's default retention. Headers on a bucket
/// without Object Lock are refused.
pub fn for_write(
    s: &Bucket,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    legal_hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<Option<ObjectLock>> {
    let Some(config) = &s.object_lock else {
        if mode.is_some() || until.is_some() || legal_hold.is_some() {
            return Err(no_lock_configuration());
        }
        return Ok(None);
    };
    let now = now_ns();
    let retention = match (mode, until) {
        (Some(m), Some(u)) => {
            let mode = mode_of(m.as_str())
                .ok_or_else(|| s3_error!(InvalidArgument, "Unknown wormMode directive."))?;
            let until_ns = timestamp_ns(u);
            if until_ns <= now {
                return Err(s3_error!(
                    InvalidArgument,
                    "The retain until date must be in the future!"
                ));
            }
            Some(Retention { mode, until_ns })
        }
        (None, None) => config.default.as_ref().map(|d| d.retention(now)),
        _ => {
            return Err(s3_error!(
            InvalidArgument,
            "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied"
        ))
        }
    };
    let legal_hold = match legal_hold.map(|h| h.as_str()) {
        None | Some(ObjectLockLegalHoldStatus::OFF) => false,
        Some(ObjectLockLegalHoldStatus::ON) => true,
        Some(_) => {
            return Err(s3_error!(
                InvalidArgument,
                "Legal Hold must be either of 'ON' or 'OFF'"
            ))
        }
    };
    let lock = ObjectLock {
        retention,
        legal_hold,
    };
    Ok((!lock.is_empty()).then_some(lock))
}

/// The `x-amz-object-lock-*` headers of a GET or HEAD of `view`.
pub fn shown(
    view: &ObjectView,
) -> (
    Option<ObjectLockMode>,
    Option<Timestamp>,
    Option<ObjectLockLegalHoldStatus>,
) {
    let Some(lock) = &view.lock else {
        return (None, None, None);
    };
    let (mode, until) = match lock.retention {
        Some(r) => (
            Some(ObjectLockMode::from_static(mode_name(r.mode))),
            Some(timestamp(r.until_ns)),
        ),
        None => (None, None),
    };
    let hold = ObjectLockLegalHoldStatus::from_static(if lock.legal_hold {
        ObjectLockLegalHoldStatus::ON
    } else {
        ObjectLockLegalHoldStatus::OFF
    });
    (mode, until, Some(hold))
}

/// Whether the caller asked to bypass governance retention and may ([`crate::auth`] decides
/// it with the request's access check).
pub fn bypass<T>(req: &S3Request<T>) -> bool {
    req.extensions
        .get::<crate::auth::BypassGovernance>()
        .is_some_and(|b| b.0)
}

pub async fn put_configuration(
    gw: &Gateway,
    req: S3Request<PutObjectLockConfigurationInput>,
) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
    let i = &req.input;
    bucket_exists(gw, &i.bucket).await?;
    let config = validate_configuration(i.object_lock_configuration.as_ref())?;
    let s = copy_of(gw, &i.bucket).await?;
    if s.object_lock.is_none() && s.versioning != Versioning::Enabled {
        return Err(s3_error!(
            InvalidBucketState,
            "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"
        ));
    }
    let value = serde_json::to_vec(&config).map_err(error::internal)?;
    store(gw, &i.bucket, Setting::ObjectLock, Some(value)).await?;
    Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
}

pub async fn get_configuration(
    gw: &Gateway,
    req: S3Request<GetObjectLockConfigurationInput>,
) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let Some(config) = &s.object_lock else {
        return Err(s3_error!(
            ObjectLockConfigurationNotFoundError,
            "Object Lock configuration does not exist for this bucket"
        ));
    };
    let rule = config.default.as_ref().map(|d| ObjectLockRule {
        default_retention: Some(DefaultRetention {
            mode: Some(ObjectLockRetentionMode::from_static(mode_name(d.mode))),
            days: d.days,
            years: d.years,
        }),
    });
    Ok(S3Response::new(GetObjectLockConfigurationOutput {
        object_lock_configuration: Some(ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
            rule,
        }),
    }))
}

/// Refuses a request about a version's lock in a bucket without Object Lock.
async fn lock_bucket(gw: &Gateway, bucket: &str) -> S3Result<()> {
    match settings(gw, bucket).await?.object_lock {
        Some(_) => Ok(()),
        None => Err(no_lock_configuration()),
    }
}

/// Changes the lock of `key` (its version `version_id`) in the MNode that holds it.
async fn set(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    version_id: Option<&str>,
    retention: Option<Retention>,
    legal_hold: Option<bool>,
    bypass: bool,
) -> S3Result<()> {
    let kp = write_key(bucket, key)?;
    let req = MetaRequest::SetObjectLock {
        path: kp.path.clone(),
        version_id: version_id.map(str::to_string),
        retention,
        legal_hold,
        bypass_governance: bypass,
    };
    gw.cluster
        .call(&kp.path, req)
        .await
        .map(|_| ())
        .map_err(error::meta)
}

/// The lock of `key` (its version `version_id`).
async fn get(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    version_id: Option<&str>,
) -> S3Result<ObjectLock> {
    let want = Want::ATTR.with_lock(true);
    let view = crate::object::lookup::lookup(gw, bucket, key, version_id, want).await?;
    Ok(view.lock.unwrap_or_default())
}

pub async fn put_retention(
    gw: &Gateway,
    req: S3Request<PutObjectRetentionInput>,
) -> S3Result<S3Response<PutObjectRetentionOutput>> {
    let bypass = bypass(&req);
    let i = &req.input;
    lock_bucket(gw, &i.bucket).await?;
    let Some(r) = &i.retention else {
        return Err(s3_error!(MalformedXML, "The request has no Retention"));
    };
    let mode = valid_mode(r.mode.as_ref())?;
    let Some(until) = &r.retain_until_date else {
        return Err(s3_error!(
            MalformedXML,
            "The Retention has no RetainUntilDate"
        ));
    };
    let retention = Retention {
        mode,
        until_ns: timestamp_ns(until),
    };
    let vid = i.version_id.as_deref();
    set(gw, &i.bucket, &i.key, vid, Some(retention), None, bypass).await?;
    Ok(S3Response::new(PutObjectRetentionOutput::default()))
}

pub async fn get_retention(
    gw: &Gateway,
    req: S3Request<GetObjectRetentionInput>,
) -> S3Result<S3Response<GetObjectRetentionOutput>> {
    let i = &req.input;
    lock_bucket(gw, &i.bucket).await?;
    let lock = get(gw, &i.bucket, &i.key, i.version_id.as_deref()).await?;
    let Some(r) = lock.retention else {
        return Err(s3_error!(
            NoSuchObjectLockConfiguration,
            "The specified object does not have a ObjectLock configuration"
        ));
    };
    Ok(S3Response::new(GetObjectRetentionOutput {
        retention: Some(ObjectLockRetention {
            mode: Some(ObjectLockRetentionMode::from_static(mode_name(r.mode))),
            retain_until_date: Some(timestamp(r.until_ns)),
        }),
    }))
}

pub async fn put_legal_hold(
    gw: &Gateway,
    req: S3Request<PutObjectLegalHoldInput>,
) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
    let i = &req.input;
    lock_bucket(gw, &i.bucket).await?;
    let on = match i
        .legal_hold
        .as_ref()
        .and_then(|h| h.status.as_ref())
        .map(|s| s.as_str())
    {
        Some(ObjectLockLegalHoldStatus::ON) => true,
        Some(ObjectLockLegalHoldStatus::OFF) => false,
        _ => {
            return Err(s3_error!(
                MalformedXML,
                "The legal hold status must be ON or OFF"
            ))
        }
    };
    let vid = i.version_id.as_deref();
    set(gw, &i.bucket, &i.key, vid, None, Some(on), false).await?;
    Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
}

pub async fn get_legal_hold(
    gw: &Gateway,
    req: S3Request<GetObjectLegalHoldInput>,
) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
    let i = &req.input;
    lock_bucket(gw, &i.bucket).await?;
    let lock = get(gw, &i.bucket, &i.key, i.version_id.as_deref()).await?;
    let status = if lock.legal_hold {
        ObjectLockLegalHoldStatus::ON
    } else {
        ObjectLockLegalHoldStatus::OFF
    };
    Ok(S3Response::new(GetObjectLegalHoldOutput {
        legal_hold: Some(ObjectLockLegalHold {
            status: Some(ObjectLockLegalHoldStatus::from_static(status)),
        }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(
        enabled: &str,
        mode: Option<&str>,
        days: Option<i32>,
        years: Option<i32>,
    ) -> ObjectLockConfiguration {
        ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from(enabled.to_string())),
            rule: mode.map(|m| ObjectLockRule {
                default_retention: Some(DefaultRetention {
                    mode: Some(ObjectLockRetentionMode::from(m.to_string())),
                    days,
                    years,
                }),
            }),
        }
    }

    fn code<T: std::fmt::Debug>(r: S3Result<T>) -> String {
        r.expect_err("must be refused").code().as_str().to_string()
    }

    #[test]
    fn configurations() {
        assert!(validate_configuration(Some(&conf("Enabled", None, None, None))).is_ok());
        assert!(
            validate_configuration(Some(&conf("Enabled", Some("GOVERNANCE"), Some(1), None)))
                .is_ok()
        );
        assert!(
            validate_configuration(Some(&conf("Enabled", Some("COMPLIANCE"), None, Some(1))))
                .is_ok()
        );
        let bad = [
            (
                conf("Disabled", Some("GOVERNANCE"), None, Some(1)),
                "MalformedXML",
            ),
            (
                conf("Enabled", Some("governance"), None, Some(1)),
                "MalformedXML",
            ),
            (conf("Enabled", Some("abc"), None, Some(1)), "MalformedXML"),
            (
                conf("Enabled", Some("GOVERNANCE"), Some(1), Some(1)),
                "MalformedXML",
            ),
            (
                conf("Enabled", Some("GOVERNANCE"), None, None),
                "MalformedXML",
            ),
            (
                conf("Enabled", Some("GOVERNANCE"), Some(0), None),
                "InvalidRetentionPeriod",
            ),
            (
                conf("Enabled", Some("GOVERNANCE"), None, Some(-1)),
                "InvalidRetentionPeriod",
            ),
        ];
        for (c, want) in bad {
            assert_eq!(code(validate_configuration(Some(&c))), want, "{c:?}");
        }
        assert_eq!(code(validate_configuration(None)), "MalformedXML");
    }
}
