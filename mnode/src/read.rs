//! Read operations, served from a group's applied state without going through raft.

use bytes::Bytes;
use saker_rpc::{
    access, Attr, Cred, Dentry, DirUsage, Entry, InodeId, Layout, MetaError, MetaRequest,
    MetaResponse, ObjectMeta, ObjectView, ScanReader, VersionEntry, VersionKind, Want,
    NULL_VERSION,
};

use crate::keys::{Keys, PayloadKind};
use crate::ops::{retention, upload_parts, versions};
use crate::perm;
use crate::records::{decode, decode_bytes};
use crate::store::prefix_end;
use crate::tree::{
    child, for_each_value, internal, read_payload, resolve_parents, root_attr, shared_inode,
    target, Child, Resolver, View,
};

pub(crate) type OpResult = Result<MetaResponse, MetaError>;

pub fn apply_read<V: View + ?Sized>(v: &V, r: &Resolver<'_>, req: &MetaRequest) -> OpResult {
    let keys = r.keys;
    match req {
        MetaRequest::Lookup { path, want } => lookup(v, r, path, *want, None),
        MetaRequest::Access {
            path,
            mask,
            cred,
            want,
        } => lookup(v, r, path, *want, Some((cred, *mask))),
        MetaRequest::LookupDentry { pid, name } => lookup_dentry(v, keys, *pid, name),
        MetaRequest::DirUsage { dirs } => dir_usage(v, keys, dirs),
        MetaRequest::Scan {
            dir,
            start_after,
            limit,
            reader,
        } => {
            if let Some(reader) = reader {
                may_list(v, r, *dir, reader)?;
            }
            let mut page = scan(v, keys, *dir, start_after, *limit)?;
            if let (Some(_), MetaResponse::Entries(entries)) = (reader, &mut page) {
                // A listing needs names and attributes, not where the bytes are.
                for e in entries {
                    match &mut e.attr.layout {
                        Layout::Chunks(chunks) => chunks.clear(),
                        Layout::Coded(coded) => {
                            coded.chunks.clear();
                            coded.stored.clear();
                        }
                        _ => {}
                    }
                }
            }
            Ok(page)
        }
        MetaRequest::ListUploads {
            bucket,
            prefix,
            key_marker,
            upload_id_marker,
            limit,
        } => list_uploads(
            v,
            keys,
            bucket,
            prefix,
            key_marker,
            upload_id_marker,
            *limit,
        ),
        MetaRequest::GetUpload { path, upload_id } => get_upload(v, keys, path, upload_id),
        MetaRequest::LookupVersion {
            path,
            version_id,
            want,
        } => lookup_version(v, r, path, version_id, *want),
        MetaRequest::ScanVersions {
            bucket,
            prefix,
            key_marker,
            id_marker,
            limit,
            with_current,
        } => {
            let page = scan_versions(v, keys, bucket, prefix, key_marker, *id_marker, *limit)?;
            match page {
                MetaResponse::Versions(mut out)
                    if *with_current && out.len() >= *limit as usize =>
                {
                    if let Some(c) = current_beyond(v, keys, bucket, out.last().expect("full"))? {
                        out.insert(0, c);
                    }
                    Ok(MetaResponse::Versions(out))
                }
                other => Ok(other),
            }
        }
        MetaRequest::GcDue { now_ns, limit } => crate::refs::gc_due(v, keys, *now_ns, *limit),
        MetaRequest::TierGcDue { now_ns, limit } => {
            crate::refs::tier_gc_due(v, keys, *now_ns, *limit)
        }
        MetaRequest::ChunkRefs {
            after,
            limit,
            leaks,
        } => crate::refs::chunk_refs(v, keys, *after, *limit, *leaks),
        MetaRequest::CodedRefs { after, limit } => crate::refs::coded_refs(v, keys, *after, *limit),
        MetaRequest::RepairDue { limit } => crate::refs::repair_due(v, keys, *limit),
        MetaRequest::TierRefs { tier } => crate::refs::tier_refs(v, keys, tier),
        MetaRequest::LinkPending { id, token } => Ok(MetaResponse::Flag(
            v.get(&keys.link_token(*id, *token))
                .map_err(internal)?
                .is_some(),
        )),
        MetaRequest::SharedAttrs { ids } => {
            let mut out = Vec::with_capacity(ids.len());
            for &id in ids {
                out.extend(shared_inode(v, keys, id)?.map(|loc| loc.attr));
            }
            Ok(MetaResponse::Attrs(out))
        }
        MetaRequest::Shared { id, op } => match **op {
            MetaRequest::Lookup { .. } | MetaRequest::Access { .. } => {
                r.set_shared(Some(*id));
                let result = apply_read(v, r, op);
                r.set_shared(None);
                result
            }
            _ => Err(MetaError::Invalid(format!(
                "{} does not apply to a shared inode",
                op.op_name()
            ))),
        },
        other => Err(MetaError::Invalid(format!(
            "{} is not a read",
            other.op_name()
        ))),
    }
}

