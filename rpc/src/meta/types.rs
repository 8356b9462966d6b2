//! The values metadata requests carry: who asks, what to store, what a read wants.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::lock::ObjectLock;
use crate::attr::{Attr, Checksums, Layout, ObjectMeta, PartInfo};
use crate::InodeId;

/// Identifies one mutating request of one client, for exactly-once replies across retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientTag {
    pub client: u128,
    pub seq: u64,
}

/// Who asks, for POSIX permission checks by the MNode (FUSE requests; S3 requests carry none
/// and bypass the checks).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cred {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// Who lists a directory, and its path ([`crate::MetaRequest::Scan`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanReader {
    pub path: Vec<String>,
    pub cred: Cred,
}

impl ScanReader {
    /// The path of an (empty-named) entry of the listed directory: resolving its parents
    /// resolves every component of the directory's path as a directory.
    pub fn entry_path(&self) -> Vec<String> {
        let mut path = self.path.clone();
        path.push(String::new());
        path
    }
}

impl Cred {
    pub const ROOT: Cred = Cred {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
    };

    /// Whether the caller is in group `gid` (primary or supplementary).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// Bits of [`MetaRequest::Access`]'s `mask` (`R_OK`, `W_OK`, `X_OK` as in access(2), plus
/// [`access::DELETE`]). A mask of 0 checks only that the path resolves for the caller.
pub mod access {
    pub const READ: u32 = 4;
    pub const WRITE: u32 = 2;
    pub const EXEC: u32 = 1;
    /// The caller may remove the entry from its directory: write and search permission on the
    /// parent, and the sticky-bit rule.
    pub const DELETE: u32 = 8;
}

/// A time to set: the server's clock now, or a given time (ns since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SetTime {
    Now,
    At(i64),
}

/// Which payloads a lookup should return beside the attributes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Want {
    pub meta: bool,
    pub data: bool,
    pub tags: bool,
    /// Answer a hard link's own entry (its [`Layout::Shared`] reference, no payloads) instead
    /// of the shared inode it names: for moves of the name itself.
    pub link: bool,
    /// The version's Object Lock (buckets with Object Lock enabled).
    pub lock: bool,
    /// The object's ACL.
    pub acl: bool,
}

impl Want {
    pub const ATTR: Want = Want {
        meta: false,
        data: false,
        tags: false,
        link: false,
        lock: false,
        acl: false,
    };
    pub const OBJECT: Want = Want {
        meta: true,
        data: true,
        tags: false,
        link: false,
        lock: false,
        acl: false,
    };
    /// The attributes and a small file's inline bytes.
    pub const DATA: Want = Want {
        meta: false,
        data: true,
        tags: false,
        link: false,
        lock: false,
        acl: false,
    };
    pub const HEAD: Want = Want {
        meta: true,
        data: false,
        tags: false,
        link: false,
        lock: false,
        acl: false,
    };

    /// These payloads and, if `on`, the Object Lock.
    pub const fn with_lock(self, on: bool) -> Want {
        Want { lock: on, ..self }
    }
}

/// A file or directory marker to store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewObject {
    pub size: u64,
    pub etag: String,
    pub layout: Layout,
    pub parts: Vec<PartInfo>,
    pub meta: ObjectMeta,
    /// The bytes when `layout` is `Inline`.
    pub inline: Option<Bytes>,
    pub tags: Vec<(String, String)>,
    pub uid: u32,
    pub gid: u32,
    /// The Object Lock of the new version (`None`: none).
    pub lock: Option<ObjectLock>,
    /// Its ACL, in the gateway's encoding (`None`: private to the bucket's owner).
    pub acl: Option<String>,
    /// Written by CopyObject (its change-feed record says so: `ObjectCreated:Copy`).
    pub copied: bool,
}

/// One uploaded part of a multipart upload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartRecord {
    pub size: u64,
    pub etag: String,
    pub checksums: Checksums,
    pub layout: Layout,
    pub mtime_ns: i64,
}

