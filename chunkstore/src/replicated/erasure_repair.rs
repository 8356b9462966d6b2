//! Repair and scrub of erasure-coded chunks (issue 63). A repair pass lists what every member
//! holds, and for each coded chunk rebuilds the shards its placed members lack from any k
//! others, writing each to its member. A scrub reads every shard whole (each store checks its
//! blocks' CRCs) and checks the parity against the data; a shard missing, corrupt or out of
//! step with the others is rewritten from the rest.

use std::collections::HashSet;

use bytes::Bytes;

use futures::StreamExt;

use super::erasure::{fetch_all, gather_shards};
use super::ReplicatedChunkStore;
use crate::ec::{shard_id, Layout};
use crate::error::ChunkError;
use crate::format::ShardOf;
use crate::id::ChunkId;
use crate::placement::{shard_places, View};
use crate::store::{CodedChunk, Pace, RepairReport, ScrubReport};

/// Shard bytes a coded repair reads at once (chunks in flight times their stored length): 32
/// chunks of 4 MiB rebuilt 0.82x as fast (MiB written back per second) as replicated repair,
/// 8 at once 0.675x (`compat_tests/bench/ec-rebuild.sh`).
const REPAIR_READ_BYTES: u64 = 128 << 20;
/// Most erasure-coded chunks noted after degraded reads at once (beyond, the full pass finds
/// them).
const MAX_DEGRADED: usize = 65_536;

impl ReplicatedChunkStore {
    /// Rebuilds the shards of `coded` that their members lack, at most `rate` bytes per second
    /// (0: unpaced), [`REPAIR_READ_BYTES`] of shards read at once. `scanned` counts chunks,
    /// `under_replicated` chunks short of a shard, `repaired` shards written, `lost` chunks
    /// with fewer than k shards left.
    pub(super) async fn repair_coded_chunks(
        &self,
        coded: &[CodedChunk],
        rate: u64,
    ) -> RepairReport {
        let view = self.view();
        let mut report = RepairReport::default();
        let mut pace = Pace::new(rate);
        let held = self.held_sets(&view, &mut report).await;
        self.rebuild_missing(&view, coded, &held, &mut pace, &mut report)
            .await;
        report
    }

    /// Notes `chunk` (a degraded read found a shard of it missing) for
    /// [`Self::repair_degraded_chunks`]; at most [`MAX_DEGRADED`] wait at once.
    pub(super) fn note_degraded(&self, chunk: ChunkId, layout: Layout, stored: u64) {
        let mut noted = self.degraded.lock();
        if noted.len() < MAX_DEGRADED {
            noted.insert(chunk, (layout, stored));
        }
    }

    /// Rebuilds the missing shards of the chunks degraded reads noted, asking each placed
    /// member for its shard rather than listing every store. A chunk leaves the notes once
    /// each of its members answered (a member down keeps it for the next call).
    pub(super) async fn repair_degraded_chunks(&self, rate: u64) -> RepairReport {
        let noted: Vec<CodedChunk> = self
            .degraded
            .lock()
            .iter()
            .map(|(&c, &(l, s))| (c, l, s))
            .collect();
        let mut report = RepairReport::default();
        if noted.is_empty() {
            return report;
        }
        let view = self.view();
        let mut probes = Vec::new();
        for &(chunk, layout, _) in &noted {
            if let Ok(places) = shard_places(&view.members, layout.shards(), chunk) {
                for (i, m) in places.into_iter().enumerate() {
                    probes.push((m, shard_id(chunk, layout, i as u8)));
                }
            }
        }
        let view = &view;
        let answers: Vec<_> = futures::stream::iter(probes)
            .map(|(m, id)| async move { (m, id, view.members[m].store.get(id, 0, 1).await) })
            .buffer_unordered(32)
            .collect()
            .await;
        // What each member was seen to hold of these shards (`None`: it did not answer).
        let mut held: Vec<Option<HashSet<u128>>> = vec![Some(HashSet::new()); view.members.len()];
        for (m, id, answer) in answers {
            match answer {
                Ok(_) => {
                    if let Some(h) = held[m].as_mut() {
                        h.insert(id.0);
                    }
                }
                Err(ChunkError::NotFound(_)) => {}
                Err(e) => {
                    if held[m].take().is_some() {
                        report.unreachable += 1;
                        tracing::warn!(store = %view.members[m].name, error = %e, "a degraded chunk's repair cannot reach a chunkstore");
                    }
                }
            }
        }
        let mut pace = Pace::new(rate);
        self.rebuild_missing(view, &noted, &held, &mut pace, &mut report)
            .await;
        let mut left = self.degraded.lock();
        for &(chunk, layout, _) in &noted {
            let known = shard_places(&view.members, layout.shards(), chunk)
                .is_ok_and(|places| places.iter().all(|&m| held[m].is_some()));
            if known {
                left.remove(&chunk);
            }
        }
        report
    }

