//! Preconditions: a read's (If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since,
//! checked here against the object read) and a write's (If-Match, If-None-Match, checked by
//! the MNode in the batch that applies the write).

use s3s::dto::{ETagCondition, Timestamp};
use s3s::{s3_error, S3Error, S3ErrorCode, S3Result};
use saker_rpc::{EtagCond, WriteCond};

use crate::keys::{secs, timestamp, timestamp_secs};

fn etag_matches(cond: &ETagCondition, etag: &str) -> bool {
    match cond {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value().trim_matches('"') == etag,
    }
}

/// Read preconditions in S3's precedence: If-Match over If-Unmodified-Since (412),
/// If-None-Match over If-Modified-Since (304 for GET/HEAD).
pub fn check_read_conditions(
    etag: &str,
    mtime_ns: i64,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
    not_modified: S3ErrorCode,
) -> S3Result<()> {
    let mtime = secs(mtime_ns);
    match if_match {
        Some(c) if !etag_matches(c, etag) => {
            return Err(S3Error::new(S3ErrorCode::PreconditionFailed))
        }
        Some(_) => {}
        None => {
            if let Some(t) = if_unmodified_since {
                if mtime > timestamp_secs(t) {
                    return Err(S3Error::new(S3ErrorCode::PreconditionFailed));
                }
            }
        }
    }
    let unchanged = match if_none_match {
        Some(c) => etag_matches(c, etag),
        None => if_modified_since.is_some_and(|t| mtime <= timestamp_secs(t)),
    };
    if unchanged {
        let mut e = S3Error::new(not_modified.clone());
        if not_modified == S3ErrorCode::NotModified {
            // A 304 carries the validators of the current representation.
            let mut headers = http::HeaderMap::new();
            if let Ok(v) = http::HeaderValue::from_str(&format!("\"{etag}\"")) {
                headers.insert(http::header::ETAG, v);
            }
            if let Some(v) = crate::keys::format_http_date(&timestamp(mtime_ns))
                .and_then(|d| http::HeaderValue::from_str(&d).ok())
            {
                headers.insert(http::header::LAST_MODIFIED, v);
            }
            e.set_headers(headers);
        }
        return Err(e);
    }
    Ok(())
}

/// A conditional write's `If-Match`/`If-None-Match`, for the MNode to check in the batch that
/// applies the write (so of racing writers only those whose condition held win).
pub fn write_cond(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> Option<WriteCond> {
    let conv = |c: &ETagCondition| match c {
        ETagCondition::Any => EtagCond::Any,
        ETagCondition::ETag(e) => EtagCond::Is(e.value().trim_matches('"').to_string()),
    };
    (if_match.is_some() || if_none_match.is_some()).then(|| WriteCond {
        if_match: if_match.map(conv),
        if_none_match: if_none_match.map(conv),
    })
}

/// The write conditions of a request whose input does not carry them (CopyObject's
/// destination), from its headers.
pub fn header_write_cond(headers: &http::HeaderMap) -> S3Result<Option<WriteCond>> {
    let parse = |name: &str| -> S3Result<Option<ETagCondition>> {
        headers
            .get(name)
            .map(|v| {
                ETagCondition::parse_http_header(v.as_bytes())
                    .map_err(|_| s3_error!(InvalidArgument, "{name} is not an ETag or *"))
            })
            .transpose()
    };
    let (m, n) = (parse("if-match")?, parse("if-none-match")?);
    Ok(write_cond(m.as_ref(), n.as_ref()))
}
