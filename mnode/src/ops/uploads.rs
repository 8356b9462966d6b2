//! Multipart uploads: creating one, its parts, completing it into an object, and aborting it.

use bytes::Bytes;
use saker_rpc::{
    Checksums, Layout, MetaError, MetaResponse, NewObject, ObjectLock, ObjectMeta, PartInfo,
    PartRecord, UploadInfo, Versioning, WriteCond,
};
use serde::Deserialize;

use super::common::{check_path, release};
use super::objects::put_object;
use super::{Ctx, OpResult};
use crate::keys::Keys;
use crate::records::{decode, decode_v3, encode, encode_v3};
use crate::store::prefix_end;
use crate::store::StoreError;
use crate::tree::{internal, resolve_parents};
use crate::txn::Txn;

fn upload_key(keys: &Keys, path: &[String], upload_id: &str) -> Vec<u8> {
    keys.upload(&path[0], &path[1..].join("/"), upload_id)
}

/// An upload record as version 1 wrote it (before uploads kept an Object Lock).
#[derive(Deserialize)]
struct UploadV1 {
    key: String,
    upload_id: String,
    initiated_ns: i64,
    meta: ObjectMeta,
    tags: Vec<(String, String)>,
    uid: u32,
    gid: u32,
    parts: Vec<(u32, PartRecord)>,
}

impl From<UploadV1> for UploadV2 {
    fn from(o: UploadV1) -> Self {
        UploadV2 {
            key: o.key,
            upload_id: o.upload_id,
            initiated_ns: o.initiated_ns,
            meta: o.meta,
            tags: o.tags,
            uid: o.uid,
            gid: o.gid,
            parts: o.parts,
            lock: None,
        }
    }
}

/// An upload record as version 2 wrote it (before uploads kept an ACL).
#[derive(Deserialize)]
struct UploadV2 {
    key: String,
    upload_id: String,
    initiated_ns: i64,
    meta: ObjectMeta,
    tags: Vec<(String, String)>,
    uid: u32,
    gid: u32,
    parts: Vec<(u32, PartRecord)>,
    lock: Option<ObjectLock>,
}

impl From<UploadV2> for UploadInfo {
    fn from(o: UploadV2) -> Self {
        UploadInfo {
            key: o.key,
            upload_id: o.upload_id,
            initiated_ns: o.initiated_ns,
            meta: o.meta,
            tags: o.tags,
            uid: o.uid,
            gid: o.gid,
            parts: o.parts,
            lock: o.lock,
            acl: None,
        }
    }
}

/// Decodes a stored upload record (any version).
pub(crate) fn decode_upload(bytes: &[u8]) -> Result<UploadInfo, StoreError> {
    decode_v3::<UploadInfo, UploadV2, UploadV1>(bytes)
}

fn load_upload(
    txn: &Txn<'_>,
    keys: &Keys,
    path: &[String],
    upload_id: &str,
) -> Result<(Vec<u8>, UploadInfo), MetaError> {
    let key = upload_key(keys, path, upload_id);
    match txn.get(&key).map_err(internal)? {
        Some(v) => Ok((key, decode_upload(&v).map_err(internal)?)),
        None => Err(MetaError::NoSuchUpload),
    }
}

