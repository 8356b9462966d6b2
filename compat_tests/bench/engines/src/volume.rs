//! [`VolumeChunkStore`]: chunks appended to large volume files, made durable by group commit.
//! The candidate measured against the product's file-per-chunk `DiskChunkStore`.
//!
//! A `put` reserves space at the tail of the active volume, writes one record there with
//! positioned writes (concurrent puts write in parallel), then waits for an fdatasync of the
//! volume that started after its write finished. Whoever finds no sync running becomes the
//! leader and syncs every volume written since the last sync; the puts that finished writing
//! meanwhile are covered by the next sync together: one fdatasync per group instead of
//! fsync(file) + fsync(directory) per chunk. Records are `[record header][the chunk file bytes]`,
//! the same encoding `DiskChunkStore` writes (`saker_chunkstore::format`), so both layouts write
//! and CRC-check the same bytes.
//!
//! What makes this minimal rather than a real store, and what a real one needs:
//! - The index (id -> volume, offset) lives only in memory. A real store must rebuild it after a
//!   restart: scan the volumes record by record (the record header has a magic, the id and the
//!   length, protected by a CRC, so a torn tail is detectable), or persist index snapshots plus
//!   the scan of the volume tail written since. `open` therefore refuses a non-empty directory.
//! - `delete` only drops the index entry. A real store appends a tombstone (or logs the delete in
//!   the index) so the chunk stays deleted after recovery, and compacts volumes whose live bytes
//!   fall under a threshold: copy the live records into a new volume, switch the index, then
//!   remove the old volume. That compaction rewrites data, costs disk bandwidth the file-per-chunk
//!   layout never spends (there, a delete is an unlink), and needs coordination with readers.
//! - A failed write leaves a dead record in the volume (reclaimed by that compaction). A failed
//!   fdatasync poisons the store: every later put fails, as the state of the page cache is then
//!   unknown (this is what fjall and PostgreSQL do too).
//! - `list_older_than` uses the put time kept in the index; a crash-time partial record is never
//!   indexed, so the leak scrub has nothing to find there: recovery discards it instead.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};
use saker_chunkstore::format::{self, Header, CRC_LEN, HEADER_LEN};
use saker_chunkstore::{ChunkError, ChunkId, ChunkInfo, ChunkStats, ChunkStore};

/// A volume is closed and a new one started once the next record would pass this size.
const VOLUME_MAX: u64 = 1 << 30;
/// Record header: magic, chunk id (u128 LE), body length (u64 LE), CRC32C of the first 28 bytes.
const REC_MAGIC: [u8; 4] = *b"SKVR";
const REC_HEADER_LEN: usize = 32;

/// Where a chunk's record is.
#[derive(Clone, Copy, Debug)]
struct Loc {
    volume: usize,
    /// Offset of the record header.
    offset: u64,
    /// Length of the chunk bytes after the record header.
    body_len: u64,
    written: SystemTime,
}

/// Space allocation in the active volume.
struct Alloc {
    volume: usize,
    tail: u64,
    /// Ids being put right now (not yet in the index), to refuse a concurrent duplicate.
    pending: HashSet<ChunkId>,
}

/// Group commit state.
#[derive(Default)]
struct SyncState {
    /// Syncs started and finished so far; a sync's number is `started` after it starts.
    started: u64,
    done: u64,
    running: bool,
    /// Volumes written since the last sync started.
    dirty: BTreeSet<usize>,
    /// Set by a failed fdatasync; every later put fails.
    failed: Option<String>,
}

#[derive(Default)]
struct Counters {
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    crc_failures: AtomicU64,
    chunks_put: AtomicU64,
    chunks_deleted: AtomicU64,
    syncs: AtomicU64,
}

struct Inner {
    dir: PathBuf,
    alloc: Mutex<Alloc>,
    volumes: RwLock<Vec<Arc<File>>>,
    index: RwLock<HashMap<ChunkId, Loc>>,
    sync: Mutex<SyncState>,
    synced: Condvar,
    counters: Counters,
}

/// Chunks in append-only volume files with an in-memory index (see the module docs).
pub struct VolumeChunkStore {
    inner: Arc<Inner>,
}

impl VolumeChunkStore {
    /// Creates a store in `dir`, which must be missing or empty (there is no recovery).
    pub fn create(dir: &Path) -> Result<Self, ChunkError> {
        fs::create_dir_all(dir)?;
        if fs::read_dir(dir)?.next().is_some() {
            return Err(ChunkError::BadFormat(format!(
                "{} is not empty and this store cannot recover volumes",
                dir.display()
            )));
        }
        let first = create_volume(dir, 0)?;
        Ok(Self {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                alloc: Mutex::new(Alloc {
                    volume: 0,
                    tail: 0,
                    pending: HashSet::new(),
                }),
                volumes: RwLock::new(vec![Arc::new(first)]),
                index: RwLock::new(HashMap::new()),
                sync: Mutex::new(SyncState::default()),
                synced: Condvar::new(),
                counters: Counters::default(),
            }),
        })
    }

    /// fdatasync calls so far (puts per sync = the group commit's group size).
    pub fn syncs(&self) -> u64 {
        self.inner.counters.syncs.load(Ordering::Relaxed)
    }
}

