//! The file system: each kernel operation becomes (where possible) one full-path MNode
//! request through [`saker_client::Cluster`]; replies are returned by [`crate::kernel`].

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;
use saker_client::Cluster;
use saker_rpc::{
    access, Attr, Cred, FileKind, MetaError, MetaRequest, MetaResponse, ObjectView,
    RenameVersioning, SetTime, Versioning, Want, XattrMode,
};

use crate::config::MountConfig;
use crate::created::{Created, RecentCreates};
use crate::error::{FuseError, Result};
use crate::file::OpenFile;
use crate::inodes::{Inodes, MAX_PATH, ROOT};

/// What `create_node` makes.
#[derive(Clone)]
pub enum NewNode {
    /// A regular file (an existing one is answered as is unless `exclusive`).
    File { exclusive: bool },
    /// A symbolic link to this target.
    Symlink(String),
    /// A FIFO, socket or device node.
    Special(FileKind),
}

/// The `Create` request that makes `node` at `path` for `caller` (answered before its sync if
/// `defer`, see [`crate::created`]).
pub(crate) fn create_request(
    caller: &Caller,
    path: &[String],
    mode: u32,
    node: NewNode,
    defer: bool,
    versioning: Versioning,
) -> MetaRequest {
    let (exclusive, symlink, special) = match node {
        NewNode::File { exclusive } => (exclusive, None, None),
        NewNode::Symlink(target) => (true, Some(target), None),
        NewNode::Special(kind) => (true, None, Some(kind)),
    };
    MetaRequest::Create {
        path: path.to_vec(),
        mode: mode & 0o7777,
        uid: caller.cred.uid,
        gid: caller.cred.gid,
        exclusive,
        symlink,
        special,
        cred: caller.cred.clone(),
        defer,
        versioning,
    }
}

/// One open file handle.
pub struct Handle {
    pub ino: u64,
    pub append: bool,
}

/// The mounted file system's state: the inode table, open files and open directories.
pub struct SakerFs {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) rt: tokio::runtime::Handle,
    pub(crate) cfg: MountConfig,
    pub(crate) inodes: Mutex<Inodes>,
    pub(crate) files: Mutex<HashMap<u64, Arc<Mutex<OpenFile>>>>,
    pub(crate) handles: Mutex<HashMap<u64, Handle>>,
    /// Open directories ([`crate::dir`]).
    pub(crate) dirs: Mutex<HashMap<u64, Arc<Mutex<crate::dir::DirStream>>>>,
    next_fh: AtomicU64,
    callers: Mutex<Callers>,
    /// open(O_CREAT) comes as MKNOD then OPEN ([`crate::created`]).
    pub(crate) split_create: bool,
    /// Files a MKNOD made, by inode, until their creator's OPEN ([`Created`]): open(2)'s
    /// probed ones, and unprobed ones for a moment.
    pub(crate) created: Mutex<HashMap<u64, Created>>,
    /// When each directory last had a create answered (which creates queue on its lock).
    pub(crate) recent: Mutex<RecentCreates>,
    /// The buckets' versioning ([`crate::versioning`]).
    pub(crate) versioning: saker_rpc::BucketWritesCache,
}

/// The caller of a kernel request: uid and gid from the request, supplementary groups from
/// /proc/PID/status (cached, see [`GROUPS_TTL`]).
#[derive(Clone, Debug)]
pub struct Caller {
    pub cred: Cred,
}

