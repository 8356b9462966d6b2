//! [`ReplicatedChunkStore`]: every chunk on `replicas` of a cluster's chunkstores.
//!
//! Placement is rendezvous hashing of the chunk id over the members' ids, spread over their
//! zones ([`crate::placement`]);
//! the member list can change while the store serves ([`ReplicatedChunkStore::set_members`]).
//! A `put` goes to the chunk's replicas at
//! once and returns when a majority of them has it durably (the rest finish in the background;
//! a replica that failed is counted as a degraded write and filled in by [`ChunkStore::repair`]).
//! A `get` reads from this process's replica first, then the others in placement order, then
//! any other member (chunks written under an older placement); a replica that had no copy or a
//! corrupt one is rewritten from the copy that answered (read repair), so a client never sees
//! a bad copy while a good one exists. A `delete` succeeds only once every replica confirmed
//! it, so the GC keeps a dropped reference until then. A scrub reads every replica whole
//! (checking its CRC32C) and rewrites bad ones the same way.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use futures::future::join_all;
use futures::StreamExt;
use tracing::Instrument;

mod erasure;
mod erasure_repair;

use crate::error::ChunkError;
use crate::id::ChunkId;
use crate::members::members_for;
pub use crate::members::{Member, MemberInfo};
use crate::placement::View;
use crate::stats::ChunkStats;
use crate::store::{ChunkInfo, ChunkStore, Pace, RepairReport, ScrubReport};

/// How long a put that has its quorum waits for its other copies, so that one that failed is
/// noted ([`RepairLog`]) before the write is acknowledged.
const SHORT_GRACE: Duration = Duration::from_millis(200);

/// Where a write records a chunk it left short of replicas (durably, before it is
/// acknowledged), so that a repair pass finds it without listing every store.
#[async_trait]
pub trait RepairLog: Send + Sync {
    async fn note(&self, id: ChunkId) -> Result<(), ChunkError>;
}

/// Notes `id` as short in `log` (if there is one); a failure is logged: the periodic full pass
/// still finds the chunk.
async fn note_short(log: Option<&dyn RepairLog>, id: ChunkId) {
    let Some(log) = log else { return };
    if let Err(e) = log.note(id).await {
        tracing::warn!(chunk = %id, error = %e, "a chunk short of replicas was not noted for repair");
    }
}

/// Chunks a repair pass copies at once.
const REPAIR_PARALLEL: usize = 8;

/// What a repair pass did for one chunk.
#[derive(Default)]
struct Repaired {
    /// A replica lacked it.
    short: bool,
    /// No reachable member has it.
    lost: bool,
    copied: u64,
    bytes: u64,
    failed: u64,
    /// Copies dropped from members beyond its placement.
    dropped: u64,
}

impl Repaired {
    /// Counts this chunk's outcome in `report` (all but `scanned`).
    fn add_to(&self, report: &mut RepairReport) {
        report.under_replicated += u64::from(self.short);
        report.lost += u64::from(self.lost);
        report.repaired += self.copied;
        report.bytes += self.bytes;
        report.failed += self.failed;
        report.dropped += self.dropped;
    }
}

#[derive(Default)]
struct Counters {
    degraded_writes: AtomicU64,
    degraded_reads: AtomicU64,
    read_repairs: AtomicU64,
    repaired: AtomicU64,
    under_replicated: AtomicU64,
}

pub struct ReplicatedChunkStore {
    view: RwLock<Arc<View>>,
    /// Copies per chunk asked for (a view allows at most its placing members).
    asked: usize,
    /// This process's own store and its id, if it runs one (a member once it is listed).
    local: Option<(String, Arc<dyn ChunkStore>)>,
    /// Reaches members that join later.
    pool: Option<saker_rpc::ChannelPool>,
    /// Where chunks short of replicas are noted.
    repair_log: RwLock<Option<Arc<dyn RepairLog>>>,
    /// Erasure-coded chunks a degraded read found short of a shard, for the next
    /// [`ChunkStore::repair_degraded`] (in memory: the full pass is there for what a restart
    /// forgets).
    degraded: parking_lot::Mutex<std::collections::HashMap<ChunkId, (crate::ec::Layout, u64)>>,
    counters: Arc<Counters>,
}

