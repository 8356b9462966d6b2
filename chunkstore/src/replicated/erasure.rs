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

use bytes::{Bytes, BytesMut};
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
    /// once all are durable (a shard already there from an earlier try counts: encoding is
    /// deterministic). What the chunk's metadata keeps, as for a replicated chunk.
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
                    match member.store.put_shard(of, shard).await {
                        Ok(_) | Err(ChunkError::AlreadyExists(_)) => Ok(()),
                        Err(e) => Err(format!("shard {i} on {}: {e}", member.name)),
                    }
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

    /// Reads `[offset, offset + len)` (clamped to `chunk_len`) of erasure-coded chunk `chunk`:
    /// from its data shards, or, if one of them fails, rebuilt from any k shards.
    pub async fn get_encoded(
        &self,
        chunk: ChunkId,
        layout: Layout,
        chunk_len: u64,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ChunkError> {
        let view = self.view();
        let places = shard_places(&view.members, layout.shards(), chunk)?;
        let pieces = layout.pieces(chunk_len, offset, len);
        let reads = pieces
            .iter()
            .map(|p| fetch_shard(&view, &places, chunk, layout, p.shard, p.offset, p.len));
        let mut healthy = BytesMut::new();
        let mut failed = None;
        for (p, got) in pieces.iter().zip(join_all(reads).await) {
            match got {
                Ok(b) if b.len() as u64 == p.len => healthy.extend_from_slice(&b),
                Ok(b) => {
                    failed = Some(format!(
                        "shard {} answered {} bytes of {}",
                        p.shard,
                        b.len(),
                        p.len
                    ))
                }
                Err(e) => failed = Some(format!("shard {}: {e}", p.shard)),
            }
        }
        let Some(why) = failed else {
            return Ok(healthy.freeze());
        };
        self.counters.degraded_reads.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%chunk, %layout, %why, "degraded read of an erasure-coded chunk");
        let whole = self
            .rebuild_chunk(&view, &places, chunk, layout, chunk_len)
            .await?;
        let start = offset.min(chunk_len) as usize;
        let end = offset.saturating_add(len).min(chunk_len) as usize;
        Ok(whole.slice(start..end))
    }

    /// The whole of chunk `chunk` from any k of its shards (all asked at once).
    async fn rebuild_chunk(
        &self,
        view: &View,
        places: &[usize],
        chunk: ChunkId,
        layout: Layout,
        chunk_len: u64,
    ) -> Result<Bytes, ChunkError> {
        let (shards, errors) = fetch_all(view, places, chunk, layout, chunk_len).await;
        let present = shards.iter().filter(|s| s.is_some()).count();
        if present < layout.data() {
            return Err(ChunkError::Unavailable(format!(
                "chunk {chunk} ({layout}): {present} shards readable, {} needed: {}",
                layout.data(),
                errors.join("; ")
            )));
        }
        tokio::task::spawn_blocking(move || layout.decode(chunk_len, &shards))
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
    let reads = (0..layout.shards()).map(|i| fetch_shard(view, places, chunk, layout, i, 0, s));
    let mut errors = Vec::new();
    let shards = join_all(reads)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(b) if b.len() as u64 == s => Some(b),
            Ok(b) => {
                errors.push(format!("shard {i}: {} bytes of {s}", b.len()));
                None
            }
            Err(e) => {
                errors.push(format!("shard {i}: {e}"));
                None
            }
        })
        .collect();
    (shards, errors)
}

/// Shard `index` of `chunk` (`len` bytes at `offset`): from its placed member, else from the
/// first other member that has it.
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
    for (i, m) in view.members.iter().enumerate() {
        if i == placed {
            continue;
        }
        if let Ok(b) = m
            .store
            .get_shard(chunk, layout, index as u8, offset, len)
            .await
        {
            return Ok(b);
        }
    }
    Err(first_error)
}
