//! The TiKV engine: the store's keys live in a TiKV cluster under a per-namespace prefix,
//! through `tikv-client`'s transactional API, so several saker clusters can share one TiKV.
//!
//! The store trait is synchronous and `tikv-client` has no sync API: every call runs on a
//! runtime of the store's own and the caller waits on a channel (never `block_on` inside
//! tokio). A batch is one optimistic transaction; [`TikvStore::write_fenced`] also writes a
//! fence key whose value must be what the caller expects, so that a batch of a process that
//! lost its group (another took the lease and bumped the fence) fails at commit: under
//! Percolator a read alone would not conflict. Reads are snapshot reads, retried when they meet
//! locks of a transaction still committing its secondaries, at a fresh PD timestamp; or, for a
//! store whose every key has one writer at a time (the MNode groups under their leases:
//! [`TikvStore::single_writer`]), at the newest of this process's commit timestamps and the
//! timestamp taken when it last won a lease ([`TikvStore::advance_reads`]), which sees every
//! write it must see without a PD round trip per read. In that mode reads of single keys
//! are also served from a cache of what this process last read or wrote
//! ([`super::tikv_cache`]), exactly as fresh as the pinned timestamp.
//! Every transaction is rolled back when it does not commit (`tikv-client` panics when an open
//! one is dropped unless told otherwise; it is told to warn, and never gets to).
//! Every call holds its read timestamp in a floor while it runs, below which the process's
//! PD service safe point never goes ([`super::tikv_gc`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

use tikv_client::{
    BoundRange, CheckLevel, Config, Key, TimestampExt, Transaction, TransactionClient,
    TransactionOptions,
};

use super::tikv_cache::ReadCache;
use super::tikv_gc::{At, GcPart, ReadFloor};
use super::{prefix_end, Kv, KvPairs, MetaStore, StoreError, WriteBatch};

/// Largest gRPC response the client accepts (a scan page of large records; the crate's
/// default is 4 MiB).
const MAX_RESPONSE: usize = 64 << 20;
/// A pinned read timestamp older than this is taken afresh (TiKV's GC keeps 10 minutes).
const PIN_FOR: Duration = Duration::from_secs(10);
/// Attempts of a read or an unfenced write that meets locks, conflicts or region churn.
const ATTEMPTS: u32 = 8;
/// The longest a store call waits for TiKV (its retries included).
const CALL_DEADLINE: Duration = Duration::from_secs(8);
/// The longest a start waits for PD and TiKV to answer (every endpoint is tried at once,
/// each within bounded waits: [`super::tikv_connect`]).
const START_WITHIN: Duration = Duration::from_secs(30);
/// The single-writer read cache's size (keys, values and bookkeeping).
const CACHE_BYTES: u64 = 64 << 20;

/// Why a fenced write was refused.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The fence key holds another value: another process owns what it guards.
    #[error("fenced: the fence key moved on")]
    Moved,
    /// The commit may or may not have happened (its answer was lost): nothing was rolled
    /// back, and reads were moved past it.
    #[error("tikv commit outcome unknown: {0}")]
    Unknown(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct TikvStore {
    client: TransactionClient,
    /// Prepended to every key: `saker/<keyspace>/`.
    prefix: Vec<u8>,
    /// The PD endpoints, as given (for messages).
    pd: String,
    /// The PD endpoints, the one that answered at start first, and the cluster's id.
    endpoints: Vec<String>,
    cluster_id: u64,
    /// PD's service id for this process's GC safe point.
    service: String,
    /// The timestamps calls read at while they run.
    floor: Arc<ReadFloor>,
    /// Taken (and shut down in the background) on drop, which may happen inside a runtime.
    rt: Option<tokio::runtime::Runtime>,
    /// Single-writer mode: the timestamp reads use (0: take a fresh one each time) and when
    /// it was last taken from PD.
    pinned: Option<Arc<Pinned>>,
}

struct Pinned {
    ts: AtomicU64,
    fetched: Mutex<Option<Instant>>,
    cache: ReadCache,
}

/// A failed call (TiKV unreachable, or still failing after the retries), with its causes (a
/// transport error's own text says little) and without `tikv-client`'s source locations.
fn io(e: impl std::error::Error + 'static) -> StoreError {
    StoreError::Unreachable(format!("tikv: {}", super::tikv_connect::describe(&e)))
}

pub(super) fn options() -> TransactionOptions {
    TransactionOptions::new_optimistic().drop_check(CheckLevel::Warn)
}

/// Whether a failed call may succeed when tried again (locks still being resolved, a write
/// conflict, a region moving).
fn retryable(e: &tikv_client::Error) -> bool {
    use tikv_client::Error as E;
    match e {
        E::ResolveLockError(_)
        | E::RegionError(_)
        | E::RegionForKeyNotFound { .. }
        | E::RegionNotFoundInResponse { .. }
        | E::LeaderNotFound { .. }
        | E::KeyError(_)
        | E::Grpc(_)
        | E::GrpcAPI(_) => true,
        E::MultipleKeyErrors(errs) | E::ExtractedErrors(errs) => errs.iter().all(retryable),
        E::PessimisticLockError { inner, .. } => retryable(inner),
        _ => false,
    }
}

impl std::fmt::Debug for TikvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TikvStore")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish_non_exhaustive()
    }
}

