//! ListObjectVersions: the current objects of a bucket (from the listing engine) merged with
//! the noncurrent versions and delete markers of every MNode group, in S3's version order.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_rpc::{MetaResponse, VersionEntry, VersionKind, NULL_VERSION};

use crate::bucket::lookup::bucket_exists;
use crate::http::error;
use crate::keys::timestamp;
use crate::list::page::{echo_delimiter, enc, max_keys, owner_of, page, prefixes, url_encoding};
use crate::object::lookup::scan_request;
use crate::Gateway;

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
    let url = url_encoding(input.encoding_type.as_ref())?;
    let max = max_keys(input.max_keys)?;
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
        let page = page(gw, &input.bucket, &prefix, None, &key_marker, max + 1).await?;
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
    let owner = owner_of(gw, &input.bucket).await?;
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
                key: Some(enc(&key, url)),
                version_id: Some(version_id),
                is_latest: Some(latest),
                e_tag: Some(ETag::Strong(attr.etag.clone())),
                last_modified: Some(timestamp(attr.s3_mtime_ns)),
                size: Some(attr.size as i64),
                storage_class: Some(ObjectVersionStorageClass::from(
                    crate::object::tiering::class_name(&attr),
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
                key: Some(enc(&key, url)),
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
        (true, Some((k, v))) => (Some(enc(&k, url)), (!v.is_empty()).then_some(v)),
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
        common_prefixes: Some(prefixes(common, url)),
        delimiter: echo_delimiter(input.delimiter.clone(), url),
        encoding_type: input.encoding_type,
        ..Default::default()
    }))
}
