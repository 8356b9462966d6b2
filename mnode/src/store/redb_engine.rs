//! The embedded engine: one redb database file (a copy-on-write B-tree with checksummed commits).
//!
//! Chosen over an LSM (fjall) for this first version because its commits are atomic across the
//! whole key space with one fsync, it has no background compaction threads competing for the 2
//! cores of a small node, and reads are a single B-tree descent. Non-durable commits
//! (`Durability::None`) become durable with the next durable one, which is how state-machine
//! applies ride on the next raft-log append.

use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, TableDefinition};

use super::{Kv, KvPairs, MetaStore, StoreError, WriteBatch};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("saker_meta_v1");

pub struct RedbStore {
    db: Database,
}

fn io<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Io(e.to_string())
}

impl RedbStore {
    /// Opens (or creates) the database file at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::create(path).map_err(io)?;
        let txn = db.begin_write().map_err(io)?;
        txn.open_table(TABLE).map_err(io)?;
        txn.commit().map_err(io)?;
        Ok(Self { db })
    }
}

impl MetaStore for RedbStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.db.begin_read().map_err(io)?;
        let table = txn.open_table(TABLE).map_err(io)?;
        Ok(table.get(key).map_err(io)?.map(|v| v.value().to_vec()))
    }

    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(io)?;
        txn.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })
        .map_err(io)?;
        {
            let mut table = txn.open_table(TABLE).map_err(io)?;
            for (k, v) in &batch.ops {
                match v {
                    Some(v) => {
                        table.insert(k.as_slice(), v.as_ref()).map_err(io)?;
                    }
                    None => {
                        table.remove(k.as_slice()).map_err(io)?;
                    }
                }
            }
        }
        txn.commit().map_err(io)
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs, StoreError> {
        let txn = self.db.begin_read().map_err(io)?;
        let table = txn.open_table(TABLE).map_err(io)?;
        let mut out = Vec::new();
        let range = match end {
            Some(e) => table.range::<&[u8]>(start..e).map_err(io)?,
            None => table.range::<&[u8]>(start..).map_err(io)?,
        };
        for item in range.take(limit) {
            let (k, v) = item.map_err(io)?;
            out.push((k.value().to_vec(), v.value().to_vec()));
        }
        Ok(out)
    }

    fn last_in(&self, start: &[u8], end: &[u8]) -> Result<Option<Kv>, StoreError> {
        let txn = self.db.begin_read().map_err(io)?;
        let table = txn.open_table(TABLE).map_err(io)?;
        let mut range = table.range::<&[u8]>(start..end).map_err(io)?;
        match range.next_back() {
            Some(item) => {
                let (k, v) = item.map_err(io)?;
                Ok(Some((k.value().to_vec(), v.value().to_vec())))
            }
            None => Ok(None),
        }
    }
}
