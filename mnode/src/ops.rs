//! Evaluation of write operations: the sans-IO core of the executor.
//!
//! Each op reads through a [`Txn`] (store + earlier ops of the batch), checks, and records its
//! physical mutations. Nothing here does I/O beyond the store reads, so every rule of the
//! namespace (implicit directories, reaping, conflicts, multipart) is unit-testable.
//!
//! Hard links (SwitchFS §5.5): `LinkSource` moves a file's attributes from its (pid, name)
//! record to the shared table of its group (keyed by the inode id, like its payloads, so
//! nothing else moves) and leaves a reference there ([`Layout::Shared`] with the home group);
//! `LinkTarget` stores another reference at the new name. Ops on the file itself find their
//! target through [`target`]: the shared record when it is here, else a retry that forwards
//! the op to the home (`MetaRequest::Shared`). Removing a name removes its reference and
//! sends the home a link-count change as a change-log record (as for a parent directory); the
//! home drops the file, its payloads and chunks when the count reaches 0. Moves of a name
//! move only the reference.

use bytes::Bytes;
use saker_namespace::GroupId;
use saker_rpc::{
    access, Attr, Checksums, ChunkRef, Cred, DirChange, FileKind, InodeId, Layout, MetaError,
    MetaRequest, MetaResponse, NewObject, ObjectMeta, PartInfo, PartRecord, RemoveCond, SetTime,
    UploadInfo, XattrMode,
};

use crate::keys::{Keys, PayloadKind, PAYLOAD_KINDS};
use crate::perm;
use crate::records::{decode, encode, encode_bytes};
use crate::store::prefix_end;
use crate::tree::{
    child, has_children, internal, resolve_parents, shared_inode, target, Child, Located, Resolver,
    Retry,
};
use crate::txn::Txn;

/// Per-batch context of the executor.
pub struct Ctx<'k> {
    pub keys: &'k Keys,
    pub ns: &'k Resolver<'k>,
    pub now_ns: i64,
    /// How long a released chunk stays readable before it is deleted.
    pub gc_grace_ns: i64,
    /// Next inode id to hand out (advanced by ops that allocate).
    pub next_id: u64,
    /// Parent-directory changes of the current op for directories other groups own.
    pub changes: Vec<(GroupId, DirChange)>,
    /// A directory the current op may have left empty: the MNode asks the coordinator to reap
    /// it after the op commits.
    pub reap: Option<Vec<String>>,
    /// The current op already had an implicit directory in its way reaped: if one is still
    /// there, it is not empty.
    pub reaped: bool,
}

impl Ctx<'_> {
    fn alloc_id(&mut self) -> InodeId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

type OpResult = Result<MetaResponse, MetaError>;

/// Evaluates one write op against `txn`. On error the caller rolls the op back.
pub fn apply_write(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, req: &MetaRequest) -> OpResult {
    match req {
        MetaRequest::PutObject { path, obj } => put_object(txn, ctx, path, obj),
        MetaRequest::PutDirMarker { path, obj } => put_dir_marker(txn, ctx, path, obj),
        MetaRequest::MkdirImplicit { path, uid, gid } => {
            mkdir(txn, ctx, path, DirSpec::implicit(*uid, *gid), None)
        }
        MetaRequest::Mkdir {
            path,
            mode,
            uid,
            gid,
            cred,
        } => {
            let mut spec = DirSpec::posix(*mode, *uid, *gid);
            if path.len() == 1 {
                saker_namespace::validate_bucket_name(&path[0])
                    .map_err(|e| MetaError::Invalid(e.to_string()))?;
                spec.bucket = true;
            }
            mkdir(txn, ctx, path, spec, cred.as_ref())
        }
        MetaRequest::CreateBucket { name, uid, gid } => mkdir(
            txn,
            ctx,
            std::slice::from_ref(name),
            DirSpec::bucket(*uid, *gid),
            None,
        ),
        MetaRequest::Create {
            path,
            mode,
            uid,
            gid,
            exclusive,
            symlink,
            special,
            cred,
            defer: _,
        } => create(
            txn,
            ctx,
            path,
            NewFile {
                mode: *mode,
                uid: *uid,
                gid: *gid,
                exclusive: *exclusive,
                symlink: symlink.as_deref(),
                special: *special,
            },
            cred.as_ref(),
        ),
        MetaRequest::Rename {
            from,
            to,
            noreplace,
            cred,
        } => rename(txn, ctx, from, to, *noreplace, cred.as_ref()),
        MetaRequest::RenameIn {
            from,
            to,
            attr,
            meta,
            data,
            tags,
            noreplace,
            cred,
        } => rename_in(
            txn,
            ctx,
            from,
            to,
            attr,
            &NewObject {
                meta: meta.clone(),
                inline: data.clone(),
                tags: tags.clone(),
                ..Default::default()
            },
            *noreplace,
            cred.as_ref(),
        ),
        MetaRequest::RenameOut { from, id } => rename_out(txn, ctx, from, *id),
        MetaRequest::AdoptEntry {
            pid,
            name,
            attr,
            meta,
            data,
            tags,
        } => {
            let payloads = NewObject {
                meta: meta.clone(),
                inline: data.clone(),
                tags: tags.clone(),
                ..Default::default()
            };
            adopt_entry(txn, ctx, *pid, name, attr, &payloads)
        }
        MetaRequest::DropEntry { pid, name, id } => drop_entry(txn, ctx, *pid, name, *id),
        MetaRequest::RenameDirIn {
            to,
            attr,
            meta,
            data,
            tags,
            replace,
            cred,
        } => {
            let payloads = NewObject {
                meta: meta.clone(),
                inline: data.clone(),
                tags: tags.clone(),
                ..Default::default()
            };
            rename_dir_in(txn, ctx, to, attr, &payloads, *replace, cred.as_ref())
        }
        MetaRequest::RenameDirOut { from, id } => rename_dir_out(txn, ctx, from, *id),
        MetaRequest::CommitFile {
            path,
            id,
            size,
            etag,
            layout,
            inline,
        } => commit_file(txn, ctx, path, *id, *size, etag, layout, inline.as_ref()),
        MetaRequest::DeleteObject { path, dir_marker } => {
            delete_object(txn, ctx, path, *dir_marker)
        }
        MetaRequest::Unlink { path, cred } => unlink(txn, ctx, path, cred.as_ref()),
        set @ MetaRequest::SetAttr { .. } => set_attr_request(txn, ctx, set, None),
        MetaRequest::ApplyDirAttr { dir, set } => set_attr_request(txn, ctx, set, Some(*dir)),
        MetaRequest::PutTags {
            path,
            dir_marker,
            tags,
        } => put_tags(txn, ctx, path, *dir_marker, tags.as_ref()),
        MetaRequest::SetUserMeta {
            path,
            name,
            value,
            mode,
            cred,
        } => set_user_meta(txn, ctx, path, name, value.as_deref(), *mode, cred),
        MetaRequest::CreateUpload {
            path,
            upload_id,
            meta,
            tags,
            uid,
            gid,
        } => create_upload(txn, ctx, path, upload_id, meta, tags, *uid, *gid),
        MetaRequest::PutPart {
            path,
            upload_id,
            part_number,
            part,
        } => put_part(txn, ctx, path, upload_id, *part_number, part),
        MetaRequest::CompleteUpload {
            path,
            upload_id,
            parts,
            etag,
            checksums,
            min_part_size,
        } => complete_upload(
            txn,
            ctx,
            path,
            upload_id,
            parts,
            etag,
            checksums,
            *min_part_size,
        ),
        MetaRequest::AbortUpload { path, upload_id } => abort_upload(txn, ctx, path, upload_id),
        MetaRequest::GcDone { keys } => {
            for k in keys {
                txn.delete(k.clone());
            }
            Ok(MetaResponse::Done)
        }
        MetaRequest::ApplyChanges { source, records } => apply_changes(txn, ctx, *source, records),
        MetaRequest::RemoveDir { path, dir, cond } => remove_dir_op(txn, ctx, path, *dir, *cond),
        MetaRequest::PurgeDirs { bucket, dirs } => purge_dirs(txn, ctx, bucket, dirs),
        MetaRequest::LinkSource {
            path,
            cred,
            expect,
            token,
        } => link_source(txn, ctx, path, cred.as_ref(), *expect, *token),
        MetaRequest::LinkTarget {
            path,
            attr,
            cred,
            token,
        } => link_target(txn, ctx, path, attr, cred.as_ref(), *token),
        MetaRequest::ForgetLink { token } => {
            txn.delete(ctx.keys.link_stored(*token));
            Ok(MetaResponse::Done)
        }
        MetaRequest::SettleLink { id, token, kept } => settle_link(txn, ctx, *id, *token, *kept),
        MetaRequest::Shared { id, op } => shared_op(txn, ctx, *id, op),
        other => Err(MetaError::Invalid(format!(
            "{} is not a write",
            other.op_name()
        ))),
    }
}