/// The supplementary groups of process `pid` (none for the kernel's own requests, pid 0).
fn proc_groups(pid: u32) -> Vec<u32> {
    if pid == 0 {
        return Vec::new();
    }
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// How long the supplementary groups read for a (pid, uid, gid) are reused: reading
/// /proc/PID/status for every kernel request costs as much as the metadata call itself. A
/// process that changes its groups without changing uid or gid is seen with the old ones for
/// up to this long.
const GROUPS_TTL: Duration = Duration::from_secs(1);

/// Callers seen recently, by (pid, uid, gid).
#[derive(Default)]
struct Callers(HashMap<(u32, u32, u32), (Instant, Vec<u32>)>);

impl Callers {
    fn get(&mut self, uid: u32, gid: u32, pid: u32) -> Caller {
        let now = Instant::now();
        let groups = match self.0.get(&(pid, uid, gid)) {
            Some((at, groups)) if now.duration_since(*at) < GROUPS_TTL => groups.clone(),
            _ => {
                let groups = proc_groups(pid);
                if self.0.len() >= 4096 {
                    self.0
                        .retain(|_, (at, _)| now.duration_since(*at) < GROUPS_TTL);
                }
                self.0.insert((pid, uid, gid), (now, groups.clone()));
                groups
            }
        };
        Caller {
            cred: Cred { uid, gid, groups },
        }
    }
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

pub fn set_time(t: fuser::TimeOrNow) -> SetTime {
    match t {
        fuser::TimeOrNow::Now => SetTime::Now,
        fuser::TimeOrNow::SpecificTime(st) => SetTime::At(match st.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos().min(i64::MAX as u128) as i64,
            Err(e) => -(e.duration().as_nanos().min(i64::MAX as u128) as i64),
        }),
    }
}

pub fn kind(k: FileKind) -> fuser::FileType {
    match k {
        FileKind::File => fuser::FileType::RegularFile,
        FileKind::Dir => fuser::FileType::Directory,
        FileKind::Symlink => fuser::FileType::Symlink,
        FileKind::Fifo => fuser::FileType::NamedPipe,
        FileKind::Socket => fuser::FileType::Socket,
        FileKind::CharDevice(_) => fuser::FileType::CharDevice,
        FileKind::BlockDevice(_) => fuser::FileType::BlockDevice,
    }
}

/// The kind `mknod(2)` asks for with `mode`'s type bits and `rdev`.
pub fn special_kind(mode: u32, rdev: u32) -> Option<FileKind> {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => Some(FileKind::Fifo),
        libc::S_IFSOCK => Some(FileKind::Socket),
        libc::S_IFCHR => Some(FileKind::CharDevice(rdev)),
        libc::S_IFBLK => Some(FileKind::BlockDevice(rdev)),
        _ => None,
    }
}

/// The kernel's view of an inode's attributes (`size` overrides the server's while a local
/// write is pending).
pub fn file_attr(a: &Attr, size: Option<u64>) -> fuser::FileAttr {
    let size = match a.kind {
        FileKind::Dir => 4096,
        k if k.is_special() => 0,
        _ => size.unwrap_or(a.size),
    };
    let rdev = match a.kind {
        FileKind::CharDevice(r) | FileKind::BlockDevice(r) => r,
        _ => 0,
    };
    fuser::FileAttr {
        ino: fuser::INodeNo(a.id),
        size,
        blocks: size.div_ceil(512),
        atime: time(a.atime_ns),
        mtime: time(a.mtime_ns),
        ctime: time(a.ctime_ns),
        crtime: time(a.ctime_ns),
        kind: kind(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev,
        blksize: 4096,
        flags: 0,
    }
}

/// `mode` without set-user-id, and without set-group-id if the group may execute: what a
/// write or truncate by an unprivileged caller leaves of a file's mode.
pub fn drop_setid_bits(mode: u32) -> u32 {
    let mut kept = mode & !libc::S_ISUID;
    if mode & libc::S_IXGRP != 0 {
        kept &= !libc::S_ISGID;
    }
    kept
}

/// Checks one name the kernel sends and turns it into a path component.
pub fn component(name: &OsStr) -> Result<String> {
    let s = name
        .to_str()
        .ok_or_else(|| FuseError::InvalidName("not UTF-8".into()))?;
    if s.len() > 255 {
        return Err(FuseError::NameTooLong);
    }
    if s.is_empty() || s == "." || s == ".." || s.contains('/') || s.contains('\0') {
        return Err(FuseError::InvalidName(format!("{} bytes", s.len())));
    }
    Ok(s.to_string())
}

/// The S3 user-metadata name behind an extended attribute: `user.NAME` -> lower-cased `NAME`
/// (S3 names are case-insensitive), which must be an HTTP header token. `None` for the other
/// namespaces (security.*, trusted.*, system.*), which this file system does not store.
pub fn user_meta_name(name: &OsStr) -> Result<Option<String>> {
    let Some(rest) = name.as_encoded_bytes().strip_prefix(b"user.") else {
        return Ok(None);
    };
    if rest.len() > 255 {
        return Err(FuseError::NameTooLong);
    }
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if rest.is_empty() || !rest.iter().all(token) {
        return Err(FuseError::InvalidName(
            "user.* attribute names must be HTTP header tokens (S3 user metadata)".into(),
        ));
    }
    Ok(Some(
        String::from_utf8(rest.to_ascii_lowercase()).expect("ASCII"),
    ))
}

/// An extended attribute's value as S3 user metadata: printable ASCII (and tabs), as an HTTP
/// header value can carry it unencoded.
pub fn user_meta_value(value: &[u8]) -> Result<String> {
    if value
        .iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        Ok(String::from_utf8(value.to_vec()).expect("ASCII"))
    } else {
        Err(FuseError::InvalidName(
            "user.* attribute values must be printable ASCII (S3 user metadata)".into(),
        ))
    }
}

