//! SigV4 secret lookup against the access-key store.

use std::sync::Arc;

use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};
use saker_coordinator::AccessKeyStore;

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
        match self.keys.get(access_key) {
            Some(k) => Ok(SecretKey::from(k.secret_key)),
            None => Err(s3_error!(InvalidAccessKeyId)),
        }
    }
}