impl TikvStore {
    /// Connects to the PD endpoints `pd` (`host:port`) and keeps keys under `keyspace`.
    pub fn connect(pd: &[String], keyspace: &str) -> Result<Self, StoreError> {
        if keyspace.is_empty() || keyspace.contains('/') {
            return Err(StoreError::Io(format!(
                "tikv keyspace {keyspace:?} must be non-empty and have no '/'"
            )));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tikv-store")
            .enable_all()
            .build()
            .map_err(io)?;
        let config = Config::default()
            .with_timeout(Duration::from_secs(5))
            .with_grpc_max_decoding_message_size(MAX_RESPONSE);
        let prefix = format!("saker/{keyspace}/").into_bytes();
        let endpoints = pd.to_vec();
        let probe = prefix.clone();
        let connected = on_for(&rt, START_WITHIN, async move {
            super::tikv_connect::connect(&endpoints, config, probe).await
        });
        let why = match connected {
            Ok(Ok(c)) => {
                let mut endpoints = vec![c.endpoint.clone()];
                endpoints.extend(pd.iter().filter(|ep| **ep != c.endpoint).cloned());
                return Ok(Self {
                    client: c.client,
                    prefix,
                    pd: pd.join(", "),
                    endpoints,
                    cluster_id: c.cluster_id,
                    service: super::tikv_gc::service_id(keyspace),
                    floor: Arc::default(),
                    rt: Some(rt),
                    pinned: None,
                });
            }
            Ok(Err(why)) => why,
            Err(e) => e.to_string(),
        };
        // Not dropped: dropping a runtime inside another one (a server's) panics.
        rt.shutdown_background();
        Err(StoreError::Unreachable(format!(
            "cannot reach TiKV through PD {}: {why}",
            pd.join(", ")
        )))
    }

    /// The PD endpoints this store was opened with (`a, b`).
    pub fn endpoints(&self) -> &str {
        &self.pd
    }

    /// Takes part in TiKV's GC from now on, as `part` says ([`super::tikv_gc`]): registers
    /// this process's service safe point before it returns (so that no read of it runs
    /// unprotected) and renews it in the background. PD's service id, and whether PD took
    /// the first one.
    pub fn take_part_in_gc(&self, part: GcPart) -> Result<(String, bool), StoreError> {
        // A timestamp seen: the floor starts there.
        self.timestamp()?;
        let floor = self.floor.clone();
        let pinned = self.pinned.clone();
        let keeper = Arc::new(super::tikv_gc::Keeper {
            client: self.client.clone(),
            pd: self.endpoints.clone(),
            cluster_id: self.cluster_id,
            service: self.service.clone(),
            oldest: Box::new(move || floor.oldest(pinned.as_ref().map(|p| &p.ts))),
        });
        let k = keeper.clone();
        let (taken, state) = on(self.rt(), async move {
            let mut state = super::tikv_gc::Renewals::default();
            let taken = super::tikv_gc::renew(&k, part, &mut state).await.is_some();
            (taken, state)
        })?;
        self.rt().spawn(super::tikv_gc::keep(keeper, part, state));
        Ok((self.service.clone(), taken))
    }

    /// Reads at the newest timestamp this process committed at or pinned, not a fresh one:
    /// only for a store whose every key has one writer at a time, this process, which calls
    /// [`TikvStore::advance_reads`] whenever it becomes a key's writer.
    pub fn single_writer(mut self) -> Self {
        self.pinned = Some(Arc::new(Pinned {
            ts: AtomicU64::new(0),
            fetched: Mutex::new(None),
            cache: ReadCache::new(CACHE_BYTES),
        }));
        self
    }

    /// Moves reads past every write committed so far by anyone (after winning a lease).
    pub fn advance_reads(&self) -> Result<(), StoreError> {
        if let Some(p) = &self.pinned {
            // Held until the new pin is in place: the safe point stays below it meanwhile.
            let _fresh = self.floor.fresh();
            let ts = self.timestamp()?;
            p.ts.fetch_max(ts, Ordering::SeqCst);
            // Cached values may be older than the new timestamp's.
            p.cache.clear();
            *p.fetched.lock() = Some(Instant::now());
        }
        Ok(())
    }

    /// `key` at a fresh timestamp, whatever the read mode (a lease record others write).
    pub fn get_fresh(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.get_at(self.floor.fresh(), key)
    }

    /// `key` at `at`.
    fn get_at(&self, at: At, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let key = self.key(key);
        self.read_at(at, move |mut snap| {
            let key = key.clone();
            async move { snap.get(key).await }
        })
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.rt
            .as_ref()
            .expect("the runtime lives until the store is dropped")
    }

    fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    fn unkey(&self, key: Key) -> Vec<u8> {
        let k: Vec<u8> = key.into();
        k[self.prefix.len().min(k.len())..].to_vec()
    }

    /// The prefixed range `[start, end)`; `end = None` up to the prefix's end.
    fn range(&self, start: &[u8], end: Option<&[u8]>) -> BoundRange {
        let lo = self.key(start);
        let hi = match end {
            Some(e) => self.key(e),
            None => prefix_end(&self.prefix).expect("the prefix ends in '/'"),
        };
        (Key::from(lo)..Key::from(hi)).into()
    }

    /// The timestamp reads use, held: the pinned one in single-writer mode (taken afresh once
    /// it is [`PIN_FOR`] old), else a fresh one per read.
    fn read_ts(&self) -> Result<At, StoreError> {
        let Some(p) = &self.pinned else {
            return Ok(self.floor.fresh());
        };
        self.repin_if_old(p)?;
        Ok(self.floor.pinned(&p.ts))
    }

    /// Takes the pinned timestamp afresh once it is [`PIN_FOR`] old.
    fn repin_if_old(&self, p: &Pinned) -> Result<(), StoreError> {
        if !p.fetched.lock().is_some_and(|t| t.elapsed() < PIN_FOR) {
            self.advance_reads()?;
        }
        Ok(())
    }

    /// Runs `f` with a snapshot at `at` (a fresh timestamp for `None`), again while it meets
    /// unresolved locks.
    fn read_at<T, F, Fut>(&self, at: At, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(tikv_client::Snapshot) -> Fut + Send + 'static,
        Fut: Future<Output = tikv_client::Result<T>> + Send,
    {
        let client = self.client.clone();
        let floor = self.floor.clone();
        on(self.rt(), async move {
            let mut attempt = 0;
            loop {
                let ts = match at.ts {
                    Some(v) => tikv_client::Timestamp::from_version(v),
                    None => {
                        let ts = client.current_timestamp().await.map_err(io)?;
                        floor.saw(ts.version());
                        ts
                    }
                };
                match f(client.snapshot(ts, options())).await {
                    Ok(v) => return Ok(v),
                    Err(e) if attempt + 1 < ATTEMPTS && retryable(&e) => {
                        attempt += 1;
                        tracing::debug!(error = %e, attempt, "tikv read retried");
                        tokio::time::sleep(backoff(attempt)).await;
                    }
                    Err(e) => return Err(io(e)),
                }
            }
        })?
    }

    /// Applies `batch` in one transaction and, with `fence = Some((key, expected))`, only
    /// while the fence key holds `expected` (`None`: is absent). The fence key is locked in
    /// the transaction (or written, if the batch writes it), so that a concurrent change of
    /// it conflicts at commit: a read alone would not. Not retried: the caller decides.
    pub fn write_fenced(
        &self,
        batch: &WriteBatch,
        fence: Option<(&[u8], Option<&[u8]>)>,
    ) -> Result<(), FenceError> {
        let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = batch
            .ops
            .iter()
            .map(|(k, v)| (self.key(k), v.as_ref().map(|v| v.to_vec())))
            .collect();
        let fence = fence.map(|(k, v)| (self.key(k), v.map(<[u8]>::to_vec)));
        let client = self.client.clone();
        let pinned = self.pinned.clone();
        // The transaction reads (the fence) at its start timestamp, taken from PD.
        let held = self.floor.fresh();
        let floor = self.floor.clone();
        let committed = on(self.rt(), async move {
            let _held = held;
            let mut txn = client.begin_with_options(options()).await.map_err(io)?;
            let done = fill_and_commit(&mut txn, ops, fence).await;
            match &done {
                Ok(Some(ts)) => {
                    floor.saw(ts.version());
                    if let Some(p) = pinned {
                        // Later reads see this commit (the cache is updated below).
                        p.ts.fetch_max(ts.version(), Ordering::SeqCst);
                    }
                }
                Ok(None) | Err(FenceError::Unknown(_)) => {}
                Err(_) => {
                    // Refused before anything committed: take the locks back (an open
                    // transaction is never left).
                    if let Err(e) = txn.rollback().await {
                        tracing::debug!(error = %e, "tikv rollback failed; locks expire");
                    }
                }
            }
            done
        })
        // No answer in time: the commit may have happened or may yet (never rolled back).
        .unwrap_or_else(|e| Err(FenceError::Unknown(e.to_string())));
        if let Some(p) = &self.pinned {
            match &committed {
                Ok(Some(_)) => p.cache.apply(&batch.ops),
                Err(FenceError::Unknown(_)) => p.cache.clear(),
                _ => {}
            }
        }
        let done = committed.map(|_| ());
        if let Err(FenceError::Unknown(_)) = &done {
            // It may have committed: never roll back a possibly committed primary (its
            // secondaries in other regions would go, leaving half a batch); its locks resolve
            // through the primary. Reads move past it, so nothing reads around it.
            self.advance_reads()?;
        }
        done
    }

    /// A fresh timestamp from PD (its physical part is PD's clock in milliseconds).
    pub fn timestamp(&self) -> Result<u64, StoreError> {
        let client = self.client.clone();
        let ts = on(self.rt(), async move { client.current_timestamp().await })?.map_err(io)?;
        self.floor.saw(ts.version());
        Ok(ts.version())
    }
}

/// The commit timestamp, if the transaction wrote anything.
async fn fill_and_commit(
    txn: &mut Transaction,
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    fence: Option<(Vec<u8>, Option<Vec<u8>>)>,
) -> Result<Option<tikv_client::Timestamp>, FenceError> {
    if let Some((key, want)) = fence {
        let have = txn.get(key.clone()).await.map_err(io)?;
        if have != want {
            return Err(FenceError::Moved);
        }
        txn.lock_keys([key]).await.map_err(io)?;
    }
    for (k, v) in ops {
        match v {
            Some(v) => txn.put(k, v).await.map_err(io)?,
            None => txn.delete(k).await.map_err(io)?,
        }
    }
    match txn.commit().await {
        Ok(ts) => Ok(ts),
        // A write conflict (on the fence key, or a key another process wrote) is the fence
        // moving; refused in the prewrite, so nothing committed.
        Err(e) if conflicted(&e) => Err(FenceError::Moved),
        Err(e) if refused(&e) => Err(io(e).into()),
        Err(e) => Err(FenceError::Unknown(e.to_string())),
    }
}

/// Whether a commit failed on a write conflict (another transaction committed a key first).
fn conflicted(e: &tikv_client::Error) -> bool {
    use tikv_client::Error as E;
    match e {
        E::KeyError(k) => k.conflict.is_some(),
        E::MultipleKeyErrors(errs) | E::ExtractedErrors(errs) => errs.iter().any(conflicted),
        _ => false,
    }
}

/// Whether a commit failed in its prewrite, answered by TiKV with key errors (locks, an
/// existing key): nothing of it committed. Anything else may have committed the primary.
fn refused(e: &tikv_client::Error) -> bool {
    use tikv_client::Error as E;
    match e {
        E::KeyError(_) => true,
        E::MultipleKeyErrors(errs) | E::ExtractedErrors(errs) => errs.iter().all(refused),
        _ => false,
    }
}

pub(super) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((5u64 << attempt.min(7)).min(500))
}

/// Runs `fut` on `rt` and waits for it from this (synchronous) thread, at most
/// [`CALL_DEADLINE`]: a TiKV that stopped answering (a partition drops packets, it does not
/// refuse them) must not hold a request, a batch or a lease round for ever.
fn on<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, StoreError> {
    on_for(rt, CALL_DEADLINE, fut)
}

/// [`on`], waiting at most `deadline`.
fn on_for<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    deadline: Duration,
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, StoreError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(tokio::time::timeout(deadline, fut).await);
    });
    let wait = || match rx.recv() {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(StoreError::Unreachable(format!(
            "tikv: no answer within {deadline:?}"
        ))),
        Err(_) => Err(StoreError::Io("tikv store runtime stopped".into())),
    };
    // On a worker of a multi-thread runtime, its other tasks move to other threads meanwhile.
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

