//! What kind of request a [`MetaRequest`] is: a write or a read, who may send it, what it
//! names, and the checks of what it carries before it is served.

use super::{Cred, Decided, MetaRequest, SettingsRequest};
use crate::attr::Layout;

/// The most entries one page request (`Scan`, `ListUploads`, `GcDue`) may ask for: a reply
/// is built in memory, so a peer may not ask for a whole directory at once. (Clients ask for
/// at most about 5,000.)
pub const MAX_PAGE: u32 = 10_000;

/// The prefix of the coordinator's record of the chunkstores, the one record a client may
/// read.
pub const CHUNKSTORES_RECORD: &str = "chunkstores/";

impl MetaRequest {
    /// Whether this request changes state (and so goes through the executor and raft).
    pub fn is_write(&self) -> bool {
        match self {
            MetaRequest::Shared { op, .. } => return op.is_write(),
            MetaRequest::BucketSettings(r) => return r.is_write(),
            MetaRequest::Feed(r) => return r.is_write(),
            _ => {}
        }
        !matches!(
            self,
            MetaRequest::Lookup { .. }
                | MetaRequest::Access { .. }
                | MetaRequest::SseKey { .. }
                | MetaRequest::Scan { .. }
                | MetaRequest::ListUploads { .. }
                | MetaRequest::ScanVersions { .. }
                | MetaRequest::LookupVersion { .. }
                | MetaRequest::GetUpload { .. }
                | MetaRequest::Backup { .. }
                | MetaRequest::GcDue { .. }
                | MetaRequest::ChunkRefs { .. }
                | MetaRequest::CodedRefs { .. }
                | MetaRequest::TierGcDue { .. }
                | MetaRequest::TierRefs { .. }
                | MetaRequest::LookupDentry { .. }
                | MetaRequest::DirUsage { .. }
                | MetaRequest::Counters
                | MetaRequest::SyncToDisk
                | MetaRequest::PushChanges
                | MetaRequest::MarkDirty { .. }
                | MetaRequest::PendingDirs { .. }
                | MetaRequest::Freeze { .. }
                | MetaRequest::Unfreeze { .. }
                | MetaRequest::Invalidate { .. }
                | MetaRequest::BlockPath { .. }
                | MetaRequest::UnblockPath { .. }
                | MetaRequest::BlockName { .. }
                | MetaRequest::UnblockName { .. }
                | MetaRequest::SetExceptions { .. }
                | MetaRequest::Exceptions
                | MetaRequest::ThawAll { .. }
                | MetaRequest::MigrateName { .. }
                | MetaRequest::NameStats { .. }
                | MetaRequest::LoadStats { .. }
                | MetaRequest::Committed { .. }
                | MetaRequest::SharedAttrs { .. }
                | MetaRequest::LinkPending { .. }
                | MetaRequest::RaftStatus
                | MetaRequest::CoordScan { .. }
                | MetaRequest::BucketVersioning { .. }
                | MetaRequest::RepairDue { .. }
        )
    }

    /// Whether this request adds data to the namespace (an entry, an object, metadata, an
    /// upload or part): what a node short of disk space refuses ([`MetaError::NoSpace`]).
    /// Deletes, renames and the protocols' own requests (which finish what was acknowledged)
    /// still pass.
    ///
    /// [`MetaError::NoSpace`]: crate::MetaError::NoSpace
    pub fn adds_data(&self) -> bool {
        matches!(
            self,
            MetaRequest::Create { .. }
                | MetaRequest::CommitFile { .. }
                | MetaRequest::PutObject { .. }
                | MetaRequest::PutDirMarker { .. }
                | MetaRequest::MkdirImplicit { .. }
                | MetaRequest::Mkdir { .. }
                | MetaRequest::CreateBucket { .. }
                | MetaRequest::PutTags { .. }
                | MetaRequest::PutAcl { .. }
                | MetaRequest::SetObjectLock { .. }
                | MetaRequest::SetUserMeta { .. }
                | MetaRequest::CreateUpload { .. }
                | MetaRequest::PutPart { .. }
                | MetaRequest::CompleteUpload { .. }
        )
    }

