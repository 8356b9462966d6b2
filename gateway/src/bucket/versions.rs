//! Bucket versioning on the S3 API: Put/GetBucketVersioning (a bucket setting), reads by
//! version id, the version ids writes answer with, and ListObjectVersions.
//!
//! Whether a bucket keeps versions is a bucket setting ([`crate::bucket::settings`]); each write
//! carries it to the MNode with the settings version it was decided under
//! ([`saker_rpc::Decided`]), and the MNode keeps the replaced object as a version in the
//! batch that replaces it, if its group's copy of the settings has that version. Otherwise
//! the write is decided again from a reloaded copy ([`redecide`]), so a change holds for
//! every write answered after it, through any gateway.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_rpc::{
    version_id, Decided, MetaError, MetaRequest, MetaResponse, ObjectView, VersionEntry,
    VersionKind, Versioning, Want, NULL_VERSION,
};

use crate::bucket::lookup::bucket_exists;
use crate::bucket::lookup::{settings, store};
use crate::bucket::settings::Setting;
use crate::http::error;
use crate::keys::{map_key, timestamp};
use crate::Gateway;

/// Whether `bucket` keeps versions, from this gateway's copy of its settings (no request to
/// a metadata node: this is on every write's and read's path; a bucket that does not exist
/// keeps none, and the operation answers NoSuchBucket as before), with the settings version
/// that is decided under.
pub async fn of_bucket(gw: &Gateway, bucket: &str) -> S3Result<Decided> {
    let s = crate::bucket::lookup::copy_of(gw, bucket).await?;
    Ok(Decided::under(s.versioning, s.settings_version))
}

/// How a write of the object at `kp` keeps versions, its bucket's settings being `s`: as the
/// bucket does, except a directory marker, which keeps none (decided under `s`'s settings
/// version all the same).
pub fn of_key(s: &crate::bucket::settings::Bucket, kp: &crate::keys::KeyPath) -> Decided {
    let versioning = match kp.dir_marker {
        true => Versioning::Off,
        false => s.versioning,
    };
    Decided::under(versioning, s.settings_version)
}

/// How many times a write refused for settings that changed is decided anew.
pub const REDECIDE: usize = 4;

/// After a write into `bucket` was refused for settings that changed since `was` (this
/// gateway's copy it was decided from): the copy reloaded, and the new settings if the
/// write may just be sent again with their versioning, i.e. its lock and encryption, chosen
/// from `was` before its bytes were stored, still stand. `None`: the client must send the
/// request again (503).
pub async fn redecide(
    gw: &Gateway,
    bucket: &str,
    was: &crate::bucket::settings::Bucket,
) -> S3Result<Option<std::sync::Arc<crate::bucket::settings::Bucket>>> {
    gw.settings
        .reload()
        .await
        .map_err(crate::bucket::lookup::settings_error)?;
    let now = crate::bucket::lookup::copy_of(gw, bucket).await?;
    let same = now.object_lock == was.object_lock && now.encryption == was.encryption;
    Ok(same.then_some(now))
}

/// The version id a write answers with: its own while the bucket keeps versions; none
/// otherwise (a write while versioning is suspended makes the `null` version, which S3 does
/// not name in the answer).
pub fn written(versioning: impl Into<Versioning>, id: saker_rpc::InodeId) -> Option<String> {
    (versioning.into() == Versioning::Enabled).then(|| version_id(id))
}

/// The version id a read shows for `view` (`null` for an object of a bucket that keeps
/// versions but is not a version of its own).
pub fn shown(view: &ObjectView, versioning: impl Into<Versioning>) -> Option<String> {
    match (&view.version_id, versioning.into()) {
        (Some(v), _) => Some(v.clone()),
        (None, Versioning::Off) => None,
        (None, _) => Some(NULL_VERSION.into()),
    }
}

/// The object `key` of `bucket`, or its version `version_id`.
pub async fn lookup(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    version: Option<&str>,
    want: Want,
) -> S3Result<ObjectView> {
    let Some(vid) = version else {
        let found = crate::object::get::lookup_object(gw, bucket, key, want).await;
        return match found {
            Err(e) if e.code() == &s3s::S3ErrorCode::NoSuchKey => {
                let marker = match of_bucket(gw, bucket).await?.versioning {
                    Versioning::Off => None,
                    _ => latest_marker(gw, bucket, key).await,
                };
                // The 404 says whether a delete marker is why, as RGW does (`false` too).
                Err(marker.unwrap_or_else(|| not_a_marker(e)))
            }
            r => r,
        };
    };
    let kp = map_key(bucket, key).map_err(|_| s3_error!(NoSuchKey))?;
    if kp.dir_marker {
        // Directory markers keep no versions: only the current one, as `null`.
        if vid != NULL_VERSION {
            return Err(no_such_version());
        }
        return crate::object::get::lookup_object(gw, bucket, key, want).await;
    }
    let req = MetaRequest::LookupVersion {
        path: kp.path.clone(),
        version_id: vid.to_string(),
        want,
    };
    match gw.cluster.call(&kp.path, req).await {
        Ok(MetaResponse::Object(v)) => Ok(*v),
        Ok(other) => Err(error::internal(format!("LookupVersion answered {other:?}"))),
        Err(MetaError::NoSuchVersion) => Err(no_such_version()),
        Err(e) => Err(error::meta(e)),
    }
}