impl MetaStore for TikvStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(p) = &self.pinned else {
            return self.get_at(self.floor.fresh(), key);
        };
        // Re-pins (and empties the cache) once the pin is PIN_FOR old, hit or miss.
        self.repin_if_old(p)?;
        if let Some(hit) = p.cache.get(key) {
            return Ok(hit.map(|v| v.to_vec()));
        }
        // Before the timestamp: a write committed after this read's timestamp was taken
        // bumps the generation, and the older value is then not cached.
        let seen = p.cache.generation();
        let value = self.get_at(self.floor.pinned(&p.ts), key)?;
        p.cache
            .fill(key, value.as_deref().map(Bytes::copy_from_slice), seen);
        Ok(value)
    }

    fn write(&self, batch: &WriteBatch, _durable: bool) -> Result<(), StoreError> {
        // A committed TiKV transaction is durable (replicated by TiKV's raft).
        let mut attempt = 0;
        loop {
            match self.write_fenced(batch, None) {
                Ok(()) => return Ok(()),
                Err(FenceError::Moved) if attempt + 1 < ATTEMPTS => {
                    attempt += 1;
                    std::thread::sleep(backoff(attempt));
                }
                Err(FenceError::Moved) => {
                    return Err(StoreError::Io("tikv: write conflicts persisted".into()))
                }
                Err(FenceError::Unknown(e)) => return Err(StoreError::Unreachable(e)),
                Err(FenceError::Store(e)) => return Err(e),
            }
        }
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs, StoreError> {
        if limit == 0 || end.is_some_and(|e| e <= start) {
            return Ok(Vec::new());
        }
        let range = self.range(start, end);
        let limit = limit.min(u32::MAX as usize) as u32;
        let pairs = self.read_at(self.read_ts()?, move |mut snap| {
            let range = range.clone();
            async move { Ok(snap.scan(range, limit).await?.collect::<Vec<_>>()) }
        })?;
        Ok(pairs.into_iter().map(|p| (self.unkey(p.0), p.1)).collect())
    }

    fn last_in(&self, start: &[u8], end: &[u8]) -> Result<Option<Kv>, StoreError> {
        if end <= start {
            return Ok(None);
        }
        let range = self.range(start, Some(end));
        let last = self.read_at(self.read_ts()?, move |mut snap| {
            let range = range.clone();
            async move { Ok(snap.scan_reverse(range, 1).await?.next()) }
        })?;
        Ok(last.map(|p| (self.unkey(p.0), p.1)))
    }
}

