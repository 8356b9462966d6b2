//! Percolator over ordered maps, sans I/O: locks, write records and values by timestamp.
//!
//! A transaction prewrites every key (a lock naming the primary), then commits the primary
//! (a write record at the commit timestamp) and the secondaries. A reader meets a lock older
//! than its snapshot and must resolve it: the primary's state decides the transaction.
//! A rollback leaves a record at the start timestamp so a late prewrite of that transaction
//! fails. Semantics follow TiKV's: lock TTLs are counted in the physical part of timestamps.
//! Versions below the GC safe point are collected as TiKV's GC does ([`Mvcc::gc`]).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// A key's bytes.
pub type Key = Vec<u8>;

/// Milliseconds in a timestamp: the physical part is above these bits.
pub const LOGICAL_BITS: u32 = 18;

/// The physical (millisecond) part of a timestamp.
pub fn physical(ts: u64) -> u64 {
    ts >> LOGICAL_BITS
}

/// What a mutation or a lock does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Put,
    Del,
    /// Locks the key without changing it (a read made part of the transaction).
    Lock,
    /// Puts a key that must not exist.
    Insert,
    /// Checks the key does not exist; takes no lock.
    CheckNotExists,
}

/// One mutation of a prewrite.
#[derive(Clone, Debug)]
pub struct Mutation {
    pub op: Op,
    pub key: Key,
    pub value: Vec<u8>,
}

/// A lock left by a prewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    pub primary: Key,
    pub start_ts: u64,
    pub ttl: u64,
    pub op: Op,
    pub value: Vec<u8>,
    pub txn_size: u64,
    pub min_commit_ts: u64,
    pub use_async_commit: bool,
    pub secondaries: Vec<Key>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Put(Vec<u8>),
    Del,
    Lock,
    Rollback,
}

/// A committed (or rolled back) transaction's record on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Write {
    start_ts: u64,
    kind: Kind,
}

/// Why a transactional request failed on a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// Another transaction's lock stands in the way.
    Locked { key: Key, lock: Box<Lock> },
    /// A write committed after this transaction started.
    Conflict {
        key: Key,
        start_ts: u64,
        conflict_start_ts: u64,
        conflict_commit_ts: u64,
        primary: Key,
    },
    /// An insert met an existing key.
    AlreadyExist { key: Key },
    /// The transaction was rolled back (or its lock is gone) on this key.
    Abort(String),
    /// A commit found neither the lock nor a record of the transaction.
    TxnLockNotFound { key: Key, start_ts: u64 },
    /// A status check found nothing of the transaction.
    TxnNotFound { primary: Key, start_ts: u64 },
    /// A commit below the lock's min commit ts (a reader pushed it): commit later.
    CommitTsExpired {
        key: Key,
        start_ts: u64,
        commit_ts: u64,
        min_commit_ts: u64,
    },
}

/// What a status check did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    NoAction,
    TtlExpireRollback,
    LockNotExistRollback,
    MinCommitTsPushed,
}

/// A transaction's state, as its primary shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// Still locked: the lock's remaining ttl and the lock itself.
    Locked {
        ttl: u64,
        lock: Lock,
    },
    Committed {
        commit_ts: u64,
    },
    RolledBack,
}

/// The whole keyspace of one server.
#[derive(Default)]
pub struct Mvcc {
    locks: BTreeMap<Key, Lock>,
    /// Per key, its records by commit timestamp (a rollback's by its start timestamp).
    writes: BTreeMap<Key, BTreeMap<u64, Write>>,
    /// Per start timestamp, the keys a transaction holds locks on (for resolving them).
    by_txn: HashMap<u64, Vec<Key>>,
    /// Per key, the records GC collected so far (for stats).
    collected: BTreeMap<Key, u64>,
    /// Everything at or below this was collected already.
    collected_below: u64,
}

/// The union of two sorted key streams, in their order (`first(a, b)`: `a` comes first).
fn merge<'a>(
    a: impl Iterator<Item = &'a Key>,
    b: impl Iterator<Item = &'a Key>,
    first: impl Fn(&Key, &Key) -> bool,
) -> impl Iterator<Item = &'a Key> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek().copied(), b.peek().copied()) {
        (None, None) => None,
        (Some(_), None) => a.next(),
        (None, Some(_)) => b.next(),
        (Some(x), Some(y)) if x == y => {
            b.next();
            a.next()
        }
        (Some(x), Some(y)) if first(x, y) => a.next(),
        _ => b.next(),
    })
}

