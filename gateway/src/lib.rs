//! The S3 front end: s3s does the wire protocol and SigV4; this crate implements its `S3` trait
//! by turning each request into full-path operations through `saker-client`.
//!
//! One module per resource family (bucket, put, get, copy, delete, list, multipart, tagging);
//! the `impl S3` in [`service`] stays thin and delegates. S3 error codes are mapped in one
//! place, [`error`].

mod attributes;
mod auth;
mod body;
mod bucket;
mod checksum;
mod copy;
mod delete;
pub mod error;
mod get;
mod keys;
mod list;
mod lock;
pub mod metrics;
mod multipart;
mod put;
mod route;
mod service;
mod tagging;

use std::sync::Arc;

use saker_client::Cluster;
use saker_coordinator::AccessKeyStore;

pub use auth::KeyAuth;

/// The gateway state shared by all requests.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) keys: Arc<AccessKeyStore>,
}

impl Gateway {
    pub fn new(cluster: Arc<Cluster>, keys: Arc<AccessKeyStore>) -> Self {
        Self { cluster, keys }
    }

    /// The s3s service: SigV4 against the access-key store, anonymous requests refused
    /// ([`auth::Access`]), path-style addressing, and virtual-hosted style under `domain` when
    /// given; [`route`] answers what s3s would put on the wire differently from S3.
    pub fn into_service(self, domain: Option<&str>) -> Result<s3s::service::S3Service, String> {
        let auth = KeyAuth::new(self.keys.clone());
        let host = || {
            domain
                .map(|d| s3s::host::SingleDomain::new(d).map_err(|e| e.to_string()))
                .transpose()
        };
        let routes = route::Routes::new(self.clone(), host()?);
        let access = auth::Access::new(self.clone());
        let mut builder = s3s::service::S3ServiceBuilder::new(self);
        builder.set_auth(auth);
        builder.set_access(access);
        builder.set_route(routes);
        if let Some(h) = host()? {
            builder.set_host(h);
        }
        Ok(builder.build())
    }
}