/// `Lookup`, and with `check` = (caller, mask) the POSIX checks of `Access`.
fn lookup<V: View + ?Sized>(
    v: &V,
    r: &Resolver<'_>,
    path: &[String],
    want: Want,
    check: Option<(&Cred, u32)>,
) -> OpResult {
    let keys = r.keys;
    if path.is_empty() {
        let attr = root_attr();
        if let Some((cred, mask)) = check {
            if mask & access::DELETE != 0 {
                return Err(MetaError::Invalid("the root cannot be removed".into()));
            }
            perm::check(&attr, cred, mask)?;
        }
        return Ok(MetaResponse::Object(Box::new(ObjectView {
            attr,
            version_id: None,
            meta: None,
            data: None,
            tags: None,
            lock: None,
            acl: None,
            grants: Vec::new(),
        })));
    }
    let chain = resolve_parents(v, r, path).map_err(|e| match e {
        MetaError::MissingParent { .. } => MetaError::NotFound,
        MetaError::Conflict { .. } => MetaError::NotDir,
        e => e,
    })?;
    if let Some((cred, _)) = check {
        perm::search(&chain, Some(cred))?;
    }
    let pid = chain.last().expect("root").attr.id;
    let name = path.last().expect("non-empty");
    let found = if want.link {
        child(v, keys, pid, name)?
    } else {
        target(v, r, pid, name)?
    };
    let attr = match found {
        Child::Dir(loc) | Child::Other(loc) => loc.attr,
        Child::None if path.len() == 1 && check.is_none() => return Err(MetaError::NoSuchBucket),
        Child::None => return Err(MetaError::NotFound),
    };
    if let Some((cred, mask)) = check {
        if mask & access::DELETE != 0 {
            perm::may_delete(&chain.last().expect("root").attr, &attr, Some(cred))?;
        }
        perm::check(&attr, cred, mask & 0o7)?;
        // Writing to, truncating or removing a locked version is refused as early as open(2).
        if mask & (access::WRITE | access::DELETE) != 0
            && attr.kind == saker_rpc::FileKind::File
            && attr.layout.shared_home().is_none()
        {
            retention::lock_of(v, keys, attr.id)?.check_delete(crate::executor::now_ns(), false)?;
        }
    }
    let version_id = match (want.meta, attr.kind) {
        (true, saker_rpc::FileKind::File) if path.len() >= 2 => {
            let (bucket, key) = versions::object_key(path);
            let vid = versions::current_id(v, keys, bucket, &key, &attr)?;
            (vid != NULL_VERSION).then_some(vid)
        }
        _ => None,
    };
    view(v, keys, attr, want, version_id)
}

/// An object's view: its attributes and the payloads `want` asks for.
fn view<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    attr: Attr,
    want: Want,
    version_id: Option<String>,
) -> OpResult {
    // A hard link's own entry has no payloads.
    let want = if attr.layout.shared_home().is_some() {
        Want::ATTR
    } else {
        want
    };
    let meta = if want.meta {
        match read_payload(v, keys, attr.id, PayloadKind::Meta)? {
            Some(b) => Some(decode::<ObjectMeta>(&b).map_err(internal)?),
            None => Some(ObjectMeta::default()),
        }
    } else {
        None
    };
    let data = if want.data {
        read_payload(v, keys, attr.id, PayloadKind::Data)?
            .map(|b| decode_bytes(&b).map(Bytes::copy_from_slice))
            .transpose()
            .map_err(internal)?
    } else {
        None
    };
    let tags = if want.tags {
        match read_payload(v, keys, attr.id, PayloadKind::Tags)? {
            Some(b) => Some(decode(&b).map_err(internal)?),
            None => Some(Vec::new()),
        }
    } else {
        None
    };
    let lock = if want.lock {
        Some(retention::lock_of(v, keys, attr.id)?)
    } else {
        None
    };
    let acl = match want.acl {
        true => read_payload(v, keys, attr.id, PayloadKind::Acl)?
            .map(|b| decode(&b).map_err(internal))
            .transpose()?,
        false => None,
    };
    Ok(MetaResponse::Object(Box::new(ObjectView {
        attr,
        version_id,
        meta,
        data,
        tags,
        lock,
        acl,
        grants: Vec::new(),
    })))
}

