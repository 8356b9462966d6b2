//! [`DiskChunkStore`]: chunks on a local file system — small ones in append-only volumes
//! ([`crate::volume`]), the rest as one file per chunk.
//!
//! Layout: chunks up to the small-chunk limit ([`SMALL_CHUNK_MAX`] by default) are records in
//! `dir/volumes/`; larger ones are `dir/<first 2 hex chars of the id>/<32 hex chars>.chunk`, in
//! 256 shard directories created by [`DiskChunkStore::open`]. Both hold the same bytes (the chunk
//! file format, [`crate::format`]). Reads and deletes look in the volume index (memory) first.
//!
//! Durability of a chunk file: ids are random and never reused, so `put` writes directly to the
//! final path, opened with `create_new` (an existing id is [`ChunkError::AlreadyExists`]), writes
//! the header, data and checksums, fsyncs the file and then the shard directory before
//! returning. A crash during `put` leaves at most a partial file that no metadata record
//! references (the metadata commit happens only after `put` returns); reads of it fail as
//! corrupt, and the leak scrub ([`ChunkStore::list_older_than`]) finds and deletes it. (A
//! shard's id is derived from its chunk, so a retry at coding the chunk meets such a file:
//! the coder keeps it only if it reads back whole, see `replicated::erasure`.) A failed
//! `put` removes its partial file itself. `delete` does not fsync: a chunk that reappears after a
//! crash is an unreferenced leak that the scrub removes too. Volumes give the same guarantees
//! with one shared fdatasync per group of puts (see [`crate::volume`]), or, opened with
//! [`Durability::Process`], with none until the background sync or [`ChunkStore::sync_to_disk`]
//! (chunk files are synced at their put either way: they are large enough that the fsync is a
//! small part of the put).
//!
//! All file I/O runs on tokio's blocking pool, except reads inside [`reads_in_place`]: a thread
//! of its own that may block (a FUSE worker) reads on itself.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use tracing::Instrument;

use crate::error::ChunkError;
use crate::format::{self, Header, ShardOf};
use crate::id::ChunkId;
use crate::image::{read_image, ReadOut};
use crate::stats::{ChunkStats, Counters};
use crate::store::{ChunkInfo, ChunkStore};
use crate::volume::{start_background_sync, Volumes, VOLUME_SIZE};
use saker_durable::sync_dir;
use saker_rpc::Durability;

/// Chunks up to this size go to volumes by default: group commit pays where fsyncs dominate the
/// put (small chunks); larger ones move enough bytes per fsync that a file of their own costs
/// nothing extra, and deleting them is an unlink rather than a compaction
/// (`compat_tests/bench/engines/README.md`).
pub const SMALL_CHUNK_MAX: u64 = 256 * 1024;

/// File name suffix of chunk files.
const SUFFIX: &str = ".chunk";

/// Chunk store keeping one checksummed file per chunk under a root directory.
#[derive(Debug)]
pub struct DiskChunkStore {
    root: PathBuf,
    counters: Counters,
    volumes: Arc<Volumes>,
    small_max: u64,
    /// A put found the disk full; cleared once it has room again.
    full: std::sync::atomic::AtomicBool,
}

impl DiskChunkStore {
    /// Opens (creating if needed) a store rooted at `dir`, with its 256 shard directories and
    /// its volumes; chunks up to [`SMALL_CHUNK_MAX`] go to volumes.
    pub fn open(dir: &Path) -> Result<Self, ChunkError> {
        Self::open_with(dir, SMALL_CHUNK_MAX, VOLUME_SIZE)
    }

    /// [`Self::open`], with volume puts as durable as `durability` says.
    pub fn open_with_durability(dir: &Path, durability: Durability) -> Result<Self, ChunkError> {
        Self::open_inner(dir, SMALL_CHUNK_MAX, VOLUME_SIZE, durability)
    }

    /// Like [`DiskChunkStore::open`], with chunks up to `small_max` bytes in volumes (0: every
    /// chunk in a file of its own) of up to `volume_size` bytes.
    pub fn open_with(dir: &Path, small_max: u64, volume_size: u64) -> Result<Self, ChunkError> {
        Self::open_inner(dir, small_max, volume_size, Durability::Disk)
    }

