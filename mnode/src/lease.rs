//! A group's commit path on the TiKV engine: no raft (TiKV replicates); one process at a time
//! serves the group, holding a lease record in TiKV, and every batch it commits is fenced.
//!
//! The lease record (`L`) names the holder, its epoch and when it runs out (PD's clock, in
//! milliseconds). The holder renews it every [`RENEW_EVERY`]; any process that may serve the
//! group takes it over once it ran out, in one transaction that also bumps the fence key
//! (`F`) to the new epoch. Every batch transaction checks and writes the fence key with the
//! holder's epoch, so once another process took the group over, a batch of the old holder
//! conflicts or finds the fence moved, and fails: no split brain, whatever the old holder's
//! clock or scheduling did. Reads are served only within half a lease of the last successful
//! round (as a raft leader's reads within its lease): a holder that cannot renew stops
//! answering before another can take the group over, so no read misses a write acknowledged
//! by the next holder. A holder's own writes go one at a time (they all lock the fence key).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use saker_rpc::{MetaError, MetaResponse};
use serde::{Deserialize, Serialize};

use crate::keys::{Keys, SM_META};
use crate::leadership::{Change, Leadership};
use crate::raft::BatchEntry;
use crate::records::{decode, encode, SmMeta};
use crate::store::{FenceError, StoreError, TikvStore, WriteBatch};

/// The lease record's table tag.
pub const LEASE: u8 = b'L';
/// The fence key's table tag: the epoch of the process that may write.
pub const FENCE: u8 = b'F';

/// How long a lease lasts past its last renewal.
pub const LEASE_FOR: Duration = Duration::from_secs(4);
/// How often the holder renews it (and the others look whether it ran out).
pub const RENEW_EVERY: Duration = Duration::from_millis(1000);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    holder: u64,
    addr: String,
    epoch: u64,
    /// PD physical milliseconds.
    expires_ms: u64,
}

/// A group's lease, as one process sees it.
pub(crate) struct Lease {
    store: Arc<TikvStore>,
    keys: Keys,
    node_id: u64,
    addr: String,
    /// The epoch this process holds the group in (0: it does not).
    epoch: AtomicU64,
    /// The group's state-machine meta as of the last commit (the inode id high-water mark).
    meta: Mutex<SmMeta>,
    /// When this process's hold runs out unless renewed (local clock, with a margin).
    deadline: Mutex<Option<Instant>>,
    /// Whether this process serves the group, as requests see it.
    leadership: Arc<Leadership>,
    /// Held while a write commits: a holder's writes all lock the fence key, so two at once
    /// would conflict with each other.
    writing: Mutex<()>,
}

fn unavailable(e: impl std::fmt::Display) -> MetaError {
    MetaError::Unavailable(format!("tikv: {e}"))
}

impl Lease {
    pub fn new(
        store: Arc<TikvStore>,
        keys: Keys,
        node_id: u64,
        addr: String,
        leadership: Arc<Leadership>,
    ) -> Self {
        Self {
            store,
            keys,
            node_id,
            addr,
            epoch: AtomicU64::new(0),
            meta: Mutex::new(SmMeta::default()),
            deadline: Mutex::new(None),
            leadership,
            writing: Mutex::new(()),
        }
    }

    /// Stops serving at once: the fence moved, another process holds the group.
    fn deposed(&self) {
        self.epoch.store(0, Ordering::SeqCst);
        self.leadership.lease_lost(None);
    }

