//! GetObject and HeadObject: one MNode lookup (inline data comes back with the inode),
//! preconditions, ranges, part numbers, and the stored headers.

use s3s::dto::{
    ChecksumMode, ChecksumType, ETag, ETagCondition, GetObjectInput, GetObjectOutput,
    HeadObjectInput, HeadObjectOutput, Metadata, ObjectLockLegalHoldStatus, ObjectLockMode, Range,
    StreamingBlob, Timestamp,
};
use s3s::{s3_error, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use saker_client::sealed::DataKey;
use saker_client::ReadRange;
use saker_rpc::{Checksums, ObjectMeta, ObjectView, Sse, Want};

use crate::http::checksum::{self, Algorithm};
use crate::keys::{parse_http_date, timestamp};
use crate::object::conditions::check_read_conditions;
use crate::Gateway;

fn invalid_part_number() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::InvalidPart,
        "The requested partnumber is not satisfiable",
    )
}

/// The byte range to serve and the Content-Range header, from Range or partNumber.
fn select_range(
    view: &ObjectView,
    range: Option<&Range>,
    part_number: Option<i32>,
) -> S3Result<(ReadRange, Option<String>, Option<i32>)> {
    let size = view.attr.size;
    if let Some(n) = part_number {
        if range.is_some() {
            return Err(s3_error!(
                InvalidRequest,
                "Cannot specify both Range header and partNumber query parameter"
            ));
        }
        let parts = &view.attr.parts;
        if parts.is_empty() {
            if n != 1 {
                return Err(invalid_part_number());
            }
            let cr = (size > 0).then(|| format!("bytes 0-{}/{}", size - 1, size));
            return Ok((
                ReadRange {
                    start: 0,
                    end: size,
                },
                cr,
                Some(1),
            ));
        }
        let idx = usize::try_from(n)
            .ok()
            .filter(|&i| i >= 1 && i <= parts.len())
            .ok_or_else(invalid_part_number)?;
        let start: u64 = parts[..idx - 1].iter().map(|p| p.size).sum();
        let end = start + parts[idx - 1].size;
        let cr = format!("bytes {}-{}/{}", start, end.saturating_sub(1), size);
        return Ok((ReadRange { start, end }, Some(cr), Some(parts.len() as i32)));
    }
    match range {
        None => Ok((
            ReadRange {
                start: 0,
                end: size,
            },
            None,
            None,
        )),
        Some(r) => {
            let r = r
                .check(size)
                .map_err(|_| S3Error::new(S3ErrorCode::InvalidRange))?;
            let cr = format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), size);
            Ok((
                ReadRange {
                    start: r.start,
                    end: r.end,
                },
                Some(cr),
                None,
            ))
        }
    }
}

fn user_metadata(meta: &ObjectMeta) -> Option<Metadata> {
    if meta.user.is_empty() {
        None
    } else {
        Some(meta.user.iter().cloned().collect())
    }
}

/// The checksums a GET or HEAD with `x-amz-checksum-mode: ENABLED` returns, and their type:
/// the object's for the whole object, the part's (in the object's algorithm) for `partNumber`
/// of a multipart object, none for any other range.
fn served_checksums(
    mode: Option<&ChecksumMode>,
    view: &ObjectView,
    range: &ReadRange,
    part_number: Option<i32>,
    meta: &ObjectMeta,
) -> (Checksums, Option<ChecksumType>) {
    if mode.is_none_or(|m| m.as_str() != ChecksumMode::ENABLED) {
        return (Checksums::default(), None);
    }
    let a = &view.attr;
    let part = part_number
        .filter(|_| !a.parts.is_empty())
        .and_then(|n| usize::try_from(n).ok())
        .and_then(|n| a.parts.get(n.checked_sub(1)?));
    let sums = match part {
        Some(p) => match Algorithm::of(&meta.checksums) {
            Some(alg) => alg.only(&p.checksums),
            None => Checksums::default(),
        },
        None if range.start == 0 && range.end == a.size => meta.checksums.clone(),
        None => Checksums::default(),
    };
    if sums.is_empty() {
        return (sums, None);
    }
    (sums, checksum::object_type(meta))
}

/// What GET and HEAD share after the lookup: preconditions checked, the byte range chosen, the
/// stored headers and the checksums to return.
struct Served {
    range: ReadRange,
    content_range: Option<String>,
    parts_count: Option<i32>,
    meta: ObjectMeta,
    sums: Checksums,
    checksum_type: Option<ChecksumType>,
}