fn check_path(path: &[String], min: usize) -> Result<(), MetaError> {
    if path.len() < min {
        return Err(MetaError::Invalid("path too short".into()));
    }
    Ok(())
}

fn put_attr(txn: &mut Txn<'_>, key: &[u8], attr: &Attr) {
    txn.put(key.to_vec(), encode(attr));
}

/// Queues `chunks` for deletion after the grace period.
fn release_chunks(txn: &mut Txn<'_>, ctx: &Ctx<'_>, chunks: &[ChunkRef]) {
    for c in chunks {
        txn.put(ctx.keys.gc(ctx.now_ns + ctx.gc_grace_ns, c.id), Vec::new());
    }
}

fn delete_payloads(txn: &mut Txn<'_>, keys: &Keys, id: InodeId) {
    for kind in PAYLOAD_KINDS {
        txn.delete(keys.payload(id, kind));
    }
}

/// Deletes the payloads of the inode record `attr` at a name that goes; a hard link's
/// reference has none (they stay with the shared inode).
fn delete_name_payloads(txn: &mut Txn<'_>, keys: &Keys, attr: &Attr) {
    if attr.layout.shared_home().is_none() {
        delete_payloads(txn, keys, attr.id);
    }
}

/// Applies a directory-entry change to the parent at the end of `chain`: to its record when this
/// group owns it, else as a change-log entry for its owner.
fn touch_parent(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    entries: i64,
    links: i64,
) {
    let parent = chain.last_mut().expect("chain has the root");
    let change = DirChange {
        dir: parent.attr.id,
        entries,
        links,
        mtime_ns: ctx.now_ns,
    };
    match parent.key.clone() {
        Some(key) => {
            change_attr(&mut parent.attr, &change);
            put_attr(txn, &key, &parent.attr);
        }
        // The root keeps no record.
        None if parent.attr.id == saker_namespace::ROOT_ID => {}
        None => ctx.changes.push((parent.owner, change)),
    }
}

fn change_attr(a: &mut Attr, c: &DirChange) {
    a.children = (a.children as i64 + c.entries).max(0) as u64;
    a.nlink = (a.nlink as i64 + c.links).max(2) as u32;
    a.mtime_ns = a.mtime_ns.max(c.mtime_ns);
    a.ctime_ns = a.ctime_ns.max(c.mtime_ns);
}

/// Writes a directory's record and its id index.
fn put_dir(txn: &mut Txn<'_>, keys: &Keys, key: &[u8], attr: &Attr) {
    put_attr(txn, key, attr);
    txn.put(keys.dir_index(attr.id), key.to_vec());
}

fn new_attr(ctx: &mut Ctx<'_>, kind: FileKind, mode: u32, uid: u32, gid: u32) -> Attr {
    Attr {
        id: ctx.alloc_id(),
        kind,
        mode,
        uid,
        gid,
        nlink: if kind == FileKind::Dir { 2 } else { 1 },
        size: 0,
        atime_ns: ctx.now_ns,
        mtime_ns: ctx.now_ns,
        ctime_ns: ctx.now_ns,
        etag: String::new(),
        implicit: false,
        children: 0,
        layout: Layout::Inline,
        parts: Vec::new(),
        s3_mtime_ns: ctx.now_ns,
    }
}

/// Writes the payload records of an object or marker.
fn write_payloads(txn: &mut Txn<'_>, keys: &Keys, id: InodeId, obj: &NewObject) {
    match &obj.inline {
        Some(data) => txn.put(keys.payload(id, PayloadKind::Data), encode_bytes(data)),
        None => txn.delete(keys.payload(id, PayloadKind::Data)),
    }
    txn.put(keys.payload(id, PayloadKind::Meta), encode(&obj.meta));
    if obj.tags.is_empty() {
        txn.delete(keys.payload(id, PayloadKind::Tags));
    } else {
        txn.put(keys.payload(id, PayloadKind::Tags), encode(&obj.tags));
    }
}

fn put_object(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, path: &[String], obj: &NewObject) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path)?;
    let name = path.last().expect("checked length");
    let pid = chain.last().expect("root").attr.id;
    let existing = child(txn, ctx.keys, pid, name)?;
    // An empty implicit directory is invisible to S3: the object takes its place once the
    // coordinator has reaped it (its entries may live on any group).
    if let Child::Dir(loc) = &existing {
        if loc.attr.implicit && !ctx.reaped {
            return Err(ctx.ns.retry(Retry::Reap(path.to_vec())));
        }
    }
    let (key, mut attr, is_new) = match existing {
        Child::Dir(_) => {
            return Err(MetaError::Conflict {
                path: path.join("/"),
            })
        }
        Child::Other(loc) => {
            if loc.attr.kind != FileKind::File {
                return Err(MetaError::Conflict {
                    path: path.join("/"),
                });
            }
            if let Some(home) = loc.attr.layout.shared_home() {
                // A hard link: the key gets a new object of its own (as a rename over it
                // would); the file lives on under its other names.
                touch_shared(txn, ctx, home, loc.attr.id, -1)?;
                let attr = new_attr(ctx, FileKind::File, 0o644, obj.uid, obj.gid);
                (loc.key.expect("child has a key"), attr, false)
            } else {
                release_chunks(txn, ctx, loc.attr.layout.chunks());
                (loc.key.expect("child has a key"), loc.attr, false)
            }
        }
        Child::None => {
            let attr = new_attr(ctx, FileKind::File, 0o644, obj.uid, obj.gid);
            (ctx.keys.inode(pid, name, false), attr, true)
        }
    };
    attr.size = obj.size;
    attr.etag = obj.etag.clone();
    attr.layout = obj.layout.clone();
    attr.parts = obj.parts.clone();
    attr.mtime_ns = ctx.now_ns;
    attr.ctime_ns = ctx.now_ns;
    attr.s3_mtime_ns = ctx.now_ns;
    put_attr(txn, &key, &attr);
    write_payloads(txn, ctx.keys, attr.id, obj);
    if is_new {
        touch_parent(txn, ctx, &mut chain, 1, 0);
    }
    Ok(MetaResponse::Attr(attr))
}