/// A multipart upload in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadInfo {
    pub key: String,
    pub upload_id: String,
    pub initiated_ns: i64,
    pub meta: ObjectMeta,
    pub tags: Vec<(String, String)>,
    pub uid: u32,
    pub gid: u32,
    /// Parts by number (filled by `GetUpload`, empty in listings).
    pub parts: Vec<(u32, PartRecord)>,
    /// The Object Lock the completed object gets.
    pub lock: Option<ObjectLock>,
    /// The ACL the completed object gets; its owner is the upload's initiator (`None`: the
    /// bucket owner's private ACL).
    pub acl: Option<String>,
}

/// Everything a GET/HEAD needs, in one reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectView {
    pub attr: Attr,
    /// The version id of this object when it is a version of its own (not the `null` one;
    /// filled with `meta`).
    pub version_id: Option<String>,
    pub meta: Option<ObjectMeta>,
    pub data: Option<Bytes>,
    pub tags: Option<Vec<(String, String)>>,
    /// The version's Object Lock (filled with `Want::lock`; empty if it has none).
    pub lock: Option<ObjectLock>,
    /// The object's ACL (filled with `Want::acl`; `None` if it has none).
    pub acl: Option<String>,
    /// Leave to read the chunks of `attr`'s layout, given with an `Access` that checked
    /// read or write permission ([`crate::capability`]).
    pub grants: Vec<(u128, crate::capability::ChunkGrant)>,
}

/// A change of a directory's attributes made by an op that ran on another group: commutative
/// deltas, no names (SwitchFS change-log entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirChange {
    pub dir: InodeId,
    /// Entry-count delta.
    pub entries: i64,
    /// Link-count delta (subdirectories).
    pub links: i64,
    /// The op's time; the directory's mtime and ctime become at least this.
    pub mtime_ns: i64,
}

/// When the coordinator may remove a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemoveCond {
    /// POSIX rmdir: no entry at all.
    Empty,
    /// S3 reaping: the directory is implicit and has no entry.
    ImplicitEmpty,
    /// S3 DeleteBucket: no object anywhere below; implicit directories without objects go with
    /// the bucket, and so do unfinished multipart uploads.
    Bucket,
}

/// What one group holds directly under some directories.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirUsage {
    /// Some entry that is not an implicit directory.
    pub objects: bool,
    /// Ids of the implicit directories among the entries.
    pub implicit_dirs: Vec<InodeId>,
}

/// Messages one MNode group sent or received on behalf of client ops, since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupCounters {
    /// Requests received for names another group owns, forwarded there.
    pub forwards: u64,
    /// Remote lookups sent to fill the dentry replica.
    pub remote_lookups: u64,
    /// Change-log records pushed to directory owners.
    pub change_pushes: u64,
    /// Dirty marks sent to directory owners (async parent updates; one per owner per batch).
    pub dirty_marks: u64,
    /// Pulls (`PushChanges`) sent to contributing groups before answering a directory's
    /// attributes.
    pub pulls: u64,
    /// Directories marked dirty here now.
    pub dirty_dirs: u64,
    /// Batches the executor ran (each one transaction and one raft entry).
    pub batches: u64,
    /// Ops in those batches.
    pub batched_ops: u64,
    /// Dentry invalidations received from the coordinator.
    pub invalidations: u64,
    /// Entries in the dentry replica now.
    pub replica_len: u64,
    /// Inode records (files and directories) this group holds.
    pub inodes: u64,
}

impl GroupCounters {
    /// Messages between servers: forwards, remote lookups, change-log pushes, dirty marks and
    /// pulls.
    pub fn server_msgs(&self) -> u64 {
        self.forwards + self.remote_lookups + self.change_pushes + self.dirty_marks + self.pulls
    }
}

/// setxattr(2)'s flags: whether the name must (not) exist already.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum XattrMode {
    /// Create or replace.
    Any,
    /// `XATTR_CREATE`: `Exists` if the name is set.
    Create,
    /// `XATTR_REPLACE` (and removal): `NoAttr` if the name is not set.
    Replace,
}

/// Where a wrapped data key is kept ([`super::MetaRequest::RewrapSse`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SealedRecord {
    /// The version stored as this inode (current or not).
    Version(InodeId),
    /// A multipart upload in progress (its parts are sealed under its data key).
    Upload(String),
}
