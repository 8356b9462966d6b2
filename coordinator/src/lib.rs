//! The coordinator: cluster-wide state that no single MNode owns.
//!
//! It holds the access keys (the identities S3 requests authenticate as) and runs the
//! namespace protocols that need every MNode: rmdir, DeleteBucket and S3 reaping
//! ([`rmdir`]). The exception table, balancing and rename join it later.

pub mod access_keys;
pub mod rmdir;

pub use access_keys::{AccessKey, AccessKeyStore, KeyError};
pub use rmdir::{Groups, NamespaceCoordinator};