    /// Rebuilds the shards of `coded` that their placed members lack by `held` (what each
    /// member holds; `None`: unknown, so nothing there counts as missing), from any k others,
    /// [`REPAIR_READ_BYTES`] of shards read at once.
    async fn rebuild_missing(
        &self,
        view: &View,
        coded: &[CodedChunk],
        held: &[Option<HashSet<u128>>],
        pace: &mut Pace,
        report: &mut RepairReport,
    ) {
        let mut short = Vec::new();
        for &(chunk, layout, stored) in coded {
            report.scanned += 1;
            let Ok(places) = shard_places(&view.members, layout.shards(), chunk) else {
                report.failed += 1;
                continue;
            };
            let holds = |i: usize| {
                held[places[i]]
                    .as_ref()
                    .map(|h| h.contains(&shard_id(chunk, layout, i as u8).0))
            };
            let missing: Vec<usize> = (0..layout.shards())
                .filter(|&i| holds(i) == Some(false))
                .collect();
            if missing.is_empty() {
                continue;
            }
            report.under_replicated += 1;
            // Read back first: shards their placed members were seen to hold.
            let unheld: Vec<bool> = (0..layout.shards())
                .map(|i| holds(i) != Some(true))
                .collect();
            short.push((chunk, layout, stored, places, missing, unheld));
        }
        // As many chunks at once as keep REPAIR_READ_BYTES of shards in flight (a rebuild reads
        // k shards to write one, so more at once than replicated repair copies chunks).
        let largest = short.iter().map(|c| c.2).max().unwrap_or(1).max(1);
        let parallel =
            (REPAIR_READ_BYTES / largest).clamp(super::REPAIR_PARALLEL as u64, 64) as usize;
        let rebuilds = short.into_iter().map(
            |(chunk, layout, stored, places, missing, unheld)| async move {
                let none = vec![None; layout.shards()];
                let (shards, _) =
                    gather_shards(view, &places, chunk, layout, stored, none, unheld).await;
                let mut r = RepairReport::default();
                let fix = Fix {
                    which: &missing,
                    drop_first: false,
                };
                let bytes = self
                    .rewrite_shards(view, &places, chunk, layout, stored, shards, fix, &mut r)
                    .await;
                (r, bytes)
            },
        );
        let mut rebuilds = futures::stream::iter(rebuilds).buffer_unordered(parallel);
        while let Some((r, bytes)) = rebuilds.next().await {
            report.add(&r);
            pace.wait(bytes).await;
        }
    }

    /// Reads every shard of `coded` whole and checks the parity, at most `rate` bytes per
    /// second; rewrites shards missing, corrupt or out of step. `verified` and `bytes` count
    /// shards read intact, `missing` and `corrupt` shards found so, `repaired` those rewritten.
    pub(super) async fn scrub_coded_chunks(&self, coded: &[CodedChunk], rate: u64) -> ScrubReport {
        let view = self.view();
        let mut report = ScrubReport::default();
        let mut pace = Pace::new(rate);
        for &(chunk, layout, stored) in coded {
            let Ok(places) = shard_places(&view.members, layout.shards(), chunk) else {
                continue;
            };
            let (shards, errors) = fetch_all(&view, &places, chunk, layout, stored).await;
            let read: u64 = shards.iter().flatten().map(|s| s.len() as u64).sum();
            let mut bad: Vec<usize> = (0..shards.len()).filter(|&i| shards[i].is_none()).collect();
            for e in &errors {
                if e.contains("corrupt") {
                    report.corrupt += 1;
                } else {
                    report.missing += 1;
                }
            }
            if bad.is_empty() {
                let all: Vec<Bytes> = shards.iter().flatten().cloned().collect();
                if !matches!(layout.verify(&all), Ok(true)) {
                    // Every shard passed its CRCs, yet they disagree: rewrite the one shard
                    // whose rebuild makes them agree, if exactly one does (never with one
                    // parity shard, where any does).
                    report.corrupt += 1;
                    match one_out_of_step(layout, stored, &shards) {
                        Some(i) => bad.push(i),
                        None => {
                            tracing::error!(%chunk, %layout, "the shards of an erasure-coded chunk disagree and the wrong one cannot be told; left as they are")
                        }
                    }
                }
            }
            report.verified += (shards.len() - bad.len()) as u64;
            report.bytes += read;
            if !bad.is_empty() {
                let mut r = RepairReport::default();
                let fix = Fix {
                    which: &bad,
                    drop_first: true,
                };
                self.rewrite_shards(&view, &places, chunk, layout, stored, shards, fix, &mut r)
                    .await;
                report.repaired += r.repaired;
            }
            pace.wait(read).await;
        }
        report
    }