impl ReplicatedChunkStore {
    /// Chunks on `replicas` (at least 1, at most every placing member) of `members` (at
    /// least one placing).
    pub fn new(members: Vec<Member>, replicas: usize) -> Self {
        let local = members
            .iter()
            .find(|m| m.local)
            .map(|m| (m.name.clone(), m.store.clone()));
        Self::with(members, replicas, local, None)
    }

    fn with(
        members: Vec<Member>,
        replicas: usize,
        local: Option<(String, Arc<dyn ChunkStore>)>,
        pool: Option<saker_rpc::ChannelPool>,
    ) -> Self {
        Self {
            view: RwLock::new(Arc::new(View::new(members, replicas))),
            asked: replicas,
            local,
            pool,
            repair_log: RwLock::default(),
            degraded: Default::default(),
            counters: Arc::default(),
        }
    }

    /// The chunkstores `list`, `replicas` copies per chunk: `local` (its id and store: the
    /// store of this process) where its id is listed, the others reached through `pool`.
    pub fn over(
        list: &[MemberInfo],
        replicas: u32,
        pool: &saker_rpc::ChannelPool,
        local: Option<(&str, Arc<dyn ChunkStore>)>,
    ) -> Result<Self, ChunkError> {
        let local = local.map(|(a, s)| (a.to_string(), s));
        if list.is_empty() {
            return Err(ChunkError::Unavailable(
                "no chunkstore in the cluster map".into(),
            ));
        }
        let members = members_for(list, &[], local.as_ref(), Some(pool))?;
        Ok(Self::with(
            members,
            replicas as usize,
            local,
            Some(pool.clone()),
        ))
    }

    fn view(&self) -> Arc<View> {
        self.view.read().expect("chunkstore members lock").clone()
    }

    /// The members, in the order they were given.
    pub fn members(&self) -> Vec<MemberInfo> {
        self.view().members.iter().map(MemberInfo::of).collect()
    }

    /// Replaces the members with `list` (at least one placing), reusing the stores of
    /// members already known at the same address. Operations running keep the list they
    /// started with; the next ones use this one.
    pub fn set_members(&self, list: &[MemberInfo]) -> Result<(), ChunkError> {
        let current = self.view();
        if current
            .members
            .iter()
            .map(MemberInfo::of)
            .eq(list.iter().cloned())
        {
            return Ok(());
        }
        let members = members_for(
            list,
            &current.members,
            self.local.as_ref(),
            self.pool.as_ref(),
        )?;
        self.replace_members(members)?;
        tracing::info!(members = ?list, "chunkstore members changed");
        Ok(())
    }

    /// Replaces the members with `members` (at least one placing).
    pub fn replace_members(&self, members: Vec<Member>) -> Result<(), ChunkError> {
        if !members.iter().any(|m| m.placing) {
            return Err(ChunkError::Unavailable(
                "a chunkstore list needs a member that takes chunks".into(),
            ));
        }
        *self.view.write().expect("chunkstore members lock") =
            Arc::new(View::new(members, self.asked));
        Ok(())
    }

    /// Writes note the chunks they leave short of replicas in `log`.
    pub fn set_repair_log(&self, log: Arc<dyn RepairLog>) {
        *self.repair_log.write().expect("repair log lock") = Some(log);
    }

    /// Copies per chunk asked for (fewer while fewer members take chunks).
    pub fn replicas_asked(&self) -> usize {
        self.asked
    }

    /// Member indexes by rank for `id`: the first `replicas` hold it.
    pub fn placement(&self, id: ChunkId) -> Vec<usize> {
        self.view().placement(id)
    }