    /// This process's RPC address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The epoch this process serves the group in (0: none).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    fn fence(&self) -> (Vec<u8>, Vec<u8>) {
        (self.keys.single(FENCE), self.epoch().to_be_bytes().to_vec())
    }

    /// Commits a batch entry: its mutations and the group's meta, fenced by the epoch.
    pub async fn commit(
        self: &Arc<Self>,
        entry: BatchEntry,
    ) -> Result<Vec<Result<MetaResponse, MetaError>>, String> {
        let me = self.clone();
        let results = Arc::unwrap_or_clone(entry.results);
        let mut batch = Arc::unwrap_or_clone(entry.mutations);
        let high_water = entry.id_high_water;
        tokio::task::spawn_blocking(move || me.write(&mut batch, high_water))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        Ok(results)
    }

    /// Writes `mutations` as a control entry (exception table, coordinator records).
    pub async fn write_control(
        self: &Arc<Self>,
        mut mutations: WriteBatch,
        not_leader: impl FnOnce() -> MetaError,
    ) -> Result<(), MetaError> {
        if self.epoch() == 0 {
            return Err(not_leader());
        }
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.write(&mut mutations, 0))
            .await
            .map_err(unavailable)?
    }

    fn write(&self, batch: &mut WriteBatch, high_water: u64) -> Result<(), MetaError> {
        let _one = self.writing.lock();
        let (fence_key, epoch) = self.fence();
        if self.epoch() == 0 {
            return Err(MetaError::NotLeader { leader: None });
        }
        let mut meta = self.meta.lock().clone();
        if high_water > meta.id_high_water {
            meta.id_high_water = high_water;
            batch.put(self.keys.single(SM_META), encode(&meta));
        }
        match self
            .store
            .write_fenced(batch, Some((&fence_key, Some(&epoch))))
        {
            Ok(()) => {
                *self.meta.lock() = meta;
                Ok(())
            }
            Err(FenceError::Moved) => {
                // A conflict: the fence moved (another process holds the group now: stop at
                // once), or another writer touched a key of the batch (try again).
                match self.store.get_fresh(&fence_key) {
                    Ok(Some(now)) if now == epoch => Err(MetaError::Unavailable(
                        "tikv: write conflict; try again".into(),
                    )),
                    _ => {
                        self.deposed();
                        Err(MetaError::NotLeader { leader: None })
                    }
                }
            }
            Err(FenceError::Unknown(e)) => Err(unavailable(e)),
            Err(FenceError::Store(e)) => Err(unavailable(e)),
        }
    }

    /// One round: renews a held lease, takes over one that ran out, or learns who holds it.
    /// Returns the epoch won this round (a new hold), if any, and the holder's address.
    fn round(&self) -> Result<(Option<u64>, Option<String>), StoreError> {
        let key = self.keys.single(LEASE);
        let started = Instant::now();
        use tikv_client::TimestampExt;
        let now_ms = tikv_client::Timestamp::from_version(self.store.timestamp()?).physical as u64;
        let old_bytes = self.store.get_fresh(&key)?;
        let old: Option<Record> = old_bytes.as_deref().map(decode).transpose()?;
        let mine = self.epoch();
        let ours = old
            .as_ref()
            .is_some_and(|r| r.holder == self.node_id && r.epoch == mine && mine != 0);
        let expired = old.as_ref().is_none_or(|r| r.expires_ms < now_ms);
        if !ours && !expired {
            let holder = old.map(|r| r.addr);
            if mine != 0 {
                self.epoch.store(0, Ordering::SeqCst);
            }
            return Ok((None, holder));
        }
        let epoch = if ours {
            mine
        } else {
            old.as_ref().map_or(0, |r| r.epoch) + 1
        };
        let record = Record {
            holder: self.node_id,
            addr: self.addr.clone(),
            epoch,
            expires_ms: now_ms + LEASE_FOR.as_millis() as u64,
        };
        let mut batch = WriteBatch::default();
        batch.put(key.clone(), encode(&record));
        if !ours {
            batch.put(self.keys.single(FENCE), epoch.to_be_bytes().to_vec());
        }
        match self
            .store
            .write_fenced(&batch, Some((&key, old_bytes.as_deref())))
        {
            Ok(()) => {}
            Err(FenceError::Moved) => {
                self.deposed();
                return Ok((None, None));
            }
            Err(FenceError::Unknown(e)) => return Err(StoreError::Unreachable(e)),
            Err(FenceError::Store(e)) => return Err(e),
        }
        // The hold counts from before the round (the local clock), less a margin; reads are
        // served within half of it.
        *self.deadline.lock() = Some(started + LEASE_FOR / 2);
        self.leadership.acked(started);
        if ours {
            return Ok((None, Some(self.addr.clone())));
        }
        // Reads from now on see everything the previous holder committed.
        self.store.advance_reads()?;
        *self.meta.lock() = SmMeta::load(self.store.as_ref(), self.keys)?;
        self.epoch.store(epoch, Ordering::SeqCst);
        Ok((Some(epoch), Some(self.addr.clone())))
    }

    /// Gives a held lease up (a graceful shutdown), so another process, or this one
    /// restarted, takes the group at once rather than after it lapses. Stops serving first.
    pub fn release(&self) -> Result<(), StoreError> {
        let _one = self.writing.lock();
        let mine = self.epoch.swap(0, Ordering::SeqCst);
        self.leadership.lease_lost(None);
        if mine == 0 {
            return Ok(());
        }
        let key = self.keys.single(LEASE);
        let Some(old) = self.store.get_fresh(&key)? else {
            return Ok(());
        };
        let mut record: Record = decode(&old)?;
        if record.holder != self.node_id || record.epoch != mine {
            return Ok(());
        }
        record.expires_ms = 0;
        let mut batch = WriteBatch::default();
        batch.put(key.clone(), encode(&record));
        match self.store.write_fenced(&batch, Some((&key, Some(&old)))) {
            Ok(()) | Err(FenceError::Moved) => Ok(()),
            Err(FenceError::Unknown(e)) => Err(StoreError::Unreachable(e)),
            Err(FenceError::Store(e)) => Err(e),
        }
    }

    /// Whether the hold ran out locally (renewals failed for a while).
    fn lapsed(&self) -> bool {
        self.deadline.lock().is_none_or(|d| Instant::now() >= d)
    }
}

/// Keeps the lease of `node`'s group for as long as the node lives: serves while it holds
/// it (after the rebuild a new hold needs), stops when it loses it. The first round has run
/// already ([`step`], at start).
pub(crate) async fn drive(
    node: Weak<crate::Mnode>,
    lease: Arc<Lease>,
    leadership: Arc<Leadership>,
) {
    let mut tick = tokio::time::interval(RENEW_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(n) = node.upgrade() else { return };
        if leadership.retired() {
            return;
        }
        step(&n, &lease, &leadership).await;
    }
}

