//! Errors of FUSE operations and their errno, mapped in one place.

use fuser::Errno;
use saker_client::ClientError;
use saker_rpc::MetaError;

/// Why a FUSE operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FuseError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("local buffer file: {0}")]
    Io(#[from] std::io::Error),
    /// A component over 255 bytes or a path over [`crate::inodes::MAX_PATH`].
    #[error("name too long")]
    NameTooLong,
    /// A name the namespace cannot hold (not UTF-8, or a bucket name S3 does not allow).
    #[error("invalid name: {0}")]
    InvalidName(String),
    /// The kernel named an inode this mount does not know (any more).
    #[error("unknown inode {0}")]
    UnknownInode(u64),
    /// The path now names another inode (renamed or replaced elsewhere).
    #[error("stale file handle")]
    Stale,
    #[error("bad file handle {0}")]
    BadHandle(u64),
    /// The operation is not supported by this file system.
    #[error("not supported: {0}")]
    Unsupported(&'static str),
    /// An operation across MNode groups that needs a protocol not built yet.
    #[error("cross-device operation")]
    CrossDevice,
    /// An extended attribute outside `user.*` (the only namespace stored).
    #[error("extended attributes outside user.* are not supported")]
    XattrNamespace,
    /// An object stored encrypted that this mount cannot decrypt, or may not rewrite.
    #[error("encrypted object: {0}")]
    Sealed(&'static str),
}

impl FuseError {
    /// The errno the kernel gets.
    pub fn errno(&self) -> Errno {
        match self {
            FuseError::Meta(e) => meta_errno(e),
            FuseError::Client(ClientError::Meta(e)) => meta_errno(e),
            FuseError::Client(ClientError::Chunk(saker_chunkstore::ChunkError::Full(_))) => {
                Errno::ENOSPC
            }
            FuseError::Client(
                ClientError::Chunk(_)
                | ClientError::TooManyRetries(_)
                | ClientError::Protocol(_)
                | ClientError::Tier(_),
            ) => Errno::EIO,
            FuseError::Io(e) => e.raw_os_error().map(Errno::from_i32).unwrap_or(Errno::EIO),
            FuseError::NameTooLong => Errno::ENAMETOOLONG,
            FuseError::InvalidName(_) => Errno::EINVAL,
            FuseError::UnknownInode(_) => Errno::ESTALE,
            FuseError::Stale => Errno::ESTALE,
            FuseError::BadHandle(_) => Errno::EBADF,
            FuseError::Unsupported(_) => Errno::EPERM,
            FuseError::CrossDevice => Errno::EXDEV,
            FuseError::XattrNamespace => Errno::EOPNOTSUPP,
            FuseError::Sealed(_) => Errno::EACCES,
        }
    }

    /// Whether the failure is the caller's (an expected errno) rather than the system's.
    pub fn is_expected(&self) -> bool {
        !matches!(self.errno(), Errno::EIO)
    }
}

fn meta_errno(e: &MetaError) -> Errno {
    match e {
        MetaError::NotFound
        | MetaError::NoSuchBucket
        | MetaError::MissingParent { .. }
        | MetaError::NoSuchVersion
        | MetaError::DeleteMarker(_) => Errno::ENOENT,
        // A file that changed under a conditional write (not sent by the mount).
        MetaError::Exists | MetaError::PreconditionFailed => Errno::EEXIST,
        MetaError::NotDir | MetaError::Conflict { .. } => Errno::ENOTDIR,
        MetaError::IsDir => Errno::EISDIR,
        MetaError::NotEmpty => Errno::ENOTEMPTY,
        MetaError::Invalid(_) => Errno::EINVAL,
        MetaError::NotPermitted | MetaError::ObjectLocked => Errno::EPERM,
        MetaError::CrossGroup => Errno::EXDEV,
        MetaError::AccessDenied | MetaError::Unauthenticated(_) => Errno::EACCES,
        MetaError::NoAttr => Errno::NO_XATTR,
        MetaError::MetadataTooLarge | MetaError::NoSpace(_) => Errno::ENOSPC,
        MetaError::TooManyLinks => Errno::EMLINK,
        MetaError::NoSuchUpload
        | MetaError::InvalidPart(_)
        | MetaError::InvalidPartOrder
        | MetaError::EntityTooSmall => Errno::EINVAL,
        // Sent for the gateway's writes only; the MNode decides the mount's.
        MetaError::SettingsChanged { .. } => Errno::EAGAIN,
        MetaError::NotOwner { .. }
        | MetaError::Unavailable(_)
        | MetaError::NotLeader { .. }
        | MetaError::Fenced { .. }
        | MetaError::Internal(_) => Errno::EIO,
    }
}

pub type Result<T> = std::result::Result<T, FuseError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_errors_become_their_errno() {
        let cases = [
            (MetaError::NotFound, Errno::ENOENT),
            (MetaError::MissingParent { depth: 1 }, Errno::ENOENT),
            (MetaError::Exists, Errno::EEXIST),
            (MetaError::NotEmpty, Errno::ENOTEMPTY),
            (MetaError::NotDir, Errno::ENOTDIR),
            (MetaError::IsDir, Errno::EISDIR),
            (MetaError::AccessDenied, Errno::EACCES),
            (MetaError::NotPermitted, Errno::EPERM),
            (MetaError::TooManyLinks, Errno::EMLINK),
            (MetaError::Internal("x".into()), Errno::EIO),
        ];
        for (e, errno) in cases {
            assert_eq!(FuseError::from(e.clone()).errno(), errno, "{e:?}");
            assert_eq!(
                FuseError::from(ClientError::Meta(e.clone())).errno(),
                errno,
                "{e:?}"
            );
        }
        assert_eq!(FuseError::NameTooLong.errno(), Errno::ENAMETOOLONG);
        assert_eq!(FuseError::CrossDevice.errno(), Errno::EXDEV);
    }
}
