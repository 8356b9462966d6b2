//! [`ChunkStore`]: the trait every chunk backend implements, and [`ChunkInfo`], what `put` returns.

use std::time::SystemTime;

use bytes::Bytes;

use crate::error::ChunkError;
use crate::format::ShardOf;
use crate::id::ChunkId;
use crate::stats::ChunkStats;

/// An erasure-coded chunk to repair or scrub: its id, layout and stored length.
pub type CodedChunk = (ChunkId, crate::ec::Layout, u64);

/// What a metadata record keeps about a stored chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkInfo {
    /// Data length in bytes.
    pub len: u64,
    /// CRC32C (Castagnoli) of the whole data.
    pub crc32c: u32,
}

/// Storage of immutable chunks. Every implementation passes [`crate::conformance::run_all`].
#[async_trait::async_trait]
pub trait ChunkStore: Send + Sync + 'static {
    /// Stores the chunk durably (fsync'd, visible after a crash) before returning. Ids are never
    /// reused; putting an existing id is an error ([`ChunkError::AlreadyExists`]).
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError>;

    /// Reads `len` bytes at `offset` (clamped to the chunk end; an offset at or past the end
    /// gives empty bytes), verifying the CRC32C of every block it touches; a mismatch is
    /// [`ChunkError::Corrupt`] and is counted in [`ChunkStats::crc_failures`].
    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError>;

    /// The whole of chunk `id` from a copy whose bytes `check` accepts: a check the store
    /// cannot make itself, such as an encryption tag. A store of one copy answers its bytes or
    /// [`ChunkError::Corrupt`]; a replicated one tries each copy and rewrites those `check`
    /// refused from the one it accepted.
    async fn get_checked(
        &self,
        id: ChunkId,
        check: &(dyn for<'b> Fn(&'b [u8]) -> bool + Send + Sync),
    ) -> Result<Bytes, ChunkError> {
        let data = self.get(id, 0, u64::MAX).await?;
        match check(&data) {
            true => Ok(data),
            false => Err(ChunkError::corrupt(
                id,
                "its bytes fail their reader's check",
            )),
        }
    }

    /// Stores `data` as shard `of.index` of erasure-coded chunk `of.chunk`, under
    /// [`crate::ec::shard_id`] of both, in the shard format, as durably as [`Self::put`]. A store
    /// of several others places shards itself and keeps none here.
    async fn put_shard(&self, of: ShardOf, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        let _ = data;
        Err(ChunkError::BadFormat(format!(
            "shard {} of chunk {}: this store keeps no shards",
            of.index, of.chunk
        )))
    }

    /// Reads `len` bytes at `offset` of shard `index` of chunk `chunk` coded in `layout`, as
    /// [`Self::get`] reads a chunk.
    async fn get_shard(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        index: u8,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ChunkError> {
        self.get(crate::ec::shard_id(chunk, layout, index), offset, len)
            .await
    }

    /// Rebuilds the shards of the erasure-coded chunks `coded` that their stores lack, at most
    /// `rate` bytes per second. A store of one disk keeps none.
    async fn repair_coded(&self, coded: &[CodedChunk], rate: u64) -> RepairReport {
        let _ = (coded, rate);
        RepairReport::default()
    }

    /// Rebuilds the missing shards of the erasure-coded chunks degraded reads through this
    /// store found short since the last call, at most `rate` bytes per second. A store of one
    /// disk keeps none.
    async fn repair_degraded(&self, rate: u64) -> RepairReport {
        let _ = rate;
        RepairReport::default()
    }

    /// Reads every shard of `coded` whole and checks their parity, rewriting bad ones, at most
    /// `rate` bytes per second. A store of one disk keeps none.
    async fn scrub_coded(&self, coded: &[CodedChunk], rate: u64) -> ScrubReport {
        let _ = (coded, rate);
        ScrubReport::default()
    }

    /// `Ok` if this store can keep chunks coded in `layout` (its shards on as many distinct
    /// stores); why not otherwise.
    fn takes_coded(&self, layout: crate::ec::Layout) -> Result<(), ChunkError> {
        Err(ChunkError::Unavailable(format!(
            "{layout} needs {} chunkstores; this one has 1",
            layout.shards()
        )))
    }

    /// Stores chunk `chunk` (`data`, its stored bytes) erasure-coded in `layout`: every shard on
    /// its store, durably. A store of one disk keeps no coded chunks.
    async fn put_coded(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        data: Bytes,
    ) -> Result<ChunkInfo, ChunkError> {
        let _ = data;
        Err(ChunkError::BadFormat(format!(
            "chunk {chunk} cannot be erasure-coded ({layout}) on a store of one disk"
        )))
    }

    /// Reads `len` bytes at `offset` of chunk `chunk`, stored erasure-coded in `layout` as
    /// `stored` bytes (`offset` and `len` within those). A store of one disk keeps no coded
    /// chunks.
    async fn get_coded(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        stored: u64,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ChunkError> {
        let _ = (stored, offset, len);
        Err(ChunkError::BadFormat(format!(
            "chunk {chunk} is erasure-coded ({layout}): this store keeps no coded chunks"
        )))
    }

    /// [`Self::get_coded`] as the bytes' parts in order: a store that reads a coded chunk as
    /// shards answers them as read, without joining them. By default the one part `get_coded`
    /// answers.
    async fn get_coded_parts(
        &self,
        chunk: ChunkId,
        layout: crate::ec::Layout,
        stored: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Bytes>, ChunkError> {
        Ok(vec![
            self.get_coded(chunk, layout, stored, offset, len).await?,
        ])
    }

    /// [`Self::get`] as the bytes' parts in order (see [`Self::get_coded_parts`]). By default
    /// the one part `get` answers.
    async fn get_parts(
        &self,
        id: ChunkId,
        offset: u64,
        len: u64,
    ) -> Result<Vec<Bytes>, ChunkError> {
        Ok(vec![self.get(id, offset, len).await?])
    }

    /// Deletes; deleting a missing chunk is Ok.
    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError>;

    /// Ids of chunks whose files were last modified before `older_than` (for the leak scrub).
    /// This includes partial chunks left by a crash during `put`.
    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError>;

    /// Makes every chunk put so far durable on disk; answers at once where each put is on
    /// disk when it returns (the default).
    async fn sync_to_disk(&self) -> Result<(), ChunkError> {
        Ok(())
    }

    /// Brings every chunk of `referenced` (ids) to all the replicas it should have, copying
    /// at most `rate` bytes per second (0: unpaced); a store of one copy has nothing to do.
    async fn repair(
        &self,
        referenced: &std::collections::HashSet<u128>,
        rate: u64,
    ) -> Result<RepairReport, ChunkError> {
        let _ = (referenced, rate);
        Ok(RepairReport::default())
    }

    /// Brings each of `ids` (chunks a write noted as short of replicas) to all its replicas,
    /// at most `rate` bytes per second; answers the report and the ids that need no more
    /// repair. A store of one copy has nothing to do.
    async fn repair_noted(&self, ids: &[ChunkId], rate: u64) -> (RepairReport, Vec<ChunkId>) {
        let _ = rate;
        (RepairReport::default(), ids.to_vec())
    }

    /// Reads every chunk of `referenced` whole (which checks every block's CRC32C), at most
    /// `rate` bytes per second, reporting the corrupt and missing ones; a store with other
    /// copies rewrites them from a good one.
    async fn scrub(
        &self,
        referenced: &std::collections::HashSet<u128>,
        rate: u64,
    ) -> Result<ScrubReport, ChunkError> {
        let mut report = ScrubReport::default();
        let mut pace = Pace::new(rate);
        let progress = &crate::progress::SCRUB;
        let _running = progress.begin(referenced.len() as u64);
        for &id in referenced {
            progress.scanned();
            match self.get(ChunkId(id), 0, u64::MAX).await {
                Ok(data) => {
                    report.verified += 1;
                    report.bytes += data.len() as u64;
                    progress.moved(data.len() as u64);
                    pace.wait(data.len() as u64).await;
                }
                Err(ChunkError::Corrupt { .. }) => {
                    report.corrupt += 1;
                    progress.found();
                }
                Err(ChunkError::NotFound(_)) => {
                    report.missing += 1;
                    progress.found();
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    /// Totals for /metrics.
    fn stats(&self) -> ChunkStats;

    /// Why this node's store takes no writes, if its disk is full (for `/health`).
    fn full(&self) -> Option<String> {
        None
    }
}

/// What one scrub pass found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScrubReport {
    /// Copies read whole and found intact, and their bytes.
    pub verified: u64,
    pub bytes: u64,
    /// Copies that failed their CRC, or were not there.
    pub corrupt: u64,
    pub missing: u64,
    /// Copies rewritten from a good one.
    pub repaired: u64,
}

/// Keeps a pass at or under `rate` bytes per second (0: no limit).
pub struct Pace {
    rate: u64,
    start: std::time::Instant,
    done: u64,
}

impl Pace {
    pub fn new(rate: u64) -> Self {
        Self {
            rate,
            start: std::time::Instant::now(),
            done: 0,
        }
    }

    /// Counts `bytes` more, sleeping as long as the pass is ahead of its rate.
    pub async fn wait(&mut self, bytes: u64) {
        self.done += bytes;
        if self.rate == 0 {
            return;
        }
        let due = std::time::Duration::from_secs_f64(self.done as f64 / self.rate as f64);
        if let Some(ahead) = due.checked_sub(self.start.elapsed()) {
            tokio::time::sleep(ahead).await;
        }
    }
}

/// What one repair pass found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RepairReport {
    /// Referenced chunks checked.
    pub scanned: u64,
    /// Chunks some replica lacked.
    pub under_replicated: u64,
    /// Copies made, and their bytes.
    pub repaired: u64,
    pub bytes: u64,
    /// Copies that could not be made (retried by the next pass).
    pub failed: u64,
    /// Referenced chunks no reachable store holds.
    pub lost: u64,
    /// Stores that could not be listed (their chunks were not checked).
    pub unreachable: u64,
    /// Copies dropped from stores beyond a chunk's placement once all its replicas had it
    /// (after a store joined, or from one being drained).
    #[serde(default)]
    pub dropped: u64,
}

impl RepairReport {
    /// Adds `other`'s counts to these (passes over several groups' notes).
    pub fn add(&mut self, other: &RepairReport) {
        self.scanned += other.scanned;
        self.under_replicated += other.under_replicated;
        self.repaired += other.repaired;
        self.bytes += other.bytes;
        self.failed += other.failed;
        self.lost += other.lost;
        self.unreachable += other.unreachable;
        self.dropped += other.dropped;
    }
}
