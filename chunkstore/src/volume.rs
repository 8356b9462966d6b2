//! [`Volumes`]: small chunks appended to large volume files, made durable by group commit. The
//! [`DiskChunkStore`](crate::DiskChunkStore) keeps chunks up to its small-chunk limit here and
//! larger ones as files of their own.
//!
//! Why: a chunk file costs an fsync of the file and one of its shard directory per put; a
//! volume record costs a share of one fdatasync, which every put that finished writing before
//! it started has in common (`compat_tests/bench/engines`: 32 KiB puts 3.1x at 16 writers).
//!
//! Layout: `dir/NNNNNNNN.vol`, numbered in write order; new records go to the last one (the
//! active volume) until it would pass the volume size, then a new one starts. A volume is a
//! sequence of records, all integers little-endian:
//!
//! ```text
//! offset  size  field
//! 0       4     magic: b"SKVP" (a put) or b"SKVD" (a delete, a tombstone)
//! 4       16    chunk id (u128)
//! 20      8     body length B (0 for a delete)
//! 28      8     put time, ns since the Unix epoch (for the leak scrub)
//! 36      4     CRC32C of bytes 0..36
//! 40      B     the chunk image: exactly the bytes of a chunk file (`crate::format`)
//! ```
//!
//! Appends are serialised (one positioned write each, under the append lock), so after a crash
//! a file is a run of whole records followed by at most one torn one; an fdatasync covers every
//! record written before it. Recovery (`open`) replays every volume in order into the in-memory
//! index (id -> volume, offset): a put indexes, a later put of the same id (a compaction copy)
//! moves it, a tombstone removes it. A record that is not whole with no whole record after it
//! is a torn tail, cut off the last volume (it was never acknowledged: an acknowledged put was
//! followed by an fdatasync, which made every earlier byte durable); so are zeros at its end.
//! A record is whole by its header CRC and its length, but a crash can leave a record its full
//! length with part of its body never written, so two records are also checked against their
//! image CRCs: a volume's last put (cut off if torn) and a compaction copy, before the chunk
//! moves to it (a torn copy leaves the chunk at its original). A torn put with whole records
//! after it is indexed: it was never acknowledged, so nothing references it, the leak scrub
//! removes it, and a read of it fails as corrupt. A damaged record *followed* by whole ones
//! can only be damage to the medium: replay resumes at the next whole record, logs an error,
//! and that volume is never compacted nor appended to (new records go to a new volume: which
//! record a resync finds depends on the bytes after it, so records appended there could be
//! swallowed by the next replay). A resync may land in a chunk body whose data looks like
//! records, so the records after it may add chunks but not remove or replace earlier ones
//! (`replay`'s module docs).
//!
//! Deletes append a tombstone without syncing it, as the file layout unlinks without syncing
//! the directory: a chunk that comes back after a crash is unreferenced, and the leak scrub
//! removes it. Space comes back by compaction: a sealed volume with nothing live is removed at
//! the delete that empties it; one that has stayed under half live for [`COMPACT_DELAY`] (seen
//! at a delete, or at open) has its live records copied to the active volume (the same bytes),
//! synced, the index switched, and is removed (unless a live chunk in it is corrupt: then it is
//! kept as a damaged one, and the chunk stays readable as corrupt). The delay spares the copy when a burst of GC
//! deletes is emptying the volume anyway. Tombstones in a removed volume go with it, so a
//! chunk deleted long ago from an older volume can come back after a restart — again as an
//! unreferenced leak for the scrub. A failed fdatasync poisons the store: the state of the page
//! cache is unknown after one, so every later put fails (as fjall and PostgreSQL do).
//!
//! With [`Durability::Process`] a put returns once its record is written to the kernel (no
//! fdatasync): it survives a crash of the process, and reaches the disk at the next sync, which
//! a background thread runs every [`saker_rpc::BACKGROUND_SYNC`] and [`Volumes::sync_to_disk`]
//! runs at once (fsync(2) through a mount). A power loss can then lose the puts since the last sync,
//! and, since the kernel writes pages back in any order, leave a lost record followed by whole
//! ones (replayed as damage, see above). Compaction copies are synced either way.
//!
//! All calls here block; the store calls them on tokio's blocking pool.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use saker_rpc::{spawn_background_sync, Durability};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::ChunkError;
use crate::format::{self, Header};
use crate::id::ChunkId;
use crate::image::{read_image, ReadOut};
use crate::store::ChunkInfo;
use replay::{replay, Rest};
use saker_durable::sync_dir;

