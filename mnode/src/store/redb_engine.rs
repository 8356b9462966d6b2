//! The embedded engine: one redb database file (a copy-on-write B-tree with checksummed commits).
//!
//! Chosen over an LSM (fjall) for this first version because its commits are atomic across the
//! whole key space with one fsync, it has no background compaction threads competing for the 2
//! cores of a small node, and reads are a single B-tree descent. Non-durable commits
//! (`Durability::None`) become durable with the next durable one, which is how state-machine
//! applies ride on the next raft-log append.
//!
//! Group commit: the MNode groups of a process write concurrently (raft appends, applies), and
//! redb serialises write transactions. Writers therefore queue their batches; whoever finds no
//! commit in progress becomes the leader, writes everything queued in one transaction (durable
//! if any writer asked for it) and wakes the others. One fsync covers every group.

use std::collections::HashMap;
use std::path::Path;

use parking_lot::{Condvar, Mutex};
use redb::{Database, Durability, ReadableDatabase, TableDefinition};

use super::{Kv, KvPairs, MetaStore, StoreError, WriteBatch};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("saker_meta_v1");

pub struct RedbStore {
    db: Database,
    commits: Mutex<CommitQueue>,
    committed: Condvar,
}

#[derive(Default)]
struct CommitQueue {
    /// Batches waiting for the next commit, by ticket (ascending).
    waiting: Vec<(u64, WriteBatch, bool)>,
    next_ticket: u64,
    /// Every ticket at or below this has been committed (or has failed).
    done_upto: u64,
    leader_active: bool,
    /// Tickets whose commit failed, with the reason.
    failed: HashMap<u64, String>,
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
        Ok(Self {
            db,
            commits: Mutex::new(CommitQueue::default()),
            committed: Condvar::new(),
        })
    }

    /// Writes `batches` (in order) in one transaction.
    fn commit(&self, batches: &[(u64, WriteBatch, bool)]) -> Result<(), StoreError> {
        let durable = batches.iter().any(|(_, _, d)| *d);
        let mut txn = self.db.begin_write().map_err(io)?;
        txn.set_durability(if durable {
            Durability::Immediate
        } else {
            Durability::None
        })
        .map_err(io)?;
        {
            let mut table = txn.open_table(TABLE).map_err(io)?;
            for (_, batch, _) in batches {
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
        }
        txn.commit().map_err(io)
    }
}

impl MetaStore for RedbStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.db.begin_read().map_err(io)?;
        let table = txn.open_table(TABLE).map_err(io)?;
        Ok(table.get(key).map_err(io)?.map(|v| v.value().to_vec()))
    }

    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError> {
        let mut q = self.commits.lock();
        q.next_ticket += 1;
        let ticket = q.next_ticket;
        q.waiting.push((ticket, batch.clone(), durable));
        loop {
            if q.done_upto >= ticket {
                return match q.failed.remove(&ticket) {
                    Some(e) => Err(StoreError::Io(e)),
                    None => Ok(()),
                };
            }
            if q.leader_active {
                self.committed.wait(&mut q);
                continue;
            }
            // Lead: commit everything queued, ours included.
            q.leader_active = true;
            let batches = std::mem::take(&mut q.waiting);
            let last = batches.last().map(|(t, _, _)| *t).unwrap_or(ticket);
            let result = parking_lot::MutexGuard::unlocked(&mut q, || self.commit(&batches));
            if let Err(e) = result {
                for (t, _, _) in &batches {
                    q.failed.insert(*t, e.to_string());
                }
            }
            q.done_upto = last;
            q.leader_active = false;
            self.committed.notify_all();
        }
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
