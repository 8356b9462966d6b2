//! What every request shares, whatever its resource: routing of the requests s3s would answer
//! differently from S3 ([`route`]), the one S3 error mapping ([`error`]), checksums and
//! request bodies, per-key limits, the request log and SigV4 helpers.

pub(crate) mod body;
pub(crate) mod checksum;
pub mod error;
pub mod limits;
pub(crate) mod path;
pub mod request_log;
pub(crate) mod route;
pub(crate) mod scope_region;
pub mod sigv4;
pub(crate) mod write_headers;