impl SakerFs {
    pub fn new(cluster: Arc<Cluster>, rt: tokio::runtime::Handle, cfg: MountConfig) -> Self {
        // SAFETY: geteuid(2) takes no arguments and cannot fail.
        let split_create = cfg.split_create && unsafe { libc::geteuid() } == 0;
        Self {
            cluster,
            rt,
            cfg,
            inodes: Mutex::new(Inodes::default()),
            files: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            callers: Mutex::new(Callers::default()),
            split_create,
            created: Mutex::new(HashMap::new()),
            recent: Mutex::new(RecentCreates::default()),
            versioning: Default::default(),
        }
    }

    /// The caller of a kernel request (supplementary groups cached for [`GROUPS_TTL`]).
    pub fn caller(&self, uid: u32, gid: u32, pid: u32) -> Caller {
        self.callers.lock().get(uid, gid, pid)
    }

    /// The full path of an inode the kernel holds.
    pub fn path(&self, ino: u64) -> Result<Vec<String>> {
        self.inodes
            .lock()
            .path(ino)
            .ok_or(FuseError::UnknownInode(ino))
    }

    /// The full path of `name` in directory `parent`.
    pub fn child_path(&self, parent: u64, name: &OsStr) -> Result<Vec<String>> {
        let mut path = self.path(parent)?;
        path.push(component(name)?);
        let len: usize = path.iter().map(|c| c.len() + 1).sum();
        if len >= MAX_PATH {
            return Err(FuseError::NameTooLong);
        }
        Ok(path)
    }

    /// A new file or directory handle.
    pub(crate) fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub(crate) async fn call(&self, path: &[String], req: MetaRequest) -> Result<MetaResponse> {
        Ok(self.cluster.call(path, req).await?)
    }

    pub(crate) async fn call_attr(&self, path: &[String], req: MetaRequest) -> Result<Attr> {
        match self.call(path, req).await? {
            MetaResponse::Attr(a) => Ok(a),
            other => Err(MetaError::Internal(format!("expected attributes, got {other:?}")).into()),
        }
    }

    /// One `Access` request: the attributes (and wanted payloads) of `path` if `caller` may
    /// reach it and has `mask` on it.
    pub(crate) async fn access_view(
        &self,
        path: &[String],
        mask: u32,
        caller: &Caller,
        want: Want,
    ) -> Result<ObjectView> {
        let req = MetaRequest::Access {
            path: path.to_vec(),
            mask,
            cred: caller.cred.clone(),
            want,
        };
        match self.call(path, req).await? {
            MetaResponse::Object(v) => {
                saker_rpc::capability::hold(&v.grants);
                Ok(*v)
            }
            other => Err(MetaError::Internal(format!("access answered {other:?}")).into()),
        }
    }

    /// The size a pending local write gives `ino`, if any.
    fn local_size(&self, ino: u64) -> Option<u64> {
        let f = self.files.lock().get(&ino).cloned()?;
        let f = f.lock();
        f.buf.as_ref().map(|b| b.size)
    }

    pub fn kernel_attr(&self, a: &Attr) -> fuser::FileAttr {
        file_attr(a, self.local_size(a.id))
    }

    // ---- namespace ----

    pub fn lookup(&self, caller: &Caller, parent: u64, name: &OsStr) -> Result<Attr> {
        let path = self.child_path(parent, name)?;
        let view = self.block(self.access_view(&path, 0, caller, Want::ATTR))?;
        let name = path.last().expect("child path");
        self.inodes
            .lock()
            .remember(view.attr.id, parent, name, has_links(&view.attr));
        Ok(view.attr)
    }

    pub fn forget(&self, ino: u64, n: u64) {
        if self.inodes.lock().forget(ino, n) {
            self.created.lock().remove(&ino);
        }
    }