/// One version of the object at `path` by version id: the current object if it is that
/// version, else a noncurrent one.
fn lookup_version<V: View + ?Sized>(
    v: &V,
    r: &Resolver<'_>,
    path: &[String],
    vid: &str,
    want: Want,
) -> OpResult {
    let keys = r.keys;
    if path.len() < 2 {
        return Err(MetaError::Invalid("a version names an object".into()));
    }
    let (bucket, key) = versions::object_key(path);
    if let Ok(chain) = resolve_parents(v, r, path) {
        let pid = chain.last().expect("root").attr.id;
        if let Child::Other(loc) = target(v, r, pid, path.last().expect("len"))? {
            let current = versions::current_id(v, keys, bucket, &key, &loc.attr)?;
            if loc.attr.kind == saker_rpc::FileKind::File && current == vid {
                let own = (current != NULL_VERSION).then_some(current);
                return view(v, keys, loc.attr, want, own);
            }
        }
    }
    let Some(found) = versions::find(v, keys, bucket, &key, vid)? else {
        return Err(MetaError::NoSuchVersion);
    };
    match found.stored.kind {
        VersionKind::Object(attr) => {
            let own = (vid != NULL_VERSION).then(|| vid.to_string());
            view(v, keys, *attr, want, own)
        }
        VersionKind::DeleteMarker => Err(MetaError::DeleteMarker(vid.to_string())),
        VersionKind::Current => Err(MetaError::NoSuchVersion),
    }
}

/// The versions of `bucket`'s keys under `prefix` after (`key_marker`, `id_marker`).
fn scan_versions<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    prefix: &str,
    key_marker: &str,
    id_marker: Option<InodeId>,
    limit: u32,
) -> OpResult {
    let base = keys.versions_of(bucket);
    let end = prefix_end(&base).expect("prefix end");
    let mut from = base.clone();
    match id_marker {
        // Within the marker's key, the versions older than the marker.
        Some(id) if key_marker >= prefix => {
            from.extend_from_slice(key_marker.as_bytes());
            from.push(0);
            from.extend_from_slice(&(!id).to_be_bytes());
            from.push(0);
        }
        _ if !key_marker.is_empty() && key_marker >= prefix => {
            // After every version of the marker's key.
            from.extend_from_slice(key_marker.as_bytes());
            from.push(1);
        }
        _ => from.extend_from_slice(prefix.as_bytes()),
    }
    let mut out = Vec::new();
    'outer: loop {
        let batch = v.scan(&from, &end, 256).map_err(internal)?;
        let Some((last, _)) = batch.last() else {
            break;
        };
        from = last.clone();
        from.push(0);
        for (k, val) in &batch {
            let entry = version_entry(k, val, base.len())?;
            if !entry.key.starts_with(prefix) {
                break 'outer;
            }
            out.push(entry);
            if out.len() >= limit as usize {
                break 'outer;
            }
        }
    }
    Ok(MetaResponse::Versions(out))
}

/// The current record of `last`'s key further on than `last` (none if the page had it
/// already or the key has none): the rest of one key's versions is read.
fn current_beyond<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    last: &VersionEntry,
) -> Result<Option<VersionEntry>, MetaError> {
    if matches!(last.kind, VersionKind::Current) {
        return Ok(None);
    }
    let mut from = keys.version(bucket, &last.key, last.id);
    from.push(0);
    let end = prefix_end(&keys.versions_of_key(bucket, &last.key)).expect("prefix end");
    let base = keys.versions_of(bucket).len();
    let mut found = None;
    crate::tree::for_each_entry(v, &from, &end, |k, val| {
        let entry = version_entry(k, val, base)?;
        let current = matches!(entry.kind, VersionKind::Current);
        if current {
            found = Some(entry);
        }
        Ok(!current)
    })?;
    Ok(found)
}

/// A version record (key and value) as listings show it, its bucket's prefix `base` long.
fn version_entry(k: &[u8], val: &[u8], base: usize) -> Result<VersionEntry, MetaError> {
    let (key, id) = Keys::version_parts(k, base)
        .ok_or_else(|| MetaError::Internal("bad version key".into()))?;
    let s: versions::Stored = decode(val).map_err(internal)?;
    Ok(VersionEntry {
        key,
        id,
        version_id: s.version_id,
        kind: s.kind,
        mtime_ns: s.mtime_ns,
    })
}

/// A directory entry this group owns, for another group's replica.
fn lookup_dentry<V: View + ?Sized>(v: &V, keys: &Keys, pid: InodeId, name: &str) -> OpResult {
    match child(v, keys, pid, name)? {
        Child::Dir(loc) => Ok(MetaResponse::Dentry(Dentry {
            id: loc.attr.id,
            mode: loc.attr.mode,
            uid: loc.attr.uid,
            gid: loc.attr.gid,
        })),
        Child::Other(_) => Err(MetaError::NotDir),
        Child::None => Err(MetaError::NotFound),
    }
}

