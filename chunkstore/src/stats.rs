//! [`ChunkStats`]: counters a chunk store exports to `/metrics`, and the atomics behind them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Totals since the store was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChunkStats {
    /// Chunk data bytes accepted by successful `put`s (excluding headers and checksums).
    pub bytes_written: u64,
    /// Chunk data bytes returned by successful `get`s.
    pub bytes_read: u64,
    /// Reads that found a checksum mismatch or a damaged chunk file.
    pub crc_failures: u64,
    /// Successful `put`s.
    pub chunks_put: u64,
    /// `delete`s that removed an existing chunk.
    pub chunks_deleted: u64,
    /// fdatasyncs of volumes (each makes a group of small-chunk puts durable).
    pub volume_syncs: u64,
    /// Volumes removed by compaction.
    pub volume_compactions: u64,
    /// Bytes in volume files now, and the part of them live chunks use.
    pub volume_bytes: u64,
    pub volume_live_bytes: u64,
    /// Replicated stores: chunk replicas a put could not write (filled in by repair).
    pub degraded_writes: u64,
    /// Replicas rewritten by reads that found them missing or corrupt.
    pub read_repairs: u64,
    /// Reads of erasure-coded chunks that rebuilt them from other shards (one they needed was
    /// missing, corrupt or unreachable).
    #[serde(default)]
    pub degraded_reads: u64,
    /// Replicas re-created by repair passes.
    pub repaired: u64,
    /// Chunks the last repair pass left short of replicas.
    pub under_replicated: u64,
}

impl ChunkStats {
    /// Adds `other`'s counters to these.
    pub fn add(&mut self, other: &ChunkStats) {
        self.bytes_written += other.bytes_written;
        self.bytes_read += other.bytes_read;
        self.crc_failures += other.crc_failures;
        self.chunks_put += other.chunks_put;
        self.chunks_deleted += other.chunks_deleted;
        self.volume_syncs += other.volume_syncs;
        self.volume_compactions += other.volume_compactions;
        self.volume_bytes += other.volume_bytes;
        self.volume_live_bytes += other.volume_live_bytes;
        self.degraded_writes += other.degraded_writes;
        self.read_repairs += other.read_repairs;
        self.degraded_reads += other.degraded_reads;
        self.repaired += other.repaired;
        self.under_replicated += other.under_replicated;
    }
}

/// Lock-free counters shared by the store implementations.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    crc_failures: AtomicU64,
    chunks_put: AtomicU64,
    chunks_deleted: AtomicU64,
}

impl Counters {
    pub(crate) fn put(&self, len: u64) {
        self.bytes_written.fetch_add(len, Ordering::Relaxed);
        self.chunks_put.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, len: u64) {
        self.bytes_read.fetch_add(len, Ordering::Relaxed);
    }

    pub(crate) fn crc_failure(&self) {
        self.crc_failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn deleted(&self) {
        self.chunks_deleted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ChunkStats {
        ChunkStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            crc_failures: self.crc_failures.load(Ordering::Relaxed),
            chunks_put: self.chunks_put.load(Ordering::Relaxed),
            chunks_deleted: self.chunks_deleted.load(Ordering::Relaxed),
            ..ChunkStats::default()
        }
    }
}