    fn open_inner(
        dir: &Path,
        small_max: u64,
        volume_size: u64,
        durability: Durability,
    ) -> Result<Self, ChunkError> {
        fs::create_dir_all(dir)?;
        for shard in 0..=255u8 {
            match fs::create_dir(dir.join(format!("{shard:02x}"))) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e.into()),
                _ => {}
            }
        }
        // Make the shard directories' entries durable; `put` only fsyncs the shard itself.
        sync_dir(dir)?;
        let volumes = Arc::new(Volumes::open_with(
            &dir.join("volumes"),
            volume_size,
            durability,
        )?);
        start_background_sync(&volumes)?;
        Ok(DiskChunkStore {
            root: dir.to_path_buf(),
            counters: Counters::default(),
            volumes,
            small_max,
            full: Default::default(),
        })
    }

    /// The volumes holding the small chunks.
    pub fn volumes(&self) -> &Volumes {
        &self.volumes
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of chunk `id`'s file (whether or not it exists).
    pub fn chunk_path(&self, id: ChunkId) -> PathBuf {
        let name = id.to_string();
        self.root.join(&name[..2]).join(format!("{name}{SUFFIX}"))
    }

    /// Reads the whole chunk and checks every block checksum and the whole-data checksum,
    /// returning what its metadata record should say. For the scrub and repair tasks.
    pub async fn verify(&self, id: ChunkId) -> Result<ChunkInfo, ChunkError> {
        let out = self.count_corrupt(self.read(id, 0, u64::MAX).await)?;
        let crc32c = out
            .whole_crc
            .expect("a read from offset 0 to u64::MAX covers the whole chunk");
        Ok(ChunkInfo {
            len: out.data_len,
            crc32c,
        })
    }

    /// A range of chunk `id`, from its volume record or its file.
    async fn read(&self, id: ChunkId, offset: u64, len: u64) -> Result<ReadOut, ChunkError> {
        let path = self.chunk_path(id);
        let volumes = self.volumes.clone();
        let read = move || match volumes.read(id, offset, len)? {
            Some(out) => Ok(out),
            None => read_range(&path, id, offset, len),
        };
        if READS_IN_PLACE.with(|c| c.get()) {
            return read();
        }
        blocking(read).await
    }

    /// Stores one chunk (or shard: `header` says which): in a volume if small, else as a file of
    /// its own.
    async fn put_chunk(
        &self,
        id: ChunkId,
        header: Header,
        data: Bytes,
    ) -> Result<ChunkInfo, ChunkError> {
        let path = self.chunk_path(id);
        let len = data.len() as u64;
        let result = if len <= self.small_max {
            let volumes = self.volumes.clone();
            blocking(move || volumes.put_image(id, header, &data)).await
        } else {
            blocking(move || write_chunk(&path, id, header, &data)).await
        };
        let info = match result.map_err(ChunkError::classify) {
            Err(ChunkError::Full(m)) => {
                if !self.full.swap(true, Ordering::Relaxed) {
                    tracing::warn!(root = %self.root.display(), error = %m, "chunkstore disk full");
                }
                return Err(ChunkError::Full(format!("{}: {m}", self.root.display())));
            }
            other => other?,
        };
        self.full.store(false, Ordering::Relaxed);
        self.counters.put(len);
        tracing::debug!(chunk = %id, len, "chunk stored");
        Ok(info)
    }

    fn count_corrupt<T>(&self, res: Result<T, ChunkError>) -> Result<T, ChunkError> {
        if let Err(ChunkError::Corrupt { id, detail }) = &res {
            self.counters.crc_failure();
            tracing::warn!(chunk = %id, %detail, "corrupt chunk");
        }
        res
    }
}

#[async_trait::async_trait]
impl ChunkStore for DiskChunkStore {
    async fn put(&self, id: ChunkId, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        let span = tracing::debug_span!("chunk.write", len = data.len());
        let header = Header::new(data.len() as u64);
        self.put_chunk(id, header, data).instrument(span).await
    }

    async fn put_shard(&self, of: ShardOf, data: Bytes) -> Result<ChunkInfo, ChunkError> {
        crate::ec::check_shard_len(&of, data.len() as u64)?;
        let span = tracing::debug_span!("chunk.write_shard", len = data.len());
        let header = Header::shard(data.len() as u64, of);
        let id = crate::ec::shard_id(of.chunk, of.layout, of.index);
        self.put_chunk(id, header, data).instrument(span).await
    }

    async fn get(&self, id: ChunkId, offset: u64, len: u64) -> Result<Bytes, ChunkError> {
        let span = tracing::debug_span!("chunk.read", len);
        async {
            let out = self.count_corrupt(self.read(id, offset, len).await)?;
            self.counters.read(out.data.len() as u64);
            Ok(out.data)
        }
        .instrument(span)
        .await
    }