mod compact;
mod replay;
#[cfg(test)]
mod tests;

/// A new volume starts once the next record would pass this size.
pub const VOLUME_SIZE: u64 = 1 << 30;
pub(crate) const PUT_MAGIC: [u8; 4] = *b"SKVP";
pub(crate) const DELETE_MAGIC: [u8; 4] = *b"SKVD";
/// A sealed volume under half live is compacted only once it has stayed there this long:
/// the GC deletes in bursts (everything a deleted tree or an overwritten dataset released), and
/// a volume a burst is emptying reaches zero live soon, when removing it copies nothing.
pub const COMPACT_DELAY: Duration = Duration::from_secs(120);
/// Length of a record header.
pub const RECORD_HEADER_LEN: u64 = 40;
const VOLUME_SUFFIX: &str = ".vol";

/// Where a chunk's record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub volume: u32,
    /// Offset of the record header.
    pub offset: u64,
    /// Length of the chunk image after the record header.
    pub body_len: u64,
    /// Put time, ns since the Unix epoch.
    pub written_ns: u64,
}

impl Loc {
    fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN + self.body_len
    }
}

struct Volume {
    file: std::sync::Arc<File>,
    /// Bytes of records in it.
    size: u64,
    /// Bytes of its records the index points at.
    live: u64,
    /// Recovery found a damaged record in the middle (or compaction a corrupt live chunk):
    /// never compacted (removed), so what is left of it stays for inspection, and never
    /// appended to.
    damaged: bool,
    /// When a delete first left this sealed volume under half live.
    below_half_since: Option<std::time::Instant>,
}

impl Volume {
    /// A new, empty volume file.
    fn new(file: File) -> Self {
        Volume {
            file: std::sync::Arc::new(file),
            size: 0,
            live: 0,
            damaged: false,
            below_half_since: None,
        }
    }

    /// Less than half of it is live, and it may be compacted (not damaged).
    fn under_half(&self) -> bool {
        !self.damaged && self.live * 2 < self.size
    }
}

/// The index and the open volumes, behind one lock so a reader gets a consistent pair.
#[derive(Default)]
struct State {
    index: HashMap<ChunkId, Loc>,
    volumes: BTreeMap<u32, Volume>,
}

/// The append position.
struct Tail {
    volume: u32,
    offset: u64,
    /// Ids being put right now (written, not yet synced and indexed), and their volumes: a
    /// volume with pending puts is not compacted.
    pending: HashMap<ChunkId, u32>,
}

/// Group commit state.
#[derive(Default)]
struct SyncState {
    /// Syncs started and finished so far; a sync's number is `started` after it starts.
    started: u64,
    done: u64,
    running: bool,
    /// Volumes written since the last sync started.
    dirty: BTreeSet<u32>,
    /// Set by a failed fdatasync or a write that could not be undone; every later put fails.
    failed: Option<String>,
}

/// Small chunks in append-only volumes (see the module docs).
pub struct Volumes {
    dir: PathBuf,
    volume_size: u64,
    tail: Mutex<Tail>,
    state: RwLock<State>,
    sync: Mutex<SyncState>,
    synced: Condvar,
    /// Held while a compaction runs (one at a time).
    compacting: Mutex<()>,
    /// How long a sealed volume stays under half live before it is compacted (ms).
    compact_delay_ms: AtomicU64,
    syncs: AtomicU64,
    compacted: AtomicU64,
    durability: Durability,
}

fn now_ns() -> u64 {
    saker_durable::now_ns().max(0) as u64
}

fn volume_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("{n:08}{VOLUME_SUFFIX}"))
}

/// A record header's bytes.
type RecordHeader = [u8; RECORD_HEADER_LEN as usize];