fn put_dir_marker(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    obj: &NewObject,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path)?;
    let name = path.last().expect("checked length");
    let pid = chain.last().expect("root").attr.id;
    let (key, mut attr, is_new) = match child(txn, ctx.keys, pid, name)? {
        Child::Other(_) => {
            return Err(MetaError::Conflict {
                path: path.join("/"),
            })
        }
        Child::Dir(loc) => (loc.key.expect("child has a key"), loc.attr, false),
        Child::None => {
            let attr = new_attr(ctx, FileKind::Dir, 0o755, obj.uid, obj.gid);
            (ctx.keys.inode(pid, name, true), attr, true)
        }
    };
    release_chunks(txn, ctx, attr.layout.chunks());
    attr.implicit = false;
    attr.etag = obj.etag.clone();
    attr.size = obj.size;
    attr.layout = obj.layout.clone();
    attr.s3_mtime_ns = ctx.now_ns;
    attr.ctime_ns = ctx.now_ns;
    put_dir(txn, ctx.keys, &key, &attr);
    write_payloads(txn, ctx.keys, attr.id, obj);
    if is_new {
        touch_parent(txn, ctx, &mut chain, 1, 1);
    }
    Ok(MetaResponse::Attr(attr))
}

struct DirSpec {
    mode: u32,
    uid: u32,
    gid: u32,
    implicit: bool,
    /// An existing directory is success (idempotent implicit creation).
    exist_ok: bool,
    bucket: bool,
}

impl DirSpec {
    fn implicit(uid: u32, gid: u32) -> Self {
        Self {
            mode: 0o755,
            uid,
            gid,
            implicit: true,
            exist_ok: true,
            bucket: false,
        }
    }
    fn posix(mode: u32, uid: u32, gid: u32) -> Self {
        Self {
            mode,
            uid,
            gid,
            implicit: false,
            exist_ok: false,
            bucket: false,
        }
    }
    fn bucket(uid: u32, gid: u32) -> Self {
        Self {
            mode: 0o755,
            uid,
            gid,
            implicit: false,
            exist_ok: false,
            bucket: true,
        }
    }
}

fn mkdir(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    mut spec: DirSpec,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(path, 1)?;
    if path.len() == 1 && !spec.bucket {
        return Err(MetaError::Invalid(
            "a top-level directory is a bucket".into(),
        ));
    }
    let mut chain = if cred.is_some() {
        resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?
    } else {
        resolve_parents(txn, ctx.ns, path)?
    };
    perm::search(&chain, cred)?;
    let parent = &chain.last().expect("root").attr;
    perm::may_create(parent, cred)?;
    if cred.is_some() && parent.mode & perm::S_ISGID != 0 {
        spec.gid = parent.gid;
        spec.mode |= perm::S_ISGID;
    }
    let name = path.last().expect("checked length");
    let pid = parent.id;
    match child(txn, ctx.keys, pid, name)? {
        Child::Dir(loc) if spec.exist_ok => return Ok(MetaResponse::Attr(loc.attr)),
        Child::Dir(_) => return Err(MetaError::Exists),
        Child::Other(_) if spec.exist_ok => {
            return Err(MetaError::Conflict {
                path: path.join("/"),
            })
        }
        Child::Other(_) => return Err(MetaError::Exists),
        Child::None => {}
    }
    let mut attr = new_attr(ctx, FileKind::Dir, spec.mode, spec.uid, spec.gid);
    attr.implicit = spec.implicit;
    put_dir(txn, ctx.keys, &ctx.keys.inode(pid, name, true), &attr);
    touch_parent(txn, ctx, &mut chain, 1, 1);
    Ok(MetaResponse::Attr(attr))
}

/// Removes the directory at the end of `chain` (which must be empty) from its parent.
fn remove_dir(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, chain: &mut Vec<Located>) {
    let dir = chain.pop().expect("chain has the directory");
    txn.delete(dir.key.expect("a local directory"));
    txn.delete(ctx.keys.dir_index(dir.attr.id));
    delete_payloads(txn, ctx.keys, dir.attr.id);
    release_chunks(txn, ctx, dir.attr.layout.chunks());
    touch_parent(txn, ctx, chain, -1, -1);
}

/// Whether `path` names a directory below a bucket, which S3 may reap.
fn reapable(path: &[String]) -> bool {
    path.len() > 1
}

fn delete_object(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir_marker: bool,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = match resolve_parents(txn, ctx.ns, path) {
        Ok(chain) => chain,
        Err(MetaError::NoSuchBucket) => return Err(MetaError::NoSuchBucket),
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => {
            return Ok(MetaResponse::Done)
        }
        Err(e) => return Err(e),
    };
    let name = path.last().expect("checked length");
    let pid = chain.last().expect("root").attr.id;
    match (child(txn, ctx.keys, pid, name)?, dir_marker) {
        (Child::Other(loc), false) if loc.attr.kind == FileKind::File => {
            remove_file(txn, ctx, &mut chain, loc)?;
            let parent = path[..path.len() - 1].to_vec();
            if reapable(&parent) && !has_children(txn, ctx.keys, pid)? {
                ctx.reap = Some(parent);
            }
        }
        (Child::Dir(loc), true) if !loc.attr.implicit => {
            // The marker goes; the directory stays as implicit until the coordinator finds it
            // empty on every group and reaps it.
            let mut attr = loc.attr;
            let marker = std::mem::take(&mut attr.layout);
            attr.implicit = true;
            attr.etag.clear();
            attr.size = 0;
            release_chunks(txn, ctx, marker.chunks());
            put_attr(txn, &loc.key.expect("a local directory"), &attr);
            delete_payloads(txn, ctx.keys, attr.id);
            ctx.reap = Some(path.to_vec());
        }
        _ => {}
    }
    Ok(MetaResponse::Done)
}

fn remove_file(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    loc: Located,
) -> Result<(), MetaError> {
    txn.delete(loc.key.expect("child has a key"));
    match loc.attr.layout.shared_home() {
        Some(home) => touch_shared(txn, ctx, home, loc.attr.id, -1)?,
        None => {
            delete_payloads(txn, ctx.keys, loc.attr.id);
            release_chunks(txn, ctx, loc.attr.layout.chunks());
        }
    }
    touch_parent(txn, ctx, chain, -1, 0);
    Ok(())
}

fn unlink(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, path: &[String], cred: Option<&Cred>) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let pid = chain.last().expect("root").attr.id;
    match child(txn, ctx.keys, pid, path.last().expect("len"))? {
        Child::Other(loc) => {
            let parent = &chain.last().expect("root").attr;
            perm::may_delete(parent, &victim(txn, ctx, parent, &loc, cred)?, cred)?;
            let removed = loc.attr.clone();
            remove_file(txn, ctx, &mut chain, loc)?;
            Ok(MetaResponse::Attr(removed))
        }
        Child::Dir(_) => Err(MetaError::IsDir),
        Child::None => Err(MetaError::NotFound),
    }
}

fn missing_as_not_found(e: MetaError) -> MetaError {
    match e {
        MetaError::MissingParent { .. } => MetaError::NotFound,
        MetaError::Conflict { .. } => MetaError::NotDir,
        e => e,
    }
}

