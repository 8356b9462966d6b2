//! ListObjects (V1 and V2) over the listing engine of `saker-client`.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};
use saker_rpc::Attr;

use crate::keys::timestamp;
use crate::list::page::{
    echo_delimiter, enc, max_keys, owner_of, page, prefixes, url_encoding, Page,
};
use crate::Gateway;

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

/// The [`listing`] of a `ListObjectsInput` or `ListObjectsV2Input` (their fields have the same
/// names) after key `$after`: what V1 and V2 share.
macro_rules! listing_of {
    ($gw:expr, $input:expr, $after:expr) => {
        listing(
            $gw,
            &$input.bucket,
            $input.encoding_type.as_ref(),
            $input.max_keys,
            $input.prefix.as_deref(),
            $input.delimiter.as_deref(),
            $after,
        )
    };
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
                crate::object::tiering::class_name(&a),
            )),
            owner: owner.clone(),
            ..Default::default()
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
    } = listing_of!(gw, input, &after).await?;
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
    } = listing_of!(gw, input, &after).await?;
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
