//! The LSM engine: [`FjallStore`], the [`MetaStore`] trait on fjall (an LSM tree with a
//! write-ahead journal). Measured against redb in `compat_tests/bench/engines/`: 2.2-5.7x more
//! raft entries (durable append + apply) per second, reads 1.2-3x slower.
//!
//! One database, one keyspace. A [`WriteBatch`] becomes one fjall batch, which fjall writes to
//! its journal as one atomic record. `durable` commits fdatasync the journal before returning
//! (`PersistMode::SyncData`, the same system call redb's `Durability::Immediate` ends with);
//! non-durable ones stay in the journal's buffer and become durable with the next durable commit,
//! which syncs the whole journal. The block cache is set to redb's default (1 GiB) so both engines
//! may keep the same amount of data in memory.
//!
//! Shared syncs: the MNode groups of a process append to their raft logs concurrently, each
//! asking for a durable write. A durable write commits its batch to the journal without a sync,
//! then waits for a sync that started after that commit; whoever finds no sync running starts
//! one for everyone committed so far. One fdatasync thus covers every group's appends.
//!
//! Async callers (the raft log appends) commit on their own task and ask for a sync with
//! [`MetaStore::request_sync`]: a syncer thread runs one fdatasync for every request queued
//! before it started and answers each on a oneshot channel, so no thread waits per append.
//! Measured against appending on tokio's blocking pool (4 alternating pairs, `saker server
//! --mount`, 16 threads): creates +29%, copies +13%, other lines unchanged; one thread: no
//! line worse.

use std::ops::Bound;
use std::path::Path;

use std::sync::Arc;

use super::{Kv, KvPairs, MetaStore, StoreError, SyncReceiver, WriteBatch};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Condvar, Mutex, MutexGuard};

/// Block cache size, equal to redb's default cache size.
const CACHE_BYTES: u64 = 1 << 30;

/// A [`MetaStore`] on one fjall keyspace.
pub struct FjallStore {
    db: Database,
    ks: Keyspace,
    syncs: Mutex<SyncState>,
    synced: Condvar,
    /// Async callers' sync requests, served by one syncer thread (group commit).
    syncer: Arc<SyncQueue>,
    /// That thread, joined on drop (it holds the database open).
    syncer_thread: Option<std::thread::JoinHandle<()>>,
}

/// Waiters for the syncer thread's next journal sync.
#[derive(Default)]
struct SyncQueue {
    waiting: Mutex<Waiting>,
    wake: Condvar,
}

#[derive(Default)]
struct Waiting {
    answers: Vec<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
    stop: bool,
}

impl SyncQueue {
    /// The syncer thread: one fdatasync for every request that came in before it started.
    fn run(&self, db: Database) {
        loop {
            let waiters = {
                let mut w = self.waiting.lock();
                while w.answers.is_empty() && !w.stop {
                    self.wake.wait(&mut w);
                }
                if w.answers.is_empty() {
                    return; // stopped
                }
                std::mem::take(&mut w.answers)
            };
            let result = db.persist(PersistMode::SyncData).map_err(io);
            for tx in waiters {
                let _ = tx.send(result.clone());
            }
        }
    }
}

impl Drop for FjallStore {
    fn drop(&mut self) {
        self.syncer.waiting.lock().stop = true;
        self.syncer.wake.notify_one();
        if let Some(t) = self.syncer_thread.take() {
            let _ = t.join();
        }
    }
}

/// Durable writes by ticket: each ticket is a batch committed to the journal that waits for a
/// sync covering it.
#[derive(Default)]
struct SyncState {
    next_ticket: u64,
    /// Every ticket at or below this is durable.
    synced_upto: u64,
    syncing: bool,
    /// The last sync failed with this (the journal may not be durable: every waiter fails).
    failed: Option<(u64, String)>,
}

fn io<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Io(e.to_string())
}

impl FjallStore {
    /// Opens (or creates) the database in directory `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::builder(path)
            .cache_size(CACHE_BYTES)
            .open()
            .map_err(io)?;
        let ks = db
            .keyspace("saker_meta_v1", KeyspaceCreateOptions::default)
            .map_err(io)?;
        let syncer = Arc::new(SyncQueue::default());
        let (queue, handle) = (syncer.clone(), db.clone());
        let thread = std::thread::Builder::new()
            .name("saker-journal-sync".into())
            .spawn(move || queue.run(handle))
            .map_err(io)?;
        Ok(Self {
            db,
            ks,
            syncs: Mutex::new(SyncState::default()),
            synced: Condvar::new(),
            syncer,
            syncer_thread: Some(thread),
        })
    }

    /// Whether background flushes or compactions are running or queued (benchmarks wait for
    /// quiet before measuring).
    pub fn busy(&self) -> bool {
        self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0
    }
}

impl FjallStore {
    /// Returns once a journal sync that started after this call has finished.
    fn sync_committed(&self) -> Result<(), StoreError> {
        let mut s = self.syncs.lock();
        s.next_ticket += 1;
        let ticket = s.next_ticket;
        loop {
            if s.synced_upto >= ticket {
                return match &s.failed {
                    Some((upto, e)) if *upto >= ticket => Err(StoreError::Io(e.clone())),
                    _ => Ok(()),
                };
            }
            if s.syncing {
                self.synced.wait(&mut s);
                continue;
            }
            // Lead: one sync for every ticket taken so far (their batches are in the journal).
            s.syncing = true;
            let upto = s.next_ticket;
            let result = MutexGuard::unlocked(&mut s, || self.db.persist(PersistMode::SyncData));
            if let Err(e) = result {
                s.failed = Some((upto, e.to_string()));
            }
            s.synced_upto = upto;
            s.syncing = false;
            self.synced.notify_all();
        }
    }
}

impl MetaStore for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.ks.get(key).map_err(io)?.map(|v| v.to_vec()))
    }

    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError> {
        let mut b = self.db.batch().durability(None);
        for (k, v) in &batch.ops {
            match v {
                Some(v) => b.insert(&self.ks, k.as_slice(), v.as_ref()),
                None => b.remove(&self.ks, k.as_slice()),
            }
        }
        // fjall skips empty batches entirely; a durable one still syncs earlier writes.
        if !b.is_empty() {
            b.commit().map_err(io)?;
        }
        if durable {
            self.sync_committed()?;
        }
        Ok(())
    }

    fn async_sync(&self) -> bool {
        true
    }

    fn request_sync(&self) -> Option<SyncReceiver> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.syncer.waiting.lock().answers.push(tx);
        self.syncer.wake.notify_one();
        Some(rx)
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs, StoreError> {
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        let mut out = Vec::new();
        for guard in self
            .ks
            .range::<&[u8], _>((Bound::Included(start), upper))
            .take(limit)
        {
            let (k, v) = guard.into_inner().map_err(io)?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn last_in(&self, start: &[u8], end: &[u8]) -> Result<Option<Kv>, StoreError> {
        match self.ks.range::<&[u8], _>(start..end).next_back() {
            Some(guard) => {
                let (k, v) = guard.into_inner().map_err(io)?;
                Ok(Some((k.to_vec(), v.to_vec())))
            }
            None => Ok(None),
        }
    }
}
