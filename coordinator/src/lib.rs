//! The coordinator: cluster-wide state that no single MNode owns.
//!
//! It holds the access keys (the identities S3 requests authenticate as) and, as the
//! [`namespace`] coordinator, runs the namespace protocols that need every MNode: rmdir,
//! DeleteBucket and S3 reaping ([`rmdir`]), directory rename ([`rename`]), hard links
//! ([`link`]), chmod/chown of directories ([`dir_attr`]); it decides how names are redirected
//! to balance the groups ([`balance`]) and carries out the redirections ([`exceptions`]);
//! buckets' write settings reach every group through [`bucket_writes`]. Multi-step protocols
//! log their [`intents`] in a [`journal`] and finish them after a crash or a failover;
//! everything durable is a record in a [`state`] store (files, or group 1's replicated state
//! machine).

pub mod access_keys;
pub mod balance;
pub mod benefit;
pub mod bucket_writes;
mod calls;
pub mod dir_attr;
pub mod exception_store;
pub mod exceptions;
pub mod intents;
pub mod journal;
pub mod link;
pub mod load_report;
pub mod locks;
pub mod meta_opt;
pub mod namespace;
pub mod predict;
pub mod rename;
pub mod rmdir;
pub mod state;

pub use access_keys::{AccessKey, AccessKeyStore, KeyError};
pub use exception_store::ExceptionStore;
pub use exceptions::BalanceReport;
pub use intents::RenameJournal;
pub use journal::{Journal, JournalError};
pub use namespace::{Groups, NamespaceCoordinator};
pub use state::{DirState, GroupState, MemState, StateStore};
