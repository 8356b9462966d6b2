//! Object Lock. saker has no object versions, so no bucket has Object Lock enabled and no object
//! can be locked: the requests are validated as S3 validates them, then answered as S3 answers
//! for a bucket without Object Lock. Creating a bucket with Object Lock is NotImplemented.

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::bucket::bucket_exists;
use crate::Gateway;

fn no_lock_configuration() -> S3Error {
    s3_error!(
        InvalidRequest,
        "Bucket is missing Object Lock Configuration"
    )
}

fn valid_mode(mode: Option<&ObjectLockRetentionMode>) -> S3Result<()> {
    match mode.map(|m| m.as_str()) {
        Some(ObjectLockRetentionMode::GOVERNANCE | ObjectLockRetentionMode::COMPLIANCE) => Ok(()),
        _ => Err(s3_error!(
            MalformedXML,
            "The retention mode must be GOVERNANCE or COMPLIANCE"
        )),
    }
}

/// The checks S3 makes of an Object Lock configuration before it looks at the bucket.
pub fn validate_configuration(c: Option<&ObjectLockConfiguration>) -> S3Result<()> {
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
        return Ok(());
    };
    valid_mode(r.mode.as_ref())?;
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
    Ok(())
}

/// The x-amz-object-lock-* headers of a write are refused: the bucket cannot have Object Lock.
pub fn refuse_lock_headers(
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    legal_hold: Option<&ObjectLockLegalHoldStatus>,
) -> S3Result<()> {
    if mode.is_some() || until.is_some() || legal_hold.is_some() {
        return Err(no_lock_configuration());
    }
    Ok(())
}

pub async fn put_configuration(
    gw: &Gateway,
    req: S3Request<PutObjectLockConfigurationInput>,
) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
    let i = &req.input;
    bucket_exists(gw, &i.bucket).await?;
    validate_configuration(i.object_lock_configuration.as_ref())?;
    Err(s3_error!(
        InvalidBucketState,
        "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration"
    ))
}

pub async fn get_configuration(
    gw: &Gateway,
    req: S3Request<GetObjectLockConfigurationInput>,
) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Err(s3_error!(
        ObjectLockConfigurationNotFoundError,
        "Object Lock configuration does not exist for this bucket"
    ))
}

pub async fn put_retention(
    gw: &Gateway,
    req: S3Request<PutObjectRetentionInput>,
) -> S3Result<S3Response<PutObjectRetentionOutput>> {
    let i = &req.input;
    bucket_exists(gw, &i.bucket).await?;
    let Some(r) = &i.retention else {
        return Err(s3_error!(MalformedXML, "The request has no Retention"));
    };
    valid_mode(r.mode.as_ref())?;
    if r.retain_until_date.is_none() {
        return Err(s3_error!(
            MalformedXML,
            "The Retention has no RetainUntilDate"
        ));
    }
    Err(no_lock_configuration())
}

pub async fn get_retention(
    gw: &Gateway,
    req: S3Request<GetObjectRetentionInput>,
) -> S3Result<S3Response<GetObjectRetentionOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Err(no_lock_configuration())
}

pub async fn put_legal_hold(
    gw: &Gateway,
    req: S3Request<PutObjectLegalHoldInput>,
) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
    let i = &req.input;
    bucket_exists(gw, &i.bucket).await?;
    match i
        .legal_hold
        .as_ref()
        .and_then(|h| h.status.as_ref())
        .map(|s| s.as_str())
    {
        Some(ObjectLockLegalHoldStatus::ON | ObjectLockLegalHoldStatus::OFF) => {}
        _ => {
            return Err(s3_error!(
                MalformedXML,
                "The legal hold status must be ON or OFF"
            ))
        }
    }
    Err(no_lock_configuration())
}

pub async fn get_legal_hold(
    gw: &Gateway,
    req: S3Request<GetObjectLegalHoldInput>,
) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    Err(no_lock_configuration())
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

    fn code(r: S3Result<()>) -> String {
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