    /// Copies chunk `id` from `from` to `to` (dropping a corrupt copy there first).
    async fn copy(
        from: &Arc<dyn ChunkStore>,
        to: &Arc<dyn ChunkStore>,
        id: ChunkId,
        corrupt: bool,
    ) -> Result<u64, ChunkError> {
        let data = from.get(id, 0, u64::MAX).await?;
        if corrupt {
            to.delete(id).await?;
        }
        let len = data.len() as u64;
        match to.put(id, data).await {
            Ok(_) | Err(ChunkError::AlreadyExists(_)) => Ok(len),
            Err(e) => Err(e),
        }
    }

    /// Copies chunk `id` to those of its replicas that lack it (`held`: what each member
    /// holds, `None` for one that could not be listed), from a member that has it; once every
    /// replica has it, drops the copies of members beyond its placement.
    async fn repair_one(
        &self,
        view: &View,
        id: ChunkId,
        held: &[Option<HashSet<u128>>],
        progress: Option<&crate::progress::Pass>,
    ) -> Repaired {
        let progress = progress.unwrap_or(&crate::progress::UNCOUNTED);
        progress.scanned();
        let mut done = Repaired::default();
        let order = view.placement(id);
        let has = |i: usize, yes: bool| held[i].as_ref().is_some_and(|h| h.contains(&id.0) == yes);
        let missing: Vec<usize> = order[..view.replicas]
            .iter()
            .copied()
            .filter(|&i| has(i, false))
            .collect();
        if !missing.is_empty() {
            done.short = true;
            progress.found();
            let Some(from) = order.iter().copied().find(|&i| has(i, true)) else {
                done.lost = true;
                tracing::error!(chunk = %id, "a referenced chunk has no copy on any reachable chunkstore");
                return done;
            };
            for to in missing {
                match self.restore(view, from, to, id, false).await {
                    Some(bytes) => {
                        done.copied += 1;
                        done.bytes += bytes;
                        progress.repaired();
                        progress.moved(bytes);
                    }
                    None => done.failed += 1,
                }
            }
        }
        // Every replica known to hold it: a copy elsewhere (placed before a member joined, or
        // on one that leaves) is not needed.
        let all_held = order[..view.replicas].iter().all(|&i| held[i].is_some());
        if done.failed == 0 && all_held {
            for &i in &order[view.replicas..] {
                if !has(i, true) {
                    continue;
                }
                let m = &view.members[i];
                match m.store.delete(id).await {
                    Ok(()) => done.dropped += 1,
                    Err(e) => {
                        tracing::warn!(chunk = %id, store = %m.name, error = %e, "a copy beyond the placement was not dropped")
                    }
                }
            }
        }
        done
    }

    /// Rewrites member `to`'s copy of `id` from member `from`'s (a repair pass or a scrub),
    /// counting it; the bytes copied, or `None` (logged) if it could not be.
    async fn restore(
        &self,
        view: &View,
        from: usize,
        to: usize,
        id: ChunkId,
        corrupt: bool,
    ) -> Option<u64> {
        let (src, dst) = (&view.members[from].store, &view.members[to].store);
        match Self::copy(src, dst, id, corrupt).await {
            Ok(bytes) => {
                self.counters.repaired.fetch_add(1, Ordering::Relaxed);
                Some(bytes)
            }
            Err(e) => {
                tracing::warn!(chunk = %id, store = %view.members[to].name, error = %e, "a chunk replica could not be rewritten");
                None
            }
        }
    }
}