/// The last step of the coordinator's rmdir protocol, at the directory's owner: the directory
/// is frozen and every group has reported its entries; check what this group holds once more
/// and remove it.
fn remove_dir_op(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir: InodeId,
    cond: RemoveCond,
) -> OpResult {
    check_path(path, 1)?;
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match child(txn, ctx.keys, pid, path.last().expect("len"))? {
        Child::Dir(loc) if loc.attr.id == dir => loc,
        Child::Dir(_) | Child::None if path.len() == 1 => return Err(MetaError::NoSuchBucket),
        Child::Dir(_) | Child::None => return Err(MetaError::NotFound),
        Child::Other(_) => return Err(MetaError::NotDir),
    };
    if cond == RemoveCond::ImplicitEmpty && !loc.attr.implicit {
        return Err(MetaError::NotEmpty);
    }
    if has_children(txn, ctx.keys, dir)? {
        return Err(MetaError::NotEmpty);
    }
    chain.push(loc);
    remove_dir(txn, ctx, &mut chain);
    Ok(MetaResponse::Done)
}

/// DeleteBucket's sweep on one group: the implicit directories under `dirs` (the coordinator
/// found no object below the frozen bucket) and the bucket's unfinished uploads.
fn purge_dirs(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, bucket: &str, dirs: &[InodeId]) -> OpResult {
    for &dir in dirs {
        let start = ctx.keys.children(dir);
        let end = prefix_end(&start).expect("prefix end");
        for (key, value) in txn.scan(&start, &end, usize::MAX).map_err(internal)? {
            let attr: Attr = decode(&value).map_err(internal)?;
            if attr.kind != FileKind::Dir || !attr.implicit {
                return Err(MetaError::NotEmpty);
            }
            txn.delete(key);
            txn.delete(ctx.keys.dir_index(attr.id));
            delete_payloads(txn, ctx.keys, attr.id);
        }
    }
    let upload_prefix = ctx.keys.uploads_of(bucket);
    let upload_end = prefix_end(&upload_prefix).expect("prefix end");
    for (key, value) in txn
        .scan(&upload_prefix, &upload_end, usize::MAX)
        .map_err(internal)?
    {
        let info: UploadInfo = decode(&value).map_err(internal)?;
        drop_upload_parts(txn, ctx, &info.upload_id)?;
        txn.delete(key);
    }
    Ok(MetaResponse::Done)
}

/// Change-log records pushed by group `source`, applied once each (by seq).
fn apply_changes(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    source: u32,
    records: &[(u64, Vec<DirChange>)],
) -> OpResult {
    let akey = ctx.keys.applied(source);
    let mut applied: u64 = match txn.get(&akey).map_err(internal)? {
        Some(v) => decode(&v).map_err(internal)?,
        None => 0,
    };
    for (seq, changes) in records {
        if *seq <= applied {
            continue;
        }
        for c in changes {
            // A directory removed since is skipped: its deltas no longer matter.
            let Some(key) = txn.get(&ctx.keys.dir_index(c.dir)).map_err(internal)? else {
                apply_link_change(txn, ctx, c)?;
                continue;
            };
            let Some(bytes) = txn.get(&key).map_err(internal)? else {
                continue;
            };
            let mut attr: Attr = decode(&bytes).map_err(internal)?;
            change_attr(&mut attr, c);
            put_attr(txn, &key, &attr);
        }
        applied = *seq;
    }
    txn.put(akey, encode(&applied));
    Ok(MetaResponse::Done)
}

/// What a `SetAttr` changes.
struct AttrChange {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<SetTime>,
    mtime: Option<SetTime>,
}

/// MD5 of no bytes: the ETag of an empty file.
pub const EMPTY_ETAG: &str = "d41d8cd98f00b204e9800998ecf8427e";

/// A `SetAttr` (else `Invalid`), see [`set_attr`].
fn set_attr_request(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    req: &MetaRequest,
    coordinated: Option<InodeId>,
) -> OpResult {
    let MetaRequest::SetAttr {
        path,
        mode,
        uid,
        gid,
        size,
        atime,
        mtime,
        cred,
    } = req
    else {
        return Err(MetaError::Invalid("ApplyDirAttr carries a SetAttr".into()));
    };
    let ch = AttrChange {
        mode: *mode,
        uid: *uid,
        gid: *gid,
        size: *size,
        atime: *atime,
        mtime: *mtime,
    };
    set_attr(txn, ctx, path, ch, cred.as_ref(), coordinated)
}

/// `coordinated`: the directory the coordinator froze and invalidated for this change
/// (`ApplyDirAttr`); without it, a change of a directory's mode or owner is handed to the
/// coordinator (after the caller's permission is checked, so a refused chmod costs nothing).
fn set_attr(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    ch: AttrChange,
    cred: Option<&Cred>,
    coordinated: Option<InodeId>,
) -> OpResult {
    check_path(path, 1)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match target(txn, ctx.ns, pid, path.last().expect("len"))? {
        Child::Dir(loc) | Child::Other(loc) => loc,
        Child::None => return Err(MetaError::NotFound),
    };
    let mut attr = loc.attr;
    if let Some(cred) = cred {
        check_set_attr(&attr, &ch, cred)?;
    }
    let owner_change = ch.mode.is_some() || ch.uid.is_some() || ch.gid.is_some();
    match coordinated {
        Some(dir) if attr.id != dir || attr.kind != FileKind::Dir => {
            return Err(MetaError::Internal(format!(
                "ApplyDirAttr for directory {dir} found inode {}",
                attr.id
            )))
        }
        None if owner_change && attr.kind == FileKind::Dir => {
            return Err(ctx.ns.retry(Retry::DirAttr))
        }
        _ => {}
    }
    if let Some(size) = ch.size {
        match attr.kind {
            FileKind::Dir => return Err(MetaError::IsDir),
            FileKind::File => {}
            _ => {
                return Err(MetaError::Invalid(
                    "truncate of a symlink or special file".into(),
                ))
            }
        }
        if size != 0 {
            return Err(MetaError::Invalid(
                "SetAttr truncates to 0 only; other sizes are a CommitFile".into(),
            ));
        }
        if attr.size != 0 || !attr.layout.chunks().is_empty() {
            release_chunks(txn, ctx, attr.layout.chunks());
            attr.layout = Layout::Inline;
            attr.size = 0;
            attr.parts.clear();
            attr.etag = EMPTY_ETAG.to_string();
            txn.put(
                ctx.keys.payload(attr.id, PayloadKind::Data),
                encode_bytes(&[]),
            );
        }
        attr.mtime_ns = ctx.now_ns;
        attr.s3_mtime_ns = ctx.now_ns;
    }
    if let Some(m) = ch.mode {
        attr.mode = m & 0o7777;
        // A non-root caller outside the file's group cannot keep set-group-id.
        if let Some(c) = cred {
            if c.uid != 0 && attr.kind != FileKind::Dir && !c.in_group(attr.gid) {
                attr.mode &= !perm::S_ISGID;
            }
        }
    }
    let owner_changed =
        ch.uid.is_some_and(|u| u != attr.uid) || ch.gid.is_some_and(|g| g != attr.gid);
    if let Some(u) = ch.uid {
        attr.uid = u;
    }
    if let Some(g) = ch.gid {
        attr.gid = g;
    }
    // chown clears set-user-id and set-group-id of files (as Linux does).
    let chown = ch.uid.is_some() || ch.gid.is_some();
    if cred.is_some() && (owner_changed || chown) && ch.mode.is_none() && attr.kind != FileKind::Dir
    {
        attr.mode &= !(perm::S_ISUID | perm::S_ISGID);
    }
    let resolve = |t: SetTime| match t {
        SetTime::Now => ctx.now_ns,
        SetTime::At(ns) => ns,
    };
    if let Some(t) = ch.atime {
        attr.atime_ns = resolve(t);
    }
    if let Some(t) = ch.mtime {
        attr.mtime_ns = resolve(t);
    }
    attr.ctime_ns = ctx.now_ns;
    put_attr(txn, &loc.key.expect("child key"), &attr);
    Ok(MetaResponse::Attr(attr))
}