impl Mvcc {
    /// The committed value of `key` visible at `ts` (no lock check).
    fn read(&self, key: &[u8], ts: u64) -> Option<Vec<u8>> {
        let records = self.writes.get(key)?;
        for (_, w) in records.range(..=ts).rev() {
            match &w.kind {
                Kind::Put(v) => return Some(v.clone()),
                Kind::Del => return None,
                Kind::Lock | Kind::Rollback => continue,
            }
        }
        None
    }

    /// A lock that blocks a read at `ts`: a put, delete or insert prewritten at or before it.
    fn blocking_lock(&self, key: &[u8], ts: u64, resolved: &[u64]) -> Option<&Lock> {
        let lock = self.locks.get(key)?;
        let blocks = lock.start_ts <= ts
            && lock.op != Op::Lock
            && !resolved.contains(&lock.start_ts)
            && !(lock.use_async_commit && lock.min_commit_ts > ts);
        blocks.then_some(lock)
    }

    /// Reads `key` at `ts`; locks of the transactions in `resolved` are skipped (the reader
    /// found them committed after its snapshot, or rolled back).
    pub fn get(&self, key: &[u8], ts: u64, resolved: &[u64]) -> Result<Option<Vec<u8>>, KeyError> {
        if let Some(lock) = self.blocking_lock(key, ts, resolved) {
            return Err(KeyError::Locked {
                key: key.to_vec(),
                lock: Box::new(lock.clone()),
            });
        }
        Ok(self.read(key, ts))
    }