fn volume_path(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("{n:08}.vol"))
}

fn create_volume(dir: &Path, n: usize) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(volume_path(dir, n))?;
    File::open(dir)?.sync_all()?;
    Ok(file)
}

fn record_header(id: ChunkId, body_len: u64) -> [u8; REC_HEADER_LEN] {
    let mut h = [0u8; REC_HEADER_LEN];
    h[0..4].copy_from_slice(&REC_MAGIC);
    h[4..20].copy_from_slice(&id.0.to_le_bytes());
    h[20..28].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

impl Inner {
    fn put(&self, id: ChunkId, data: &[u8]) -> Result<ChunkInfo, ChunkError> {
        let header = Header::new(data.len() as u64);
        let (trailer, crc32c) = format::encode_trailer(data, header.block_size);
        let body_len = header
            .file_len()
            .expect("a chunk that fits in memory has a representable file length");
        let mut head = Vec::with_capacity(REC_HEADER_LEN + HEADER_LEN);
        head.extend_from_slice(&record_header(id, body_len));
        head.extend_from_slice(&header.encode());

        let (volume, file, offset) = self.reserve(id, REC_HEADER_LEN as u64 + body_len)?;
        let res = (|| -> Result<(), ChunkError> {
            file.write_all_at(&head, offset)?;
            let data_at = offset + head.len() as u64;
            file.write_all_at(data, data_at)?;
            file.write_all_at(&trailer, data_at + data.len() as u64)?;
            self.group_commit(volume)
        })();
        let mut alloc = self.alloc.lock();
        alloc.pending.remove(&id);
        res?;
        self.index.write().insert(
            id,
            Loc {
                volume,
                offset,
                body_len,
                written: SystemTime::now(),
            },
        );
        drop(alloc);
        let c = &self.counters;
        c.bytes_written
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        c.chunks_put.fetch_add(1, Ordering::Relaxed);
        Ok(ChunkInfo {
            len: header.data_len,
            crc32c,
        })
    }

    /// Claims `len` bytes at the tail of the active volume, starting a new volume when full.
    fn reserve(&self, id: ChunkId, len: u64) -> Result<(usize, Arc<File>, u64), ChunkError> {
        let mut alloc = self.alloc.lock();
        if alloc.pending.contains(&id) || self.index.read().contains_key(&id) {
            return Err(ChunkError::AlreadyExists(id));
        }
        if alloc.tail > 0 && alloc.tail + len > VOLUME_MAX {
            let next = alloc.volume + 1;
            let file = create_volume(&self.dir, next)?;
            self.volumes.write().push(Arc::new(file));
            alloc.volume = next;
            alloc.tail = 0;
        }
        alloc.pending.insert(id);
        let offset = alloc.tail;
        alloc.tail += len;
        let file = self.volumes.read()[alloc.volume].clone();
        Ok((alloc.volume, file, offset))
    }

    /// Returns once an fdatasync of `volume` that started after this call has finished.
    fn group_commit(&self, volume: usize) -> Result<(), ChunkError> {
        let mut s = self.sync.lock();
        s.dirty.insert(volume);
        let target = s.started + 1;
        loop {
            if let Some(e) = &s.failed {
                return Err(io::Error::other(format!("volume sync failed earlier: {e}")).into());
            }
            if s.done >= target {
                return Ok(());
            }
            if s.running {
                self.synced.wait(&mut s);
                continue;
            }
            // Lead the next sync: it covers every write finished before it starts.
            s.running = true;
            s.started += 1;
            let number = s.started;
            let dirty = std::mem::take(&mut s.dirty);
            drop(s);
            let files: Vec<Arc<File>> = {
                let volumes = self.volumes.read();
                dirty.iter().map(|&v| volumes[v].clone()).collect()
            };
            let res = files.iter().try_for_each(|f| f.sync_data());
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            s = self.sync.lock();
            s.running = false;
            s.done = number;
            if let Err(e) = res {
                s.failed = Some(e.to_string());
            }
            self.synced.notify_all();
        }
    }

    fn read(&self, file: &File, id: ChunkId, loc: Loc, offset: u64, len: u64) -> ReadResult {
        let mut head = [0u8; REC_HEADER_LEN + HEADER_LEN];
        file.read_exact_at(&mut head, loc.offset)?;
        if head[..REC_HEADER_LEN] != record_header(id, loc.body_len) {
            return Err(corrupt(id, "record header does not match the index"));
        }
        let header = Header::decode(id, &head[REC_HEADER_LEN..])?;
        if header.file_len() != Some(loc.body_len) {
            return Err(corrupt(id, "chunk header disagrees with the record length"));
        }
        let base = loc.offset + REC_HEADER_LEN as u64;
        let data_len = header.data_len;
        let start = offset.min(data_len);
        let end = offset.saturating_add(len).min(data_len);
        if start == end {
            return Ok(Bytes::new());
        }
        // Blocks [first, last_excl) cover [start, end); verify each one we touch.
        let bs = u64::from(header.block_size);
        let (first, last_excl) = (start / bs, (end - 1) / bs + 1);
        let read_start = first * bs;
        let read_end = (last_excl * bs).min(data_len);
        let mut data = vec![0u8; (read_end - read_start) as usize];
        file.read_exact_at(&mut data, base + HEADER_LEN as u64 + read_start)?;
        let mut table = vec![0u8; (last_excl - first) as usize * CRC_LEN];
        file.read_exact_at(
            &mut table,
            base + header.table_offset() + first * CRC_LEN as u64,
        )?;
        format::verify_blocks(id, &header, first, &data, &table)?;
        Ok(Bytes::from(data).slice((start - read_start) as usize..(end - read_start) as usize))
    }
}

type ReadResult = Result<Bytes, ChunkError>;

fn corrupt(id: ChunkId, detail: &str) -> ChunkError {
    ChunkError::Corrupt {
        id,
        detail: detail.to_string(),
    }
}

/// Runs blocking file I/O on tokio's blocking pool, like `DiskChunkStore` does.
async fn blocking<T, F>(f: F) -> Result<T, ChunkError>
where
    F: FnOnce() -> Result<T, ChunkError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(res) => res,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(io::Error::other(format!("blocking chunk I/O task failed: {e}")).into()),
    }
}

