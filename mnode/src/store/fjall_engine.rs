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
//! then asks the store's syncer thread for a sync, which runs one fdatasync for every request
//! queued before it started; one fdatasync thus covers every group's appends. Async callers
//! (the raft log appends, [`MetaStore::write_then_sync`]) await the answer on a oneshot
//! channel, so no thread waits per append; blocking callers wait on a std channel. Measured
//! against appending on tokio's blocking pool (4 alternating pairs, `saker server --mount`, 16
//! threads): creates +29%, copies +13%, other lines unchanged; one thread: no line worse.
//! An async durable write that finds no sync running or queued syncs on its own thread
//! instead (the raft core's, for ~120 us): the hand-off to the syncer thread and back cost two
//! thread wake-ups, ~45 us of a one-thread unlink's ~330 us in the server. Measured against
//! always handing off (alternating pairs, `saker server --mount`, 2,000 files): one thread
//! creates +20%, writes +27%, unlinks +9%; 16 threads creates +14%, unlinks +15%, copies +6%,
//! writes unchanged.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use super::{Kv, KvPairs, MetaStore, StoreError, SyncReceiver, WriteBatch};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Condvar, Mutex};

/// Block cache size, equal to redb's default cache size.
const CACHE_BYTES: u64 = 1 << 30;

/// The keyspace of the state machines (every group's tables but its raft log).
const META_KEYSPACE: &str = "saker_meta_v1";
/// The keyspace of the raft logs ([`MetaStore::raft_log_store`]).
const RAFT_LOG_KEYSPACE: &str = "saker_raft_log_v1";

/// A [`MetaStore`] on one fjall keyspace.
pub struct FjallStore {
    db: Database,
    ks: Keyspace,
    /// Sync requests and the syncer thread serving them (group commit), shared by the stores
    /// on other keyspaces of the same database.
    syncer: Arc<Syncer>,
}

/// The syncer thread and its queue; the thread is stopped and joined when the last store
/// using it is dropped (it holds the database open).
struct Syncer {
    queue: Arc<SyncQueue>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Waiters for the syncer thread's next journal sync.
#[derive(Default)]
struct SyncQueue {
    waiting: Mutex<Waiting>,
    wake: Condvar,
}

#[derive(Default)]
struct Waiting {
    answers: Vec<Answer>,
    /// A sync is running (the syncer thread's or a caller's own, see [`SyncQueue::sync_here`]).
    running: bool,
    stop: bool,
}

/// Where a sync's outcome goes: an awaiting task or a blocked thread.
enum Answer {
    Task(tokio::sync::oneshot::Sender<Result<(), StoreError>>),
    Thread(std::sync::mpsc::SyncSender<Result<(), StoreError>>),
}

impl SyncQueue {
    fn push(&self, answer: Answer) {
        self.waiting.lock().answers.push(answer);
        self.wake.notify_one();
    }

    /// Syncs on the calling thread if no sync is running or waiting: a lone durable write
    /// then costs no hand-off to the syncer thread and back (two thread wake-ups, ~45 us on a
    /// 2-core VM, against a ~120 us fdatasync). `None` means a sync is under way or queued;
    /// the caller queues instead.
    fn sync_here(&self, db: &Database) -> Option<Result<(), StoreError>> {
        {
            let mut w = self.waiting.lock();
            if w.running || !w.answers.is_empty() || w.stop {
                return None;
            }
            w.running = true;
        }
        let result = db.persist(PersistMode::SyncData).map_err(io);
        let mut w = self.waiting.lock();
        w.running = false;
        if !w.answers.is_empty() {
            // Requests that came in meanwhile wait for the syncer thread's next sync.
            self.wake.notify_one();
        }
        Some(result)
    }

    /// The syncer thread: one fdatasync for every request that came in before it started.
    fn run(&self, db: Database) {
        loop {
            let waiters = {
                let mut w = self.waiting.lock();
                while (w.answers.is_empty() || w.running) && !w.stop {
                    self.wake.wait(&mut w);
                }
                if w.answers.is_empty() {
                    return; // stopped
                }
                w.running = true;
                std::mem::take(&mut w.answers)
            };
            let result = db.persist(PersistMode::SyncData).map_err(io);
            self.waiting.lock().running = false;
            // A waiter that went away (a cancelled task) needs no answer.
            for answer in waiters {
                match answer {
                    Answer::Task(tx) => drop(tx.send(result.clone())),
                    Answer::Thread(tx) => drop(tx.send(result.clone())),
                }
            }
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.queue.waiting.lock().stop = true;
        self.queue.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
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
            .keyspace(META_KEYSPACE, KeyspaceCreateOptions::default)
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
            syncer: Arc::new(Syncer {
                queue: syncer,
                thread: Some(thread),
            }),
        })
    }

    /// A store on keyspace `name` of the same database: same journal, same syncs.
    fn sibling(&self, name: &str) -> Result<Self, StoreError> {
        let ks = self
            .db
            .keyspace(name, KeyspaceCreateOptions::default)
            .map_err(io)?;
        Ok(Self {
            db: self.db.clone(),
            ks,
            syncer: self.syncer.clone(),
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
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.syncer.queue.push(Answer::Thread(tx));
        rx.recv().map_err(io)?
    }

    /// Commits `batch` to the journal without a sync (it survives a crash only once synced).
    fn commit(&self, batch: &WriteBatch) -> Result<(), StoreError> {
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
        Ok(())
    }
}

impl MetaStore for FjallStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.ks.get(key).map_err(io)?.map(|v| v.to_vec()))
    }

    fn write(&self, batch: &WriteBatch, durable: bool) -> Result<(), StoreError> {
        self.commit(batch)?;
        if durable {
            self.sync_committed()?;
        }
        Ok(())
    }

    /// The raft logs get a keyspace of their own: every log entry is deleted a few thousand
    /// entries later, and in the state machines' LSM those entries and their tombstones made
    /// compaction rewrite them level after level. Three rounds of `saker bench fs --threads 1,16`
    /// on one server: fjall's compaction CPU per round went 15, 27, 40 s with the logs in the
    /// state machines' keyspace and 10, 13, 19 s with their own, and the one-thread lines no
    /// longer fell round after round. Both keyspaces share the journal, so a sync covers both.
    fn raft_log_store(&self) -> Result<Option<Arc<dyn MetaStore>>, StoreError> {
        Ok(Some(Arc::new(self.sibling(RAFT_LOG_KEYSPACE)?)))
    }

    fn write_then_sync(&self, batch: &WriteBatch) -> Option<Result<SyncReceiver, StoreError>> {
        let committed = self.commit(batch).map(|()| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            match self.syncer.queue.sync_here(&self.db) {
                Some(result) => drop(tx.send(result)),
                None => self.syncer.queue.push(Answer::Task(tx)),
            }
            rx
        });
        Some(committed)
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