impl Drop for TikvStore {
    fn drop(&mut self) {
        // Not a blocking shutdown: the store may be dropped inside another runtime.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim() -> (tokio::runtime::Runtime, saker_tikv_sim::Sim) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let sim = rt
            .block_on(saker_tikv_sim::Sim::start(
                "127.0.0.1:0".parse().unwrap(),
                saker_tikv_sim::Faults {
                    split_keys: 16,
                    region_error_every: 11,
                },
            ))
            .unwrap();
        (rt, sim)
    }

    #[test]
    fn conformance() {
        let (_rt, sim) = sim();
        let store = TikvStore::connect(&[sim.addr.to_string()], "conformance").unwrap();
        super::super::conformance::run_all(&store);
        assert!(sim.cluster.regions().len() > 1, "ran across region splits");
        // And reading at the pinned timestamp, through the read cache.
        let store = TikvStore::connect(&[sim.addr.to_string()], "conformance-sw")
            .unwrap()
            .single_writer();
        super::super::conformance::run_all(&store);
    }

    #[test]
    fn a_won_lease_reads_past_the_cache() {
        let (_rt, sim) = sim();
        let mine = TikvStore::connect(&[sim.addr.to_string()], "handover")
            .unwrap()
            .single_writer();
        let other = TikvStore::connect(&[sim.addr.to_string()], "handover").unwrap();
        let mut b = WriteBatch::default();
        b.put(b"k".to_vec(), b"mine".to_vec());
        mine.write(&b, true).unwrap();
        assert_eq!(mine.get(b"absent").unwrap(), None);
        // Another process took the keys over and wrote them (its own lease).
        let mut b = WriteBatch::default();
        b.put(b"k".to_vec(), b"theirs".to_vec());
        b.put(b"absent".to_vec(), b"now here".to_vec());
        other.write(&b, true).unwrap();
        assert_eq!(mine.get(b"k").unwrap(), Some(b"mine".to_vec()), "cached");
        // Winning the keys back moves reads past every commit: the cache goes with it.
        mine.advance_reads().unwrap();
        assert_eq!(mine.get(b"k").unwrap(), Some(b"theirs".to_vec()));
        assert_eq!(mine.get(b"absent").unwrap(), Some(b"now here".to_vec()));
    }

