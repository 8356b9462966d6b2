//! Metadata requests and responses: full-path, stateless operations an MNode executes.
//!
//! A path is the list of components from the root: `["bucket", "dir", "file"]`. Reads are served
//! from the MNode's applied state; writes go through the MNode executor (one raft entry a batch)
//! and carry a [`ClientTag`] so a retried write returns its first result.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::attr::chunk_of;
use crate::attr::{Attr, Checksums, Entry, FileKind, Layout, ObjectMeta};
use crate::capability::CommitReceipt;
use crate::InodeId;
pub use saker_namespace::Dentry;

mod bucket_writes;
mod classify;
mod cond;
mod feed;
mod load;
mod lock;
pub mod nesting;
mod response;
mod sse_key;
mod types;
mod versions;

pub use bucket_writes::{
    sealed_record, BucketWrites, BucketWritesCache, Decided, SealedWrites, SettingsRequest,
    NOTIFICATION_RECORD, SEALED_RECORD, SETTINGS_REFRESH,
};
pub use classify::{CHUNKSTORES_RECORD, MAX_PAGE};
pub use cond::{check as check_cond, EtagCond, WriteCond};
pub use feed::{
    FeedEvent, FeedKind, FeedPage, FeedRequest, FeedSettings, DEFAULT_FEED_CAP, MAX_FEED_PAGE,
};
pub use load::{CostKind, Costs, LoadWindow};
pub use lock::{DefaultLock, LockConfig, LockMode, ObjectLock, Retention};
pub use response::{MetaResponse, ReplicaStatus};
pub use sse_key::{is_sse_s3, CommitSeal, PlainKey, SseKeys};
pub use types::*;
pub use versions::{
    version_id, version_inode, RenameVersioning, VersionEntry, VersionKind, Versioning,
    NULL_VERSION,
};