/// For a key without a current object whose latest version is a delete marker: S3's 404
/// that says so (`x-amz-delete-marker`, and the marker's version id).
async fn latest_marker(gw: &Gateway, bucket: &str, key: &str) -> Option<s3s::S3Error> {
    let kp = map_key(bucket, key).ok().filter(|kp| !kp.dir_marker)?;
    // The key's versions are in the group that owns its name, first in its key range.
    let r = scan_request(bucket, key, "", None, 1, false);
    let Ok(MetaResponse::Versions(v)) = gw.cluster.call(&kp.path, r).await else {
        return None;
    };
    let newest = v.into_iter().next().filter(|v| v.key == key)?;
    if !matches!(newest.kind, VersionKind::DeleteMarker) {
        return None;
    }
    let mut e = s3_error!(NoSuchKey, "The specified key does not exist.");
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "x-amz-delete-marker",
        http::HeaderValue::from_static("true"),
    );
    if let Ok(v) = http::HeaderValue::from_str(&newest.version_id) {
        headers.insert("x-amz-version-id", v);
    }
    e.set_headers(headers);
    Some(e)
}

/// A 404 with `x-amz-delete-marker: false`.
fn not_a_marker(mut e: s3s::S3Error) -> s3s::S3Error {
    let mut headers = e.headers().cloned().unwrap_or_default();
    headers.insert(
        "x-amz-delete-marker",
        http::HeaderValue::from_static("false"),
    );
    e.set_headers(headers);
    e
}

fn no_such_version() -> s3s::S3Error {
    s3_error!(NoSuchVersion, "The specified version does not exist.")
}

pub async fn get_bucket_versioning(
    gw: &Gateway,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    let status = match settings(gw, &req.input.bucket).await?.versioning {
        Versioning::Off => None,
        Versioning::Enabled => Some(BucketVersioningStatus::from_static(
            BucketVersioningStatus::ENABLED,
        )),
        Versioning::Suspended => Some(BucketVersioningStatus::from_static(
            BucketVersioningStatus::SUSPENDED,
        )),
    };
    Ok(S3Response::new(GetBucketVersioningOutput {
        status,
        mfa_delete: None,
    }))
}

pub async fn put_bucket_versioning(
    gw: &Gateway,
    req: S3Request<PutBucketVersioningInput>,
) -> S3Result<S3Response<PutBucketVersioningOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let c = input.versioning_configuration;
    if c.mfa_delete
        .as_ref()
        .is_some_and(|m| m.as_str() == MFADelete::ENABLED)
    {
        return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
    }
    let status = match c.status.as_ref().map(|s| s.as_str()) {
        Some(BucketVersioningStatus::ENABLED) => "Enabled",
        Some(BucketVersioningStatus::SUSPENDED) => "Suspended",
        _ => {
            return Err(s3_error!(
                MalformedXML,
                "The versioning status must be Enabled or Suspended"
            ))
        }
    };
    if status == "Suspended" && settings(gw, &input.bucket).await?.object_lock.is_some() {
        return Err(s3_error!(
            InvalidBucketState,
            "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed"
        ));
    }
    store(
        gw,
        &input.bucket,
        Setting::Versioning,
        Some(status.as_bytes().to_vec()),
    )
    .await?;
    Ok(S3Response::new(PutBucketVersioningOutput::default()))
}

fn scan_request(
    bucket: &str,
    prefix: &str,
    key_marker: &str,
    id_marker: Option<u64>,
    limit: u32,
    with_current: bool,
) -> MetaRequest {
    MetaRequest::ScanVersions {
        bucket: bucket.to_string(),
        prefix: prefix.to_string(),
        key_marker: key_marker.to_string(),
        id_marker,
        limit,
        with_current,
    }
}

/// Where a line sorts: its key, then the current object (0) before the versions, newest
/// first.
type Pos = (String, u128);

fn version_pos(key: &str, id: saker_rpc::InodeId) -> Pos {
    (key.to_string(), 1 + u128::from(u64::MAX - id))
}

