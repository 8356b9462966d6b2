//! S3 key to namespace path, and small conversions shared by the handlers.

use std::time::{Duration, UNIX_EPOCH};

use s3s::dto::{Timestamp, TimestampFormat};
use s3s::S3Result;
use saker_namespace::key_to_path;

use crate::http::error::bad_key;

/// A key mapped to its path: `[bucket, components…]`, and whether it names a directory marker.
pub struct KeyPath {
    pub path: Vec<String>,
    pub dir_marker: bool,
}

pub fn map_key(bucket: &str, key: &str) -> Result<KeyPath, saker_namespace::KeyError> {
    let p = key_to_path(bucket, key)?;
    let mut path = Vec::with_capacity(p.components.len() + 1);
    path.push(p.bucket.to_string());
    path.extend(p.components.iter().map(|c| c.to_string()));
    Ok(KeyPath {
        path,
        dir_marker: p.dir_marker,
    })
}

/// For writes: an unmappable key is a 400 that says why.
pub fn write_key(bucket: &str, key: &str) -> S3Result<KeyPath> {
    map_key(bucket, key).map_err(bad_key)
}

pub fn timestamp(ns: i64) -> Timestamp {
    let t = if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH
    };
    Timestamp::from(t)
}

/// Whole seconds, as HTTP dates compare.
pub fn secs(ns: i64) -> i64 {
    ns.div_euclid(1_000_000_000)
}

pub use saker_durable::now_ns;

/// A timestamp in ns since the epoch.
pub fn timestamp_ns(t: &Timestamp) -> i64 {
    let odt: time::OffsetDateTime = t.clone().into();
    i64::try_from(odt.unix_timestamp_nanos()).unwrap_or(i64::MAX)
}

pub fn timestamp_secs(t: &Timestamp) -> i64 {
    let odt: time::OffsetDateTime = t.clone().into();
    odt.unix_timestamp()
}

pub fn format_http_date(t: &Timestamp) -> Option<String> {
    let mut buf = Vec::new();
    t.format(TimestampFormat::HttpDate, &mut buf).ok()?;
    String::from_utf8(buf).ok()
}

pub fn parse_http_date(s: &str) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, s).ok()
}