/// One lease round for `n`'s group, and what it means for serving.
pub(crate) async fn step(n: &Arc<crate::Mnode>, lease: &Arc<Lease>, leadership: &Leadership) {
    let l = lease.clone();
    match tokio::task::spawn_blocking(move || l.round()).await {
        Ok(Ok((won, holder))) => {
            crate::tikv_health::round_answered(n.group());
            if let Some(epoch) = won {
                if let Change::Elected(epoch) = leadership.lease_won(epoch, holder) {
                    match n.on_elected(epoch).await {
                        Ok(()) => leadership.lease_serve(epoch, lease.epoch()),
                        // Not served: the lease is given up, and taken again (here or
                        // elsewhere) by a later round, which rebuilds again.
                        Err(e) => {
                            tracing::error!(group = n.group(), error = %e, "the group's state is unreadable; lease given up");
                            let l = lease.clone();
                            if let Ok(Err(e)) =
                                tokio::task::spawn_blocking(move || l.release()).await
                            {
                                tracing::warn!(group = n.group(), error = %e, "lease not released");
                            }
                        }
                    }
                }
            } else if lease.epoch() == 0 {
                leadership.lease_lost(holder);
            }
        }
        Ok(Err(e)) => {
            tracing::warn!(group = n.group(), error = %e, "lease round failed");
            crate::tikv_health::round_failed(n.group(), lease.store.endpoints(), e.to_string());
            if lease.lapsed() && leadership.ready_term() != 0 {
                tracing::warn!(group = n.group(), "lease lapsed; not serving");
                lease.epoch.store(0, Ordering::SeqCst);
                leadership.lease_lost(None);
            }
        }
        Err(e) => tracing::error!(group = n.group(), error = %e, "lease round panicked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MetaStore;

    fn sim() -> (tokio::runtime::Runtime, saker_tikv_sim::Sim, Arc<TikvStore>) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let sim = rt
            .block_on(saker_tikv_sim::Sim::start(
                "127.0.0.1:0".parse().unwrap(),
                saker_tikv_sim::Faults::default(),
            ))
            .unwrap();
        let store = Arc::new(
            TikvStore::connect(&[sim.addr.to_string()], "lease")
                .unwrap()
                .single_writer(),
        );
        (rt, sim, store)
    }

    fn put(key: &[u8]) -> WriteBatch {
        let mut b = WriteBatch::default();
        b.put(key.to_vec(), b"v".to_vec());
        b
    }

    /// Makes the group's lease record run out now, as if its holder stopped renewing.
    fn expire(store: &TikvStore, keys: Keys) {
        let key = keys.single(LEASE);
        let mut r: Record = decode(&store.get(&key).unwrap().unwrap()).unwrap();
        r.expires_ms = 0;
        let mut b = WriteBatch::default();
        b.put(key, encode(&r));
        store.write(&b, true).unwrap();
    }

    #[test]
    fn one_holder_at_a_time_and_the_old_one_is_fenced() {
        let (_rt, _sim, store) = sim();
        let keys = Keys::new(3);
        let lead = || Arc::new(Leadership::new(1, LEASE_FOR));
        let a = Lease::new(store.clone(), keys, 1, "a:1".into(), lead());
        let b = Lease::new(store.clone(), keys, 2, "b:1".into(), lead());
        assert_eq!(
            a.round().unwrap(),
            (Some(1), Some("a:1".into())),
            "a takes it"
        );
        assert_eq!(
            b.round().unwrap(),
            (None, Some("a:1".into())),
            "b sees a hold it"
        );
        assert_eq!(a.round().unwrap(), (None, Some("a:1".into())), "a renews");
        a.write(&mut put(b"from-a"), 10).unwrap();
        expire(&store, keys);
        assert_eq!(
            b.round().unwrap(),
            (Some(2), Some("b:1".into())),
            "b takes over"
        );
        // a has not noticed yet: its next batch is refused whole, and it stops.
        let refused = a.write(&mut put(b"stale-a"), 20);
        assert!(
            matches!(refused, Err(MetaError::NotLeader { .. })),
            "{refused:?}"
        );
        assert_eq!(a.epoch(), 0);
        assert_eq!(store.get(b"stale-a").unwrap(), None);
        assert_eq!(
            b.meta.lock().id_high_water,
            10,
            "the new holder starts from what the old one committed"
        );
        b.write(&mut put(b"from-b"), 0).unwrap();
        assert!(store.get(b"from-b").unwrap().is_some());
        assert_eq!(
            a.round().unwrap(),
            (None, Some("b:1".into())),
            "a learns the holder"
        );
        // b shuts down gracefully: a takes the group at once, not after the lease lapses.
        b.release().unwrap();
        assert_eq!(b.epoch(), 0);
        assert_eq!(a.round().unwrap(), (Some(3), Some("a:1".into())));
        assert!(matches!(
            b.write(&mut put(b"late-b"), 0),
            Err(MetaError::NotLeader { .. })
        ));
    }
}