    /// Rebuilds the shards `fix` names of `chunk` from the other `shards` (as read, `None`
    /// where one could not be) and writes each to its member; counts in `report`. Answers the
    /// bytes written.
    #[allow(clippy::too_many_arguments)]
    async fn rewrite_shards(
        &self,
        view: &View,
        places: &[usize],
        chunk: ChunkId,
        layout: Layout,
        stored: u64,
        mut shards: Vec<Option<Bytes>>,
        fix: Fix<'_>,
        report: &mut RepairReport,
    ) -> u64 {
        let which = fix.which;
        for &i in which {
            shards[i] = None;
        }
        let want = which.to_vec();
        let rebuilt = tokio::task::spawn_blocking(move || layout.rebuild(stored, &shards, &want))
            .await
            .unwrap_or_else(|e| Err(ChunkError::Unavailable(format!("rebuild task: {e}"))));
        let rebuilt = match rebuilt {
            Ok(r) => r,
            Err(e) => {
                report.lost += 1;
                tracing::error!(%chunk, %layout, error = %e, "an erasure-coded chunk has too few shards left to rebuild");
                return 0;
            }
        };
        let mut bytes = 0;
        for (&i, data) in which.iter().zip(rebuilt) {
            let member = &view.members[places[i]];
            let of = ShardOf {
                chunk,
                index: i as u8,
                layout,
                chunk_len: stored,
            };
            if fix.drop_first {
                let _ = member.store.delete(shard_id(chunk, layout, i as u8)).await;
            }
            let len = data.len() as u64;
            match member.store.put_shard(of, data).await {
                Ok(_) | Err(ChunkError::AlreadyExists(_)) => {
                    report.repaired += 1;
                    report.bytes += len;
                    bytes += len;
                }
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(%chunk, shard = i, store = %member.name, error = %e, "a shard could not be rebuilt");
                }
            }
        }
        bytes
    }

    /// What each member holds (`None` for one that could not be listed, counted unreachable).
    pub(super) async fn held_sets(
        &self,
        view: &View,
        report: &mut RepairReport,
    ) -> Vec<Option<HashSet<u128>>> {
        let future = std::time::SystemTime::now() + std::time::Duration::from_secs(24 * 3600);
        let calls = view.members.iter().map(|m| m.store.list_older_than(future));
        futures::future::join_all(calls)
            .await
            .into_iter()
            .enumerate()
            .map(|(i, r)| match r {
                Ok(ids) => Some(ids.into_iter().map(|c| c.0).collect()),
                Err(e) => {
                    tracing::warn!(store = %view.members[i].name, error = %e, "repair cannot list a chunkstore");
                    report.unreachable += 1;
                    None
                }
            })
            .collect()
    }
}

/// Which shards [`ReplicatedChunkStore::rewrite_shards`] rebuilds.
struct Fix<'a> {
    which: &'a [usize],
    /// Their members may hold bad copies (a scrub found them so): dropped first. A repair's
    /// were seen missing, and a torn one a crash left is replaced by the write itself.
    drop_first: bool,
}

/// The one shard of `shards` (all present, disagreeing) whose rebuild from the others makes
/// them agree, if exactly one does.
fn one_out_of_step(layout: Layout, stored: u64, shards: &[Option<Bytes>]) -> Option<usize> {
    let mut found = None;
    for i in 0..shards.len() {
        let mut others = shards.to_vec();
        others[i] = None;
        let Ok(mut rebuilt) = layout.rebuild(stored, &others, &[i]) else {
            continue;
        };
        others[i] = rebuilt.pop();
        let all: Vec<Bytes> = others.into_iter().flatten().collect();
        if matches!(layout.verify(&all), Ok(true)) {
            if found.is_some() {
                return None;
            }
            found = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_shard_out_of_step_is_found_when_parity_can_tell() {
        let chunk: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        for (layout, can_tell) in [("4+2", true), ("6+3", true), ("2+1", false)] {
            let layout: Layout = layout.parse().unwrap();
            let shards = layout.encode(&chunk).unwrap();
            for bad in 0..layout.shards() {
                let mut some: Vec<Option<Bytes>> = shards.iter().cloned().map(Some).collect();
                let mut b = shards[bad].to_vec();
                b[5] ^= 1;
                some[bad] = Some(b.into());
                let want = can_tell.then_some(bad);
                assert_eq!(
                    one_out_of_step(layout, 10_000, &some),
                    want,
                    "{layout} shard {bad}"
                );
            }
        }
    }
}