fn record_header(magic: [u8; 4], id: ChunkId, body_len: u64, written_ns: u64) -> RecordHeader {
    let mut h = [0u8; RECORD_HEADER_LEN as usize];
    h[0..4].copy_from_slice(&magic);
    h[4..20].copy_from_slice(&id.0.to_le_bytes());
    h[20..28].copy_from_slice(&body_len.to_le_bytes());
    h[28..36].copy_from_slice(&written_ns.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..36]);
    h[36..40].copy_from_slice(&crc.to_le_bytes());
    h
}

/// A decoded record header: (is a put, id, body length, put time).
pub(crate) fn decode_header(h: &RecordHeader) -> Option<(bool, ChunkId, u64, u64)> {
    let put = match h[0..4].try_into().ok()? {
        PUT_MAGIC => true,
        DELETE_MAGIC => false,
        _ => return None,
    };
    if format::read_u32(&h[36..40]) != crc32c::crc32c(&h[0..36]) {
        return None;
    }
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    let id = ChunkId(u128::from_le_bytes(h[4..20].try_into().expect("16 bytes")));
    Some((put, id, u64_at(20), u64_at(28)))
}

/// Checks that `head` starts with the put record header the index entry `loc` of `id` implies.
fn check_put_header(id: ChunkId, loc: &Loc, head: &[u8]) -> Result<(), ChunkError> {
    if head[..RECORD_HEADER_LEN as usize]
        != record_header(PUT_MAGIC, id, loc.body_len, loc.written_ns)
    {
        return Err(ChunkError::corrupt(
            id,
            "volume record header does not match the index",
        ));
    }
    Ok(())
}

fn open_volume(dir: &Path, n: u32, create: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(create)
        .open(volume_path(dir, n))?;
    if create {
        sync_dir(dir)?;
    }
    Ok(file)
}

impl std::fmt::Debug for Volumes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Volumes")
            .field("dir", &self.dir)
            .field("volume_size", &self.volume_size)
            .finish_non_exhaustive()
    }
}

impl Volumes {
    /// Opens the volumes in `dir` (created if missing), replaying them into the index; every
    /// put is on disk when it returns ([`Durability::Disk`]).
    pub fn open(dir: &Path, volume_size: u64) -> Result<Self, ChunkError> {
        Self::open_with(dir, volume_size, Durability::Disk)
    }

