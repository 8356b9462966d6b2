//! Pure namespace logic for saker, with no I/O: path component and bucket name validation,
//! the S3 key <-> path mapping, the stable name hash, the consistent-hash ring, the exception
//! table and the hybrid router that combines them, S3 listing order, and the dentry replica
//! an MNode keeps of directories owned elsewhere.

pub mod bucket;
pub mod exception;
pub mod hash;
pub mod key;
pub mod name;
pub mod order;
pub mod replica;
pub mod ring;
pub mod router;
pub mod shared_router;

pub use bucket::{validate_bucket_name, BucketNameError};
pub use exception::{Exception, ExceptionTable};
pub use hash::{name_hash, pid_name_hash};
pub use key::{key_to_path, KeyError, ObjectPath};
pub use name::{Name, NameError};
pub use order::{cmp_entries, sort_key};
pub use replica::{Dentry, DentryReplica};
pub use ring::{GroupId, Ring};
pub use router::{Route, Router};
pub use shared_router::SharedRouter;

/// Identifier of an inode (file or directory). Unique in the cluster; never used to locate one.
pub type InodeId = u64;

/// The inode id of the root directory `/`, whose children are the buckets.
pub const ROOT_ID: InodeId = 1;