    #[test]
    fn keyspaces_do_not_see_each_other() {
        let (_rt, sim) = sim();
        let a = TikvStore::connect(&[sim.addr.to_string()], "a").unwrap();
        let b = TikvStore::connect(&[sim.addr.to_string()], "b").unwrap();
        let mut batch = WriteBatch::default();
        batch.put(b"k".to_vec(), b"from a".to_vec());
        a.write(&batch, true).unwrap();
        assert_eq!(b.get(b"k").unwrap(), None);
        assert_eq!(b.scan(b"", None, 10).unwrap(), vec![]);
        assert_eq!(a.scan(b"", None, 10).unwrap().len(), 1);
        assert!(TikvStore::connect(&[sim.addr.to_string()], "x/y").is_err());
    }

    #[test]
    fn a_moved_fence_refuses_the_batch_whole() {
        let (_rt, sim) = sim();
        let s = TikvStore::connect(&[sim.addr.to_string()], "fence").unwrap();
        let mut set = WriteBatch::default();
        set.put(b"epoch".to_vec(), b"1".to_vec());
        s.write(&set, true).unwrap();
        let mut batch = WriteBatch::default();
        batch.put(b"data".to_vec(), b"x".to_vec());
        s.write_fenced(&batch, Some((b"epoch", Some(b"1"))))
            .unwrap();
        assert_eq!(s.get(b"data").unwrap(), Some(b"x".to_vec()));
        let mut bump = WriteBatch::default();
        bump.put(b"epoch".to_vec(), b"2".to_vec());
        s.write(&bump, true).unwrap();
        let mut stale = WriteBatch::default();
        stale.put(b"data".to_vec(), b"stale".to_vec());
        assert!(matches!(
            s.write_fenced(&stale, Some((b"epoch", Some(b"1")))),
            Err(FenceError::Moved)
        ));
        assert_eq!(
            s.get(b"data").unwrap(),
            Some(b"x".to_vec()),
            "nothing of it landed"
        );
        assert!(
            sim.cluster
                .mvcc
                .lock()
                .scan_locks(b"", b"", u64::MAX, 0)
                .is_empty(),
            "no lock left behind"
        );
    }
}
