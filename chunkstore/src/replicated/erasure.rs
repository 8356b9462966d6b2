//! Erasure-coded chunks on the cluster's chunkstores (issue 63): a chunk encoded in a
//! [`Layout`] is k data and m parity shards, shard i on the i-th member of
//! [`shard_places`] (distinct members, balanced over zones).
//!
//! A write stores every shard (a background encoder writes them, then commits the switch in the
//! metadata: nothing waits on a slow shard). A healthy read takes only the data shards its range
//! lies in ([`Layout::pieces`]); when one of them fails, the read is degraded: it takes any k
//! whole shards, rebuilds the chunk and counts it. A shard a member no longer placed holds
//! (after the member list changed) is looked for on every member.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures::future::join_all;

use super::ReplicatedChunkStore;
use crate::ec::{shard_id, Layout};
use crate::error::ChunkError;
use crate::format::ShardOf;
use crate::id::ChunkId;
use crate::placement::{shard_places, View};
use crate::store::ChunkInfo;

impl ReplicatedChunkStore {
    /// The members holding the shards of `chunk` in `layout`, by shard index.
    pub fn shard_places(&self, chunk: ChunkId, layout: Layout) -> Result<Vec<String>, ChunkError> {
        let view = self.view();
        let places = shard_places(&view.members, layout.shards(), chunk)?;
        Ok(places
            .into_iter()
            .map(|i| view.members[i].name.clone())
            .collect())
    }

    /// Encodes chunk `chunk` (`data`) in `layout` and stores every shard on its member; answers
    /// once all are durable (a shard already there from an earlier try counts if it reads back
    /// as this one: encoding is deterministic). What the chunk's metadata keeps, as for a
    /// replicated chunk.
    pub async fn put_encoded(
        &self,
        chunk: ChunkId,
        layout: Layout,
        data: Bytes,
    ) -> Result<ChunkInfo, ChunkError> {
        let view = self.view();
        let places = shard_places(&view.members, layout.shards(), chunk)?;
        let info = ChunkInfo {
            len: data.len() as u64,
            crc32c: crc32c::crc32c(&data),
        };
        let shards = tokio::task::spawn_blocking(move || layout.encode(&data))
            .await
            .map_err(|e| ChunkError::Unavailable(format!("encoding task: {e}")))??;
        let writes = places
            .iter()
            .zip(shards)
            .enumerate()
            .map(|(i, (&m, shard))| {
                let member = &view.members[m];
                let of = ShardOf {
                    chunk,
                    index: i as u8,
                    layout,
                    chunk_len: info.len,
                };
                async move {
                    put_shard_anew(&*member.store, of, shard)
                        .await
                        .map_err(|e| format!("shard {i} on {}: {e}", member.name))
                }
            });
        let failed: Vec<String> = join_all(writes)
            .await
            .into_iter()
            .filter_map(Result::err)
            .collect();
        if failed.is_empty() {
            return Ok(info);
        }
        Err(ChunkError::Unavailable(format!(
            "chunk {chunk} ({layout}): {} of {} shards not written: {}",
            failed.len(),
            layout.shards(),
            failed.join("; ")
        )))
    }

