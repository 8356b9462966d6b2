//! ListObjects (V1 and V2) over the listing engine of `saker-client`.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_client::{ListItem, Lister};
use saker_rpc::Attr;

use crate::http::error;
use crate::keys::timestamp;
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

/// A parsed listing request and its page.
struct Listing {
    url: bool,
    max: usize,
    prefix: String,
    page: Page,
}

async fn listing(
    gw: &Gateway,
    bucket: &str,
    encoding: Option<&EncodingType>,
    max_keys_param: Option<i32>,
    prefix: Option<&str>,
    delimiter: Option<&str>,
    after: &str,
) -> S3Result<Listing> {
    let url = url_encoding(encoding)?;
    let max = max_keys(max_keys_param)?;
    let prefix = prefix.unwrap_or_default().to_string();
    let page = page(gw, bucket, &prefix, delimiter, after, max).await?;
    Ok(Listing {
        url,
        max,
        prefix,
        page,
    })
}

/// The delimiter as echoed in a response (an empty one is not echoed).
pub(crate) fn echo_delimiter(d: Option<String>, url: bool) -> Option<String> {
    d.filter(|d| !d.is_empty()).map(|d| enc(&d, url))
}

/// The owner listings show for the objects of `bucket`.
async fn owner_of(gw: &Gateway, bucket: &str) -> S3Result<Owner> {
    let owner = crate::bucket::owner::of_bucket_named(gw, bucket).await?;
    Ok(crate::bucket::owner::dto(gw, &owner).await)
}

/// The objects of a listing page; with their owner, `owner` (listings show the bucket's
/// owner: an object's own is in its ACL).
fn objects(contents: Vec<(String, Attr)>, url: bool, owner: Option<Owner>) -> Vec<Object> {
    contents
        .into_iter()
        .map(|(key, a)| Object {
            key: Some(enc(&key, url)),
            e_tag: Some(ETag::Strong(a.etag.clone())),
            last_modified: Some(timestamp(a.s3_mtime_ns)),
            size: Some(a.size as i64),
            storage_class: Some(ObjectStorageClass::from(
                crate::object::tiering::class_name(&a).to_string(),
            )),
            owner: owner.clone(),
            ..Default::default()
        })
        .collect()
}

pub(crate) fn prefixes(p: Vec<String>, url: bool) -> Vec<CommonPrefix> {
    p.into_iter()
        .map(|p| CommonPrefix {
            prefix: Some(enc(&p, url)),
        })
        .collect()
}

pub async fn list_objects_v2(
    gw: &Gateway,
    req: S3Request<ListObjectsV2Input>,
) -> S3Result<S3Response<ListObjectsV2Output>> {
    let input = req.input;
    let after = input
        .continuation_token
        .clone()
        .or_else(|| input.start_after.clone())
        .unwrap_or_default();
    let Listing {
        url,
        max,
        prefix,
        page: p,
    } = listing(
        gw,
        &input.bucket,
        input.encoding_type.as_ref(),
        input.max_keys,
        input.prefix.as_deref(),
        input.delimiter.as_deref(),
        &after,
    )
    .await?;
    let owner = match input.fetch_owner {
        Some(true) => Some(owner_of(gw, &input.bucket).await?),
        _ => None,
    };
    let key_count = (p.contents.len() + p.prefixes.len()) as i32;
    Ok(S3Response::new(ListObjectsV2Output {
        name: Some(input.bucket),
        prefix: Some(enc(&prefix, url)),
        max_keys: Some(max as i32),
        key_count: Some(key_count),
        continuation_token: input.continuation_token,
        is_truncated: Some(p.truncated),
        next_continuation_token: if p.truncated { p.last } else { None },
        contents: Some(objects(p.contents, url, owner)),
        common_prefixes: Some(prefixes(p.prefixes, url)),
        delimiter: echo_delimiter(input.delimiter.clone(), url),
        encoding_type: input.encoding_type,
        start_after: input.start_after.map(|s| enc(&s, url)),
        request_charged: None,
    }))
}

pub async fn list_objects(
    gw: &Gateway,
    req: S3Request<ListObjectsInput>,
) -> S3Result<S3Response<ListObjectsOutput>> {
    let input = req.input;
    let after = input.marker.clone().unwrap_or_default();
    let Listing {
        url,
        max,
        prefix,
        page: p,
    } = listing(
        gw,
        &input.bucket,
        input.encoding_type.as_ref(),
        input.max_keys,
        input.prefix.as_deref(),
        input.delimiter.as_deref(),
        &after,
    )
    .await?;
    let owner = owner_of(gw, &input.bucket).await?;
    Ok(S3Response::new(ListObjectsOutput {
        name: Some(input.bucket),
        prefix: Some(prefix.clone()),
        marker: Some(enc(&after, url)),
        max_keys: Some(max as i32),
        is_truncated: Some(p.truncated),
        next_marker: if p.truncated && input.delimiter.is_some() {
            p.last.map(|l| enc(&l, url))
        } else {
            None
        },
        contents: Some(objects(p.contents, url, Some(owner))),
        common_prefixes: Some(prefixes(p.prefixes, url)),
        delimiter: echo_delimiter(input.delimiter.clone(), url),
        encoding_type: input.encoding_type,
        request_charged: None,
    }))
}