    async fn delete(&self, id: ChunkId) -> Result<(), ChunkError> {
        let path = self.chunk_path(id);
        let volumes = self.volumes.clone();
        let removed = blocking(move || {
            if volumes.delete(id)? {
                return Ok(true);
            }
            match fs::remove_file(&path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.into()),
            }
        })
        .await?;
        if removed {
            self.counters.deleted();
            tracing::debug!(chunk = %id, "chunk deleted");
        }
        Ok(())
    }

    async fn list_older_than(&self, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
        let root = self.root.clone();
        let volumes = self.volumes.clone();
        blocking(move || {
            let mut ids = list_older_than(&root, older_than)?;
            ids.extend(volumes.list_older_than(older_than));
            ids.sort_unstable();
            Ok(ids)
        })
        .await
    }

    async fn sync_to_disk(&self) -> Result<(), ChunkError> {
        let volumes = self.volumes.clone();
        blocking(move || volumes.sync_to_disk()).await
    }

    fn full(&self) -> Option<String> {
        if !self.full.load(Ordering::Relaxed) {
            return None;
        }
        // Room again (a twentieth of the disk, at least 1 MiB): writes are taken again.
        let (avail, total) = disk_space(&self.root).unwrap_or((0, 0));
        if avail >= (total / 20).max(1 << 20) {
            self.full.store(false, Ordering::Relaxed);
            return None;
        }
        Some(format!(
            "chunkstore {}: disk full ({avail} of {total} bytes free)",
            self.root.display()
        ))
    }

    fn stats(&self) -> ChunkStats {
        let (bytes, live) = self
            .volumes
            .usage()
            .iter()
            .fold((0, 0), |(b, l), &(_, size, live)| (b + size, l + live));
        ChunkStats {
            volume_syncs: self.volumes.syncs(),
            volume_compactions: self.volumes.compactions(),
            volume_bytes: bytes,
            volume_live_bytes: live,
            ..self.counters.snapshot()
        }
    }
}

thread_local! {
    /// Set while this thread runs [`reads_in_place`].
    static READS_IN_PLACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with chunk reads that `f` polls on this thread done on this thread, rather than
/// handed to tokio's blocking pool and back (two thread wake-ups, tens of microseconds on a
/// 2-core VM against a ~100 us read of a 64 KiB chunk). For threads of their own that may block
/// anyway, such as a FUSE worker waiting in a runtime's `block_on`; never for a runtime worker.
/// Reads only: puts done in place the same way measured no faster (a 64 KiB put is its
/// fdatasync; `compat_tests/bench/results/2026-11-25-session13-experiments.json`).
pub fn reads_in_place<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            READS_IN_PLACE.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(READS_IN_PLACE.with(|c| c.replace(true)));
    f()
}

/// Runs blocking file I/O on tokio's blocking pool, re-raising a panic from it.
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

/// Chunk files of at least this much data (parts of large objects: 8 MiB chunks, multipart
/// parts) are written past the page cache ([`crate::direct`]). Smaller ones (objects of 1-4
/// MiB, dataset samples read again and again) go through it, so the GETs after their PUT are
/// page-cache hits served from the cache's own pages ([`crate::mapped`]): a 1 MiB GET cost
/// 0.55-0.66 ms of server CPU, against 0.75-0.90 ms when 1 MiB files were written direct, and
/// the PUT no more (`compat_tests/bench/results/2026-11-29-get-1mib.json`).
const DIRECT_MIN: usize = 4 << 20;

fn write_chunk(
    path: &Path,
    id: ChunkId,
    header: Header,
    data: &[u8],
) -> Result<ChunkInfo, ChunkError> {
    let shard = path
        .parent()
        .expect("chunk paths are root/shard/name")
        .to_path_buf();
    let want_direct = data.len() >= DIRECT_MIN;
    let open = || {
        if want_direct {
            match crate::direct::create(path) {
                // No direct I/O on this file system (the open may have made the file).
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    let _ = fs::remove_file(path);
                }
                other => return other.map(|f| (f, true)),
            }
        }
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map(|f| (f, false))
    };
    let file = match open() {
        // The shard directory was removed behind our back: recreate it once.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(&shard)?;
            open()
        }
        other => other,
    };
    let (mut file, direct) = match file {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(ChunkError::AlreadyExists(id))
        }
        Err(e) => return Err(e.into()),
    };
    let (trailer, crc32c) = format::encode_trailer(data, header.block_size);
    let written = (|| -> io::Result<()> {
        if direct {
            crate::direct::write_parts(&file, &[&header.encode()[..], data, &trailer])?;
        } else {
            file.write_all(&header.encode())?;
            file.write_all(data)?;
            file.write_all(&trailer)?;
        }
        file.sync_all()?;
        sync_dir(&shard)
    })();
    if let Err(e) = written {
        drop(file);
        // Best effort: if this fails too, the scrub removes the partial file.
        let _ = fs::remove_file(path);
        return Err(e.into());
    }
    Ok(ChunkInfo {
        len: header.data_len,
        crc32c,
    })
}