    /// Reads `[offset, offset + len)` (clamped to `chunk_len`) of erasure-coded chunk `chunk`,
    /// as its parts in order: the pieces of its data shards, read at once from their placed
    /// members; or, if one of them fails, the range cut from the chunk rebuilt from any k
    /// shards (a degraded read, counted).
    pub async fn get_encoded(
        &self,
        chunk: ChunkId,
        layout: Layout,
        chunk_len: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Bytes>, ChunkError> {
        let view = self.view();
        let places = shard_places(&view.members, layout.shards(), chunk)?;
        let pieces = layout.pieces(chunk_len, offset, len);
        let reads = pieces.iter().map(|p| {
            view.members[places[p.shard]].store.get_shard(
                chunk,
                layout,
                p.shard as u8,
                p.offset,
                p.len,
            )
        });
        let got: Vec<Result<Bytes, String>> = pieces
            .iter()
            .zip(join_all(reads).await)
            .map(|(p, got)| match got {
                Ok(b) if b.len() as u64 == p.len => Ok(b),
                Ok(b) => Err(format!(
                    "shard {} answered {} bytes of {}",
                    p.shard,
                    b.len(),
                    p.len
                )),
                Err(e) => Err(format!("shard {}: {e}", p.shard)),
            })
            .collect();
        let Some(why) = got.iter().find_map(|g| g.as_ref().err()).cloned() else {
            return Ok(got.into_iter().flatten().collect());
        };
        self.counters.degraded_reads.fetch_add(1, Ordering::Relaxed);
        self.note_degraded(chunk, layout, chunk_len);
        tracing::warn!(%chunk, %layout, %why, "degraded read of an erasure-coded chunk");
        // Whole shards already read count towards the k; the placed members of those that
        // failed are not asked again.
        let s = layout.shard_len(chunk_len);
        let mut shards: Vec<Option<Bytes>> = vec![None; layout.shards()];
        let mut asked = vec![false; layout.shards()];
        for (p, g) in pieces.iter().zip(got) {
            asked[p.shard] = true;
            if p.offset == 0 && p.len == s {
                shards[p.shard] = g.ok();
            } else if g.is_ok() {
                asked[p.shard] = false;
            }
        }
        let whole = self
            .rebuild_parts(&view, &places, chunk, layout, chunk_len, shards, asked)
            .await?;
        Ok(cut_parts(whole, offset, len))
    }

    /// The chunk's bytes in parts (see [`Layout::decode_parts`]), from `shards` (those already
    /// read) and as few more as make k ([`gather_shards`]).
    #[allow(clippy::too_many_arguments)]
    async fn rebuild_parts(
        &self,
        view: &View,
        places: &[usize],
        chunk: ChunkId,
        layout: Layout,
        chunk_len: u64,
        shards: Vec<Option<Bytes>>,
        asked: Vec<bool>,
    ) -> Result<Vec<Bytes>, ChunkError> {
        let (shards, errors) =
            gather_shards(view, places, chunk, layout, chunk_len, shards, asked).await;
        let present = shards.iter().flatten().count();
        if present < layout.data() {
            return Err(ChunkError::Unavailable(format!(
                "chunk {chunk} ({layout}): {present} shards readable, {} needed: {}",
                layout.data(),
                errors.join("; ")
            )));
        }
        tokio::task::spawn_blocking(move || layout.decode_parts(chunk_len, &shards))
            .await
            .map_err(|e| ChunkError::Unavailable(format!("decoding task: {e}")))?
    }

    /// Deletes every shard of `chunk` from its members; Ok once each placed member confirmed
    /// (a shard left on another member is the leak scrub's).
    pub async fn delete_encoded(&self, chunk: ChunkId, layout: Layout) -> Result<(), ChunkError> {
        let view = self.view();
        let places = shard_places(&view.members, layout.shards(), chunk)?;
        let deletes = places.iter().enumerate().map(|(i, &m)| {
            view.members[m]
                .store
                .delete(shard_id(chunk, layout, i as u8))
        });
        let failed: Vec<String> = join_all(deletes)
            .await
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect();
        match failed.is_empty() {
            true => Ok(()),
            false => Err(ChunkError::Unavailable(format!(
                "chunk {chunk}: {} shards not deleted: {}",
                failed.len(),
                failed.join("; ")
            ))),
        }
    }
}

/// `shards` (those already read, by index) and as few more whole shards of `chunk` as make k:
/// from their placed members, in index order, skipping those `asked` already; then, if still
/// short, every missing one looked for on every member (shards that moved when the member list
/// changed). Why each read failed goes into the errors answered beside.
#[allow(clippy::too_many_arguments)]
pub(super) async fn gather_shards(
    view: &View,
    places: &[usize],
    chunk: ChunkId,
    layout: Layout,
    chunk_len: u64,
    mut shards: Vec<Option<Bytes>>,
    mut asked: Vec<bool>,
) -> (Vec<Option<Bytes>>, Vec<String>) {
    let s = layout.shard_len(chunk_len);
    let mut errors = Vec::new();
    let present = |shards: &[Option<Bytes>]| shards.iter().flatten().count();
    loop {
        let want = layout.data().saturating_sub(present(&shards));
        let next: Vec<usize> = (0..layout.shards())
            .filter(|&i| shards[i].is_none() && !asked[i])
            .take(want)
            .collect();
        if next.is_empty() {
            break;
        }
        next.iter().for_each(|&i| asked[i] = true);
        let reads = next.iter().map(|&i| {
            view.members[places[i]]
                .store
                .get_shard(chunk, layout, i as u8, 0, s)
        });
        keep_shards(&next, join_all(reads).await, s, &mut shards, &mut errors);
    }
    if present(&shards) < layout.data() {
        let next: Vec<usize> = (0..layout.shards())
            .filter(|&i| shards[i].is_none())
            .collect();
        let reads = next
            .iter()
            .map(|&i| fetch_shard(view, places, chunk, layout, i, 0, s));
        keep_shards(&next, join_all(reads).await, s, &mut shards, &mut errors);
    }
    (shards, errors)
}

/// Every shard of `chunk` (`chunk_len` bytes coded in `layout`) read whole, all asked at once:
/// `None` where one could not be read, with why.
pub(super) async fn fetch_all(
    view: &View,
    places: &[usize],
    chunk: ChunkId,
    layout: Layout,
    chunk_len: u64,
) -> (Vec<Option<Bytes>>, Vec<String>) {
    let s = layout.shard_len(chunk_len);
    let all: Vec<usize> = (0..layout.shards()).collect();
    let reads = all
        .iter()
        .map(|&i| fetch_shard(view, places, chunk, layout, i, 0, s));
    let (mut shards, mut errors) = (vec![None; layout.shards()], Vec::new());
    keep_shards(&all, join_all(reads).await, s, &mut shards, &mut errors);
    (shards, errors)
}

/// Shard `index` of `chunk` (`len` bytes at `offset`): from its placed member, else from any
/// other member that has it (all asked at once).
async fn fetch_shard(
    view: &View,
    places: &[usize],
    chunk: ChunkId,
    layout: Layout,
    index: usize,
    offset: u64,
    len: u64,
) -> Result<Bytes, ChunkError> {
    let placed = places[index];
    let first = view.members[placed]
        .store
        .get_shard(chunk, layout, index as u8, offset, len)
        .await;
    let Err(first_error) = first else {
        return first;
    };
    let others = view
        .members
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != placed)
        .map(|(_, m)| m.store.get_shard(chunk, layout, index as u8, offset, len));
    match futures::future::select_ok(others).await {
        Ok((b, _)) => Ok(b),
        Err(_) => Err(first_error),
    }
}