    /// [`Self::open`] with puts as durable as `durability` says. With
    /// [`Durability::Process`], see [`start_background_sync`].
    pub fn open_with(
        dir: &Path,
        volume_size: u64,
        durability: Durability,
    ) -> Result<Self, ChunkError> {
        if !dir.exists() {
            fs::create_dir_all(dir)?;
            // The new directory's own entry must be durable, not only what goes inside it.
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let numbers = volume_numbers(dir)?;
        let mut state = State::default();
        let last = numbers.last().copied();
        for &n in &numbers {
            let file = open_volume(dir, n, false)?;
            let replayed = replay(&file, n, &mut state.index)?;
            let size = match replayed.rest {
                Rest::Nothing => replayed.end,
                // Written after the last acknowledged record, never acknowledged itself.
                Rest::Zeros | Rest::Torn if Some(n) == last => {
                    if replayed.rest == Rest::Torn {
                        tracing::warn!(
                            volume = n,
                            at = replayed.end,
                            len = replayed.len,
                            "cutting a torn record off the last volume (a write that was never acknowledged)"
                        );
                    }
                    file.set_len(replayed.end)?;
                    file.sync_all()?;
                    replayed.end
                }
                Rest::Zeros => replayed.end,
                // Damage to the medium (see `replay`): counted whole, never compacted.
                Rest::Torn => replayed.len,
            };
            let damaged = replayed.damaged;
            state.volumes.insert(
                n,
                Volume {
                    size,
                    damaged,
                    ..Volume::new(file)
                },
            );
        }
        for loc in state.index.values() {
            let v = state
                .volumes
                .get_mut(&loc.volume)
                .expect("replay indexes only the volumes it read");
            v.live += loc.record_len();
        }
        // Appends go only after records a replay parses the same way whatever follows them: not
        // into a volume replay had to resync in (see `replay`'s module docs).
        let tail = match state.volumes.iter().next_back() {
            Some((&n, v)) if v.size < volume_size && !v.damaged => Tail {
                volume: n,
                offset: v.size,
                pending: HashMap::new(),
            },
            other => {
                if let Some((&n, v)) = other.filter(|(_, v)| v.damaged) {
                    tracing::warn!(
                        volume = n,
                        size = v.size,
                        "the last chunk volume is damaged; new records go to a new volume"
                    );
                }
                let n = other.map(|(&n, _)| n + 1).unwrap_or(0);
                let file = open_volume(dir, n, true)?;
                state.volumes.insert(n, Volume::new(file));
                Tail {
                    volume: n,
                    offset: 0,
                    pending: HashMap::new(),
                }
            }
        };
        // Sealed volumes left under half live (a compaction skipped or cut short by a crash).
        let candidates: Vec<u32> = state
            .volumes
            .iter()
            .filter(|(&n, v)| n != tail.volume && v.under_half())
            .map(|(&n, _)| n)
            .collect();
        let volumes = Volumes {
            dir: dir.to_path_buf(),
            volume_size,
            tail: Mutex::new(tail),
            state: RwLock::new(state),
            sync: Mutex::new(SyncState::default()),
            synced: Condvar::new(),
            compacting: Mutex::new(()),
            compact_delay_ms: AtomicU64::new(COMPACT_DELAY.as_millis() as u64),
            syncs: AtomicU64::new(0),
            compacted: AtomicU64::new(0),
            durability,
        };
        for n in candidates {
            volumes.compact(n)?;
        }
        Ok(volumes)
    }

    /// fdatasync calls so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Sets how long a sealed volume stays under half live before it is compacted (a volume
    /// with nothing live is removed at once).
    pub fn set_compact_delay(&self, delay: Duration) {
        self.compact_delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    /// Volumes removed by compaction so far.
    pub fn compactions(&self) -> u64 {
        self.compacted.load(Ordering::Relaxed)
    }

    /// The volume numbers on disk and their (size, live) bytes.
    pub fn usage(&self) -> Vec<(u32, u64, u64)> {
        let st = self.state.read();
        st.volumes
            .iter()
            .map(|(&n, v)| (n, v.size, v.live))
            .collect()
    }

    /// The record of `id`, if it is here.
    pub fn locate(&self, id: ChunkId) -> Option<Loc> {
        self.state.read().index.get(&id).copied()
    }

    /// The path of volume `n`.
    pub fn volume_path(&self, n: u32) -> PathBuf {
        volume_path(&self.dir, n)
    }

    /// Stores a chunk durably; returns what its metadata record keeps.
    pub fn put(&self, id: ChunkId, data: &[u8]) -> Result<ChunkInfo, ChunkError> {
        self.put_image(id, Header::new(data.len() as u64), data)
    }

    /// Stores a chunk or shard (`header` says which; its length is `data`'s) durably.
    pub fn put_image(
        &self,
        id: ChunkId,
        header: Header,
        data: &[u8],
    ) -> Result<ChunkInfo, ChunkError> {
        let (trailer, crc32c) = format::encode_trailer(data, header.block_size);
        let body_len = header
            .file_len()
            .expect("a chunk that fits in memory has a representable file length");
        let written_ns = now_ns();
        let mut record = Vec::with_capacity((RECORD_HEADER_LEN + body_len) as usize);
        record.extend_from_slice(&record_header(PUT_MAGIC, id, body_len, written_ns));
        record.extend_from_slice(&header.encode());
        record.extend_from_slice(data);
        record.extend_from_slice(&trailer);

        let (volume, offset) = {
            let mut tail = self.tail.lock();
            if tail.pending.contains_key(&id) || self.state.read().index.contains_key(&id) {
                return Err(ChunkError::AlreadyExists(id));
            }
            let at = self.append(&mut tail, &record)?;
            tail.pending.insert(id, at.0);
            at
        };
        let synced = match self.durability {
            Durability::Disk => self.group_commit(Some(volume)),
            // Written to the kernel (`append` fails once a sync has); on disk at the next sync.
            Durability::Process => Ok(()),
        };
        let mut tail = self.tail.lock();
        tail.pending.remove(&id);
        synced?;
        let loc = Loc {
            volume,
            offset,
            body_len,
            written_ns,
        };
        let mut st = self.state.write();
        let Some(v) = st.volumes.get_mut(&volume) else {
            // Compaction skips volumes with pending puts, so this is a bug, not a race.
            return Err(io::Error::other(format!("volume {volume} vanished under a put")).into());
        };
        v.live += loc.record_len();
        st.index.insert(id, loc);
        Ok(ChunkInfo {
            len: header.data_len,
            crc32c,
        })
    }

    /// Appends `record` at the tail (starting a new volume when it would not fit); returns
    /// where. A write that fails is cut off again, so the volume stays a run of whole records.
    fn append(&self, tail: &mut Tail, record: &[u8]) -> Result<(u32, u64), ChunkError> {
        if let Some(e) = &self.sync.lock().failed {
            return Err(io::Error::other(format!("volume store failed earlier: {e}")).into());
        }
        let len = record.len() as u64;
        if tail.offset > 0 && tail.offset + len > self.volume_size {
            let next = tail.volume + 1;
            let file = open_volume(&self.dir, next, true)?;
            self.state.write().volumes.insert(next, Volume::new(file));
            tail.volume = next;
            tail.offset = 0;
        }
        let file = self
            .state
            .read()
            .volumes
            .get(&tail.volume)
            .map(|v| v.file.clone())
            .ok_or_else(|| io::Error::other(format!("active volume {} is gone", tail.volume)))?;
        if let Err(e) = file.write_all_at(record, tail.offset) {
            if let Err(cut) = file.set_len(tail.offset) {
                self.sync.lock().failed = Some(format!(
                    "a failed write ({e}) could not be cut off the volume: {cut}"
                ));
            }
            return Err(e.into());
        }
        let at = (tail.volume, tail.offset);
        tail.offset += len;
        if let Some(v) = self.state.write().volumes.get_mut(&tail.volume) {
            v.size += len;
        }
        self.sync.lock().dirty.insert(tail.volume);
        Ok(at)
    }

    /// Appends the tombstone of `id` (not synced). A failure is logged: the delete holds in
    /// memory until a restart, after which the chunk is a leak the scrub finds.
    fn append_tombstone(&self, tail: &mut Tail, id: ChunkId, written_ns: u64) {
        let tomb = record_header(DELETE_MAGIC, id, 0, written_ns);
        if let Err(e) = self.append(tail, &tomb) {
            tracing::warn!(chunk = %id, error = %e, "could not write a chunk tombstone");
        }
    }

    /// Makes every put so far durable on disk (at once where each put is already).
    pub fn sync_to_disk(&self) -> Result<(), ChunkError> {
        match self.durability {
            Durability::Disk => Ok(()),
            Durability::Process => self.group_commit(None),
        }
    }

    /// Whether a put has anything to sync (volumes written since the last sync started).
    fn has_dirty(&self) -> bool {
        !self.sync.lock().dirty.is_empty()
    }

    /// Returns once an fdatasync of `volume` (and of every volume written since the last
    /// sync started) that started after its last write has finished.
    fn group_commit(&self, volume: Option<u32>) -> Result<(), ChunkError> {
        let mut s = self.sync.lock();
        s.dirty.extend(volume);
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
            let files: Vec<_> = {
                let st = self.state.read();
                dirty
                    .iter()
                    .filter_map(|v| st.volumes.get(v).map(|v| v.file.clone()))
                    .collect()
            };
            let res = files.iter().try_for_each(|f| f.sync_data());
            self.syncs.fetch_add(1, Ordering::Relaxed);
            s = self.sync.lock();
            s.running = false;
            s.done = number;
            if let Err(e) = res {
                tracing::error!(error = %e, "volume fdatasync failed; the chunk store refuses puts from now on");
                s.failed = Some(e.to_string());
            }
            self.synced.notify_all();
        }
    }

    /// Reads a range of chunk `id`; `Ok(None)` if it is not here.
    pub(crate) fn read(
        &self,
        id: ChunkId,
        offset: u64,
        len: u64,
    ) -> Result<Option<ReadOut>, ChunkError> {
        let (loc, file) = {
            let st = self.state.read();
            let Some(loc) = st.index.get(&id).copied() else {
                return Ok(None);
            };
            let Some(v) = st.volumes.get(&loc.volume) else {
                return Err(ChunkError::corrupt(id, "indexed in a volume that is gone"));
            };
            (loc, v.file.clone())
        };
        let mut head = [0u8; RECORD_HEADER_LEN as usize];
        file.read_exact_at(&mut head, loc.offset)?;
        check_put_header(id, &loc, &head)?;
        let base = loc.offset + RECORD_HEADER_LEN;
        read_image(&file, None, base, loc.body_len, id, offset, len).map(Some)
    }

    /// Deletes `id` if it is here (a tombstone, not synced); returns whether it was. Compacts
    /// the volume it was in when that is now less than half live.
    pub fn delete(&self, id: ChunkId) -> Result<bool, ChunkError> {
        let candidate = {
            let mut tail = self.tail.lock();
            let Some(loc) = self.state.write().index.remove(&id) else {
                return Ok(false);
            };
            self.append_tombstone(&mut tail, id, loc.written_ns);
            let mut st = self.state.write();
            let Some(v) = st.volumes.get_mut(&loc.volume) else {
                return Ok(true);
            };
            v.live = v.live.saturating_sub(loc.record_len());
            let due = if loc.volume == tail.volume || !v.under_half() {
                false
            } else if v.live == 0 {
                true // nothing to copy
            } else {
                let since = *v
                    .below_half_since
                    .get_or_insert_with(std::time::Instant::now);
                let delay = self.compact_delay_ms.load(Ordering::Relaxed);
                since.elapsed() >= Duration::from_millis(delay)
            };
            due.then_some(loc.volume)
        };
        if let Some(volume) = candidate {
            if let Err(e) = self.compact(volume) {
                tracing::warn!(volume, error = %e, "volume compaction failed; retried after the next delete in it");
            }
        }
        Ok(true)
    }

    /// Ids of chunks put before `older_than`.
    pub fn list_older_than(&self, older_than: SystemTime) -> Vec<ChunkId> {
        let limit = older_than
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_nanos() as u64;
        let st = self.state.read();
        st.index
            .iter()
            .filter(|(_, l)| l.written_ns < limit)
            .map(|(id, _)| *id)
            .collect()
    }
}

/// The numbers of the volume files in `dir`, in write order.
fn volume_numbers(dir: &Path) -> Result<Vec<u32>, ChunkError> {
    let mut numbers = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(n) = name
            .to_str()
            .and_then(|n| n.strip_suffix(VOLUME_SUFFIX))
            .and_then(|n| n.parse::<u32>().ok())
        {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// The chunks the volumes in `dir` hold, read without changing anything (a running store may
/// be appending: its last, unfinished record is not counted). For tests and tools.
pub fn scan(dir: &Path) -> Result<Vec<ChunkId>, ChunkError> {
    let mut index = HashMap::new();
    for n in volume_numbers(dir)? {
        match File::open(volume_path(dir, n)) {
            Ok(file) => {
                replay(&file, n, &mut index)?;
            }
            // Removed by a compaction since the listing; its live records were copied first.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut ids: Vec<ChunkId> = index.into_keys().collect();
    ids.sort_unstable();
    Ok(ids)
}

/// With [`Durability::Process`], starts the thread that syncs `volumes` to disk every
/// [`saker_rpc::BACKGROUND_SYNC`] while anything is unsynced; it ends once `volumes` is
/// dropped.
pub fn start_background_sync(volumes: &std::sync::Arc<Volumes>) -> io::Result<()> {
    if volumes.durability != Durability::Process {
        return Ok(());
    }
    spawn_background_sync(
        "saker-volume-sync",
        std::sync::Arc::downgrade(volumes),
        |volumes: &Volumes| {
            if volumes.has_dirty() {
                if let Err(e) = volumes.sync_to_disk() {
                    tracing::error!(error = %e, "background volume sync failed");
                }
            }
        },
    )
}