/// `saker admin sse rewrap` of an upload in progress: its data key, wrapped as `from`, is
/// wrapped as `to` from now on ([`super::files::rewrap_in`]).
pub(super) fn rewrap_upload(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    path: &[String],
    upload_id: &str,
    from: &[u8],
    to: &[u8],
) -> OpResult {
    check_path(path, 2)?;
    let (key, mut info) = load_upload(txn, ctx.keys, path, upload_id)?;
    if super::files::rewrap_in(&mut info.meta, from, to)? {
        txn.put(key, encode_v3(&info));
    }
    Ok(MetaResponse::Done)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn create_upload(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    upload_id: &str,
    meta: &ObjectMeta,
    tags: &[(String, String)],
    (uid, gid, acl): (u32, u32, Option<String>),
    lock: Option<ObjectLock>,
) -> OpResult {
    check_path(path, 2)?;
    resolve_parents(txn, ctx.ns, &path[..2]).map_err(|e| match e {
        MetaError::Unavailable(_) | MetaError::NotLeader { .. } => e,
        _ => MetaError::NoSuchBucket,
    })?;
    let info = UploadInfo {
        key: path[1..].join("/"),
        upload_id: upload_id.to_string(),
        initiated_ns: ctx.now_ns,
        meta: meta.clone(),
        tags: tags.to_vec(),
        uid,
        gid,
        parts: Vec::new(),
        lock,
        acl,
    };
    txn.put(upload_key(ctx.keys, path, upload_id), encode_v3(&info));
    Ok(MetaResponse::Done)
}

pub(super) fn put_part(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    upload_id: &str,
    part_number: u32,
    part: &PartRecord,
) -> OpResult {
    check_path(path, 2)?;
    load_upload(txn, ctx.keys, path, upload_id)?;
    let key = ctx.keys.part(upload_id, part_number);
    if let Some(old) = txn.get(&key).map_err(internal)? {
        let old: PartRecord = decode(&old).map_err(internal)?;
        release(txn, ctx, &old.layout);
    }
    let mut part = part.clone();
    part.mtime_ns = ctx.now_ns;
    txn.put(key, encode(&part));
    Ok(MetaResponse::Done)
}

/// All parts of an upload, by number.
pub fn upload_parts<V: crate::tree::View + ?Sized>(
    v: &V,
    keys: &Keys,
    upload_id: &str,
) -> Result<Vec<(u32, PartRecord)>, MetaError> {
    let start = keys.parts_of(upload_id);
    let end = prefix_end(&start).expect("prefix end");
    let mut out = Vec::new();
    for (k, v) in v.scan(&start, &end, usize::MAX).map_err(internal)? {
        let num = k[start.len()..]
            .try_into()
            .map(u32::from_be_bytes)
            .map_err(|_| MetaError::Internal("bad part key".into()))?;
        out.push((num, decode(&v).map_err(internal)?));
    }
    Ok(out)
}

pub(super) fn drop_upload_parts(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    upload_id: &str,
) -> Result<(), MetaError> {
    for (num, part) in upload_parts(txn, ctx.keys, upload_id)? {
        release(txn, ctx, &part.layout);
        txn.delete(ctx.keys.part(upload_id, num));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn complete_upload(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    upload_id: &str,
    wanted: &[(u32, String)],
    etag: &str,
    checksums: &Checksums,
    min_part_size: u64,
    cond: Option<&WriteCond>,
    versioning: Versioning,
) -> OpResult {
    check_path(path, 2)?;
    let (ukey, info) = load_upload(txn, ctx.keys, path, upload_id)?;
    if wanted.is_empty() {
        return Err(MetaError::Invalid(
            "at least one part must be specified".into(),
        ));
    }
    if wanted.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(MetaError::InvalidPartOrder);
    }
    let stored = upload_parts(txn, ctx.keys, upload_id)?;
    let mut chunks = Vec::new();
    let mut parts = Vec::new();
    let mut size = 0u64;
    let mut used = std::collections::BTreeSet::new();
    for (i, (num, want_etag)) in wanted.iter().enumerate() {
        let Some((_, rec)) = stored.iter().find(|(n, _)| n == num) else {
            return Err(MetaError::InvalidPart(format!(
                "part {num} was not uploaded"
            )));
        };
        if rec.etag.trim_matches('"') != want_etag.trim_matches('"') {
            return Err(MetaError::InvalidPart(format!(
                "part {num} has a different ETag"
            )));
        }
        if i + 1 < wanted.len() && rec.size < min_part_size {
            return Err(MetaError::EntityTooSmall);
        }
        used.insert(*num);
        size += rec.size;
        chunks.extend_from_slice(rec.layout.chunks());
        parts.push(PartInfo {
            size: rec.size,
            etag: rec.etag.clone(),
            checksums: rec.checksums.clone(),
        });
    }
    let mut meta = info.meta.clone();
    meta.checksums = checksums.clone();
    if let Some(sse) = meta.sse.as_mut() {
        // Each part was encrypted as a stream of its own, known by its number.
        sse.parts = wanted.iter().map(|(n, _)| *n).collect();
    }
    let obj = NewObject {
        size,
        etag: etag.to_string(),
        layout: Layout::Chunks(chunks),
        parts,
        meta,
        inline: None::<Bytes>,
        tags: info.tags.clone(),
        uid: info.uid,
        gid: info.gid,
        lock: info.lock,
        acl: info.acl.clone(),
        copied: false,
    };
    let result = put_object(txn, ctx, path, &obj, cond, versioning)?;
    for (num, part) in stored {
        if !used.contains(&num) {
            release(txn, ctx, &part.layout);
        }
        txn.delete(ctx.keys.part(upload_id, num));
    }
    txn.delete(ukey);
    Ok(result)
}

pub(super) fn abort_upload(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    upload_id: &str,
) -> OpResult {
    check_path(path, 2)?;
    let (ukey, _) = load_upload(txn, ctx.keys, path, upload_id)?;
    drop_upload_parts(txn, ctx, upload_id)?;
    txn.delete(ukey);
    Ok(MetaResponse::Done)
}