    pub fn getattr(&self, caller: &Caller, ino: u64) -> Result<Attr> {
        self.settle_ino(ino)?;
        let path = self.path(ino)?;
        let gone = match self.block(self.access_view(&path, 0, caller, Want::ATTR)) {
            Ok(view) if view.attr.id == ino => return Ok(view.attr),
            Ok(_) => FuseError::Stale,
            Err(e) if e.errno() == fuser::Errno::ENOENT => e,
            Err(e) => return Err(e),
        };
        // Removed (or replaced) while open here: fstat answers for the open file, unlinked.
        match self.files.lock().get(&ino) {
            Some(f) => {
                let mut attr = f.lock().attr.clone();
                attr.nlink = 0;
                Ok(attr)
            }
            None => Err(gone),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn setattr(
        &self,
        caller: &Caller,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<SetTime>,
        mtime: Option<SetTime>,
        has_handle: bool,
    ) -> Result<Attr> {
        let path = self.path(ino)?;
        {
            // A file mknod(2) made moments ago and changed now: its next open(2) reads it.
            let mut created = self.created.lock();
            if created.get(&ino).is_some_and(|c| c.fresh_until.is_some()) {
                created.remove(&ino);
            }
        }
        // In a bucket that keeps versions a truncate to 0 is a write too: it keeps the bytes
        // it drops as a version, as a commit does.
        let versioned = size == Some(0) && self.versioning(&path)? != Versioning::Off;
        if let Some(n) = size.filter(|&n| n > 0 || versioned) {
            self.truncate_to(caller, ino, &path, n, has_handle)?;
        }
        let zero = size == Some(0) && !versioned;
        if mode.is_none()
            && uid.is_none()
            && gid.is_none()
            && atime.is_none()
            && mtime.is_none()
            && !zero
        {
            return self.getattr(caller, ino);
        }
        // ftruncate(2): the kernel checked that the handle is open for writing (a file created
        // with mode 0 may be truncated through the handle that created it).
        let through_handle = has_handle
            && zero
            && mode.is_none()
            && uid.is_none()
            && gid.is_none()
            && atime.is_none()
            && mtime.is_none();
        let req = MetaRequest::SetAttr {
            path: path.clone(),
            mode: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size: zero.then_some(0),
            atime,
            mtime,
            cred: caller.cred.clone(),
            through_handle,
        };
        let attr = self.block(self.call_attr(&path, req))?;
        if attr.id != ino {
            return Err(FuseError::Stale);
        }
        if zero {
            if let Some(f) = self.files.lock().get(&ino).cloned() {
                let mut f = f.lock();
                if let Some(b) = f.buf.as_mut() {
                    b.truncate(0)?;
                }
                f.dirty = false;
                f.attr = attr.clone();
                f.inline = Some(Bytes::new());
            }
        }
        Ok(attr)
    }

    /// Truncate (or extend with zeros): through the local buffer, committed at once (every
    /// size but 0 outside buckets that keep versions, which a `SetAttr` truncates).
    fn truncate_to(
        &self,
        caller: &Caller,
        ino: u64,
        path: &[String],
        size: u64,
        has_handle: bool,
    ) -> Result<()> {
        let existing = self.files.lock().get(&ino).cloned();
        let file = match (existing, has_handle) {
            (Some(f), true) => f,
            (existing, _) => {
                // truncate(2) by path needs write permission, checked by the MNode.
                let view =
                    self.block(self.access_view(path, access::WRITE, caller, Want::OBJECT))?;
                if view.attr.id != ino {
                    return Err(FuseError::Stale);
                }
                match existing {
                    Some(f) => f,
                    None => Arc::new(Mutex::new(OpenFile::new(view.attr, view.data))),
                }
            }
        };
        let mut f = file.lock();
        if size == 0 {
            f.empty(&self.cfg.buffer_dir);
        } else {
            self.materialize(&mut f, caller)?;
            f.buf.as_mut().expect("materialized").truncate(size)?;
        }
        f.dirty = true;
        f.writer = Some(caller.cred.clone());
        self.commit_locked(ino, &mut f)
    }

    pub fn mkdir(&self, caller: &Caller, parent: u64, name: &OsStr, mode: u32) -> Result<Attr> {
        let path = self.child_path(parent, name)?;
        if path.len() == 1 {
            saker_namespace::validate_bucket_name(&path[0])
                .map_err(|e| FuseError::InvalidName(e.to_string()))?;
        }
        let req = MetaRequest::Mkdir {
            path: path.clone(),
            mode: mode & 0o7777,
            uid: caller.cred.uid,
            gid: caller.cred.gid,
            cred: caller.cred.clone(),
        };
        let attr = self.block(self.call_attr(&path, req))?;
        self.inodes
            .lock()
            .remember(attr.id, parent, path.last().expect("child"), false);
        Ok(attr)
    }

    pub fn unlink(&self, caller: &Caller, parent: u64, name: &OsStr) -> Result<()> {
        let path = self.child_path(parent, name)?;
        let req = MetaRequest::Unlink {
            path: path.clone(),
            cred: caller.cred.clone(),
            versioning: self.versioning(&path)?,
        };
        if let MetaResponse::Attr(removed) = self.block(self.call(&path, req))? {
            let name = path.last().expect("child path");
            self.inodes.lock().unlinked(removed.id, parent, name);
        }
        Ok(())
    }

    /// link(2): `newname` in `newparent` becomes one more name of file `ino` (SwitchFS §5.5:
    /// the file's attributes are shared by its names, at the group of the name it had first).
    /// The coordinator runs it as a logged intent: the file's home counts the new name, the
    /// new name's owner stores it, and the count is settled, finished after a crash.
    pub fn link(&self, caller: &Caller, ino: u64, newparent: u64, newname: &OsStr) -> Result<Attr> {
        self.settle_ino(ino)?;
        let from = self.path(ino)?;
        let to = self.new_node_path(newparent, newname)?;
        if self.versioning(&from)? != Versioning::Off || self.versioning(&to)? != Versioning::Off {
            // One file's versions would belong to two keys.
            return Err(FuseError::Meta(MetaError::NotPermitted));
        }
        let req = MetaRequest::CoordinatedLink {
            from,
            to: to.clone(),
            expect: Some(ino),
            cred: caller.cred.clone(),
        };
        let attr = self.block(self.call_attr(&to, req))?;
        self.inodes
            .lock()
            .linked(ino, newparent, to.last().expect("child path"));
        Ok(attr)
    }

    pub fn rmdir(&self, caller: &Caller, parent: u64, name: &OsStr) -> Result<()> {
        let path = self.child_path(parent, name)?;
        let req = MetaRequest::Rmdir {
            path: path.clone(),
            cred: caller.cred.clone(),
        };
        self.block(self.call(&path, req))?;
        Ok(())
    }

    /// Creates a regular file, a symbolic link or a special file.
    pub fn create_node(
        &self,
        caller: &Caller,
        parent: u64,
        name: &OsStr,
        mode: u32,
        node: NewNode,
    ) -> Result<Attr> {
        let path = self.new_node_path(parent, name)?;
        let req = create_request(caller, &path, mode, node, false, self.versioning(&path)?);
        let attr = self.block(self.call_attr(&path, req))?;
        self.inodes
            .lock()
            .remember(attr.id, parent, path.last().expect("child"), false);
        Ok(attr)
    }

    /// The path of a new node `name` in `parent` (the root holds only buckets).
    pub(crate) fn new_node_path(&self, parent: u64, name: &OsStr) -> Result<Vec<String>> {
        let path = self.child_path(parent, name)?;
        if parent == ROOT {
            return Err(FuseError::Meta(MetaError::NotPermitted));
        }
        Ok(path)
    }

    /// rename(2). A file whose old and new names are in one MNode group: one atomic request
    /// there. Anything else (a directory, a file moving between groups): the coordinator's
    /// logged move (`CoordinatedRename`), which keeps the inode and its chunks.
    pub fn rename(
        &self,
        caller: &Caller,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Result<()> {
        if flags & libc::RENAME_EXCHANGE != 0 {
            return Err(MetaError::Invalid("RENAME_EXCHANGE".into()).into());
        }
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let from = self.child_path(parent, name)?;
        let to = self.child_path(newparent, newname)?;
        if from.len() < 2 || to.len() < 2 {
            // Buckets are not renamed.
            return Err(FuseError::CrossDevice);
        }
        let cred = caller.cred.clone();
        // (Whether either bucket keeps a change feed is the MNode's to fill in.)
        let versioning = RenameVersioning {
            from: self.versioning(&from)?,
            to: self.versioning(&to)?,
            feed: false,
        };
        let coordinated = MetaRequest::CoordinatedRename {
            from: from.clone(),
            to: to.clone(),
            noreplace,
            cred: cred.clone(),
            versioning,
        };
        let attr = if self.cluster.owner(&from) == self.cluster.owner(&to) {
            let req = MetaRequest::Rename {
                from: from.clone(),
                to: to.clone(),
                noreplace,
                cred,
                versioning,
            };
            match self.block(self.call_attr(&to, req)) {
                // A directory: the MNode says its dentry needs the coordinator.
                Err(
                    FuseError::Meta(MetaError::CrossGroup)
                    | FuseError::Client(saker_client::ClientError::Meta(MetaError::CrossGroup)),
                ) => self.block(self.call_attr(&to, coordinated))?,
                other => other?,
            }
        } else {
            self.block(self.call_attr(&to, coordinated))?
        };
        let to_name = to.last().expect("checked length");
        let from_name = from.last().expect("checked length");
        self.inodes
            .lock()
            .moved(attr.id, (parent, from_name), newparent, to_name);
        Ok(())
    }

    pub fn readlink(&self, caller: &Caller, ino: u64) -> Result<Bytes> {
        let path = self.path(ino)?;
        let want = Want::DATA;
        let view = self.block(self.access_view(&path, 0, caller, want))?;
        if view.attr.kind != FileKind::Symlink {
            return Err(MetaError::Invalid("not a symlink".into()).into());
        }
        Ok(view.data.unwrap_or_default())
    }

    pub fn access(&self, caller: &Caller, ino: u64, mask: u32) -> Result<()> {
        let path = self.path(ino)?;
        self.block(self.access_view(&path, mask & 0o7, caller, Want::ATTR))?;
        Ok(())
    }

    // ---- extended attributes: `user.*` <-> S3 user metadata ----

    /// The value of extended attribute `name` (only `user.*` exist: `NoAttr` for the rest).
    pub fn getxattr(&self, caller: &Caller, ino: u64, name: &OsStr) -> Result<Vec<u8>> {
        let Some(key) = user_meta_name(name)? else {
            return Err(MetaError::NoAttr.into());
        };
        let meta = self.user_meta(caller, ino, access::READ)?;
        meta.into_iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.into_bytes())
            .ok_or_else(|| MetaError::NoAttr.into())
    }

    /// The NUL-terminated names of `ino`'s extended attributes.
    pub fn listxattr(&self, caller: &Caller, ino: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        for (k, _) in self.user_meta(caller, ino, 0)? {
            out.extend_from_slice(b"user.");
            out.extend_from_slice(k.as_bytes());
            out.push(0);
        }
        Ok(out)
    }

    /// setxattr(2) (`value: Some`, `flags` `XATTR_CREATE`/`XATTR_REPLACE`) and removexattr(2).
    pub fn setxattr(
        &self,
        caller: &Caller,
        ino: u64,
        name: &OsStr,
        value: Option<&[u8]>,
        flags: i32,
    ) -> Result<()> {
        let Some(key) = user_meta_name(name)? else {
            return Err(FuseError::XattrNamespace);
        };
        let value = value.map(user_meta_value).transpose()?;
        let mode = if value.is_none() || flags & libc::XATTR_REPLACE != 0 {
            XattrMode::Replace
        } else if flags & libc::XATTR_CREATE != 0 {
            XattrMode::Create
        } else {
            XattrMode::Any
        };
        let path = self.path(ino)?;
        let req = MetaRequest::SetUserMeta {
            path: path.clone(),
            name: key,
            value,
            mode,
            cred: caller.cred.clone(),
        };
        let attr = self.block(self.call_attr(&path, req))?;
        if attr.id != ino {
            return Err(FuseError::Stale);
        }
        Ok(())
    }

    fn user_meta(&self, caller: &Caller, ino: u64, mask: u32) -> Result<Vec<(String, String)>> {
        let path = self.path(ino)?;
        let want = Want::HEAD;
        let view = self.block(self.access_view(&path, mask, caller, want))?;
        if view.attr.id != ino {
            return Err(FuseError::Stale);
        }
        Ok(view.meta.map(|m| m.user).unwrap_or_default())
    }

    // ---- files ----

    /// The parent inode of directory `ino` (for `..`).
    pub fn parent_of(&self, ino: u64) -> u64 {
        self.inodes.lock().parent(ino).unwrap_or(ROOT)
    }

    pub fn remember(&self, parent: u64, name: &str, attr: &Attr) {
        self.inodes
            .lock()
            .remember(attr.id, parent, name, has_links(attr));
    }
}

/// Whether `attr` is a file with more than one name (hard links).
fn has_links(attr: &Attr) -> bool {
    attr.nlink > 1 && !attr.is_dir()
}
