//! What the listings share: a page of a bucket read through the listing engine of
//! `saker-client`, `max-keys`, `encoding-type=url`, and how keys, prefixes and owners are shown.

use s3s::dto::*;
use s3s::{s3_error, S3Result};
use saker_client::{ListItem, Lister};
use saker_rpc::Attr;

use crate::http::error;
use crate::Gateway;

pub(crate) fn url_encoding(e: Option<&EncodingType>) -> S3Result<bool> {
    match e {
        None => Ok(false),
        Some(e) if e.as_str().eq_ignore_ascii_case("url") => Ok(true),
        Some(_) => Err(s3_error!(
            InvalidArgument,
            "Invalid Encoding Method specified in Request"
        )),
    }
}

/// Percent-encodes like S3's `encoding-type=url` (keeps unreserved characters and '/').
pub(crate) fn enc(s: &str, on: bool) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~')
        .remove(b'/');
    if on {
        percent_encoding::utf8_percent_encode(s, SET).to_string()
    } else {
        s.to_string()
    }
}

pub(crate) fn max_keys(m: Option<i32>) -> S3Result<usize> {
    match m {
        None => Ok(1000),
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "max-keys must be non-negative")),
        Some(n) => Ok((n as usize).min(1000)),
    }
}

pub(crate) struct Page {
    pub contents: Vec<(String, Attr)>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    pub last: Option<String>,
}

pub(crate) async fn page(
    gw: &Gateway,
    bucket: &str,
    prefix: &str,
    delimiter: Option<&str>,
    after: &str,
    max: usize,
) -> S3Result<Page> {
    let mut lister = Lister::new(&gw.cluster, bucket)
        .await
        .map_err(error::client)?;
    let (items, truncated) = if max == 0 {
        (Vec::new(), false)
    } else {
        lister
            .page(prefix, delimiter, after, max)
            .await
            .map_err(error::client)?
    };
    let last = items.last().map(|i| i.key().to_string());
    let mut contents = Vec::new();
    let mut prefixes = Vec::new();
    for item in items {
        match item {
            ListItem::Object { key, attr } => contents.push((key, attr)),
            ListItem::CommonPrefix(p) => prefixes.push(p),
        }
    }
    Ok(Page {
        contents,
        prefixes,
        truncated,
        last,
    })
}

/// The delimiter as echoed in a response (an empty one is not echoed).
pub(crate) fn echo_delimiter(d: Option<String>, url: bool) -> Option<String> {
    d.filter(|d| !d.is_empty()).map(|d| enc(&d, url))
}

/// The owner listings show for the objects of `bucket`.
pub(crate) async fn owner_of(gw: &Gateway, bucket: &str) -> S3Result<Owner> {
    let owner = crate::bucket::owner::of_bucket_named(gw, bucket).await?;
    Ok(crate::bucket::owner::dto(gw, &owner).await)
}

pub(crate) fn prefixes(p: Vec<String>, url: bool) -> Vec<CommonPrefix> {
    p.into_iter()
        .map(|p| CommonPrefix {
            prefix: Some(enc(&p, url)),
        })
        .collect()
}