/// Reads of at least this many bytes of a chunk file of at least [`DIRECT_READ_FILE_MIN`]
/// bytes go past the page cache ([`crate::direct`]): the disk fills our buffer directly instead
/// of filling the page cache for a copy out of it.
const DIRECT_READ_MIN: u64 = 256 * 1024;
/// Chunk files this large (written past the page cache too) are parts of large objects, which
/// are streamed: reading them direct ran at the disk's own rate, 1.9x buffered reads, for 1 GiB
/// ranged GETs, and 1.1x for 16 MiB GETs. Smaller ones (1 MiB objects: dataset samples) are
/// read again and again, and the page cache serves the rereads: buffered reads were 1.5x
/// direct ones there (`compat_tests/bench/results/2026-11-29-direct-reads.json`).
const DIRECT_READ_FILE_MIN: u64 = 4 << 20;

fn read_range(path: &Path, id: ChunkId, offset: u64, len: u64) -> Result<ReadOut, ChunkError> {
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ChunkError::NotFound(id),
        _ => e.into(),
    })?;
    let file_len = file.metadata()?.len();
    let large = file_len >= DIRECT_READ_FILE_MIN;
    let direct = if large && len.min(file_len.saturating_sub(offset)) >= DIRECT_READ_MIN {
        open_direct_read(path)?
    } else {
        None
    };
    #[cfg(test)]
    tests::DIRECT_READS.with(|c| c.set(c.get() + u64::from(direct.is_some())));
    read_image(&file, direct.as_ref(), 0, file_len, id, offset, len)
}

/// `path` opened for reading with `O_DIRECT`; `None` where the file system has no direct I/O.
fn open_direct_read(path: &Path) -> io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

fn list_older_than(root: &Path, older_than: SystemTime) -> Result<Vec<ChunkId>, ChunkError> {
    let mut ids = Vec::new();
    for shard in 0..=255u8 {
        let shard_name = format!("{shard:02x}");
        let entries = match fs::read_dir(root.join(&shard_name)) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(SUFFIX))
                .filter(|stem| stem.starts_with(&shard_name))
                .and_then(|stem| stem.parse::<ChunkId>().ok())
            else {
                continue; // not a chunk file
            };
            let modified = match entry.metadata().and_then(|m| m.modified()) {
                Ok(t) => t,
                // Deleted while we listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            if modified < older_than {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Bytes available to this process and the size of the file system holding `path`.
fn disk_space(path: &Path) -> io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((st.f_bavail as u64 * frsize, st.f_blocks as u64 * frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Reads on this thread that went past the page cache.
        pub(super) static DIRECT_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }

    #[test]
    fn only_large_ranges_of_large_chunk_files_are_read_past_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let store = DiskChunkStore::open_with(dir.path(), 0, VOLUME_SIZE).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let data = |n: usize| Bytes::from((0..n).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let (big, small) = (ChunkId::random(), ChunkId::random());
        let (big_data, small_data) = (data(5 << 20), data(1 << 20));
        rt.block_on(store.put(big, big_data.clone())).unwrap();
        rt.block_on(store.put(small, small_data.clone())).unwrap();
        assert!(
            open_direct_read(&store.chunk_path(big)).unwrap().is_some(),
            "the test directory's file system must support O_DIRECT"
        );
        let direct_reads = |off: u64, len: u64, id: ChunkId, want: &Bytes| {
            let before = DIRECT_READS.with(|c| c.get());
            let got = reads_in_place(|| rt.block_on(store.get(id, off, len))).unwrap();
            assert_eq!(got, want.slice(off as usize..(off + len) as usize));
            DIRECT_READS.with(|c| c.get()) - before
        };
        assert_eq!(
            direct_reads(3, 1 << 20, big, &big_data),
            1,
            "1 MiB of a 5 MiB chunk"
        );
        assert_eq!(direct_reads(3, 4096, big, &big_data), 0, "4 KiB of it");
        assert_eq!(
            direct_reads(0, 1 << 20, small, &small_data),
            0,
            "a 1 MiB chunk"
        );
    }
}