/// What a GetObject or a HeadObject asks, borrowed from its input ([`read_of`]).
struct Read<'a> {
    bucket: &'a str,
    key: &'a str,
    version_id: Option<&'a str>,
    if_match: Option<&'a ETagCondition>,
    if_none_match: Option<&'a ETagCondition>,
    if_modified_since: Option<&'a Timestamp>,
    if_unmodified_since: Option<&'a Timestamp>,
    range: Option<&'a Range>,
    part_number: Option<i32>,
    checksum_mode: Option<&'a ChecksumMode>,
    /// The SSE-C algorithm, key and key MD5.
    customer: [Option<&'a str>; 3],
}

/// The [`Read`] of a `GetObjectInput` or `HeadObjectInput` (their fields have the same names).
macro_rules! read_of {
    ($i:expr) => {
        Read {
            bucket: &$i.bucket,
            key: &$i.key,
            version_id: $i.version_id.as_deref(),
            if_match: $i.if_match.as_ref(),
            if_none_match: $i.if_none_match.as_ref(),
            if_modified_since: $i.if_modified_since.as_ref(),
            if_unmodified_since: $i.if_unmodified_since.as_ref(),
            range: $i.range.as_ref(),
            part_number: $i.part_number,
            checksum_mode: $i.checksum_mode.as_ref(),
            customer: [
                $i.sse_customer_algorithm.as_deref(),
                $i.sse_customer_key.as_deref(),
                $i.sse_customer_key_md5.as_deref(),
            ],
        }
    };
}

fn serve(view: &ObjectView, r: &Read<'_>) -> S3Result<Served> {
    let a = &view.attr;
    check_read_conditions(
        &a.etag,
        a.s3_mtime_ns,
        r.if_match,
        r.if_none_match,
        r.if_modified_since,
        r.if_unmodified_since,
        S3ErrorCode::NotModified,
    )?;
    let (range, content_range, parts_count) = select_range(view, r.range, r.part_number)?;
    let meta = view.meta.clone().unwrap_or_default();
    let (sums, checksum_type) =
        served_checksums(r.checksum_mode, view, &range, r.part_number, &meta);
    Ok(Served {
        range,
        content_range,
        parts_count,
        meta,
        sums,
        checksum_type,
    })
}

/// The response headers GetObject and HeadObject have in common, as a struct literal of `$out`.
macro_rules! object_output {
    ($out:ident, $attr:expr, $served:expr, $shown:expr, { $($extra:tt)* }) => {{
        let (a, s, shown) = ($attr, $served, $shown);
        let shown_sse = crate::object::sse::shown(s.meta.sse.as_ref());
        $out {
            $($extra)*
            version_id: shown.version_id,
            object_lock_mode: shown.lock.0,
            object_lock_retain_until_date: shown.lock.1,
            object_lock_legal_hold_status: shown.lock.2,
            expiration: shown.expiration,
            server_side_encryption: shown_sse.sse,
            ssekms_key_id: shown_sse.kms_key_id,
            sse_customer_algorithm: shown_sse.customer_algorithm,
            sse_customer_key_md5: shown_sse.customer_key_md5,
            content_length: Some((s.range.end - s.range.start) as i64),
            content_range: s.content_range,
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(a.s3_mtime_ns)),
            e_tag: Some(ETag::Strong(a.etag.clone())),
            metadata: user_metadata(&s.meta),
            content_type: s.meta.content_type.clone().or_else(|| Some("binary/octet-stream".into())),
            content_encoding: s.meta.content_encoding.clone(),
            content_disposition: s.meta.content_disposition.clone(),
            content_language: s.meta.content_language.clone(),
            cache_control: s.meta.cache_control.clone(),
            expires: s.meta.expires.as_deref().and_then(parse_http_date),
            website_redirect_location: s.meta.website_redirect.clone(),
            parts_count: s.parts_count,
            checksum_crc32: s.sums.crc32,
            checksum_crc32c: s.sums.crc32c,
            checksum_crc64nvme: s.sums.crc64nvme,
            checksum_sha1: s.sums.sha1,
            checksum_sha256: s.sums.sha256,
            checksum_type: s.checksum_type,
            storage_class: crate::object::tiering::storage_class(a),
            restore: crate::object::tiering::restore_header(a),
            ..Default::default()
        }
    }};
}