    /// Up to `limit` live pairs in `[start, end)` (empty `end`: unbounded) at `ts`, in key
    /// order or, with `reverse`, backwards from `end` (exclusive) down to `start`. A key under
    /// a blocking lock yields its error in place of the pair.
    pub fn scan(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        ts: u64,
        reverse: bool,
        resolved: &[u64],
    ) -> Vec<Result<(Key, Vec<u8>), KeyError>> {
        let upper = if end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(end.to_vec())
        };
        let range = (Bound::Included(start.to_vec()), upper);
        // Candidate keys: those with records or locks, merged lazily (a page costs its length,
        // not the range's).
        let writes = self.writes.range(range.clone()).map(|(k, _)| k);
        let locks = self.locks.range(range).map(|(k, _)| k);
        let keys: Box<dyn Iterator<Item = &Key>> = if reverse {
            Box::new(merge(writes.rev(), locks.rev(), |a, b| a > b))
        } else {
            Box::new(merge(writes, locks, |a, b| a < b))
        };
        let mut out = Vec::new();
        for key in keys {
            if out.len() >= limit {
                break;
            }
            match self.get(key, ts, resolved) {
                Ok(Some(v)) => out.push(Ok((key.clone(), v))),
                Ok(None) => {}
                Err(e) => out.push(Err(e)),
            }
        }
        out
    }

    /// The newest record of `key` committed at or after `ts`, with its commit timestamp.
    fn newest_since(&self, key: &[u8], ts: u64) -> Option<(u64, &Write)> {
        let records = self.writes.get(key)?;
        records.range(ts..).next_back().map(|(c, w)| (*c, w))
    }

    /// The record `start_ts` left on `key`, with its commit timestamp.
    fn record_of(&self, key: &[u8], start_ts: u64) -> Option<(u64, &Write)> {
        let records = self.writes.get(key)?;
        records
            .range(start_ts..)
            .find(|(_, w)| w.start_ts == start_ts)
            .map(|(c, w)| (*c, w))
    }

    /// Prewrites `mutations` of the transaction `start_ts`: every key is checked first, then
    /// every lock is taken, so a failed prewrite takes none.
    pub fn prewrite(
        &mut self,
        mutations: &[Mutation],
        primary: &[u8],
        start_ts: u64,
        ttl: u64,
        txn_size: u64,
        async_commit: Option<(u64, Vec<Key>)>,
    ) -> Vec<KeyError> {
        let mut errors = Vec::new();
        for m in mutations {
            if let Err(e) = self.check_prewrite(m, start_ts) {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            return errors;
        }
        for m in mutations {
            if m.op == Op::CheckNotExists
                || self
                    .locks
                    .get(&m.key)
                    .is_some_and(|l| l.start_ts == start_ts)
            {
                continue;
            }
            let (min_commit_ts, secondaries) = match &async_commit {
                Some((min, secs)) if m.key == primary => (*min, secs.clone()),
                Some((min, _)) => (*min, Vec::new()),
                None => (0, Vec::new()),
            };
            let op = if m.op == Op::Insert { Op::Put } else { m.op };
            self.locks.insert(
                m.key.clone(),
                Lock {
                    primary: primary.to_vec(),
                    start_ts,
                    ttl,
                    op,
                    value: m.value.clone(),
                    txn_size,
                    min_commit_ts,
                    use_async_commit: async_commit.is_some(),
                    secondaries,
                },
            );
            self.by_txn.entry(start_ts).or_default().push(m.key.clone());
        }
        Vec::new()
    }

    fn check_prewrite(&self, m: &Mutation, start_ts: u64) -> Result<(), KeyError> {
        if let Some(lock) = self.locks.get(&m.key) {
            if lock.start_ts != start_ts {
                return Err(KeyError::Locked {
                    key: m.key.clone(),
                    lock: Box::new(lock.clone()),
                });
            }
            return Ok(()); // a retried prewrite
        }
        if let Some((commit_ts, w)) = self.newest_since(&m.key, start_ts) {
            if w.start_ts == start_ts {
                return Err(KeyError::Abort(format!(
                    "transaction {start_ts} already {} on this key",
                    if w.kind == Kind::Rollback {
                        "rolled back"
                    } else {
                        "committed"
                    }
                )));
            }
            if w.kind != Kind::Rollback || commit_ts > start_ts {
                return Err(KeyError::Conflict {
                    key: m.key.clone(),
                    start_ts,
                    conflict_start_ts: w.start_ts,
                    conflict_commit_ts: commit_ts,
                    primary: Vec::new(),
                });
            }
        }
        if matches!(m.op, Op::Insert | Op::CheckNotExists) && self.read(&m.key, u64::MAX).is_some()
        {
            return Err(KeyError::AlreadyExist { key: m.key.clone() });
        }
        Ok(())
    }

    /// Commits the transaction `start_ts` on `keys` at `commit_ts`.
    pub fn commit(&mut self, keys: &[Key], start_ts: u64, commit_ts: u64) -> Result<(), KeyError> {
        // Check every key first, so a refused commit changes nothing.
        for key in keys {
            match self.locks.get(key) {
                Some(lock) if lock.start_ts == start_ts => {
                    if commit_ts < lock.min_commit_ts {
                        return Err(KeyError::CommitTsExpired {
                            key: key.clone(),
                            start_ts,
                            commit_ts,
                            min_commit_ts: lock.min_commit_ts,
                        });
                    }
                }
                _ => match self.record_of(key, start_ts) {
                    Some((_, w)) if w.kind == Kind::Rollback => {
                        return Err(KeyError::Abort(format!(
                            "transaction {start_ts} was rolled back"
                        )))
                    }
                    Some(_) => {} // committed already: a retried commit
                    None => {
                        return Err(KeyError::TxnLockNotFound {
                            key: key.clone(),
                            start_ts,
                        })
                    }
                },
            }
        }
        for key in keys {
            self.commit_key(key, start_ts, commit_ts);
        }
        Ok(())
    }

    fn commit_key(&mut self, key: &[u8], start_ts: u64, commit_ts: u64) {
        let Some(lock) = self.locks.get(key).filter(|l| l.start_ts == start_ts) else {
            return;
        };
        let kind = match lock.op {
            Op::Put | Op::Insert => Kind::Put(lock.value.clone()),
            Op::Del => Kind::Del,
            Op::Lock | Op::CheckNotExists => Kind::Lock,
        };
        self.locks.remove(key);
        self.writes
            .entry(key.to_vec())
            .or_default()
            .insert(commit_ts, Write { start_ts, kind });
        self.forget_lock(start_ts, key);
    }

    fn forget_lock(&mut self, start_ts: u64, key: &[u8]) {
        if let Some(keys) = self.by_txn.get_mut(&start_ts) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.by_txn.remove(&start_ts);
            }
        }
    }

    /// Rolls back `start_ts` on `key`: drops its lock and leaves a rollback record so a late
    /// prewrite fails. A committed key refuses.
    fn rollback_key(&mut self, key: &[u8], start_ts: u64) -> Result<(), KeyError> {
        if let Some((commit_ts, w)) = self.record_of(key, start_ts) {
            if w.kind != Kind::Rollback {
                return Err(KeyError::Abort(format!(
                    "transaction {start_ts} committed at {commit_ts}"
                )));
            }
            return Ok(());
        }
        if self.locks.get(key).is_some_and(|l| l.start_ts == start_ts) {
            self.locks.remove(key);
            self.forget_lock(start_ts, key);
        }
        let records = self.writes.entry(key.to_vec()).or_default();
        // A commit record of another transaction at the same timestamp wins the slot.
        records.entry(start_ts).or_insert(Write {
            start_ts,
            kind: Kind::Rollback,
        });
        Ok(())
    }

    /// Rolls back `start_ts` on every key of `keys`.
    pub fn rollback(&mut self, keys: &[Key], start_ts: u64) -> Result<(), KeyError> {
        for key in keys {
            if let Some((commit_ts, w)) = self.record_of(key, start_ts) {
                if w.kind != Kind::Rollback {
                    return Err(KeyError::Abort(format!(
                        "transaction {start_ts} committed at {commit_ts}"
                    )));
                }
            }
        }
        for key in keys {
            self.rollback_key(key, start_ts)?;
        }
        Ok(())
    }

    /// The transaction `lock_ts`'s state on its primary key, rolling it back when its lock
    /// expired by `current_ts` or when nothing of it is there (as TiKV does when asked to
    /// roll back what does not exist: `tikv-client` 0.4 cannot handle the `TxnNotFound` a
    /// status check without that flag answers).
    /// A live lock's min commit ts is pushed past `caller_start_ts`.
    pub fn check_txn_status(
        &mut self,
        primary: &[u8],
        lock_ts: u64,
        caller_start_ts: u64,
        current_ts: u64,
    ) -> Result<(TxnStatus, Action), KeyError> {
        if let Some(lock) = self
            .locks
            .get_mut(primary)
            .filter(|l| l.start_ts == lock_ts)
        {
            if physical(current_ts).saturating_sub(physical(lock.start_ts)) >= lock.ttl {
                self.rollback_key(primary, lock_ts)?;
                return Ok((TxnStatus::RolledBack, Action::TtlExpireRollback));
            }
            let mut action = Action::NoAction;
            if !lock.use_async_commit && caller_start_ts != u64::MAX {
                let pushed = caller_start_ts + 1;
                if lock.min_commit_ts < pushed {
                    lock.min_commit_ts = pushed;
                    action = Action::MinCommitTsPushed;
                }
            }
            let status = TxnStatus::Locked {
                ttl: lock.ttl,
                lock: lock.clone(),
            };
            return Ok((status, action));
        }
        match self.record_of(primary, lock_ts) {
            Some((_, w)) if w.kind == Kind::Rollback => {
                Ok((TxnStatus::RolledBack, Action::NoAction))
            }
            Some((commit_ts, _)) => Ok((TxnStatus::Committed { commit_ts }, Action::NoAction)),
            // Nothing of it here: it never reached this key (or its records are gone). It is
            // rolled back so that it cannot prewrite later.
            None => {
                self.rollback_key(primary, lock_ts)?;
                Ok((TxnStatus::RolledBack, Action::LockNotExistRollback))
            }
        }
    }

    /// Commits (`commit_ts > 0`) or rolls back every lock of `start_ts`, or only those on
    /// `keys` when it is not empty. Keys outside `[lo, hi)` (empty `hi`: unbounded) are left
    /// alone (they are another region's).
    pub fn resolve(
        &mut self,
        start_ts: u64,
        commit_ts: u64,
        keys: &[Key],
        lo: &[u8],
        hi: &[u8],
    ) -> Result<(), KeyError> {
        let keys: Vec<Key> = if keys.is_empty() {
            self.by_txn.get(&start_ts).cloned().unwrap_or_default()
        } else {
            keys.to_vec()
        };
        let keys: Vec<Key> = keys
            .into_iter()
            .filter(|k| k.as_slice() >= lo && (hi.is_empty() || k.as_slice() < hi))
            .collect();
        if commit_ts == 0 {
            self.rollback(&keys, start_ts)
        } else {
            for key in &keys {
                self.commit_key(key, start_ts, commit_ts);
            }
            Ok(())
        }
    }

    /// Extends the lock ttl of `start_ts` on its primary to at least `ttl`; the ttl in force.
    pub fn heart_beat(&mut self, primary: &[u8], start_ts: u64, ttl: u64) -> Result<u64, KeyError> {
        match self
            .locks
            .get_mut(primary)
            .filter(|l| l.start_ts == start_ts)
        {
            Some(lock) => {
                lock.ttl = lock.ttl.max(ttl);
                Ok(lock.ttl)
            }
            None => Err(KeyError::TxnNotFound {
                primary: primary.to_vec(),
                start_ts,
            }),
        }
    }

    /// Locks with `start_ts <= max_ts` in `[start, end)`, at most `limit` (0: no limit).
    pub fn scan_locks(
        &self,
        start: &[u8],
        end: &[u8],
        max_ts: u64,
        limit: usize,
    ) -> Vec<(Key, Lock)> {
        let upper = if end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(end.to_vec())
        };
        self.locks
            .range((Bound::Included(start.to_vec()), upper))
            .filter(|(_, l)| l.start_ts <= max_ts)
            .take(if limit == 0 { usize::MAX } else { limit })
            .map(|(k, l)| (k.clone(), l.clone()))
            .collect()
    }

    /// For async commit: the locks of `start_ts` still on `keys`, or the commit ts when one
    /// key is committed (0 when rolled back; keys with no trace are rolled back).
    pub fn check_secondaries(
        &mut self,
        keys: &[Key],
        start_ts: u64,
    ) -> Result<(Vec<(Key, Lock)>, u64), KeyError> {
        let mut locks = Vec::new();
        for key in keys {
            if let Some(lock) = self.locks.get(key).filter(|l| l.start_ts == start_ts) {
                locks.push((key.clone(), lock.clone()));
                continue;
            }
            match self.record_of(key, start_ts) {
                Some((_, w)) if w.kind == Kind::Rollback => return Ok((Vec::new(), 0)),
                Some((commit_ts, _)) => return Ok((Vec::new(), commit_ts)),
                None => {
                    self.rollback_key(key, start_ts)?;
                    return Ok((Vec::new(), 0));
                }
            }
        }
        Ok((locks, 0))
    }

    /// Number of keys with a committed value at `ts` (for tests and stats).
    pub fn live_keys(&self, ts: u64) -> usize {
        self.writes
            .keys()
            .filter(|k| self.read(k, ts).is_some())
            .count()
    }

    /// Number of keys with records or locks in `[start, end)` (empty `end`: unbounded).
    pub fn keys_in(&self, start: &[u8], end: &[u8]) -> usize {
        let upper = if end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(end.to_vec())
        };
        self.writes
            .range((Bound::Included(start.to_vec()), upper))
            .count()
    }

    /// A key in the middle of `[start, end)` by record count (for region splits).
    pub fn middle_key(&self, start: &[u8], end: &[u8]) -> Option<Key> {
        let upper = if end.is_empty() {
            Bound::Unbounded
        } else {
            Bound::Excluded(end.to_vec())
        };
        let keys: Vec<&Key> = self
            .writes
            .range((Bound::Included(start.to_vec()), upper))
            .map(|(k, _)| k)
            .collect();
        let mid = keys.get(keys.len() / 2)?;
        (mid.as_slice() > start).then(|| mid.to_vec())
    }
}

mod gc;
pub use gc::Versions;

#[cfg(test)]
mod tests;