/// A metadata operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaRequest {
    // ---- reads ----
    /// Resolve `path` and return its attributes and the wanted payloads.
    Lookup {
        path: Vec<String>,
        want: Want,
    },
    /// Entries of directory `dir` whose sort key (name, plus '/' for directories) is greater
    /// than `start_after`, in sort-key byte order.
    Scan {
        dir: InodeId,
        start_after: Vec<u8>,
        limit: u32,
        /// A library client's listing: who asks, and the path of `dir`, checked (search
        /// permission on the way, read and search on `dir`); its entries come without chunk
        /// ids. Only a node's gateway, which authorized the S3 request, lists without one.
        reader: Option<ScanReader>,
    },
    /// Multipart uploads of `bucket` whose key is greater than `key_marker` (or equal with a
    /// greater upload id), in key order.
    ListUploads {
        bucket: String,
        prefix: String,
        key_marker: String,
        upload_id_marker: String,
        limit: u32,
    },
    /// Versions of the keys of `bucket` under `prefix` that this group holds, after
    /// (`key_marker`, `id_marker`): by key, newest first within a key (ListObjectVersions).
    /// The current object of a key is listed only if it is a version of its own (not the
    /// `null` one): its attributes are those of the key's `Lookup`.
    ScanVersions {
        bucket: String,
        prefix: String,
        key_marker: String,
        /// Within `key_marker`, only versions older than this inode id.
        id_marker: Option<InodeId>,
        limit: u32,
        /// When the page ends within a key's versions before that key's current record
        /// (which a mount's write leaves at the file's inode id, older than the versions it
        /// made): that record too, first in the page, beyond `limit`.
        with_current: bool,
    },
    /// One version of the object at `path` (GET/HEAD with a version id).
    LookupVersion {
        path: Vec<String>,
        version_id: String,
        want: Want,
    },
    /// One upload with its parts.
    GetUpload {
        path: Vec<String>,
        upload_id: String,
    },
    /// Chunks whose grace period has ended: (queue key, chunk id).
    GcDue {
        now_ns: i64,
        limit: u32,
    },
    /// The chunk ids referenced by an inode, an upload part or a version, in pages by id: the
    /// at most `limit` (up to [`crate::MAX_LIST_PAGE`]) smallest above `after`, in order; a
    /// shorter page is the last. With `leaks`, every id the leak scrub must keep: also the
    /// erasure-coded chunks' ids and their shards' ([`crate::attr::Coded::shard_ids`]) and the
    /// GC queue's; without, the chunks stored as replicas (what repair and scrub keep whole).
    /// Every page walks every record of the group, so a record that moves between two pages
    /// (a rename) is still in its chunk's page.
    ChunkRefs {
        after: Option<u128>,
        limit: u32,
        leaks: bool,
    },
    /// The erasure-coded chunks a record references, for their repair and scrub, in pages by
    /// chunk id as `ChunkRefs`: answers `CodedChunks`.
    CodedRefs {
        after: Option<u128>,
        limit: u32,
    },
    /// Remote tier objects whose grace period has ended: (queue key, where).
    TierGcDue {
        now_ns: i64,
        limit: u32,
    },
    /// The remote keys of tier `tier` that a version or the GC queue references (for the
    /// tier scrub).
    TierRefs {
        tier: String,
    },
    /// POSIX access check by `cred`: search permission on every directory of the path, and
    /// `mask` (see [`access`]) on the target; answers like `Lookup`.
    Access {
        path: Vec<String>,
        mask: u32,
        cred: Cred,
        want: Want,
    },
    /// A library mount's data key for SSE-S3 file `id` at `path` (`fresh`: a new key for the
    /// bytes it writes there), after the check a read (`fresh`: a write) gets; answers
    /// `SseKey`. Needs the master key on the serving node; only over mutual TLS or loopback.
    SseKey {
        path: Vec<String>,
        id: InodeId,
        cred: Cred,
        fresh: bool,
    },
    /// `saker admin sse rewrap`: `record` of the object at `path` gets its data key wrapped
    /// as `to` (under the current master key) if it is wrapped as `from`; done if it is `to`.
    RewrapSse {
        path: Vec<String>,
        record: SealedRecord,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// Remote lookup of a directory entry by its owner, to fill a dentry replica.
    LookupDentry {
        pid: InodeId,
        name: String,
    },
    /// What this group holds directly under `dirs` (the emptiness check of the rmdir protocol).
    DirUsage {
        dirs: Vec<InodeId>,
    },
    /// This group's message counters (for benchmarks: server messages per client op).
    Counters,
    /// Make every write this group acknowledged so far durable on disk (fsync(2) through a
    /// mount). Answered at once where every acknowledged write is on disk already
    /// ([`crate::Durability::Disk`]).
    SyncToDisk,
    /// Push every change-log record this group owes other groups now (a directory's owner
    /// asks before it answers with the directory's attributes in async mode).
    PushChanges,
    /// At a directory owner (async parent updates): group `source` committed changes to
    /// `dirs` and has not necessarily pushed them. In memory; answered before `source` answers
    /// the ops that made the changes.
    MarkDirty {
        source: u32,
        dirs: Vec<InodeId>,
        /// The change-log seq of `source`'s records for them: once the owner has applied
        /// `source`'s records up to it, the mark is void.
        seq: u64,
    },
    /// The directories of group `owner` this group holds change-log entries for (an owner
    /// rebuilding its dirty set after a restart asks every group). Answers `Dirs`.
    PendingDirs {
        owner: u32,
    },

    // ---- coordinator -> MNode control: holds, fenced by the coordinator's term ----
    // Every hold (a frozen directory, a blocked path or name) is a record in the group's
    // state machine, so a new leader keeps it. `coord` is the term of the coordinator that
    // sends it (its group-1 term; 0 for the coordinator of a one-process cluster): a group
    // refuses (`Fenced`) a call whose `coord` is below the highest it has seen, so a
    // coordinator that lost its place can neither take nor release a hold.
    /// At the directory's owner: stop every operation that resolves through it until
    /// `Unfreeze`. Answers `Frozen`. A retry of a freeze held already changes nothing.
    Freeze {
        path: Vec<String>,
        coord: u64,
    },
    /// Ends the freeze of `dir` (nothing if it is not frozen).
    Unfreeze {
        dir: InodeId,
        coord: u64,
    },
    /// At every group: drop the replica entry `(pid, name)`, wait until no batch that resolved
    /// through it is in flight, then report what this group holds under `dir`.
    Invalidate {
        pid: InodeId,
        name: String,
        dir: InodeId,
    },
    /// At the owner of `path`: hold back every write to exactly this path (but the
    /// coordinator's own `RenameOut`) until `UnblockPath`, once writes already evaluated have
    /// been applied (the per-name block of a file move).
    BlockPath {
        path: Vec<String>,
        coord: u64,
    },
    UnblockPath {
        path: Vec<String>,
        coord: u64,
    },
    /// At every group, while the coordinator moves the inodes of `name` between groups: hold
    /// back every request (read or write) for a path ending in `name` until `UnblockName`,
    /// once writes already evaluated have been applied (FalconFS §4.2.2's per-name block).
    BlockName {
        name: String,
        coord: u64,
    },
    UnblockName {
        name: String,
        coord: u64,
    },
    /// At every group, for the balancer: how many inodes this group holds and its `top` most
    /// frequent file names with their counts (one scan of its inode table). Answers
    /// `NameStats`.
    NameStats {
        top: u32,
    },
    /// At the group whose `Deferred` answer carried `ticket`: answers `Done` once that write is
    /// durable and acknowledged (or its error). A ticket is answered once; one this group does
    /// not know (forgotten, or issued before a restart) is `Unavailable`.
    Committed {
        ticket: u64,
    },
    /// At every group, from a coordinator that just started and finished its logged work:
    /// release every hold (its previous run stopped holding them) and refuse any call of an
    /// older coordinator from now on.
    ThawAll {
        coord: u64,
    },
    /// The exception table this group routes by (a client whose table is older than the
    /// version on a reply fetches it). Answers `Exceptions`.
    Exceptions,
    /// At every group: install `table` if it is newer than the one in use.
    SetExceptions {
        table: saker_namespace::ExceptionTable,
    },
    /// At every group, under the block of `name`: move each inode named `name` this group
    /// holds whose owner under `table` is another group there (`AdoptEntry`, then remove it
    /// here keeping its chunks). Directories are not moved (`Invalid`). Answers `Moved`.
    MigrateName {
        name: String,
        table: saker_namespace::ExceptionTable,
    },

    // ---- writes ----
    /// Create or replace the file at `path`. Parents must exist (`MissingParent` otherwise).
    PutObject {
        path: Vec<String>,
        obj: NewObject,
        /// Applied only if this holds of the object at `path` (checked in the batch).
        cond: Option<WriteCond>,
        /// How the bucket keeps versions (the object replaced stays as a version or goes),
        /// and the settings version that was decided under.
        versioning: Decided,
    },
    /// Create the directory at `path`, or make an existing one explicit, with this marker.
    PutDirMarker {
        path: Vec<String>,
        obj: NewObject,
    },
    /// Create the directory at `path` as implicit if it does not exist (idempotent).
    MkdirImplicit {
        path: Vec<String>,
        uid: u32,
        gid: u32,
    },
    /// POSIX mkdir: `Exists` if anything is there. A one-component path creates a bucket (the
    /// name must be a valid bucket name).
    Mkdir {
        path: Vec<String>,
        mode: u32,
        uid: u32,
        gid: u32,
        cred: Cred,
    },
    /// POSIX create of an empty regular file (or, with `symlink`, a symbolic link to that
    /// target; with `special`, a FIFO, socket or device node: mknod). An existing file is
    /// answered as is unless `exclusive`. With `defer`, answered `Deferred` as soon as the
    /// create is evaluated, before it is durable; `Committed` then waits for it (the FUSE
    /// open(O_CREAT) path: the kernel's directory lock is let go before the sync).
    Create {
        path: Vec<String>,
        mode: u32,
        uid: u32,
        gid: u32,
        exclusive: bool,
        symlink: Option<String>,
        special: Option<FileKind>,
        cred: Cred,
        defer: bool,
        /// How the bucket keeps versions (the mount's copy of the setting): a new file of a
        /// bucket that keeps them is a version of its own.
        versioning: Versioning,
    },
    /// Rename a file within one group (both names owned by the group this is sent to): one
    /// atomic step. A replaced target's chunks are released (kept as a version where the
    /// bucket keeps them). Answers the moved inode.
    Rename {
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    },
    /// Cross-group file rename, step 1 at the target's owner (the coordinator blocked the
    /// source path and logged the move): create (or replace) `to` as inode `attr`, its id and
    /// chunk references kept, with these payloads. Idempotent: `to` already naming `attr.id`
    /// is success.
    RenameIn {
        /// The old name: when this group holds it too, the whole rename is done here at once
        /// (and step 2 finds nothing to do).
        from: Vec<String>,
        to: Vec<String>,
        attr: Box<Attr>,
        meta: ObjectMeta,
        data: Option<Bytes>,
        tags: Vec<(String, String)>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    },
    /// Cross-group file rename, step 2 at the source's owner: remove `from` if it still names
    /// inode `id`, keeping its chunks (they moved with the inode). Not held back by the block
    /// on `from` (it is the move's own step). Idempotent.
    RenameOut {
        from: Vec<String>,
        id: InodeId,
        /// How `from`'s bucket keeps versions: a delete marker takes the file's place.
        versioning: Versioning,
    },
    /// Replace the bytes of the file `id` at `path` (a FUSE close or fsync): `NotFound` if
    /// `path` no longer names `id`. Attributes and S3 metadata stay. Answers `Committed`.
    ///
    /// The serving MNode decides what the commit keeps: in a bucket that keeps versions (its
    /// own copy of the bucket's setting) the bytes replaced stay as a noncurrent version,
    /// unless they are the ones this open committed last (`receipt`, signed by an MNode, and
    /// not locked since) or there are none (an empty file, as create and truncate leave it).
    /// In a bucket with a default retention the version a commit makes is locked with it in
    /// the same batch; a locked version is never replaced in place (the commit makes another). It refuses a layout
    /// other than inline bytes or chunks of this file's own ([`chunk_of`]), and a commit by a
    /// `cred` that neither owns the file nor may write it.
    CommitFile {
        path: Vec<String>,
        id: InodeId,
        size: u64,
        etag: String,
        layout: Layout,
        inline: Option<Bytes>,
        /// Who writes, as the client states it (as NFS AUTH_SYS does).
        cred: Cred,
        /// The answer to this open's last commit, if it made one.
        receipt: Option<CommitReceipt>,
        /// The new bytes' SSE-S3 record, given for them by `SseKey { fresh }`; required in a
        /// bucket with default encryption.
        sse: Option<CommitSeal>,
        /// Set by the serving MNode from the bucket's settings; never read from the wire.
        #[serde(skip)]
        versioning: Versioning,
        /// Set by the serving MNode from a valid `receipt`: the S3 mtime of the bytes this
        /// open committed last. Never read from the wire.
        #[serde(skip)]
        replaces: Option<i64>,
        /// Set by the serving MNode from the bucket's settings: the default retention the
        /// version this commit makes gets, in the same batch. Never read from the wire.
        #[serde(skip)]
        default_lock: Option<DefaultLock>,
    },
    CreateBucket {
        name: String,
        uid: u32,
        gid: u32,
    },
    /// Delete an empty bucket (implicit directories without objects do not count).
    DeleteBucket {
        name: String,
    },
    /// S3 delete: a file, or (for `dir_marker`) a directory's marker; empty implicit parents
    /// are reaped. A missing key is not an error.
    DeleteObject {
        path: Vec<String>,
        dir_marker: bool,
        cond: Option<WriteCond>,
        versioning: Decided,
        /// Deletes this version for good (no delete marker); answers `Deleted`.
        version_id: Option<String>,
        /// The caller asked to bypass a governance retention and is allowed to.
        bypass_governance: bool,
        /// A lifecycle rule's expiration (its change-feed record says so: S3 notifies it as
        /// `LifecycleExpiration`, not `ObjectRemoved`).
        lifecycle: bool,
    },
    /// POSIX unlink of a file. Answers the entry removed (a hard link's reference for a
    /// name of a file with others).
    Unlink {
        path: Vec<String>,
        cred: Cred,
        /// In a bucket that keeps versions the file stays as a noncurrent version behind a
        /// delete marker.
        versioning: Versioning,
    },
    /// POSIX rmdir.
    Rmdir {
        path: Vec<String>,
        cred: Cred,
    },
    /// chmod, chown, utimens and truncate (only to size 0: other sizes are a `CommitFile`).
    SetAttr {
        path: Vec<String>,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<SetTime>,
        mtime: Option<SetTime>,
        cred: Cred,
        /// ftruncate(2) to 0 through a handle the kernel found open for writing: `cred`'s
        /// permissions are not checked again (a file created with mode 0 may be truncated
        /// through the handle that created it). Only with a size of 0 and no other change.
        through_handle: bool,
    },
    /// Change the Object Lock of one version of the object at `path` (the current one without
    /// `version_id`): set its retention and/or its legal hold. A retention in force is only
    /// extended, unless it is a governance one and `bypass_governance` ([`ObjectLock`]).
    SetObjectLock {
        path: Vec<String>,
        version_id: Option<String>,
        retention: Option<Retention>,
        legal_hold: Option<bool>,
        bypass_governance: bool,
    },
    /// Replace (or, with `None`, delete) the tag set of a file or a directory marker.
    PutTags {
        path: Vec<String>,
        dir_marker: bool,
        tags: Option<Vec<(String, String)>>,
        /// Of this version (the current object without one).
        version_id: Option<String>,
    },
    /// Replace (or, with `None`, delete) the ACL of a file or a directory marker (opaque here:
    /// the gateway's encoding).
    PutAcl {
        path: Vec<String>,
        dir_marker: bool,
        acl: Option<String>,
        /// Of this version (the current object without one).
        version_id: Option<String>,
    },
    CreateUpload {
        path: Vec<String>,
        upload_id: String,
        meta: ObjectMeta,
        tags: Vec<(String, String)>,
        uid: u32,
        gid: u32,
        /// The Object Lock the completed object gets.
        lock: Option<ObjectLock>,
        /// The ACL the completed object gets (opaque here, as in [`MetaRequest::PutAcl`]).
        acl: Option<String>,
    },
    /// Store a part; a part with the same number is replaced and its chunks released.
    PutPart {
        path: Vec<String>,
        upload_id: String,
        part_number: u32,
        part: PartRecord,
    },
    /// Turn the listed parts into the object at `path`, moving their chunk references into the
    /// inode (no data is copied) and releasing unlisted parts.
    CompleteUpload {
        path: Vec<String>,
        upload_id: String,
        parts: Vec<(u32, String)>,
        etag: String,
        checksums: Checksums,
        min_part_size: u64,
        cond: Option<WriteCond>,
        versioning: Decided,
    },
    AbortUpload {
        path: Vec<String>,
        upload_id: String,
    },
    /// The object at `path` now lives in a remote tier (`to`), or, with a restore, has a
    /// local copy again: compare-and-set on the version (its inode id and S3 mtime), so a
    /// version overwritten since it was read is left alone (`PreconditionFailed`). Moving to
    /// a tier releases the local bytes (or the copy in the tier it leaves); `to` equal to the
    /// current layout is a no-op.
    SetTier {
        path: Vec<String>,
        inode: InodeId,
        mtime_ns: i64,
        to: Box<crate::attr::TierRef>,
        /// The version is the key's noncurrent version written as `inode`, not its current
        /// object.
        noncurrent: bool,
    },
    /// Remove collected chunks from the GC queue.
    GcDone {
        keys: Vec<Vec<u8>>,
    },
    /// At a directory's owner: apply change-log records of group `source`, each `(seq,
    /// changes)` once (records at or below the last applied seq of `source` are skipped).
    ApplyChanges {
        source: u32,
        records: Vec<(u64, Vec<DirChange>)>,
    },
    /// At the directory's owner, after the coordinator's checks: delete the frozen directory
    /// `dir` at `path`, if this group holds no entry under it but the implicit directories
    /// in `purged` (already removed elsewhere).
    RemoveDir {
        path: Vec<String>,
        dir: InodeId,
        cond: RemoveCond,
    },
    /// At every group, for DeleteBucket: delete the implicit directories whose parent is in
    /// `dirs`, and the multipart uploads of `bucket`.
    PurgeDirs {
        bucket: String,
        dirs: Vec<InodeId>,
    },
    /// rename(2) carried out by the coordinator ([`crate::CoordinatorService::rename`]): of a
    /// directory, and of a file whose old and new names live in different groups. The MNode
    /// that receives it hands it on. Answers the moved inode.
    CoordinatedRename {
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    },
    /// Directory rename, step 1 at the new name's owner (the coordinator checked the source,
    /// froze it and invalidated its dentry everywhere): put directory `attr` (its id kept) with
    /// its payloads at `to`, replacing the empty directory `replace` if that is what `to`
    /// names. Idempotent: `to` already naming `attr.id` is success.
    RenameDirIn {
        to: Vec<String>,
        attr: Box<Attr>,
        meta: ObjectMeta,
        data: Option<Bytes>,
        tags: Vec<(String, String)>,
        replace: Option<InodeId>,
        cred: Cred,
    },
    /// Directory rename, step 2 at the old name's owner: remove `from` if it still names
    /// directory `id` (its payloads too, unless the directory's record now lives in this group
    /// under its new name). Idempotent.
    RenameDirOut {
        from: Vec<String>,
        id: InodeId,
    },
    /// Migration, at the new owner: put the inode `attr` (id and chunk references kept) at
    /// `(pid, name)` with its payloads. Idempotent: the entry naming `attr.id` already is success.
    AdoptEntry {
        pid: InodeId,
        name: String,
        attr: Box<Attr>,
        meta: ObjectMeta,
        data: Option<Bytes>,
        tags: Vec<(String, String)>,
        /// Its Object Lock, which moves with it.
        lock: Option<ObjectLock>,
        /// Its ACL, which moves with it.
        acl: Option<String>,
    },
    /// Migration, at the old owner once the new one adopted it: remove the entry `(pid, name)`
    /// if it names `id`, keeping its chunks (the inode lives on elsewhere).
    DropEntry {
        pid: InodeId,
        name: String,
        id: InodeId,
    },
    /// chmod/chown of a directory, at its owner, sent by the coordinator
    /// ([`crate::CoordinatorService::set_dir_attr`]) once it holds the directory frozen there and
    /// every group has dropped its replica entry: apply `set` (a `SetAttr`) to directory `dir`.
    ApplyDirAttr {
        dir: InodeId,
        #[serde(deserialize_with = "nesting::boxed")]
        set: Box<MetaRequest>,
    },
    /// Set (or, with `value: None`, remove) one S3 user-metadata pair of a file or directory:
    /// the FUSE `user.*` extended attributes. `name` is lower-case without the prefix; the
    /// caller needs write permission. Answers the inode's attributes (its ctime changed).
    SetUserMeta {
        path: Vec<String>,
        name: String,
        value: Option<String>,
        mode: XattrMode,
        cred: Cred,
    },
    /// link(2) of `from` as `to` (sent to any MNode, run by the coordinator): the link
    /// protocol, logged and finished after a crash. `expect` is the inode the caller knows
    /// `from` as (`NotFound` if it names another now). Answers the file's attributes.
    CoordinatedLink {
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<InodeId>,
        cred: Cred,
    },
    /// Link step 1 at the owner of `path` (the existing name): one more name for file
    /// `expect` (`NotFound` if the name names another), counted once per `token` (a replay
    /// answers without counting again; the token stays with the file until `SettleLink`). A plain inode becomes a shared one first (SwitchFS
    /// §5.5): its attributes move to the shared table of this group, which is their home
    /// from then on, and the name becomes a reference ([`Layout::Shared`]). Answers the
    /// reference to store at the new name (the attributes with `nlink` counted up, `layout:
    /// Shared`). Directories: EPERM.
    LinkSource {
        path: Vec<String>,
        cred: Cred,
        expect: Option<InodeId>,
        token: u128,
    },
    /// Link step 2 at the owner of `path` (the new name): store `attr` (the reference
    /// `LinkSource` answered) there, and remember that `token` stored it. `Exists` if the name
    /// is taken. A replay of a token that stored its name is success, whatever the name holds
    /// now (it may have been removed or replaced since, by requests of their own).
    LinkTarget {
        path: Vec<String>,
        attr: Box<Attr>,
        cred: Cred,
        token: u128,
    },
    /// Link step 4 at the owner of the new name: the link of `token` is settled; forget that
    /// it stored its name.
    ForgetLink {
        token: u128,
    },
    /// At the home of shared inode `id`: whether the link of `token` is counted and not
    /// settled yet (answers `Flag`).
    LinkPending {
        id: InodeId,
        token: u128,
    },
    /// Link step 3 at the home of shared inode `id`: the link counted with `token` is over;
    /// unless `kept` (the new name was not stored), its count is taken back (the inode goes
    /// when no name is left). Idempotent: a token already settled is nothing to do.
    SettleLink {
        id: InodeId,
        token: u128,
        kept: bool,
    },
    /// The attributes of these shared inodes of hard links, at their home group (for listings,
    /// whose entries of such files are references). Answers `Attrs`, leaving out the gone.
    SharedAttrs {
        ids: Vec<InodeId>,
    },
    /// `op` (a path op: lookup, access, setattr, commit, xattr, tags, create of an existing
    /// name, `LinkSource`) applied to shared inode `id` at its home group, after the owner of
    /// the path found a hard link's reference there and forwarded it. The path's directories
    /// are resolved and checked again here; the target is the shared inode.
    Shared {
        id: InodeId,
        #[serde(deserialize_with = "nesting::boxed")]
        op: Box<MetaRequest>,
    },
    /// This replica's raft state (answered by every replica, leader or not: `Replica`).
    RaftStatus,
    /// At the group's leader: make replica `id` at RPC address `addr` a voter once it has
    /// caught up, in place of any voter at the same address (an earlier incarnation of that
    /// node, whose disk was lost). Answers once the new membership is committed.
    JoinGroup {
        id: u64,
        addr: String,
    },
    /// At the group's leader: remove replica `id` from the group (voter or learner). Refused
    /// (`Invalid`) when no voter would be left. Answers once the new membership is committed.
    LeaveGroup {
        id: u64,
    },
    /// To a node, whichever groups it hosts: start a replica of `group` that joins it (asks
    /// the members `voters` to admit it, see `JoinGroup`). Answers `Done` once the replica
    /// runs; it catches up and becomes a voter in the background.
    HostReplica {
        group: u32,
        voters: Vec<(u64, String)>,
    },
    /// To a node: stop its replica of `group` (removed from the group by `LeaveGroup`) and
    /// delete the replica's data. `Done` also when it has none.
    DropReplica {
        group: u32,
    },
    /// One record of the coordinator's replicated state (group 1's table of them): set `key`
    /// to `value`, or drop it when `None`. `term` is the coordinator's (the group-1 term it
    /// became active in): a leader at another term refuses with `Fenced`, so a coordinator
    /// that lost its place writes nothing more. 0 writes unfenced (access keys).
    CoordPut {
        term: u64,
        key: String,
        value: Option<Vec<u8>>,
    },
    /// The coordinator's records whose key starts with `prefix`, in key order (`Records`).
    CoordScan {
        prefix: String,
    },
    /// At the leader: a backup of the group's state machine, as it stands with no batch in
    /// flight, read piece by piece (`BackupPiece`). `id` 0 makes a new one (its first piece
    /// comes back with its id); then up to `len` bytes from `offset` of backup `id`.
    Backup {
        id: u64,
        offset: u64,
        len: u32,
    },
    /// At every group, for the balancer: what its work cost over its last closed window
    /// ([`LoadWindow`]), with its `top` heaviest names and directories. Answers `Load`.
    LoadStats {
        top: u32,
    },
    /// At group 1: how `bucket` keeps versions and locks them, for a mount (which may not read
    /// the coordinator's other records). Answers `Records` with the bucket's `versioning` and
    /// `object-lock` records, those it has.
    BucketVersioning {
        bucket: String,
    },
    /// A bucket's write settings in this group ([`SettingsRequest`]).
    BucketSettings(SettingsRequest),
    /// A bucket's change feed in this group ([`FeedRequest`]).
    Feed(FeedRequest),
    /// Chunks a write left short of their replicas (a copy failed), recorded before the
    /// write is acknowledged so a repair pass finds them without a full scan.
    RepairNote {
        chunks: Vec<u128>,
    },
    /// At most `limit` recorded short chunks, oldest notes first: `Gc` with (record key,
    /// chunk).
    RepairDue {
        limit: u32,
    },
    /// Drops repair records (keys from `RepairDue`) once their chunks have all replicas.
    RepairDone {
        keys: Vec<Vec<u8>>,
    },
    /// The object at `path` (its current object, or with `noncurrent` the noncurrent version
    /// written as `inode`) now has its chunks erasure-coded as `coded` says (the same chunks
    /// its layout has, whose shards are all stored): compare-and-set on the version (its inode
    /// id and S3 mtime), as `SetTier`. The chunks' replicas go to the GC queue in the same
    /// batch. A version coded so already is a no-op; any other layout is `PreconditionFailed`
    /// (and a refused switch queues the shards written for it).
    SetCoded {
        path: Vec<String>,
        inode: InodeId,
        mtime_ns: i64,
        coded: Box<crate::attr::Coded>,
        noncurrent: bool,
    },
}