/// The POSIX rules of chmod, chown, utimens and truncate for a non-S3 caller.
fn check_set_attr(attr: &Attr, ch: &AttrChange, cred: &Cred) -> Result<(), MetaError> {
    let root = cred.uid == 0;
    let owner = root || cred.uid == attr.uid;
    // Anyone who may write the file may drop its set-user-id and set-group-id bits, one or
    // both (a write by a non-owner drops them).
    let drops_only_setid = ch.mode.is_some_and(|m| {
        let (old, new) = (attr.mode & 0o7777, m & 0o7777);
        let dropped = old & !new;
        new & !old == 0 && dropped != 0 && dropped & !(perm::S_ISUID | perm::S_ISGID) == 0
    });
    if drops_only_setid && !owner {
        perm::check(attr, cred, access::WRITE)?;
    } else if ch.mode.is_some() && !owner {
        return Err(MetaError::NotPermitted);
    }
    if let Some(u) = ch.uid {
        if u != attr.uid && !root {
            return Err(MetaError::NotPermitted);
        }
    }
    if let Some(g) = ch.gid {
        if g != attr.gid && !(root || cred.uid == attr.uid && cred.in_group(g)) {
            return Err(MetaError::NotPermitted);
        }
        if !owner {
            return Err(MetaError::NotPermitted);
        }
    }
    let explicit_time =
        matches!(ch.atime, Some(SetTime::At(_))) || matches!(ch.mtime, Some(SetTime::At(_)));
    let any_time = ch.atime.is_some() || ch.mtime.is_some();
    if explicit_time && !owner {
        return Err(MetaError::NotPermitted);
    }
    if any_time && !owner {
        perm::check(attr, cred, access::WRITE)?;
    }
    if ch.size.is_some() {
        perm::check(attr, cred, access::WRITE)?;
    }
    Ok(())
}

/// What a `Create` makes.
struct NewFile<'a> {
    mode: u32,
    uid: u32,
    gid: u32,
    exclusive: bool,
    symlink: Option<&'a str>,
    special: Option<FileKind>,
}

fn create(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    spec: NewFile<'_>,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(path, 2)?;
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let parent = chain.last().expect("root").attr.clone();
    let name = path.last().expect("checked length");
    if spec.special.is_some_and(|k| !k.is_special()) {
        return Err(MetaError::Invalid(
            "special must be a FIFO, socket or device".into(),
        ));
    }
    let new_name_only = spec.exclusive || spec.symlink.is_some() || spec.special.is_some();
    // Whether the name is taken is this group's to say; a hard link's file is looked up at
    // its home only when it is to be answered.
    let found = match ctx.ns.shared_target() {
        Some(_) => target(txn, ctx.ns, parent.id, name)?,
        None => child(txn, ctx.keys, parent.id, name)?,
    };
    match found {
        Child::Dir(_) if new_name_only => return Err(MetaError::Exists),
        Child::Dir(_) => return Err(MetaError::IsDir),
        Child::Other(_) if new_name_only => return Err(MetaError::Exists),
        Child::Other(_) => {
            let Child::Other(loc) = target(txn, ctx.ns, parent.id, name)? else {
                return Err(MetaError::NotFound);
            };
            if let Some(c) = cred {
                let mut want = 0;
                if loc.attr.kind == FileKind::File {
                    want = access::READ;
                }
                perm::check(&loc.attr, c, want)?;
            }
            return Ok(MetaResponse::Attr(loc.attr));
        }
        // The shared inode went since its home was asked.
        Child::None if ctx.ns.shared_target().is_some() => return Err(MetaError::NotFound),
        Child::None => {}
    }
    perm::may_create(&parent, cred)?;
    let gid = if parent.mode & perm::S_ISGID != 0 {
        parent.gid
    } else {
        spec.gid
    };
    let (kind, mode, data): (FileKind, u32, &[u8]) = match (spec.symlink, spec.special) {
        (Some(target), _) => (FileKind::Symlink, 0o777, target.as_bytes()),
        (None, Some(kind)) => (kind, spec.mode & 0o7777, &[]),
        (None, None) => (FileKind::File, spec.mode & 0o7777, &[]),
    };
    let mut attr = new_attr(ctx, kind, mode, spec.uid, gid);
    attr.size = data.len() as u64;
    if kind == FileKind::File {
        attr.etag = EMPTY_ETAG.to_string();
    }
    put_attr(txn, &ctx.keys.inode(parent.id, name, false), &attr);
    txn.put(
        ctx.keys.payload(attr.id, PayloadKind::Data),
        encode_bytes(data),
    );
    touch_parent(txn, ctx, &mut chain, 1, 0);
    Ok(MetaResponse::Attr(attr))
}

#[allow(clippy::too_many_arguments)]
fn commit_file(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    id: InodeId,
    size: u64,
    etag: &str,
    layout: &Layout,
    inline: Option<&Bytes>,
) -> OpResult {
    check_path(path, 2)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match target(txn, ctx.ns, pid, path.last().expect("len"))? {
        Child::Other(loc) if loc.attr.id == id && loc.attr.kind == FileKind::File => loc,
        _ => return Err(MetaError::NotFound),
    };
    let mut attr = loc.attr;
    release_chunks(txn, ctx, attr.layout.chunks());
    attr.size = size;
    attr.etag = etag.to_string();
    attr.layout = layout.clone();
    attr.parts.clear();
    attr.mtime_ns = ctx.now_ns;
    attr.ctime_ns = ctx.now_ns;
    attr.s3_mtime_ns = ctx.now_ns;
    put_attr(txn, &loc.key.expect("child key"), &attr);
    match inline {
        Some(data) => txn.put(ctx.keys.payload(id, PayloadKind::Data), encode_bytes(data)),
        None => txn.delete(ctx.keys.payload(id, PayloadKind::Data)),
    }
    Ok(MetaResponse::Attr(attr))
}

/// What stands at a rename target: nothing, or a file the caller may replace (removed here).
fn clear_target(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    chain: &mut [Located],
    name: &str,
    moving: InodeId,
    noreplace: bool,
    cred: Option<&Cred>,
) -> Result<bool, MetaError> {
    let pid = chain.last().expect("root").attr.id;
    match child(txn, ctx.keys, pid, name)? {
        Child::None => Ok(false),
        Child::Dir(_) => Err(MetaError::IsDir),
        Child::Other(loc) if loc.attr.id == moving => Ok(true),
        Child::Other(_) if noreplace => Err(MetaError::Exists),
        Child::Other(loc) => {
            let parent = &chain.last().expect("root").attr;
            perm::may_delete(parent, &victim(txn, ctx, parent, &loc, cred)?, cred)?;
            remove_file(txn, ctx, chain, loc)?;
            Ok(false)
        }
    }
}