    /// Checks what this request carries before it is served (defence in depth: requests
    /// come from the network): every path component as the gateway checks it, and page sizes
    /// up to [`MAX_PAGE`]. `Invalid` names the first bad one.
    pub fn validate(&self) -> Result<(), crate::MetaError> {
        let limit = match self {
            MetaRequest::Scan { limit, .. }
            | MetaRequest::ListUploads { limit, .. }
            | MetaRequest::ScanVersions { limit, .. }
            | MetaRequest::GcDue { limit, .. }
            | MetaRequest::TierGcDue { limit, .. }
            | MetaRequest::RepairDue { limit } => *limit,
            MetaRequest::RepairNote { chunks } => chunks.len() as u32,
            MetaRequest::RepairDone { keys } => keys.len() as u32,
            _ => 0,
        };
        if let MetaRequest::ChunkRefs { limit, .. } | MetaRequest::CodedRefs { limit, .. } = self {
            if *limit > crate::MAX_LIST_PAGE {
                return Err(crate::MetaError::Invalid(format!(
                    "a page of {limit} chunk ids is over the limit of {}",
                    crate::MAX_LIST_PAGE
                )));
            }
        }
        if limit > MAX_PAGE {
            return Err(crate::MetaError::Invalid(format!(
                "a page of {limit} entries is over the limit of {MAX_PAGE}"
            )));
        }
        if let MetaRequest::SetAttr {
            through_handle: true,
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
            ..
        } = self
        {
            if (mode, uid, gid, size, atime, mtime) != (&None, &None, &None, &Some(0), &None, &None)
            {
                return Err(crate::MetaError::Invalid(
                    "a change through a handle may only truncate to 0".into(),
                ));
            }
        }
        let brought = match self {
            MetaRequest::PutObject { obj, .. } => Some(&obj.layout),
            MetaRequest::CommitFile { layout, .. } => Some(layout),
            MetaRequest::PutPart { part, .. } => Some(&part.layout),
            _ => None,
        };
        // A writer brings chunks or inline bytes; only the MNode makes references and remote
        // copies (a remote copy named by a writer would be deleted with its object).
        if matches!(brought, Some(Layout::Tiered(_) | Layout::Shared { .. })) {
            return Err(crate::MetaError::Invalid(
                "a write may bring chunks or inline bytes only".into(),
            ));
        }
        if let MetaRequest::SetTier { to, .. } = self {
            crate::attr::check_tier_name(&to.tier).map_err(crate::MetaError::Invalid)?;
            if to.key.is_empty() || to.key.len() > 1024 {
                return Err(crate::MetaError::Invalid("bad tier key length".into()));
            }
        }
        if let MetaRequest::Shared { op, .. } = self {
            op.validate()?;
        }
        if let MetaRequest::SetCoded { coded, .. } = self {
            coded.check().map_err(crate::MetaError::Invalid)?;
        }
        if let MetaRequest::CommitFile { id, layout, .. } = self {
            check_commit_layout(*id, layout)?;
        }
        if let MetaRequest::BucketSettings(r) = self {
            r.validate()?;
        }
        if let MetaRequest::Feed(r) = self {
            r.validate()?;
        }
        if let MetaRequest::BucketVersioning { bucket } = self {
            saker_namespace::validate_bucket_name(bucket)
                .map_err(|e| crate::MetaError::Invalid(format!("bad bucket {bucket:?}: {e}")))?;
        }
        let extra: &[String] = match self {
            MetaRequest::CoordinatedRename { from, .. }
            | MetaRequest::CoordinatedLink { from, .. } => from,
            MetaRequest::Scan {
                reader: Some(r), ..
            } => &r.path,
            _ => &[],
        };
        let paths = self
            .path()
            .into_iter()
            .chain(self.written_paths())
            .chain(std::iter::once(extra));
        for path in paths {
            for c in path {
                saker_namespace::Name::check(c).map_err(|e| {
                    crate::MetaError::Invalid(format!("bad path component {:?}: {e}", c))
                })?;
            }
        }
        Ok(())
    }