/// One line of a version listing, before it is put on the wire.
enum Line {
    Version {
        pos: Pos,
        version_id: String,
        latest: bool,
        attr: Box<saker_rpc::Attr>,
    },
    Marker {
        pos: Pos,
        version_id: String,
        latest: bool,
        mtime_ns: i64,
    },
}

impl Line {
    fn pos(&self) -> &Pos {
        match self {
            Line::Version { pos, .. } | Line::Marker { pos, .. } => pos,
        }
    }
    fn key(&self) -> &str {
        &self.pos().0
    }
    fn version_id(&self) -> &str {
        match self {
            Line::Version { version_id, .. } | Line::Marker { version_id, .. } => version_id,
        }
    }
}

/// Merges the current objects (key order) with the noncurrent versions (key order, newest
/// first within a key) into S3's version order: each key's current object first, as the
/// latest; without one, its newest version is the latest.
/// `resumed` is a key whose listing resumes within its versions: its latest was listed on
/// the page before.
fn merge(
    current: Vec<(String, saker_rpc::Attr)>,
    versions: Vec<VersionEntry>,
    resumed: Option<&str>,
) -> Vec<Line> {
    let mut out = Vec::new();
    let mut cur = current.into_iter().peekable();
    let mut ver = versions.into_iter().peekable();
    loop {
        let key = match (cur.peek(), ver.peek()) {
            (None, None) => break,
            (Some((k, _)), None) => k.clone(),
            (None, Some(v)) => v.key.clone(),
            (Some((k, _)), Some(v)) => k.clone().min(v.key.clone()),
        };
        let mut own_ids = Vec::new();
        let mut mine = Vec::new();
        while ver.peek().is_some_and(|v| v.key == key) {
            let v = ver.next().expect("peeked");
            match v.kind {
                VersionKind::Current => own_ids.push((v.id, v.version_id)),
                _ => mine.push(v),
            }
        }
        let mut latest = resumed != Some(key.as_str());
        if cur.peek().is_some_and(|(k, _)| *k == key) {
            let (k, attr) = cur.next().expect("peeked");
            let vid = own_ids
                .iter()
                .find(|(id, _)| *id == attr.id)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| NULL_VERSION.to_string());
            out.push(Line::Version {
                pos: (k, 0),
                version_id: vid,
                latest: true,
                attr: Box::new(attr),
            });
            latest = false;
        }
        for v in mine {
            let pos = version_pos(&v.key, v.id);
            match v.kind {
                VersionKind::Object(attr) => out.push(Line::Version {
                    pos,
                    version_id: v.version_id,
                    latest,
                    attr,
                }),
                VersionKind::DeleteMarker => out.push(Line::Marker {
                    pos,
                    version_id: v.version_id,
                    latest,
                    mtime_ns: v.mtime_ns,
                }),
                VersionKind::Current => {}
            }
            latest = false;
        }
    }
    out
}