fn rename(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    to: &[String],
    noreplace: bool,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(from, 2)?;
    check_path(to, 2)?;
    let mut from_chain = resolve_parents(txn, ctx.ns, from).map_err(missing_as_not_found)?;
    perm::search(&from_chain, cred)?;
    let from_pid = from_chain.last().expect("root").attr.id;
    let from_name = from.last().expect("len");
    let loc = match child(txn, ctx.keys, from_pid, from_name)? {
        Child::None => return Err(MetaError::NotFound),
        // Moving a directory renames a dentry every replica may hold: not here yet.
        Child::Dir(_) => return Err(MetaError::CrossGroup),
        Child::Other(loc) => loc,
    };
    let from_parent = &from_chain.last().expect("root").attr;
    perm::may_delete(
        from_parent,
        &victim(txn, ctx, from_parent, &loc, cred)?,
        cred,
    )?;
    if from == to {
        return Ok(MetaResponse::Attr(loc.attr));
    }
    let mut to_chain = resolve_parents(txn, ctx.ns, to).map_err(missing_as_not_found)?;
    perm::search(&to_chain, cred)?;
    let same_dir = to_chain.last().expect("root").attr.id == from_pid;
    let chain = if same_dir {
        &mut from_chain
    } else {
        &mut to_chain
    };
    perm::may_create(&chain.last().expect("root").attr, cred)?;
    let to_name = to.last().expect("len");
    if clear_target(txn, ctx, chain, to_name, loc.attr.id, noreplace, cred)? {
        // Two hard links of one file: rename(2) does nothing.
        return Ok(MetaResponse::Attr(loc.attr));
    }
    let to_pid = chain.last().expect("root").attr.id;
    let mut attr = loc.attr;
    attr.ctime_ns = ctx.now_ns;
    if let Some(home) = attr.layout.shared_home() {
        touch_shared(txn, ctx, home, attr.id, 0)?;
    }
    txn.delete(loc.key.expect("child key"));
    put_attr(txn, &ctx.keys.inode(to_pid, to_name, false), &attr);
    if same_dir {
        touch_parent(txn, ctx, &mut from_chain, 0, 0);
    } else {
        touch_parent(txn, ctx, &mut to_chain, 1, 0);
        touch_parent(txn, ctx, &mut from_chain, -1, 0);
    }
    Ok(MetaResponse::Attr(attr))
}

#[allow(clippy::too_many_arguments)]
fn rename_in(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    from: &[String],
    to: &[String],
    attr: &Attr,
    payloads: &NewObject,
    noreplace: bool,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(from, 2)?;
    check_path(to, 2)?;
    if attr.kind == FileKind::Dir {
        return Err(MetaError::CrossGroup);
    }
    let mut chain = resolve_parents(txn, ctx.ns, to).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    perm::may_create(&chain.last().expect("root").attr, cred)?;
    let name = to.last().expect("len");
    if clear_target(txn, ctx, &mut chain, name, attr.id, noreplace, cred)? {
        return Ok(MetaResponse::Attr(attr.clone()));
    }
    // The old name in this group too (a path-walked name, or a caller that did not know):
    // remove it in the same step, keeping the payloads, which the new name shares.
    let mut entries = 1;
    if let Ok(mut from_chain) = resolve_parents(txn, ctx.ns, from) {
        let from_pid = from_chain.last().expect("root").attr.id;
        if let Child::Other(loc) = child(txn, ctx.keys, from_pid, from.last().expect("len"))? {
            if loc.attr.id == attr.id {
                txn.delete(loc.key.expect("child has a key"));
                if from_pid == chain.last().expect("root").attr.id {
                    entries = 0;
                } else {
                    touch_parent(txn, ctx, &mut from_chain, -1, 0);
                }
            }
        }
    }
    let pid = chain.last().expect("root").attr.id;
    let mut attr = attr.clone();
    attr.ctime_ns = ctx.now_ns;
    put_attr(txn, &ctx.keys.inode(pid, name, false), &attr);
    match attr.layout.shared_home() {
        // A hard link's payloads stay with the shared inode.
        Some(home) => touch_shared(txn, ctx, home, attr.id, 0)?,
        None => write_payloads(txn, ctx.keys, attr.id, payloads),
    }
    touch_parent(txn, ctx, &mut chain, entries, 0);
    Ok(MetaResponse::Attr(attr))
}

fn rename_out(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, from: &[String], id: InodeId) -> OpResult {
    check_path(from, 2)?;
    let mut chain = match resolve_parents(txn, ctx.ns, from) {
        Ok(c) => c,
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => {
            return Ok(MetaResponse::Done)
        }
        Err(e) => return Err(e),
    };
    let pid = chain.last().expect("root").attr.id;
    if let Child::Other(loc) = child(txn, ctx.keys, pid, from.last().expect("len"))? {
        if loc.attr.id == id {
            // The chunks moved with the inode: only the name and payloads go.
            txn.delete(loc.key.expect("child has a key"));
            delete_name_payloads(txn, ctx.keys, &loc.attr);
            touch_parent(txn, ctx, &mut chain, -1, 0);
        }
    }
    Ok(MetaResponse::Done)
}

/// Migration, at the new owner of `name` (see [`MetaRequest::AdoptEntry`]). The parent's
/// entry count does not change: the entry only moves between groups.
fn adopt_entry(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    pid: InodeId,
    name: &str,
    attr: &Attr,
    payloads: &NewObject,
) -> OpResult {
    if attr.kind == FileKind::Dir {
        return Err(MetaError::Invalid("directories are not migrated".into()));
    }
    match child(txn, ctx.keys, pid, name)? {
        Child::Other(loc) if loc.attr.id == attr.id => return Ok(MetaResponse::Done),
        Child::None => {}
        _ => {
            return Err(MetaError::Conflict {
                path: format!("{pid}/{name}"),
            })
        }
    }
    put_attr(txn, &ctx.keys.inode(pid, name, false), attr);
    if attr.layout.shared_home().is_none() {
        write_payloads(txn, ctx.keys, attr.id, payloads);
    }
    Ok(MetaResponse::Done)
}

/// Migration, at the old owner (see [`MetaRequest::DropEntry`]).
fn drop_entry(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    pid: InodeId,
    name: &str,
    id: InodeId,
) -> OpResult {
    if let Child::Other(loc) = child(txn, ctx.keys, pid, name)? {
        if loc.attr.id == id {
            txn.delete(loc.key.expect("child has a key"));
            delete_name_payloads(txn, ctx.keys, &loc.attr);
        }
    }
    Ok(MetaResponse::Done)
}

/// Directory rename, step 1 at the owner of the new name (see [`MetaRequest::RenameDirIn`]).
fn rename_dir_in(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    to: &[String],
    attr: &Attr,
    payloads: &NewObject,
    replace: Option<InodeId>,
    cred: Option<&Cred>,
) -> OpResult {
    check_path(to, 2)?;
    if attr.kind != FileKind::Dir {
        return Err(MetaError::NotDir);
    }
    let mut chain = resolve_parents(txn, ctx.ns, to).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let name = to.last().expect("len");
    let pid = chain.last().expect("root").attr.id;
    let mut entries = 1;
    match child(txn, ctx.keys, pid, name)? {
        Child::Dir(loc) if loc.attr.id == attr.id => return Ok(MetaResponse::Attr(loc.attr)),
        Child::Dir(loc) if Some(loc.attr.id) == replace => {
            perm::may_delete(&chain.last().expect("root").attr, &loc.attr, cred)?;
            if has_children(txn, ctx.keys, loc.attr.id)? {
                return Err(MetaError::NotEmpty);
            }
            txn.delete(loc.key.expect("a local directory"));
            txn.delete(ctx.keys.dir_index(loc.attr.id));
            delete_payloads(txn, ctx.keys, loc.attr.id);
            release_chunks(txn, ctx, loc.attr.layout.chunks());
            entries = 0;
        }
        // Something else took the name since the coordinator looked.
        Child::Dir(_) => return Err(MetaError::NotEmpty),
        Child::Other(_) => return Err(MetaError::NotDir),
        Child::None => perm::may_create(&chain.last().expect("root").attr, cred)?,
    }
    let mut attr = attr.clone();
    attr.ctime_ns = ctx.now_ns;
    put_dir(txn, ctx.keys, &ctx.keys.inode(pid, name, true), &attr);
    write_payloads(txn, ctx.keys, attr.id, payloads);
    touch_parent(txn, ctx, &mut chain, entries, entries);
    Ok(MetaResponse::Attr(attr))
}