#[async_trait]
impl ChunkStore for ReplicatedChunkStore {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        let view = self.view();
        let order = view.placement(id);
        let log = self.repair_log.read().expect("repair log lock").clone();
        let (tx, mut rx) = tokio::sync::mpsc::channel(view.replicas);
        // Whether this put has returned: a copy that fails later notes its chunk itself.
        let returned = Arc::new(std::sync::Mutex::new(false));
        for &i in &order[..view.replicas] {
            let store = view.members[i].store.clone();
            let name = view.members[i].name.clone();
            let (tx, data, counters) = (tx.clone(), data.clone(), self.counters.clone());
            let (returned, log) = (returned.clone(), log.clone());
            // Each copy runs to its end even once the caller has its quorum.
            tokio::spawn(async move {
                let result = store.put(id, data).await;
                let failed = matches!(&result, Err(e) if !matches!(e, ChunkError::AlreadyExists(_)));
                if let Err(e) = &result {
                    counters.degraded_writes.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(chunk = %id, store = %name, error = %e, "a chunk replica was not written");
                }
                let late = {
                    let returned = returned.lock().expect("put state lock");
                    if !*returned {
                        let _ = tx.try_send(result);
                    }
                    *returned
                };
                if late && failed {
                    note_short(log.as_deref(), id).await;
                }
            }.in_current_span());
        }
        drop(tx);
        let (mut acked, mut errors) = (0, Vec::new());
        let mut info = None;
        let mut quorum_at = None;
        loop {
            let next = match quorum_at {
                None => rx.recv().await,
                // A quorum has it: the others are given a moment, so that a failed copy is
                // noted before the write is acknowledged; one slower than that notes itself.
                Some(at) => tokio::time::timeout_at(at + SHORT_GRACE, rx.recv())
                    .await
                    .unwrap_or(None),
            };
            let Some(result) = next else { break };
            match result {
                Ok(i) => {
                    acked += 1;
                    info.get_or_insert(i);
                }
                Err(e) => errors.push(e),
            }
            if acked >= view.quorum && quorum_at.is_none() {
                quorum_at = Some(tokio::time::Instant::now());
            }
            if acked + errors.len() == view.replicas {
                break;
            }
        }
        {
            *returned.lock().expect("put state lock") = true;
            while let Ok(result) = rx.try_recv() {
                match result {
                    Ok(_) => acked += 1,
                    Err(e) => errors.push(e),
                }
            }
        }
        if let Some(info) = info.filter(|_| acked >= view.quorum) {
            if errors
                .iter()
                .any(|e| !matches!(e, ChunkError::AlreadyExists(_)))
            {
                note_short(log.as_deref(), id).await;
            }
            return Ok(info);
        }
        // Fewer than a majority have it: the write failed (the copies made are leaks the
        // scrub collects). An id put before is AlreadyExists everywhere.
        if errors
            .iter()
            .all(|e| matches!(e, ChunkError::AlreadyExists(_)))
        {
            return Err(ChunkError::AlreadyExists(id));
        }
        let full = errors.iter().any(|e| matches!(e, ChunkError::Full(_)));
        let why = errors
            .into_iter()
            .find(|e| !matches!(e, ChunkError::AlreadyExists(_)))
            .map(|e| e.to_string())
            .unwrap_or_default();
        let why = format!(
            "chunk {id} written to {acked} of {} replicas, a majority is {}: {why}",
            view.replicas, view.quorum
        );
        // A full disk is the caller's to hear of (507, ENOSPC), not a transient failure.
        Err(if full {
            ChunkError::Full(why)
        } else {
            ChunkError::Unavailable(why)
        })
    }

    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        let view = self.view();
        let order = view.placement(id);
        let replicas = &order[..view.replicas];
        let mut bad: Vec<(usize, bool)> = Vec::new();
        let mut failure: Option<ChunkError> = None;
        for i in view.read_order(&order) {
            match view.members[i].store.get(id, offset, len).await {
                Ok(bytes) => {
                    if !bad.is_empty() {
                        // Read repair, off the reader's path.
                        let from = view.members[i].store.clone();
                        let targets: Vec<_> = bad
                            .iter()
                            .map(|&(j, corrupt)| (view.members[j].store.clone(), corrupt))
                            .collect();
                        let counters = self.counters.clone();
                        tokio::spawn(async move {
                            for (to, corrupt) in targets {
                                match Self::copy(&from, &to, id, corrupt).await {
                                    Ok(_) => {
                                        counters.read_repairs.fetch_add(1, Ordering::Relaxed);
                                    }
                                    Err(e) => {
                                        tracing::warn!(chunk = %id, error = %e, "read repair failed")
                                    }
                                }
                            }
                        }.in_current_span());
                    }
                    return Ok(bytes);
                }
                Err(e) => {
                    let corrupt = matches!(e, ChunkError::Corrupt { .. });
                    if replicas.contains(&i) && (corrupt || matches!(e, ChunkError::NotFound(_))) {
                        bad.push((i, corrupt));
                    }
                    if corrupt {
                        tracing::warn!(chunk = %id, store = %view.members[i].name, error = %e, "a corrupt chunk replica");
                    }
                    // The most telling failure: corrupt over unreachable over not found.
                    let rank = |e: &ChunkError| match e {
                        ChunkError::NotFound(_) => 0,
                        ChunkError::Unavailable(_) | ChunkError::Io(_) => 1,
                        _ => 2,
                    };
                    if failure.as_ref().is_none_or(|f| rank(&e) > rank(f)) {
                        failure = Some(e);
                    }
                }
            }
        }
        Err(failure.unwrap_or(ChunkError::NotFound(id)))
    }

    async fn get_checked(
        &self,
        id: ChunkId,
        check: &(dyn for<'b> Fn(&'b [u8]) -> bool + Send + Sync),
    ) -> Result<Bytes, ChunkError> {
        let view = self.view();
        let order = view.placement(id);
        let replicas = &order[..view.replicas];
        let mut refused: Vec<usize> = Vec::new();
        let mut failure = None;
        for i in view.read_order(&order) {
            match view.members[i].store.get_checked(id, check).await {
                Ok(bytes) => {
                    // Rewritten from this copy before the answer: the reader asked because
                    // it found a bad one.
                    let from = view.members[i].store.clone();
                    for j in refused {
                        let to = view.members[j].store.clone();
                        match Self::copy(&from, &to, id, true).await {
                            Ok(_) => {
                                self.counters.read_repairs.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => tracing::warn!(chunk = %id, error = %e, "read repair failed"),
                        }
                    }
                    return Ok(bytes);
                }
                Err(e) => {
                    if replicas.contains(&i) && matches!(e, ChunkError::Corrupt { .. }) {
                        tracing::warn!(chunk = %id, store = %view.members[i].name, error = %e, "a chunk replica its reader refused");
                        refused.push(i);
                    }
                    failure = Some(e);
                }
            }
        }
        Err(failure.unwrap_or(ChunkError::NotFound(id)))
    }

    fn takes_coded(&self, layout: crate::ec::Layout) -> Result<(), ChunkError> {
        crate::placement::shard_places(&self.view().members, layout.shards(), ChunkId(0))
            .map(|_| ())
    }

    async fn repair_coded(&self, coded: &[crate::store::CodedChunk], rate: u64) -> RepairReport {
        self.repair_coded_chunks(coded, rate).await
    }

    async fn scrub_coded(&self, coded: &[crate::store::CodedChunk], rate: u64) -> ScrubReport {
        self.scrub_coded_chunks(coded, rate).await
    }

    async fn repair_degraded(&self, rate: u64) -> RepairReport {
        self.repair_degraded_chunks(rate).await
    }

    async fn put_coded(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        data: Bytes,
    ) -> Result<ChunkInfo, ChunkError> {
        self.put_encoded(chunk, layout, data).await
    }

    async fn get_coded(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        stored: u64,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ChunkError> {
        let parts = self
            .get_coded_parts(chunk, layout, stored, offset, len)
            .await?;
        Ok(match <[Bytes; 1]>::try_from(parts) {
            Ok([one]) => one,
            Err(parts) => parts.concat().into(),
        })
    }

    async fn get_coded_parts(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        stored: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Bytes>, ChunkError> {
        let view = self.view();
        if view.members.iter().filter(|m| m.placing).count() >= layout.shards() {
            return self.get_encoded(chunk, layout, stored, offset, len).await;
        }
        // Fewer stores than shards here: they lie behind a member that is itself several
        // stores (an all-in-one server's chunk directories), which reads them.
        let mut last = None;
        for &i in &view.read_order(&view.placement(chunk)) {
            match view.members[i]
                .store
                .get_coded_parts(chunk, layout, stored, offset, len)
                .await
            {
                Ok(b) => return Ok(b),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ChunkError::NotFound(chunk)))
    }

    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        let view = self.view();
        let order = view.placement(id);
        let calls = view.members.iter().map(|m| m.store.delete(id));
        let results = join_all(calls).await;
        // Every replica must confirm; another member's copy (an older placement) may not.
        for &i in &order[..view.replicas] {
            if let Err(e) = &results[i] {
                return Err(ChunkError::Unavailable(format!(
                    "chunk {id} not deleted at {}: {e}",
                    view.members[i].name
                )));
            }
        }
        Ok(())
    }

    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        let view = self.view();
        let calls = view
            .members
            .iter()
            .map(|m| m.store.list_older_than(older_than));
        let mut all = HashSet::new();
        let mut answered = false;
        let mut last = None;
        for r in join_all(calls).await {
            match r {
                Ok(ids) => {
                    answered = true;
                    all.extend(ids);
                }
                Err(e) => last = Some(e),
            }
        }
        match (answered, last) {
            (false, Some(e)) => Err(e),
            _ => Ok(all.into_iter().collect()),
        }
    }

    async fn sync_to_disk(&self) -> Result<(), ChunkError> {
        let view = self.view();
        let calls = view.members.iter().map(|m| m.store.sync_to_disk());
        let results = join_all(calls).await;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        if ok >= view.quorum {
            return Ok(());
        }
        Err(results
            .into_iter()
            .find_map(Result::err)
            .unwrap_or_else(|| ChunkError::Unavailable("no chunkstore".into())))
    }

    /// Brings every chunk of `referenced` to all its replicas: lists what each member holds,
    /// and copies each chunk a replica lacks from a member that has it, at most `rate` bytes
    /// per second (a few copies at a time; the next start waits while the pass is ahead).
    async fn repair(
        &self,
        referenced: &HashSet<u128>,
        rate: u64,
    ) -> Result<RepairReport, ChunkError> {
        let view = self.view();
        let mut report = RepairReport::default();
        let mut pace = Pace::new(rate);
        let progress = &crate::progress::REPAIR;
        let _running = progress.begin(referenced.len() as u64);
        // Chunks still short of a replica when the pass ends (the gauge).
        let mut left_short = 0;
        let held = self.held_sets(&view, &mut report).await;
        // A few chunks at a time: each copy waits on two stores' disks and the network.
        let held = &held;
        let mut outcomes = futures::stream::iter(referenced.iter().copied())
            .map(|raw| self.repair_one(&view, ChunkId(raw), held, Some(&crate::progress::REPAIR)))
            .buffer_unordered(REPAIR_PARALLEL);
        while let Some(o) = outcomes.next().await {
            report.scanned += 1;
            o.add_to(&mut report);
            left_short += u64::from(o.lost || o.failed > 0);
            pace.wait(o.bytes).await;
        }
        self.counters
            .under_replicated
            .store(left_short, Ordering::Relaxed);
        Ok(report)
    }

    /// Brings each of `ids` (chunks noted short) to all its replicas, asking each member
    /// whether it has the chunk rather than listing every store, at most `rate` bytes per
    /// second; answers the pass's report and the ids that need no more repair (all replicas
    /// have them, or no member does: collected since).
    async fn repair_noted(&self, ids: &[ChunkId], rate: u64) -> (RepairReport, Vec<ChunkId>) {
        let view = self.view();
        let mut report = RepairReport::default();
        let mut pace = Pace::new(rate);
        let mut settled = Vec::new();
        for &id in ids {
            let probes = view.members.iter().map(|m| m.store.get(id, 0, 1));
            let held: Vec<Option<HashSet<u128>>> = join_all(probes)
                .await
                .into_iter()
                .map(|r| match r {
                    Ok(_) => Some(HashSet::from([id.0])),
                    Err(ChunkError::NotFound(_)) => Some(HashSet::new()),
                    Err(_) => None,
                })
                .collect();
            report.scanned += 1;
            let every = held.iter().all(Option::is_some);
            report.unreachable += held.iter().filter(|h| h.is_none()).count() as u64;
            if !held.iter().flatten().any(|h| !h.is_empty()) {
                // No member has it: deleted since it was written (or on a member down).
                if every {
                    settled.push(id);
                }
                continue;
            }
            let o = self.repair_one(&view, id, &held, None).await;
            o.add_to(&mut report);
            if o.failed == 0 && every {
                settled.push(id);
            }
            pace.wait(o.bytes).await;
        }
        (report, settled)
    }

    /// Reads every replica of every chunk of `referenced` whole (checking its CRC32C), at most
    /// `rate` bytes per second; a corrupt or missing replica is rewritten from one that reads
    /// back intact. An unreachable member is skipped (the next pass checks it).
    async fn scrub(
        &self,
        referenced: &HashSet<u128>,
        rate: u64,
    ) -> Result<ScrubReport, ChunkError> {
        let view = self.view();
        let mut report = ScrubReport::default();
        let mut pace = Pace::new(rate);
        let progress = &crate::progress::SCRUB;
        let _running = progress.begin(referenced.len() as u64);
        for &raw in referenced {
            let id = ChunkId(raw);
            progress.scanned();
            let order = view.placement(id);
            let mut good = None;
            let mut bad = Vec::new();
            for &i in &order[..view.replicas] {
                match view.members[i].store.get(id, 0, u64::MAX).await {
                    Ok(data) => {
                        report.verified += 1;
                        report.bytes += data.len() as u64;
                        progress.moved(data.len() as u64);
                        pace.wait(data.len() as u64).await;
                        good.get_or_insert(i);
                    }
                    Err(ChunkError::Corrupt { .. }) => {
                        report.corrupt += 1;
                        bad.push((i, true));
                    }
                    Err(ChunkError::NotFound(_)) => {
                        report.missing += 1;
                        bad.push((i, false));
                    }
                    Err(e) => {
                        tracing::debug!(chunk = %id, store = %view.members[i].name, error = %e, "scrub skips an unreachable replica");
                    }
                }
            }
            if !bad.is_empty() {
                progress.found();
            }
            let Some(from) = good else {
                if !bad.is_empty() {
                    tracing::error!(chunk = %id, "no replica of a referenced chunk reads back intact");
                }
                continue;
            };
            for (to, corrupt) in bad {
                if self.restore(&view, from, to, id, corrupt).await.is_some() {
                    report.repaired += 1;
                    progress.repaired();
                }
            }
        }
        Ok(report)
    }

    fn full(&self) -> Option<String> {
        let view = self.view();
        view.members
            .iter()
            .filter(|m| m.local)
            .find_map(|m| m.store.full())
    }

    fn stats(&self) -> ChunkStats {
        let view = self.view();
        let mut total = ChunkStats::default();
        for m in &view.members {
            total.add(&m.store.stats());
        }
        total.degraded_writes = self.counters.degraded_writes.load(Ordering::Relaxed);
        total.read_repairs = self.counters.read_repairs.load(Ordering::Relaxed);
        total.degraded_reads = self.counters.degraded_reads.load(Ordering::Relaxed);
        total.repaired = self.counters.repaired.load(Ordering::Relaxed);
        total.under_replicated = self.counters.under_replicated.load(Ordering::Relaxed);
        total
    }
}