/// What a GET or HEAD shows of a version beside its bytes and attributes.
struct Shown {
    version_id: Option<String>,
    lock: (
        Option<ObjectLockMode>,
        Option<Timestamp>,
        Option<ObjectLockLegalHoldStatus>,
    ),
    expiration: Option<String>,
}

/// The object (or its version `version`) a GET (with its `data`) or HEAD reads, and what it
/// shows.
async fn read_view(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    version: Option<&str>,
    data: bool,
) -> S3Result<(ObjectView, Shown)> {
    let want = Want {
        meta: true,
        data,
        tags: true,
        link: false,
        lock: false,
        acl: false,
    };
    // One look at this gateway's copy of the bucket's settings (no metadata request).
    let s = crate::bucket::lookup::copy_of(gw, bucket).await?;
    // The lock is asked for in a bucket with Object Lock only.
    let want = want.with_lock(s.object_lock.is_some());
    let view = crate::object::lookup::lookup(gw, bucket, key, version, want).await?;
    // Lifecycle expiration is announced for current objects.
    let expiration = match version {
        None => {
            let tags = view.tags.as_deref().unwrap_or(&[]);
            crate::bucket::lifecycle::rules::expiration_header(
                s.lifecycle.as_deref().map(|r| r.as_slice()),
                key,
                &view.attr,
                tags,
            )
        }
        Some(_) => None,
    };
    let shown = Shown {
        version_id: crate::bucket::versions::shown(&view, s.versioning),
        lock: crate::bucket::lock::shown(&view),
        expiration,
    };
    Ok((view, shown))
}

/// What a GET or HEAD read: the object, what it shows, what it serves of it and the data key
/// its bytes are sealed with.
struct ObjectRead {
    view: ObjectView,
    shown: Shown,
    served: Served,
    key: Option<(DataKey, Sse)>,
}

/// The read GetObject (with the object's `data`) and HeadObject share: the request checked,
/// the object looked up, its preconditions and range, and its SSE-C key (an SSE-C object is
/// read, and answers HEAD, only with its key, as in S3).
async fn read(
    gw: &Gateway,
    headers: &http::HeaderMap,
    r: Read<'_>,
    data: bool,
) -> S3Result<ObjectRead> {
    crate::object::sse::refuse_on_read(headers)?;
    let (view, shown) = read_view(gw, r.bucket, r.key, r.version_id, data).await?;
    let served = serve(&view, &r)?;
    let [algorithm, key, key_md5] = r.customer;
    let customer = crate::object::sse::customer_key(algorithm, key, key_md5)?;
    let key = crate::object::sse::for_read(gw, view.meta.as_ref(), customer)?;
    Ok(ObjectRead {
        view,
        shown,
        served,
        key,
    })
}

pub async fn get_object(
    gw: &Gateway,
    req: S3Request<GetObjectInput>,
) -> S3Result<S3Response<GetObjectOutput>> {
    let i = req.input;
    let ObjectRead {
        view,
        shown,
        served,
        key,
    } = read(gw, &req.headers, read_of!(i), true).await?;
    let body = crate::object::sse::read_plain(&gw.cluster, &view, key.as_ref(), served.range);
    let tag_count = view
        .tags
        .as_ref()
        .filter(|t| !t.is_empty())
        .map(|t| t.len() as i32);
    Ok(S3Response::new(
        object_output!(GetObjectOutput, &view.attr, served, shown, {
            body: Some(StreamingBlob::wrap(body)),
            tag_count,
        }),
    ))
}

pub async fn head_object(
    gw: &Gateway,
    req: S3Request<HeadObjectInput>,
) -> S3Result<S3Response<HeadObjectOutput>> {
    let i = req.input;
    let r = read(gw, &req.headers, read_of!(i), false).await?;
    let view = r.view;
    let mut resp = S3Response::new(object_output!(
        HeadObjectOutput,
        &view.attr,
        r.served,
        r.shown,
        {}
    ));
    // HeadObjectOutput has no tag count, but S3 sends it on HEAD as on GET.
    if let Some(t) = view.tags.as_ref().filter(|t| !t.is_empty()) {
        resp.headers
            .insert("x-amz-tagging-count", http::HeaderValue::from(t.len()));
    }
    Ok(resp)
}
