//! The coordinator: cluster-wide state that no single MNode owns.
//!
//! For now it holds the access keys (the identities S3 requests authenticate as). The cluster
//! map, the exception table and the rmdir/rename protocols join it with the multi-node work.

pub mod access_keys;

pub use access_keys::{AccessKey, AccessKeyStore, KeyError};