/// Stores shard `of` (`shard`) on `store`. A shard already there is one an earlier try at the
/// same chunk wrote (shard ids are derived from the chunk, not random, so a retry meets it):
/// kept only if it reads back as `shard`, else replaced, since a crash during that try may
/// have left it torn (a chunk file is written in place).
async fn put_shard_anew(
    store: &dyn crate::store::ChunkStore,
    of: ShardOf,
    shard: Bytes,
) -> Result<(), ChunkError> {
    match store.put_shard(of, shard.clone()).await {
        Err(ChunkError::AlreadyExists(_)) => {}
        other => return other.map(|_| ()),
    }
    let len = shard.len() as u64;
    if let Ok(there) = store.get_shard(of.chunk, of.layout, of.index, 0, len).await {
        if there == shard {
            return Ok(());
        }
    }
    tracing::warn!(chunk = %of.chunk, shard = of.index, "a shard left by an earlier try did not read back whole; written again");
    store
        .delete(shard_id(of.chunk, of.layout, of.index))
        .await?;
    store.put_shard(of, shard).await.map(|_| ())
}

/// Puts the shards `got` for indexes `which` (each `s` bytes) into `shards`, why not into
/// `errors`.
fn keep_shards(
    which: &[usize],
    got: Vec<Result<Bytes, ChunkError>>,
    s: u64,
    shards: &mut [Option<Bytes>],
    errors: &mut Vec<String>,
) {
    for (&i, r) in which.iter().zip(got) {
        match r {
            Ok(b) if b.len() as u64 == s => shards[i] = Some(b),
            Ok(b) => errors.push(format!("shard {i}: {} bytes of {s}", b.len())),
            Err(e) => errors.push(format!("shard {i}: {e}")),
        }
    }
}

/// `[offset, offset + len)` of the bytes `parts` hold in order, as parts (not copied).
fn cut_parts(parts: Vec<Bytes>, offset: u64, len: u64) -> Vec<Bytes> {
    let end = offset.saturating_add(len);
    let mut at = 0u64;
    let mut out = Vec::new();
    for p in parts {
        let (p_start, p_end) = (at, at + p.len() as u64);
        at = p_end;
        let (from, to) = (offset.max(p_start), end.min(p_end));
        if from < to {
            out.push(p.slice((from - p_start) as usize..(to - p_start) as usize));
        }
    }
    out
}