    /// Whether this request is for the node rather than one of its groups' replicas (the
    /// RPC server hands it to the node's handler, [`crate::RpcServer::with_node`]).
    pub fn is_node_call(&self) -> bool {
        matches!(
            self,
            MetaRequest::HostReplica { .. } | MetaRequest::DropReplica { .. }
        )
    }

    /// Whether the answer carries a plaintext data key: served only over mutual TLS or from
    /// loopback ([`crate::transport`]).
    pub fn hands_out_keys(&self) -> bool {
        matches!(self, MetaRequest::SseKey { .. })
    }

    /// Whether a client credential may send this request: the POSIX namespace operations,
    /// each carrying the caller's identity (`cred`) which the MNode checks, the operations on
    /// what such a check let the caller open (a directory's pages, a file's new bytes), and
    /// the reads a client needs to route. Everything else needs a node credential
    /// ([`crate::auth`]): raft state, the protocols' control requests, GC, migrations, the
    /// coordinator's records, and the S3-shaped requests, which carry no identity because the
    /// gateway of a node authorized them. Of the coordinator's records, a client may read the
    /// chunkstore list ([`CHUNKSTORES_RECORD`]), which it needs to place file data.
    pub fn client_allowed(&self) -> bool {
        if let MetaRequest::CoordScan { prefix } = self {
            return prefix.starts_with(CHUNKSTORES_RECORD);
        }
        matches!(
            self,
            MetaRequest::Access { .. }
                | MetaRequest::SseKey { .. }
                | MetaRequest::Scan {
                    reader: Some(_),
                    ..
                }
                | MetaRequest::Counters
                | MetaRequest::SyncToDisk
                | MetaRequest::Committed { .. }
                | MetaRequest::Exceptions
                | MetaRequest::RaftStatus
                | MetaRequest::Create { .. }
                | MetaRequest::CommitFile { .. }
                | MetaRequest::Rename { .. }
                | MetaRequest::Mkdir { .. }
                | MetaRequest::Unlink { .. }
                | MetaRequest::Rmdir { .. }
                | MetaRequest::SetAttr { .. }
                | MetaRequest::SetUserMeta { .. }
                | MetaRequest::CoordinatedRename { .. }
                | MetaRequest::CoordinatedLink { .. }
                | MetaRequest::BucketVersioning { .. }
                | MetaRequest::RepairNote { .. }
        )
    }

    /// Whether doing this request twice is the same as doing it once, so a resend after a
    /// lost answer is safe without a tag.
    pub fn is_idempotent(&self) -> bool {
        !self.is_write()
            || matches!(
                self,
                MetaRequest::JoinGroup { .. }
                    | MetaRequest::LeaveGroup { .. }
                    | MetaRequest::HostReplica { .. }
                    | MetaRequest::DropReplica { .. }
                    | MetaRequest::CoordPut { .. }
                    | MetaRequest::BucketSettings(SettingsRequest::Install { .. })
                    | MetaRequest::Feed(_)
                    | MetaRequest::RepairNote { .. }
                    | MetaRequest::RepairDone { .. }
            )
    }

    /// A write a gateway decided from its copy of the bucket's settings: its path and that
    /// decision (checked by the MNode against its group's copy).
    pub fn gateway_decided(&self) -> Option<(&[String], &Decided)> {
        match self {
            MetaRequest::PutObject {
                path, versioning, ..
            }
            | MetaRequest::DeleteObject {
                path, versioning, ..
            }
            | MetaRequest::CompleteUpload {
                path, versioning, ..
            } => Some((path, versioning)),
            _ => None,
        }
    }

    /// A `SetAttr` that truncates to 0 (truncate(2) of a path).
    pub fn truncate(path: Vec<String>, cred: Cred) -> Self {
        MetaRequest::SetAttr {
            path,
            mode: None,
            uid: None,
            gid: None,
            size: Some(0),
            atime: None,
            mtime: None,
            cred,
            through_handle: false,
        }
    }

    /// A `SetAttr` that changes only the mode (chmod).
    pub fn chmod(path: Vec<String>, mode: u32, cred: Cred) -> Self {
        MetaRequest::SetAttr {
            path,
            mode: Some(mode),
            uid: None,
            gid: None,
            size: None,
            atime: None,
            mtime: None,
            cred,
            through_handle: false,
        }
    }