/// Directory rename, step 2 at the owner of the old name (see [`MetaRequest::RenameDirOut`]).
fn rename_dir_out(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, from: &[String], id: InodeId) -> OpResult {
    check_path(from, 2)?;
    let mut chain = match resolve_parents(txn, ctx.ns, from) {
        Ok(c) => c,
        Err(MetaError::MissingParent { .. } | MetaError::Conflict { .. }) => {
            return Ok(MetaResponse::Done)
        }
        Err(e) => return Err(e),
    };
    let pid = chain.last().expect("root").attr.id;
    if let Child::Dir(loc) = child(txn, ctx.keys, pid, from.last().expect("len"))? {
        if loc.attr.id == id {
            let key = loc.key.expect("a local directory");
            txn.delete(key.clone());
            // When the new name is in this group too, the index and payloads are its now.
            let index = ctx.keys.dir_index(id);
            if txn.get(&index).map_err(internal)?.as_deref() == Some(key.as_slice()) {
                txn.delete(index);
                delete_payloads(txn, ctx.keys, id);
            }
            touch_parent(txn, ctx, &mut chain, -1, -1);
        }
    }
    Ok(MetaResponse::Done)
}

/// A change of shared inode `id`'s link count by `links`, made now.
fn link_change(ctx: &Ctx<'_>, id: InodeId, links: i64) -> DirChange {
    DirChange {
        dir: id,
        entries: 0,
        links,
        mtime_ns: ctx.now_ns,
    }
}

/// Tells shared inode `id` at `home` that one of its names changed (`links` = -1: went;
/// 0: moved), which changes its ctime: at once when this group is the home, else as a
/// change-log record for the home, like a parent-directory update.
fn touch_shared(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    home: GroupId,
    id: InodeId,
    links: i64,
) -> Result<(), MetaError> {
    let change = link_change(ctx, id, links);
    if home == ctx.keys.group {
        apply_link_change(txn, ctx, &change)
    } else {
        ctx.changes.push((home, change));
        Ok(())
    }
}

/// The attributes a removal of the name at `loc` is checked against: for a hard link whose
/// owner matters (the sticky bit on the parent, a caller that owns neither), the shared
/// inode's, as its owner may have changed since the reference was made.
fn victim(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    parent: &Attr,
    loc: &Located,
    cred: Option<&Cred>,
) -> Result<Attr, MetaError> {
    let Some(home) = loc.attr.layout.shared_home() else {
        return Ok(loc.attr.clone());
    };
    let owner_matters =
        parent.mode & perm::S_ISVTX != 0 && cred.is_some_and(|c| c.uid != 0 && c.uid != parent.uid);
    if !owner_matters {
        return Ok(loc.attr.clone());
    }
    if home == ctx.keys.group {
        let shared = shared_inode(txn, ctx.keys, loc.attr.id)?;
        return Ok(shared.map_or_else(|| loc.attr.clone(), |s| s.attr));
    }
    match ctx.ns.fetched(loc.attr.id) {
        // A reference to nothing: checked as it is.
        Some(attr) if attr.nlink == 0 => Ok(loc.attr.clone()),
        Some(attr) => Ok(attr),
        None => Err(ctx.ns.retry(Retry::SharedAttr {
            home,
            id: loc.attr.id,
        })),
    }
}

/// Applies a link-count change to a shared inode of this group (a missing one is gone
/// already); the inode goes, with its payloads and chunks, when no name is left.
fn apply_link_change(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, c: &DirChange) -> Result<(), MetaError> {
    let Some(loc) = shared_inode(txn, ctx.keys, c.dir)? else {
        return Ok(());
    };
    let key = loc.key.expect("a shared inode has a key");
    let mut attr = loc.attr;
    let nlink = attr.nlink as i64 + c.links;
    if nlink <= 0 {
        txn.delete(key);
        delete_payloads(txn, ctx.keys, attr.id);
        release_chunks(txn, ctx, attr.layout.chunks());
        return Ok(());
    }
    attr.nlink = nlink as u32;
    attr.ctime_ns = attr.ctime_ns.max(c.mtime_ns);
    put_attr(txn, &key, &attr);
    Ok(())
}

/// The most names one file may have (`EMLINK` beyond).
pub const LINK_MAX: u32 = 65_000;

/// link(2) step 1 (see [`MetaRequest::LinkSource`]).
fn link_source(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    cred: Option<&Cred>,
    expect: Option<InodeId>,
    token: u128,
) -> OpResult {
    check_path(path, 2)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let pid = chain.last().expect("root").attr.id;
    let name = path.last().expect("len");
    let loc = match target(txn, ctx.ns, pid, name)? {
        Child::None => return Err(MetaError::NotFound),
        Child::Dir(_) => return Err(MetaError::NotPermitted),
        Child::Other(loc) if expect.is_some_and(|id| id != loc.attr.id) => {
            return Err(MetaError::NotFound)
        }
        Child::Other(loc) => loc,
    };
    let mut attr = loc.attr;
    let key = loc.key.expect("a file has a key");
    let shared_key = ctx.keys.shared(attr.id);
    let mark = ctx.keys.link_token(attr.id, token);
    // The reference to the file, as its names hold it.
    let reference = |attr: &Attr| Attr {
        layout: Layout::Shared {
            home: ctx.keys.group,
        },
        ..attr.clone()
    };
    if key == shared_key && txn.get(&mark).map_err(internal)?.is_some() {
        // Counted already (a replay of the logged intent).
        return Ok(MetaResponse::Attr(reference(&attr)));
    }
    if attr.nlink >= LINK_MAX {
        return Err(MetaError::TooManyLinks);
    }
    attr.nlink += 1;
    attr.ctime_ns = ctx.now_ns;
    txn.put(mark, Vec::new());
    if key != shared_key {
        // A plain inode: its attributes move to the shared table (its payloads are keyed by
        // its id and stay), and its name becomes a reference.
        put_attr(txn, &key, &reference(&attr));
    }
    put_attr(txn, &shared_key, &attr);
    Ok(MetaResponse::Attr(reference(&attr)))
}

/// link(2) step 2 (see [`MetaRequest::LinkTarget`]).
fn link_target(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    attr: &Attr,
    cred: Option<&Cred>,
    token: u128,
) -> OpResult {
    check_path(path, 2)?;
    let stored = ctx.keys.link_stored(token);
    if txn.get(&stored).map_err(internal)?.is_some() {
        // Stored already (a replay of the logged intent).
        return Ok(MetaResponse::Attr(attr.clone()));
    }
    let home = attr.layout.shared_home();
    if attr.is_dir() || home.is_none_or(|h| !ctx.ns.router.ring().groups().contains(&h)) {
        return Err(MetaError::Invalid(
            "LinkTarget stores a reference to a file of a known group".into(),
        ));
    }
    let mut chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, cred)?;
    let name = path.last().expect("len");
    let pid = chain.last().expect("root").attr.id;
    if !matches!(child(txn, ctx.keys, pid, name)?, Child::None) {
        return Err(MetaError::Exists);
    }
    perm::may_create(&chain.last().expect("root").attr, cred)?;
    put_attr(txn, &ctx.keys.inode(pid, name, false), attr);
    txn.put(stored, encode(&attr.id));
    touch_parent(txn, ctx, &mut chain, 1, 0);
    Ok(MetaResponse::Attr(attr.clone()))
}

