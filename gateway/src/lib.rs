//! The S3 front end: s3s does the wire protocol and SigV4; this crate implements its `S3` trait
//! by turning each request into full-path operations through `saker-client`.
//!
//! One folder per resource family, as Garage lays its API out: [`object`] (put, get, copy,
//! delete, attributes, tagging, with one shared write sequence), [`multipart`], [`bucket`]
//! (the buckets, their settings, ACLs, CORS, Object Lock, versioning, lifecycle) and [`list`];
//! [`http`] holds what every request shares (routing, errors, checksums, bodies, limits).
//! The `impl S3` in [`service`] stays thin and delegates. S3 error codes are mapped in one
//! place, [`http::error`].

pub mod archive;
mod auth;
pub mod bucket;
pub mod http;
mod keys;
mod list;
pub mod metrics;
mod multipart;
mod object;
mod service;

use std::sync::Arc;

use bucket::cors;
use bucket::lifecycle;
use bucket::settings::BucketSettings;
use http::{limits, request_log, route, scope_region};
use saker_client::Cluster;
use saker_coordinator::{AccessKeyStore, GroupState};

pub use auth::KeyAuth;

/// The connection a request came on, put in its extensions by the listener: the policy
/// conditions `aws:SourceIp` and `aws:SecureTransport` are taken from it.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub addr: std::net::SocketAddr,
    /// Whether the connection is TLS.
    pub secure: bool,
}

/// The gateway state shared by all requests.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) keys: Arc<AccessKeyStore>,
    pub(crate) settings: Arc<BucketSettings>,
    pub(crate) limits: Arc<limits::KeyLimits>,
    pub(crate) lifecycle: Arc<lifecycle::Lifecycle>,
    /// The coordinator's replicated records (bucket settings, the lifecycle cursor).
    pub(crate) state: Arc<dyn saker_coordinator::StateStore>,
    /// The remote archive tiers (reads of tiered objects go through them too).
    pub(crate) tiers: Arc<saker_tier::Tiers>,
}

/// The S3 listener's handlers: see [`Gateway::into_front`].
#[derive(Clone)]
pub struct Front {
    /// The s3s service, each failed request logged once ([`request_log`]).
    pub s3: request_log::Logged,
    pub cors: Arc<cors::Cors>,
    keys: Arc<AccessKeyStore>,
}

impl Front {
    /// What a request needs before s3s takes it: a SigV4 scope whose region has upper-case
    /// letters (s3cmd's `US`) is signed again in lower case once its signature is checked
    /// ([`scope_region`]).
    pub async fn prepare<B>(&self, req: &mut ::http::Request<B>) {
        scope_region::lower_region(&self.keys, req).await;
    }
}

impl Gateway {
    /// A gateway over `cluster`. The buckets' access settings are records of the
    /// coordinator's state in the cluster's first group; within a Tokio runtime, this
    /// gateway's copy of them is refreshed in the background.
    pub fn new(cluster: Arc<Cluster>, keys: Arc<AccessKeyStore>) -> Self {
        let first = cluster
            .groups()
            .next()
            .map(|(_, g)| g.clone())
            .expect("a cluster has a group");
        let state: Arc<dyn saker_coordinator::StateStore> = Arc::new(GroupState::new(first, 0));
        let groups = cluster.groups().map(|(g, s)| (*g, s.clone())).collect();
        let settings = Arc::new(BucketSettings::new(state.clone()).publishing(groups));
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(settings.clone().follow());
        }
        let tiers = saker_tier::Tiers::new(state.clone(), saker_tier::cache::Cache::none());
        cluster.set_tier_reader(tiers.clone());
        Self {
            cluster,
            keys,
            settings,
            limits: Arc::default(),
            lifecycle: Arc::default(),
            state,
            tiers,
        }
    }

    /// Tiered objects read through a local cache (`--tier-cache-size`) of at most `bytes`
    /// in `dir`.
    pub fn with_tier_cache(mut self, dir: std::path::PathBuf, bytes: u64) -> std::io::Result<Self> {
        let cache = saker_tier::cache::Cache::new(dir, bytes)?;
        self.tiers = saker_tier::Tiers::new(self.state.clone(), cache);
        self.cluster.set_tier_reader(self.tiers.clone());
        Ok(self)
    }

    /// The remote tiers this gateway moves objects to and reads them from.
    pub fn tiers(&self) -> &Arc<saker_tier::Tiers> {
        &self.tiers
    }

    /// Lifecycle rules count days of `day` ([`lifecycle`]; 24 hours by default, shorter
    /// for tests), and a pass looks at `rate` items a second at most (0: unpaced).
    pub fn with_lifecycle(mut self, day: std::time::Duration, rate: u64) -> Self {
        self.lifecycle = Arc::new(lifecycle::Lifecycle::new(day, rate));
        self
    }

    /// The per-key request limits ([`limits`]; none by default).
    pub fn with_key_limits(mut self, config: limits::KeyLimitConfig) -> Self {
        self.limits = limits::KeyLimits::new(config);
        self
    }

    /// What the S3 listener serves: the s3s service ([`Gateway::into_service`]) and the
    /// CORS side of it (preflights and response headers), with the same addressing.
    pub fn into_front(self, domain: Option<&str>) -> Result<Front, String> {
        let host = domain
            .map(|d| s3s::host::SingleDomain::new(d).map_err(|e| e.to_string()))
            .transpose()?;
        let cors = Arc::new(cors::Cors::new(&self, host));
        let keys = self.keys.clone();
        Ok(Front {
            s3: request_log::Logged::new(self.into_service(domain)?),
            cors,
            keys,
        })
    }

    /// The s3s service: SigV4 against the access-key store, requests authorized by
    /// [`auth::Access`], path-style addressing, and virtual-hosted style under `domain` when
    /// given; [`route`] answers what s3s would put on the wire differently from S3.
    pub fn into_service(self, domain: Option<&str>) -> Result<s3s::service::S3Service, String> {
        let auth = KeyAuth::new(self.keys.clone());
        let host = || {
            domain
                .map(|d| s3s::host::SingleDomain::new(d).map_err(|e| e.to_string()))
                .transpose()
        };
        let access = auth::Access::new(self.clone());
        let routes = route::Routes::new(self.clone(), host()?, access.clone());
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