#[async_trait::async_trait]
impl ChunkStore for VolumeChunkStore {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        let inner = self.inner.clone();
        blocking(move || inner.put(id, &data)).await
    }

    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        let loc = self
            .inner
            .index
            .read()
            .get(&id)
            .copied()
            .ok_or(ChunkError::NotFound(id))?;
        let file = self.inner.volumes.read()[loc.volume].clone();
        let inner = self.inner.clone();
        let res = blocking(move || inner.read(&file, id, loc, offset, len)).await;
        let c = &self.inner.counters;
        match &res {
            Ok(data) => {
                c.bytes_read.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
            Err(ChunkError::Corrupt { .. }) => {
                c.crc_failures.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
        res
    }

    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        if self.inner.index.write().remove(&id).is_some() {
            let c = &self.inner.counters;
            c.chunks_deleted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        let index = self.inner.index.read();
        let mut ids: Vec<ChunkId> = index
            .iter()
            .filter(|(_, loc)| loc.written < older_than)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn stats(&self) -> ChunkStats {
        let c = &self.inner.counters;
        ChunkStats {
            bytes_written: c.bytes_written.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            crc_failures: c.crc_failures.load(Ordering::Relaxed),
            chunks_put: c.chunks_put.load(Ordering::Relaxed),
            chunks_deleted: c.chunks_deleted.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("saker-bench-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn passes_chunkstore_conformance() {
        let dir = tmp("volume-conformance");
        let store = VolumeChunkStore::create(&dir).unwrap();
        saker_chunkstore::conformance::run_all(&store).await;
        fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_puts_share_syncs_and_detect_corruption() {
        let dir = tmp("volume-group");
        let store = Arc::new(VolumeChunkStore::create(&dir).unwrap());
        let data = saker_chunkstore::conformance::pattern(9, 100_000);
        let mut tasks = Vec::new();
        for _ in 0..32 {
            let (store, data) = (store.clone(), data.clone());
            tasks.push(tokio::spawn(async move {
                let id = ChunkId::random();
                store.put(id, data).await.unwrap();
                id
            }));
        }
        let mut ids = Vec::new();
        for t in tasks {
            ids.push(t.await.unwrap());
        }
        assert!(store.syncs() <= 32);
        for id in &ids {
            assert_eq!(store.get(*id, 0, u64::MAX).await.unwrap(), data);
        }
        // Flip a data byte of one record on disk: its read must fail the CRC check.
        let loc = store.inner.index.read()[&ids[0]];
        let file = OpenOptions::new()
            .write(true)
            .open(volume_path(&dir, loc.volume))
            .unwrap();
        let at = loc.offset + (REC_HEADER_LEN + HEADER_LEN) as u64 + 10;
        file.write_all_at(&[data[10] ^ 1], at).unwrap();
        assert!(matches!(
            store.get(ids[0], 0, 100).await,
            Err(ChunkError::Corrupt { .. })
        ));
        assert_eq!(store.stats().crc_failures, 1);
        fs::remove_dir_all(&dir).unwrap();
    }
}
