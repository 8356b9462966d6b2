//! A bucket's default encryption: Put/Get/DeleteBucketEncryption, a write setting (SSE-S3,
//! or SSE-KMS with a key of this cluster's, [`crate::object::sse`]).

use s3s::dto::*;
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use crate::bucket::lookup::{bucket_exists, settings, store};
use crate::bucket::settings::Setting;
use crate::object::sse::{kms_key, master, parse_default, AES256};
use crate::Gateway;

pub async fn put_bucket(
    gw: &Gateway,
    req: S3Request<PutBucketEncryptionInput>,
) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let rules = input.server_side_encryption_configuration.rules;
    let [rule] = &rules[..] else {
        return Err(s3_error!(
            MalformedXML,
            "an encryption configuration has exactly one rule"
        ));
    };
    let Some(default) = &rule.apply_server_side_encryption_by_default else {
        return Err(s3_error!(
            MalformedXML,
            "the rule has no ApplyServerSideEncryptionByDefault"
        ));
    };
    let value = match default.sse_algorithm.as_str() {
        AES256 => {
            master(gw)?;
            AES256.to_string()
        }
        ServerSideEncryption::AWS_KMS => {
            let (_, id) = kms_key(gw, default.kms_master_key_id.as_deref())?;
            format!("{} {id}", ServerSideEncryption::AWS_KMS)
        }
        _ => return Err(s3_error!(MalformedXML, "unknown SSEAlgorithm")),
    };
    let value = value.into_bytes();
    store(gw, &input.bucket, Setting::Encryption, Some(value)).await?;
    Ok(S3Response::new(PutBucketEncryptionOutput::default()))
}

pub async fn get_bucket(
    gw: &Gateway,
    req: S3Request<GetBucketEncryptionInput>,
) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let Some(text) = &s.encryption else {
        return Err(S3Error::new(
            S3ErrorCode::ServerSideEncryptionConfigurationNotFoundError,
        ));
    };
    let (algorithm, kms_key_id) = parse_default(text);
    let rule = ServerSideEncryptionRule {
        apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
            kms_master_key_id: kms_key_id.map(str::to_string),
            sse_algorithm: ServerSideEncryption::from(algorithm.to_string()),
        }),
        bucket_key_enabled: Some(false),
    };
    Ok(S3Response::new(GetBucketEncryptionOutput {
        server_side_encryption_configuration: Some(ServerSideEncryptionConfiguration {
            rules: vec![rule],
        }),
    }))
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketEncryptionInput>,
) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::Encryption, None).await?;
    Ok(S3Response::new(DeleteBucketEncryptionOutput::default()))
}
