//! The coordinator's exception table as it is kept: one record of its state store, the
//! table and the name being migrated, if any (written durably before it is used).

use std::sync::Arc;

use parking_lot::Mutex;
use saker_namespace::ExceptionTable;
use serde::{Deserialize, Serialize};

use crate::journal::{decode, JournalError};
use crate::state::{MemState, StateStore};

/// The record the table is kept in.
const RECORD: &str = "exceptions";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Persisted {
    pub(crate) table: ExceptionTable,
    /// A name whose inodes may not all have reached their new owners yet.
    pub(crate) migrating: Option<String>,
}

/// The coordinator's exception table, kept in its state.
pub struct ExceptionStore {
    state: Arc<dyn StateStore>,
    pub(crate) current: Mutex<Persisted>,
}

impl ExceptionStore {
    pub fn in_memory(table: ExceptionTable) -> Self {
        Self {
            state: Arc::new(MemState::default()),
            current: Mutex::new(Persisted {
                table,
                migrating: None,
            }),
        }
    }

    /// The table kept in `state`, or `initial` (the table the cluster was created with) when
    /// there is none yet.
    pub async fn load(
        state: Arc<dyn StateStore>,
        initial: ExceptionTable,
    ) -> Result<Self, JournalError> {
        let current = match state
            .scan(RECORD)
            .await?
            .into_iter()
            .find(|(k, _)| k == RECORD)
        {
            Some((key, value)) => decode(&key, &value)?,
            None => Persisted {
                table: initial,
                migrating: None,
            },
        };
        Ok(Self {
            state,
            current: Mutex::new(current),
        })
    }

    pub fn table(&self) -> ExceptionTable {
        self.current.lock().table.clone()
    }

    /// Every record of the coordinator's state (this table's and the journals'), for a backup.
    pub(crate) async fn all_records(&self) -> Result<Vec<(String, Vec<u8>)>, JournalError> {
        self.state.scan("").await
    }

    pub(crate) fn pending(&self) -> Option<(String, ExceptionTable)> {
        let s = self.current.lock();
        s.migrating.clone().map(|n| (n, s.table.clone()))
    }

    /// Writes `next` durably, then keeps it.
    pub(crate) async fn save(&self, next: Persisted) -> Result<(), JournalError> {
        let body = serde_json::to_vec_pretty(&next).expect("tables serialize");
        self.state.put(RECORD, Some(body)).await?;
        *self.current.lock() = next;
        Ok(())
    }
}