    /// The paths whose entries this write changes, for the per-path blocks of file moves.
    pub fn written_paths(&self) -> Vec<&[String]> {
        match self {
            MetaRequest::Rename { from, to, .. } => vec![from, to],
            // The move's own step, and requests that are not writes to a name.
            MetaRequest::RenameOut { .. }
            | MetaRequest::RenameDirOut { .. }
            | MetaRequest::BlockPath { .. }
            | MetaRequest::UnblockPath { .. }
            | MetaRequest::Shared { .. }
            | MetaRequest::Freeze { .. } => Vec::new(),
            r if r.is_write() => r.path().into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// The full path this request names, if it names one.
    pub fn path(&self) -> Option<&[String]> {
        match self {
            MetaRequest::Lookup { path, .. }
            | MetaRequest::LookupVersion { path, .. }
            | MetaRequest::Access { path, .. }
            | MetaRequest::SseKey { path, .. }
            | MetaRequest::RewrapSse { path, .. }
            | MetaRequest::Create { path, .. }
            | MetaRequest::CommitFile { path, .. }
            | MetaRequest::Rename { to: path, .. }
            | MetaRequest::RenameIn { to: path, .. }
            | MetaRequest::RenameOut { from: path, .. }
            | MetaRequest::GetUpload { path, .. }
            | MetaRequest::PutObject { path, .. }
            | MetaRequest::PutDirMarker { path, .. }
            | MetaRequest::MkdirImplicit { path, .. }
            | MetaRequest::Mkdir { path, .. }
            | MetaRequest::DeleteObject { path, .. }
            | MetaRequest::Unlink { path, .. }
            | MetaRequest::Rmdir { path, .. }
            | MetaRequest::SetAttr { path, .. }
            | MetaRequest::PutTags { path, .. }
            | MetaRequest::PutAcl { path, .. }
            | MetaRequest::SetObjectLock { path, .. }
            | MetaRequest::SetUserMeta { path, .. }
            | MetaRequest::CoordinatedRename { to: path, .. }
            | MetaRequest::RenameDirIn { to: path, .. }
            | MetaRequest::RenameDirOut { from: path, .. }
            | MetaRequest::CreateUpload { path, .. }
            | MetaRequest::PutPart { path, .. }
            | MetaRequest::CompleteUpload { path, .. }
            | MetaRequest::AbortUpload { path, .. }
            | MetaRequest::LinkSource { path, .. }
            | MetaRequest::LinkTarget { path, .. }
            | MetaRequest::CoordinatedLink { to: path, .. }
            | MetaRequest::Freeze { path, .. }
            | MetaRequest::BlockPath { path, .. }
            | MetaRequest::UnblockPath { path, .. }
            | MetaRequest::SetTier { path, .. }
            | MetaRequest::SetCoded { path, .. }
            | MetaRequest::RemoveDir { path, .. } => Some(path),
            MetaRequest::CreateBucket { name, .. } | MetaRequest::DeleteBucket { name } => {
                Some(std::slice::from_ref(name))
            }
            MetaRequest::ApplyDirAttr { set, .. } | MetaRequest::Shared { op: set, .. } => {
                set.path()
            }
            MetaRequest::Scan { .. }
            | MetaRequest::ListUploads { .. }
            | MetaRequest::ScanVersions { .. }
            | MetaRequest::GcDue { .. }
            | MetaRequest::ChunkRefs { .. }
            | MetaRequest::CodedRefs { .. }
            | MetaRequest::TierGcDue { .. }
            | MetaRequest::TierRefs { .. }
            | MetaRequest::LookupDentry { .. }
            | MetaRequest::DirUsage { .. }
            | MetaRequest::Counters
            | MetaRequest::SyncToDisk
            | MetaRequest::PushChanges
            | MetaRequest::MarkDirty { .. }
            | MetaRequest::PendingDirs { .. }
            | MetaRequest::Unfreeze { .. }
            | MetaRequest::Invalidate { .. }
            | MetaRequest::GcDone { .. }
            | MetaRequest::RepairNote { .. }
            | MetaRequest::RepairDue { .. }
            | MetaRequest::RepairDone { .. }
            | MetaRequest::BlockName { .. }
            | MetaRequest::UnblockName { .. }
            | MetaRequest::SetExceptions { .. }
            | MetaRequest::Exceptions
            | MetaRequest::CoordPut { .. }
            | MetaRequest::CoordScan { .. }
            | MetaRequest::BucketVersioning { .. }
            | MetaRequest::BucketSettings(_)
            | MetaRequest::Feed(_)
            | MetaRequest::ThawAll { .. }
            | MetaRequest::MigrateName { .. }
            | MetaRequest::NameStats { .. }
            | MetaRequest::LoadStats { .. }
            | MetaRequest::Committed { .. }
            | MetaRequest::AdoptEntry { .. }
            | MetaRequest::DropEntry { .. }
            | MetaRequest::ApplyChanges { .. }
            | MetaRequest::SettleLink { .. }
            | MetaRequest::ForgetLink { .. }
            | MetaRequest::LinkPending { .. }
            | MetaRequest::SharedAttrs { .. }
            | MetaRequest::RaftStatus
            | MetaRequest::JoinGroup { .. }
            | MetaRequest::LeaveGroup { .. }
            | MetaRequest::HostReplica { .. }
            | MetaRequest::DropReplica { .. }
            | MetaRequest::Backup { .. }
            | MetaRequest::PurgeDirs { .. } => None,
        }
    }

    /// Short operation name for metrics and traces.
    pub fn op_name(&self) -> &'static str {
        match self {
            MetaRequest::Lookup { .. } => "lookup",
            MetaRequest::Access { .. } => "access",
            MetaRequest::SseKey { .. } => "sse_key",
            MetaRequest::RewrapSse { .. } => "rewrap_sse",
            MetaRequest::Create { .. } => "create",
            MetaRequest::CommitFile { .. } => "commit_file",
            MetaRequest::Rename { .. } => "rename",
            MetaRequest::RenameIn { .. } => "rename_in",
            MetaRequest::RenameOut { .. } => "rename_out",
            MetaRequest::Scan { .. } => "scan",
            MetaRequest::ListUploads { .. } => "list_uploads",
            MetaRequest::ScanVersions { .. } => "scan_versions",
            MetaRequest::LookupVersion { .. } => "lookup_version",
            MetaRequest::GetUpload { .. } => "get_upload",
            MetaRequest::GcDue { .. } => "gc_due",
            MetaRequest::ChunkRefs { .. } => "chunk_refs",
            MetaRequest::CodedRefs { .. } => "coded_refs",
            MetaRequest::TierGcDue { .. } => "tier_gc_due",
            MetaRequest::TierRefs { .. } => "tier_refs",
            MetaRequest::SetTier { .. } => "set_tier",
            MetaRequest::SetCoded { .. } => "set_coded",
            MetaRequest::PutObject { .. } => "put_object",
            MetaRequest::PutDirMarker { .. } => "put_dir_marker",
            MetaRequest::MkdirImplicit { .. } => "mkdir_implicit",
            MetaRequest::Mkdir { .. } => "mkdir",
            MetaRequest::CreateBucket { .. } => "create_bucket",
            MetaRequest::DeleteBucket { .. } => "delete_bucket",
            MetaRequest::DeleteObject { .. } => "delete_object",
            MetaRequest::Unlink { .. } => "unlink",
            MetaRequest::Rmdir { .. } => "rmdir",
            MetaRequest::SetAttr { .. } => "setattr",
            MetaRequest::PutTags { .. } => "put_tags",
            MetaRequest::PutAcl { .. } => "put_acl",
            MetaRequest::SetObjectLock { .. } => "set_object_lock",
            MetaRequest::SetUserMeta { .. } => "set_user_meta",
            MetaRequest::ApplyDirAttr { .. } => "apply_dir_attr",
            MetaRequest::CoordinatedRename { .. } => "coordinated_rename",
            MetaRequest::RenameDirIn { .. } => "rename_dir_in",
            MetaRequest::RenameDirOut { .. } => "rename_dir_out",
            MetaRequest::CreateUpload { .. } => "create_upload",
            MetaRequest::PutPart { .. } => "put_part",
            MetaRequest::CompleteUpload { .. } => "complete_upload",
            MetaRequest::AbortUpload { .. } => "abort_upload",
            MetaRequest::GcDone { .. } => "gc_done",
            MetaRequest::RepairNote { .. } => "repair_note",
            MetaRequest::RepairDue { .. } => "repair_due",
            MetaRequest::RepairDone { .. } => "repair_done",
            MetaRequest::LookupDentry { .. } => "lookup_dentry",
            MetaRequest::DirUsage { .. } => "dir_usage",
            MetaRequest::Counters => "counters",
            MetaRequest::SyncToDisk => "sync_to_disk",
            MetaRequest::PushChanges => "push_changes",
            MetaRequest::MarkDirty { .. } => "mark_dirty",
            MetaRequest::PendingDirs { .. } => "pending_dirs",
            MetaRequest::Freeze { .. } => "freeze",
            MetaRequest::Unfreeze { .. } => "unfreeze",
            MetaRequest::Invalidate { .. } => "invalidate",
            MetaRequest::BlockPath { .. } => "block_path",
            MetaRequest::BlockName { .. } => "block_name",
            MetaRequest::UnblockName { .. } => "unblock_name",
            MetaRequest::SetExceptions { .. } => "set_exceptions",
            MetaRequest::Exceptions => "exceptions",
            MetaRequest::ThawAll { .. } => "thaw_all",
            MetaRequest::MigrateName { .. } => "migrate_name",
            MetaRequest::NameStats { .. } => "name_stats",
            MetaRequest::LoadStats { .. } => "load_stats",
            MetaRequest::Committed { .. } => "committed",
            MetaRequest::AdoptEntry { .. } => "adopt_entry",
            MetaRequest::DropEntry { .. } => "drop_entry",
            MetaRequest::UnblockPath { .. } => "unblock_path",
            MetaRequest::ApplyChanges { .. } => "apply_changes",
            MetaRequest::RemoveDir { .. } => "remove_dir",
            MetaRequest::PurgeDirs { .. } => "purge_dirs",
            MetaRequest::LinkSource { .. } => "link_source",
            MetaRequest::LinkTarget { .. } => "link_target",
            MetaRequest::SettleLink { .. } => "settle_link",
            MetaRequest::ForgetLink { .. } => "forget_link",
            MetaRequest::LinkPending { .. } => "link_pending",
            MetaRequest::CoordinatedLink { .. } => "coordinated_link",
            MetaRequest::SharedAttrs { .. } => "shared_attrs",
            MetaRequest::Shared { op, .. } => op.op_name(),
            MetaRequest::RaftStatus => "raft_status",
            MetaRequest::JoinGroup { .. } => "join_group",
            MetaRequest::LeaveGroup { .. } => "leave_group",
            MetaRequest::HostReplica { .. } => "host_replica",
            MetaRequest::DropReplica { .. } => "drop_replica",
            MetaRequest::Backup { .. } => "backup",
            MetaRequest::CoordPut { .. } => "coord_put",
            MetaRequest::CoordScan { .. } => "coord_scan",
            MetaRequest::BucketVersioning { .. } => "bucket_versioning",
            MetaRequest::BucketSettings(r) => r.op_name(),
            MetaRequest::Feed(r) => r.op_name(),
        }
    }
}

/// A commit's layout: inline bytes, or chunks made for this very file ([`crate::chunk_of`]).
/// Anything else (another file's chunks, a tier's copy, a hard link's reference) would hand
/// a client other data, or have the collector delete it while still in use.
fn check_commit_layout(id: crate::InodeId, layout: &crate::Layout) -> Result<(), crate::MetaError> {
    match layout {
        crate::Layout::Inline => Ok(()),
        crate::Layout::Chunks(chunks) => match chunks.iter().find(|c| !crate::chunk_of(id, c.id)) {
            None => Ok(()),
            Some(c) => Err(crate::MetaError::Invalid(format!(
                "chunk {:032x} was not made for file {id}",
                c.id
            ))),
        },
        _ => Err(crate::MetaError::Invalid(
            "a commit brings inline bytes or chunks".into(),
        )),
    }
}
