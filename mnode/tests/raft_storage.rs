//! openraft's storage conformance suite against the MNode's raft log store and state machine,
//! with the log in the metadata store itself (the in-memory engine) and in the process's log
//! journal (fjall), and snapshots as files.

use std::sync::Arc;

use openraft::testing::{StoreBuilder, Suite};
use saker_mnode::raft::{LogStore, StateMachine, StorageError, TypeConfig};
use saker_mnode::{FjallStore, MemStore, MetaStore};

/// A log store and state machine of group 1 on a fresh store; the temporary directory (for
/// fjall and the snapshot files) lives as long as the test.
struct Fresh {
    journal: bool,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Fresh {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store: Arc<dyn MetaStore> = if self.journal {
            Arc::new(FjallStore::open(&dir.path().join("meta")).expect("open fjall"))
        } else {
            Arc::new(MemStore::new())
        };
        let log = LogStore::open(store.clone(), 1).expect("open the log");
        let sm = StateMachine::open(store, 1, dir.path().join("snapshots")).expect("open the sm");
        Ok((dir, log, sm))
    }
}

#[test]
fn the_log_in_the_store_passes_openrafts_suite() {
    Suite::test_all(Fresh { journal: false }).unwrap();
}

#[test]
fn the_log_in_the_journal_passes_openrafts_suite() {
    Suite::test_all(Fresh { journal: true }).unwrap();
}
