//! SigV4 secret lookup against the access-key store, and the access check.

use std::sync::Arc;

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::path::S3Path;
use s3s::{s3_error, S3Result};
use saker_coordinator::AccessKeyStore;

use crate::Gateway;

pub struct KeyAuth {
    keys: Arc<AccessKeyStore>,
}

impl KeyAuth {
    pub fn new(keys: Arc<AccessKeyStore>) -> Self {
        Self { keys }
    }
}

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.keys.lookup(access_key).await {
            Some(k) => Ok(SecretKey::from(k.secret_key)),
            None => Err(s3_error!(InvalidAccessKeyId)),
        }
    }
}

/// Who may do what: every signed request with a known key may do everything; nothing is
/// public, so an anonymous request is AccessDenied, except that, as in S3, a bucket that does
/// not exist is NoSuchBucket to anyone.
pub struct Access {
    gw: Gateway,
}

impl Access {
    pub fn new(gw: Gateway) -> Self {
        Self { gw }
    }
}

/// The answer to an anonymous request for `path`: NoSuchBucket or AccessDenied.
pub async fn refuse_anonymous(gw: &Gateway, path: &S3Path) -> S3Result<()> {
    if let Some(bucket) = path.get_bucket_name() {
        crate::bucket::bucket_exists(gw, bucket).await?;
    }
    Err(s3_error!(AccessDenied, "Anonymous access is not allowed"))
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        if cx.credentials().is_some() {
            return Ok(());
        }
        refuse_anonymous(&self.gw, cx.s3_path()).await
    }
}