/// What this group holds directly under each of `dirs`.
pub fn dir_usage<V: View + ?Sized>(v: &V, keys: &Keys, dirs: &[InodeId]) -> OpResult {
    let mut usage = DirUsage::default();
    for &dir in dirs {
        let start = keys.children(dir);
        let end = prefix_end(&start).expect("prefix end");
        for_each_value(v, &start, &end, |val| {
            let attr: Attr = decode(val).map_err(internal)?;
            if attr.is_dir() && attr.implicit {
                usage.implicit_dirs.push(attr.id);
                Ok(true)
            } else {
                usage.objects = true;
                Ok(false)
            }
        })?;
        if usage.objects {
            break;
        }
    }
    Ok(MetaResponse::Usage(usage))
}

/// Whether `reader` may list directory `dir`: `reader.path` resolves to it, with search
/// permission on every directory above and read and search permission on it.
fn may_list<V: View + ?Sized>(
    v: &V,
    r: &Resolver<'_>,
    dir: InodeId,
    reader: &ScanReader,
) -> Result<(), MetaError> {
    let chain = resolve_parents(v, r, &reader.entry_path()).map_err(|e| match e {
        MetaError::MissingParent { .. } | MetaError::NoSuchBucket => MetaError::NotFound,
        MetaError::Conflict { .. } => MetaError::NotDir,
        e => e,
    })?;
    let (listed, above) = chain.split_last().expect("the chain starts with the root");
    perm::search(above, Some(&reader.cred))?;
    perm::check(&listed.attr, &reader.cred, access::READ | access::EXEC)?;
    if listed.attr.id != dir {
        // The path names another directory now (renamed, or made anew).
        return Err(MetaError::NotFound);
    }
    Ok(())
}

fn scan<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    dir: u64,
    start_after: &[u8],
    limit: u32,
) -> OpResult {
    let prefix = keys.children(dir);
    let end = prefix_end(&prefix).expect("prefix end");
    let mut start = prefix.clone();
    if !start_after.is_empty() {
        start.extend_from_slice(start_after);
        start.push(0); // the smallest key after start_after
    }
    let mut out = Vec::new();
    for (k, val) in v.scan(&start, &end, limit as usize).map_err(internal)? {
        let sort_name = &k[prefix.len()..];
        let attr: Attr = decode(&val).map_err(internal)?;
        let name = sort_name
            .strip_suffix(b"/")
            .filter(|_| attr.is_dir())
            .unwrap_or(sort_name);
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| MetaError::Internal("non-UTF-8 name".into()))?;
        // A hard link whose shared inode lives here is answered with it (the MNode asks the
        // home group for the others).
        let attr = match attr.layout.shared_home() {
            Some(home) if home == keys.group => shared_inode(v, keys, attr.id)?
                .map(|loc| loc.attr)
                .unwrap_or(attr),
            _ => attr,
        };
        out.push(Entry { name, attr });
    }
    Ok(MetaResponse::Entries(out))
}

fn list_uploads<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    prefix: &str,
    key_marker: &str,
    upload_id_marker: &str,
    limit: u32,
) -> OpResult {
    let base = keys.uploads_of(bucket);
    let end = prefix_end(&base).expect("prefix end");
    let mut start = base.clone();
    start.extend_from_slice(prefix.as_bytes().max(key_marker.as_bytes()));
    let mut out = Vec::new();
    let mut from = start;
    'outer: loop {
        let batch = v.scan(&from, &end, 256).map_err(internal)?;
        if batch.is_empty() {
            break;
        }
        for (_, val) in &batch {
            let info = crate::ops::decode_upload(val).map_err(internal)?;
            if !info.key.starts_with(prefix) {
                if info.key.as_str() > prefix {
                    break 'outer;
                }
                continue;
            }
            let after_marker = match info.key.as_str().cmp(key_marker) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => {
                    !upload_id_marker.is_empty() && info.upload_id.as_str() > upload_id_marker
                }
                std::cmp::Ordering::Less => false,
            };
            if key_marker.is_empty() || after_marker {
                out.push(info);
                if out.len() >= limit as usize {
                    break 'outer;
                }
            }
        }
        let mut next = batch.last().expect("non-empty").0.clone();
        next.push(0);
        from = next;
    }
    Ok(MetaResponse::Uploads(out))
}

fn get_upload<V: View + ?Sized>(v: &V, keys: &Keys, path: &[String], upload_id: &str) -> OpResult {
    if path.len() < 2 {
        return Err(MetaError::NoSuchUpload);
    }
    let key = keys.upload(&path[0], &path[1..].join("/"), upload_id);
    let Some(bytes) = v.get(&key).map_err(internal)? else {
        return Err(MetaError::NoSuchUpload);
    };
    let mut info = crate::ops::decode_upload(&bytes).map_err(internal)?;
    info.parts = upload_parts(v, keys, upload_id)?;
    Ok(MetaResponse::Upload(Box::new(info)))
}
