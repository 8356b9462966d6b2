//! Errors of metadata operations, as returned to clients.

use serde::{Deserialize, Serialize};

/// Why a metadata operation failed. Each op in a batch fails on its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum MetaError {
    #[error("no such file or directory")]
    NotFound,
    #[error("no such bucket")]
    NoSuchBucket,
    #[error("already exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    /// The parent directory at `depth` (0 = bucket) does not exist.
    #[error("missing parent directory at depth {depth}")]
    MissingParent { depth: usize },
    /// The tree cannot hold this key: a file is in the way of a directory or the reverse.
    #[error("path conflict at '{path}'")]
    Conflict { path: String },
    #[error("no such upload")]
    NoSuchUpload,
    #[error("invalid part: {0}")]
    InvalidPart(String),
    #[error("invalid part order")]
    InvalidPartOrder,
    #[error("part too small")]
    EntityTooSmall,
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("operation not permitted")]
    NotPermitted,
    /// The operation spans MNode groups in a way not supported yet (EXDEV).
    #[error("operation across metadata groups not supported")]
    CrossGroup,
    /// A POSIX permission check failed (EACCES; `NotPermitted` is EPERM).
    #[error("permission denied")]
    AccessDenied,
    /// The request reached a node that does not own it; `group` does.
    #[error("not the owner; try group {group}")]
    NotOwner { group: u32 },
    #[error("metadata node unavailable: {0}")]
    Unavailable(String),
    #[error("internal metadata error: {0}")]
    Internal(String),
    /// No such extended attribute / user-metadata name (ENODATA).
    #[error("no such attribute")]
    NoAttr,
    /// User metadata over S3's 2 KiB limit (S3 MetadataTooLarge, ENOSPC).
    #[error("user metadata too large")]
    MetadataTooLarge,
    /// A file with the most names it may have got one more (EMLINK).
    #[error("too many links")]
    TooManyLinks,
    /// This replica of the group is not its raft leader (or has not caught up since it was
    /// elected); `leader` is the RPC address of the leader it knows of. Nothing was executed.
    #[error("not the group's leader (leader: {})", leader.as_deref().unwrap_or("unknown"))]
    NotLeader { leader: Option<String> },
    /// A coordinator write of an earlier term: the coordinator that sent it is no longer the
    /// active one (group 1 has elected another leader since). Nothing was written.
    #[error("the coordinator's term {term} is over")]
    Fenced { term: u64 },
    /// The caller's cluster credential is missing, wrong, expired, or not allowed to send
    /// this request ([`crate::auth`]). Nothing was executed.
    #[error("refused: {0}")]
    Unauthenticated(String),
    /// The metadata store's disk is (nearly) full: a write that would add data was refused
    /// before it reached the raft log (S3 507 InsufficientStorage, ENOSPC). Nothing was
    /// executed; deletes still pass.
    #[error("disk full: {0}")]
    NoSpace(String),
    /// A conditional write's `If-Match`/`If-None-Match` did not hold (S3 412). Nothing was
    /// written.
    #[error("precondition failed")]
    PreconditionFailed,
    /// No version of the key has this version id (S3 404 NoSuchVersion).
    #[error("no such version")]
    NoSuchVersion,
    /// The version asked for (or, without a version id, the key's latest) is a delete
    /// marker: S3 answers 405 for it by version id, 404 without.
    #[error("a delete marker ({0})")]
    DeleteMarker(String),
    /// The version is under Object Lock (a retention or a legal hold): it cannot be deleted,
    /// overwritten or have its retention weakened (S3 403 AccessDenied, EPERM). Nothing was
    /// written.
    #[error("the object is locked (Object Lock)")]
    ObjectLocked,
    /// The write was decided under version `decided` of its bucket's write settings, and the
    /// group that would apply it has version `current` ([`crate::Decided`]): nothing was
    /// written. The sender reads the settings again and decides the write anew.
    #[error("the bucket's settings changed (decided under version {decided}, now {current})")]
    SettingsChanged { decided: u64, current: u64 },
}