pub async fn list_object_versions(
    gw: &Gateway,
    req: S3Request<ListObjectVersionsInput>,
) -> S3Result<S3Response<ListObjectVersionsOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let url = crate::list::url_encoding(input.encoding_type.as_ref())?;
    let max = crate::list::max_keys(input.max_keys)?;
    let prefix = input.prefix.clone().unwrap_or_default();
    let key_marker = input.key_marker.clone().unwrap_or_default();
    let id_marker = input
        .version_id_marker
        .as_deref()
        .filter(|v| !v.is_empty() && !key_marker.is_empty());
    // The marker's version, as an inode id to resume after; `null` (or a version id of the
    // current object) resumes after the current object, that is at the key's versions.
    let resume_id = match id_marker {
        Some(NULL_VERSION) | None => None,
        Some(v) => Some(
            saker_rpc::version_inode(v)
                .ok_or_else(|| s3_error!(InvalidArgument, "Invalid version id specified"))?,
        ),
    };
    // Current objects after the marker key (or at it, when resuming within its versions
    // is not asked for).
    // Each source is read a page at a time; one that had more than its page limits how far
    // this page may go (the `horizon`), so that nothing it did not send is skipped.
    let mut horizon: Option<Pos> = None;
    let mut limit_to = |pos: Pos| {
        if horizon.as_ref().is_none_or(|h| pos < *h) {
            horizon = Some(pos);
        }
    };
    let current = if max == 0 {
        Vec::new()
    } else {
        let page =
            crate::list::page(gw, &input.bucket, &prefix, None, &key_marker, max + 1).await?;
        if page.truncated {
            if let Some((k, _)) = page.contents.last() {
                limit_to((k.clone(), 0));
            }
        }
        page.contents
    };
    let mut versions = Vec::new();
    if max > 0 {
        for (g, _) in gw.cluster.groups() {
            let (marker, id) = match (id_marker, resume_id) {
                (Some(_), Some(id)) => (key_marker.as_str(), Some(id)),
                // Within the marker key after its current (`null`) version: all its versions.
                (Some(_), None) => (key_marker.as_str(), Some(u64::MAX)),
                (None, _) => (key_marker.as_str(), None),
            };
            // With the current objects' version ids, wherever their records sort.
            let r = scan_request(&input.bucket, &prefix, marker, id, (max + 1) as u32, true);
            match gw.cluster.call_group(*g, r).await.map_err(error::meta)? {
                MetaResponse::Versions(v) => {
                    if v.len() > max {
                        // (A current record beyond the page comes first, not last.)
                        let last = v.last().expect("non-empty");
                        limit_to(version_pos(&last.key, last.id));
                    }
                    versions.extend(v)
                }
                other => return Err(error::internal(format!("ScanVersions answered {other:?}"))),
            }
        }
        versions.sort_by(|a, b| {
            (&a.key, std::cmp::Reverse(a.id)).cmp(&(&b.key, std::cmp::Reverse(b.id)))
        });
    }
    let resumed = id_marker.map(|_| key_marker.as_str());
    let lines = merge(current, versions, resumed);
    let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
    let owner = crate::bucket::owner::of_bucket_named(gw, &input.bucket).await?;
    let owner = crate::bucket::owner::dto(gw, &owner).await;
    let mut out_versions = Vec::new();
    let mut markers = Vec::new();
    let mut common: Vec<String> = Vec::new();
    let mut emitted = 0usize;
    let mut truncated = false;
    let mut last: Option<(String, String)> = None;
    for line in lines {
        if horizon.as_ref().is_some_and(|h| line.pos() > h) {
            truncated = true;
            break;
        }
        if let Some(d) = &delimiter {
            if let Some(i) = line.key()[prefix.len()..].find(d.as_str()) {
                let cp = line.key()[..prefix.len() + i + d.len()].to_string();
                // A prefix given as the marker was listed on the page before.
                if common.last() != Some(&cp) && cp != key_marker {
                    if emitted == max {
                        truncated = true;
                        break;
                    }
                    emitted += 1;
                    last = Some((cp.clone(), String::new()));
                    common.push(cp);
                }
                continue;
            }
        }
        if emitted == max {
            truncated = true;
            break;
        }
        emitted += 1;
        last = Some((line.key().to_string(), line.version_id().to_string()));
        match line {
            Line::Version {
                pos: (key, _),
                version_id,
                latest,
                attr,
            } => out_versions.push(ObjectVersion {
                key: Some(crate::list::enc(&key, url)),
                version_id: Some(version_id),
                is_latest: Some(latest),
                e_tag: Some(ETag::Strong(attr.etag.clone())),
                last_modified: Some(timestamp(attr.s3_mtime_ns)),
                size: Some(attr.size as i64),
                storage_class: Some(ObjectVersionStorageClass::from(
                    crate::object::tiering::class_name(&attr).to_string(),
                )),
                owner: Some(owner.clone()),
                ..Default::default()
            }),
            Line::Marker {
                pos: (key, _),
                version_id,
                latest,
                mtime_ns,
            } => markers.push(DeleteMarkerEntry {
                key: Some(crate::list::enc(&key, url)),
                version_id: Some(version_id),
                is_latest: Some(latest),
                last_modified: Some(timestamp(mtime_ns)),
                owner: Some(owner.clone()),
            }),
        }
    }
    // A source with more than it sent: what it holds past its last entry comes on the next
    // page, even when that entry (a current record) made no line of its own.
    let truncated = truncated || (horizon.is_some() && last.is_some());
    let (next_key, next_version) = match (truncated, last) {
        (true, Some((k, v))) => (
            Some(crate::list::enc(&k, url)),
            (!v.is_empty()).then_some(v),
        ),
        _ => (None, None),
    };
    Ok(S3Response::new(ListObjectVersionsOutput {
        name: Some(input.bucket),
        prefix: Some(prefix),
        key_marker: input.key_marker,
        version_id_marker: input.version_id_marker,
        max_keys: Some(max as i32),
        is_truncated: Some(truncated),
        next_key_marker: next_key,
        next_version_id_marker: next_version,
        versions: Some(out_versions),
        delete_markers: Some(markers),
        common_prefixes: Some(crate::list::prefixes(common, url)),
        delimiter: crate::list::echo_delimiter(input.delimiter.clone(), url),
        encoding_type: input.encoding_type,
        ..Default::default()
    }))
}