/// link(2) step 3 (see [`MetaRequest::SettleLink`]).
fn settle_link(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    id: InodeId,
    token: u128,
    kept: bool,
) -> OpResult {
    let mark = ctx.keys.link_token(id, token);
    if txn.get(&mark).map_err(internal)?.is_none() {
        return Ok(MetaResponse::Done);
    }
    txn.delete(mark);
    if !kept {
        let change = link_change(ctx, id, -1);
        apply_link_change(txn, ctx, &change)?;
    }
    Ok(MetaResponse::Done)
}

/// A path op on shared inode `id` of this group (see [`MetaRequest::Shared`]).
fn shared_op(txn: &mut Txn<'_>, ctx: &mut Ctx<'_>, id: InodeId, op: &MetaRequest) -> OpResult {
    match op {
        MetaRequest::SetAttr { .. }
        | MetaRequest::CommitFile { .. }
        | MetaRequest::SetUserMeta { .. }
        | MetaRequest::PutTags { .. }
        | MetaRequest::Create { .. }
        | MetaRequest::LinkSource { .. } => {}
        other => {
            return Err(MetaError::Invalid(format!(
                "{} does not apply to a shared inode",
                other.op_name()
            )))
        }
    }
    ctx.ns.set_shared(Some(id));
    let result = apply_write(txn, ctx, op);
    ctx.ns.set_shared(None);
    result
}

/// Finds the file (or explicit directory marker) an S3 key names.
fn find_object<V: crate::tree::View + ?Sized>(
    v: &V,
    ns: &Resolver<'_>,
    path: &[String],
    dir_marker: bool,
) -> Result<Located, MetaError> {
    let chain = resolve_parents(v, ns, path).map_err(|e| match e {
        MetaError::NoSuchBucket | MetaError::Unavailable(_) | MetaError::NotLeader { .. } => e,
        _ => MetaError::NotFound,
    })?;
    let pid = chain.last().expect("root").attr.id;
    match (target(v, ns, pid, path.last().expect("len"))?, dir_marker) {
        (Child::Other(loc), false) if loc.attr.kind == FileKind::File => Ok(loc),
        (Child::Dir(loc), true) if !loc.attr.implicit => Ok(loc),
        _ => Err(MetaError::NotFound),
    }
}

fn put_tags(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    dir_marker: bool,
    tags: Option<&Vec<(String, String)>>,
) -> OpResult {
    check_path(path, 2)?;
    let loc = find_object(txn, ctx.ns, path, dir_marker)?;
    let key = ctx.keys.payload(loc.attr.id, PayloadKind::Tags);
    match tags {
        Some(t) if !t.is_empty() => txn.put(key, encode(t)),
        _ => txn.delete(key),
    }
    Ok(MetaResponse::Done)
}

/// S3's limit on user metadata: names and values together, in bytes.
pub const USER_META_LIMIT: usize = 2048;

/// One user-metadata pair of a file or directory (a FUSE `user.*` xattr): needs write
/// permission, as Linux asks for `user.*` attributes; symlinks have none (EPERM).
fn set_user_meta(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    name: &str,
    value: Option<&str>,
    mode: XattrMode,
    cred: &Cred,
) -> OpResult {
    check_path(path, 1)?;
    let chain = resolve_parents(txn, ctx.ns, path).map_err(missing_as_not_found)?;
    perm::search(&chain, Some(cred))?;
    let pid = chain.last().expect("root").attr.id;
    let loc = match target(txn, ctx.ns, pid, path.last().expect("len"))? {
        Child::Dir(loc) | Child::Other(loc) => loc,
        Child::None => return Err(MetaError::NotFound),
    };
    let mut attr = loc.attr;
    if attr.kind == FileKind::Symlink {
        return Err(MetaError::NotPermitted);
    }
    perm::check(&attr, cred, access::WRITE)?;
    let key = ctx.keys.payload(attr.id, PayloadKind::Meta);
    let mut meta: ObjectMeta = match txn.get(&key).map_err(internal)? {
        Some(v) => decode(&v).map_err(internal)?,
        None => ObjectMeta::default(),
    };
    let at = meta.user.binary_search_by(|(k, _)| k.as_str().cmp(name));
    match (at, value) {
        (Ok(_), Some(_)) if mode == XattrMode::Create => return Err(MetaError::Exists),
        (Ok(i), Some(v)) => meta.user[i].1 = v.to_string(),
        (Err(_), Some(_)) if mode == XattrMode::Replace => return Err(MetaError::NoAttr),
        (Err(i), Some(v)) => meta.user.insert(i, (name.to_string(), v.to_string())),
        (Ok(i), None) => {
            meta.user.remove(i);
        }
        (Err(_), None) => return Err(MetaError::NoAttr),
    }
    let used: usize = meta.user.iter().map(|(k, v)| k.len() + v.len()).sum();
    if used > USER_META_LIMIT {
        return Err(MetaError::MetadataTooLarge);
    }
    txn.put(key, encode(&meta));
    attr.ctime_ns = ctx.now_ns;
    put_attr(txn, &loc.key.expect("child key"), &attr);
    Ok(MetaResponse::Attr(attr))
}

fn upload_key(keys: &Keys, path: &[String], upload_id: &str) -> Vec<u8> {
    keys.upload(&path[0], &path[1..].join("/"), upload_id)
}

fn load_upload(
    txn: &Txn<'_>,
    keys: &Keys,
    path: &[String],
    upload_id: &str,
) -> Result<(Vec<u8>, UploadInfo), MetaError> {
    let key = upload_key(keys, path, upload_id);
    match txn.get(&key).map_err(internal)? {
        Some(v) => Ok((key, decode(&v).map_err(internal)?)),
        None => Err(MetaError::NoSuchUpload),
    }
}

#[allow(clippy::too_many_arguments)]
fn create_upload(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    upload_id: &str,
    meta: &ObjectMeta,
    tags: &[(String, String)],
    uid: u32,
    gid: u32,
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
    };
    txn.put(upload_key(ctx.keys, path, upload_id), encode(&info));
    Ok(MetaResponse::Done)
}

fn put_part(
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
        release_chunks(txn, ctx, old.layout.chunks());
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

fn drop_upload_parts(txn: &mut Txn<'_>, ctx: &Ctx<'_>, upload_id: &str) -> Result<(), MetaError> {
    for (num, part) in upload_parts(txn, ctx.keys, upload_id)? {
        release_chunks(txn, ctx, part.layout.chunks());
        txn.delete(ctx.keys.part(upload_id, num));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn complete_upload(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    path: &[String],
    upload_id: &str,
    wanted: &[(u32, String)],
    etag: &str,
    checksums: &Checksums,
    min_part_size: u64,
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
    };
    let result = put_object(txn, ctx, path, &obj)?;
    for (num, part) in stored {
        if !used.contains(&num) {
            release_chunks(txn, ctx, part.layout.chunks());
        }
        txn.delete(ctx.keys.part(upload_id, num));
    }
    txn.delete(ukey);
    Ok(result)
}

fn abort_upload(
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
