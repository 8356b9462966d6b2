//! The raft log journal ([`LogJournal`]): the raft logs and votes of every MNode group of a
//! process, appended to segment files and held in memory until purged.
//!
//! Why not the LSM: every log entry is deleted a few thousand entries after it is written, and
//! an LSM writes it twice (journal, then table), then flushes and compacts it and its
//! tombstone. With the logs in a fjall keyspace of their own, fjall's workers used ~20% of the
//! machine's CPU in a 16-thread `saker bench fs` write phase (perf record). Here an entry is
//! written once, read from memory (raft applies entries it reads back from the log), and
//! dropped with its segment file.
//!
//! Layout: a directory of `seg-<16 hex digits>.log` files, numbered in the order they were
//! started, and at most one `spare.log`. A segment is a run of frames: the segment's number
//! (u64 LE), the payload length (u32 LE), the CRC-32C of those 12 bytes and the payload (u32
//! LE), then the payload, a [`Record`]. The first frame of a segment is a checkpoint: every
//! group's vote, last purged entry and last entry as the segment starts. Reading a segment
//! stops at the first frame that is not whole and valid: the torn tail of a crash, the zeros
//! of a new file, or the frames of the segment a reused file used to be (they carry its old
//! number).
//!
//! Durability: a write appends its frame to the active segment's tail in memory and then asks
//! for a sync ([`GroupSync`]): one write of the tail's blocks serves every write before it.
//! Segment files are opened `O_DSYNC | O_DIRECT` (`O_DSYNC` alone where the file system
//! refuses direct I/O), so that write is durable when it returns, without the page cache:
//! against a buffered write and fdatasync it saved ~15 us at the median and ~60 us at p90 per
//! sync on this VM's disk (write-back cache, no FUA: both are a write and a cache flush). The
//! tail starts at a block boundary, so the last, partly filled block is written again with the
//! next frames; the zeros that pad it read as the end of the segment. A segment is durable to
//! its end before the next one starts, so a sync of the active segment makes every earlier
//! frame durable. After a restart the journal never writes to an old segment; it starts a new
//! one, so nothing it writes can line up with frames behind a torn tail.
//!
//! Purging: a sealed segment whose entries every group has purged is deleted, or kept as the
//! spare, which the next segment reuses: its blocks are written already, and an fdatasync
//! after overwriting written blocks took ~90 us against ~135 us for writing into a new file's
//! blocks (4.4 KB writes, this VM's disk). The checkpoint that starts every later segment
//! holds whatever the deleted segment's votes, purges and truncations changed. A group whose
//! live entries keep a segment more than [`KEEP_BEHIND`] segments old has them copied into the
//! active segment at the next purge, so a group that writes rarely does not keep every segment
//! the others fill; but only once the segments from its oldest live entry on hold at least
//! [`COPY_RATIO`] times its live entries' bytes. A busy group's log (tens of MB before its
//! snapshot) spans a few times its own bytes when a few groups write alike: copied at every
//! other group's purge, it was rewritten whole again and again, stalling appends behind the
//! copy, while its own next purge frees those segments anyway. Disk use after a purge is thus
//! at most `max(KEEP_BEHIND, COPY_RATIO * L / S) + 2` segments of `S` bytes (the active one and
//! the spare besides), `L` the largest live log of a group (bounded by its snapshots), plus
//! what is written until the next purge; a copy writes at most `1 / COPY_RATIO` of the bytes it
//! lets go. Recovery checks each checkpoint against the entries read before it, so a
//! damaged frame in an older segment is an error, not a silent hole. Until purges
//! free a segment, a background thread writes a zero-filled spare whenever there is none, so
//! new segments start on written blocks too.
//!
//! With [`Durability::Process`] segments are opened without `O_DSYNC | O_DIRECT`: the same
//! write of the tail's blocks hands them to the kernel, so an append survives a crash of the
//! process when it returns, and reaches the disk at the next [`LogJournal::sync_to_disk`]
//! (fsync(2) through a mount) or background sync (every [`saker_rpc::BACKGROUND_SYNC`] while
//! anything is unsynced). Everything else the journal writes stays on disk when it returns: votes,
//! truncations, purges (before the segments they free are deleted), the end of a segment
//! before the next starts, and each checkpoint. A power loss loses the appends since the last
//! sync: the log ends earlier, and a state machine that got further (its store wrote back on
//! its own) is ahead of it, which openraft mends at startup by purging the log up to it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use saker_rpc::{spawn_background_sync, Durability};

use super::group_sync::GroupSync;
use super::StoreError;
use crate::records::{decode, encode};

/// Size of a new segment file (a larger frame gets a larger segment).
const SEGMENT_BYTES: u64 = 8 << 20;
/// Segment number, payload length, CRC.
const HEADER: usize = 16;
/// The name of a purged segment kept for reuse.
const SPARE: &str = "spare.log";
/// How many segments behind the active one a group's live entries may stay before a purge
/// copies them forward (so disk use stays near this many segments plus the busy groups' logs).
const KEEP_BEHIND: u64 = 8;
/// A group's live entries are copied forward only when the segments from its oldest on hold
/// this many times their bytes (see the module docs).
const COPY_RATIO: u64 = 4;
/// Names of spares being zero-filled: `spare-<n>.tmp`.
const SPARE_TMP: (&str, &str) = ("spare-", ".tmp");
/// Segments are written in whole blocks of this size, at offsets it divides (direct I/O).
const BLOCK: usize = 4096;

mod records;
#[cfg(test)]
mod tests;
mod writer;

use records::*;
#[cfg(feature = "fuzzing")]
pub(crate) use records::{fuzz_read_back, fuzz_seeds};
use writer::*;

struct State {
    groups: BTreeMap<u32, GroupLog>,
    active: Active,
    /// Older segments, oldest first.
    sealed: VecDeque<Segment>,
    spare: Option<PathBuf>,
    /// The thread writing a zero-filled spare, if one is.
    zeroing: Option<std::thread::JoinHandle<()>>,
}

/// Every group's raft log and vote, in segment files.
pub struct LogJournal {
    dir: PathBuf,
    segment_bytes: u64,
    state: Arc<Mutex<State>>,
    /// The active segment's writer, which syncs flush.
    writer: Arc<SegmentWriter>,
    /// Set by a failed write or sync: what the file holds is unknown, so nothing more is
    /// written.
    poisoned: Arc<AtomicBool>,
    syncer: GroupSync,
    durability: Durability,
}

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(e.to_string())
}

fn segment_name(seq: u64) -> String {
    format!("seg-{seq:016x}.log")
}

fn poisoned_error() -> StoreError {
    StoreError::Io("raft log journal refuses writes after a failed write or sync".into())
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    saker_durable::sync_dir(dir).map_err(io)
}

impl LogJournal {
    /// Opens (or creates) the journal in directory `dir`: reads every segment back, then
    /// starts a new one.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, SEGMENT_BYTES, Durability::Disk)
    }

    /// [`Self::open`], with appends as durable as `durability` says.
    pub fn open_with_durability(dir: &Path, durability: Durability) -> Result<Self, StoreError> {
        Self::open_with(dir, SEGMENT_BYTES, durability)
    }

    fn open_with(
        dir: &Path,
        segment_bytes: u64,
        durability: Durability,
    ) -> Result<Self, StoreError> {
        if !dir.exists() {
            fs::create_dir_all(dir).map_err(io)?;
            // The directory's own name must survive a crash before anything relies on it (a
            // moved log is deleted from its old place once imported here).
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let mut seqs = Vec::new();
        let mut spare = None;
        for e in fs::read_dir(dir).map_err(io)? {
            let name = e.map_err(io)?.file_name();
            let name = name.to_string_lossy();
            if name == SPARE {
                spare = Some(dir.join(SPARE));
            } else if name.starts_with(SPARE_TMP.0) && name.ends_with(SPARE_TMP.1) {
                // Cut short by a crash (or still being written by the thread of a journal
                // closed in this process, which removes it itself when it finds that journal
                // gone: either may remove it first).
                match fs::remove_file(dir.join(&*name)) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    r => r.map_err(io)?,
                }
            } else if let Some(hex) = name
                .strip_prefix("seg-")
                .and_then(|n| n.strip_suffix(".log"))
            {
                let seq = u64::from_str_radix(hex, 16)
                    .map_err(|_| StoreError::Corrupt(format!("segment name {name}")))?;
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut groups = BTreeMap::new();
        let mut sealed = VecDeque::new();
        for &seq in &seqs {
            let path = dir.join(segment_name(seq));
            let bytes = fs::read(&path).map_err(io)?;
            sealed.push_back(read_back(&mut groups, seq, path, &bytes)?);
        }
        check_read_back(&mut groups)?;
        let next = seqs.last().map_or(1, |s| s + 1);
        // The new checkpoint is durable before segments it stands in for are deleted.
        let (active, file, first) = start_segment(
            dir,
            next,
            spare.take(),
            segment_bytes,
            &checkpoint(&groups),
            durability,
        )?;
        let state = State {
            groups,
            active,
            sealed,
            spare,
            zeroing: None,
        };
        let writer = Arc::new(SegmentWriter::new(file, &first));
        let poisoned = Arc::new(AtomicBool::new(false));
        // Exported (as 0) from the start.
        std::sync::LazyLock::force(&crate::metrics::JOURNAL_POISONED);
        let (w, flag) = (writer.clone(), poisoned.clone());
        let syncer = GroupSync::start("saker-raftlog-sync", move || {
            let synced = w.flush();
            poisoning(&flag, synced)
        })?;
        if durability == Durability::Process {
            let poisoned = poisoned.clone();
            spawn_background_sync(
                "saker-raftlog-disk",
                Arc::downgrade(&writer),
                move |w: &SegmentWriter| {
                    if w.unsynced.load(Ordering::Acquire) {
                        // A failure is logged and poisons the journal.
                        let _ = sync_writer_to_disk(w, &poisoned);
                    }
                },
            )
            .map_err(io)?;
        }
        let journal = Self {
            dir: dir.to_path_buf(),
            segment_bytes,
            state: Arc::new(Mutex::new(state)),
            writer,
            poisoned,
            syncer,
            durability,
        };
        journal.drop_purged();
        journal.prepare_spare(&mut journal.state.lock());
        Ok(journal)
    }

    /// Appends `rec` to the active segment (not durable until a sync) and applies it.
    fn write(&self, rec: Record) -> Result<(), StoreError> {
        self.write_locked(&mut self.state.lock(), rec)
    }

    fn write_locked(&self, st: &mut State, rec: Record) -> Result<(), StoreError> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(poisoned_error());
        }
        let mut bytes = frame(st.active.seg.seq, &rec);
        if st.active.pos + bytes.len() as u64 > st.active.len {
            self.roll(st, bytes.len() as u64)?;
            bytes = frame(st.active.seg.seq, &rec);
        }
        self.writer.append(&bytes);
        st.active.pos += bytes.len() as u64;
        let State { groups, active, .. } = st;
        State::apply(groups, &mut active.seg, rec);
        Ok(())
    }

    /// Seals the active segment (durably) and starts the next, with room for `need` bytes.
    /// The new segment's checkpoint is durable before anything relies on it (older segments
    /// are deleted only when a later checkpoint holds what they changed). A failure poisons the
    /// journal: a half-started segment is not retried.
    fn roll(&self, st: &mut State, need: u64) -> Result<(), StoreError> {
        let size = self.segment_bytes.max(need + (HEADER as u64) * 2 + 4096);
        let spare = st.spare.take();
        let cp = checkpoint(&st.groups);
        let next = st.active.seg.seq + 1;
        let io_held = self.writer.io.lock();
        let sealed = match self.durability {
            Durability::Disk => self.writer.flush_locked(),
            // A segment is on disk to its end before the next one starts.
            Durability::Process => self.writer.to_disk_locked(),
        };
        let started = sealed
            .map_err(io)
            .and_then(|()| start_segment(&self.dir, next, spare, size, &cp, self.durability));
        let (active, file, first) = match started {
            Ok(a) => a,
            Err(e) => {
                poison(&self.poisoned);
                tracing::error!(error = %e, "raft log segment not started; the journal refuses writes from now on");
                return Err(e);
            }
        };
        self.writer.switch(file, &first);
        drop(io_held);
        let old = std::mem::replace(&mut st.active, active);
        st.sealed.push_back(old.seg);
        self.prepare_spare(st);
        Ok(())
    }

    /// Starts a thread that writes a zero-filled spare, unless there is a spare or one is
    /// being written.
    fn prepare_spare(&self, st: &mut State) {
        if st.spare.is_some() || st.zeroing.is_some() {
            return;
        }
        static SPARES: AtomicU64 = AtomicU64::new(0);
        let n = SPARES.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!("{}{n}{}", SPARE_TMP.0, SPARE_TMP.1));
        let (size, state) = (self.segment_bytes, Arc::downgrade(&self.state));
        match std::thread::Builder::new()
            .name("saker-raftlog-spare".into())
            .spawn(move || zero_spare(&tmp, size, &state))
        {
            Ok(handle) => st.zeroing = Some(handle),
            Err(e) => tracing::warn!(error = %e, "no thread for a zero-filled raft log spare"),
        }
    }

    /// Waits for the thread writing a spare, if one is.
    #[cfg(test)]
    fn join_zeroing(&self) {
        let handle = self.state.lock().zeroing.take();
        if let Some(h) = handle {
            h.join().unwrap();
        }
    }

    /// Returns once every write so far is as durable as the journal's [`Durability`] says.
    async fn synced(&self) -> Result<(), StoreError> {
        self.syncer.request().await.map_err(io)?
    }

    /// Returns once every write so far is on disk, whatever the durability.
    async fn on_disk(&self) -> Result<(), StoreError> {
        self.synced().await?;
        self.sync_to_disk()
    }

    /// Makes every write so far durable on disk (blocking; at once with
    /// [`Durability::Disk`], where each is on disk when it returns).
    pub fn sync_to_disk(&self) -> Result<(), StoreError> {
        if self.durability == Durability::Disk {
            return Ok(());
        }
        sync_writer_to_disk(&self.writer, &self.poisoned)
    }

    /// Syncs to disk so far beyond each write's own ([`Durability::Process`]).
    pub fn disk_syncs(&self) -> u64 {
        self.writer.disk_syncs.load(Ordering::Relaxed)
    }

    /// Appends `entries` (index order) to `group`'s log, replacing any from the first index on;
    /// returns once they are durable (as the journal's [`Durability`] says).
    pub async fn append(&self, group: u32, entries: Vec<(u64, Bytes)>) -> Result<(), StoreError> {
        self.write(Record::Append { group, entries })?;
        self.synced().await
    }

    /// Removes `group`'s entries from index `from` on, on disk.
    pub async fn truncate(&self, group: u32, from: u64) -> Result<(), StoreError> {
        self.write(Record::Truncate { group, from })?;
        self.on_disk().await
    }

    /// Forgets `group` (its entries, vote and purge record), on disk; then drops the segments
    /// only it needed.
    pub async fn forget(&self, group: u32) -> Result<(), StoreError> {
        self.write(Record::Forget { group })?;
        self.on_disk().await?;
        self.drop_purged();
        Ok(())
    }

    /// Removes `group`'s entries up to index `upto` and records `log_id` as its last purge,
    /// durably; then drops the segments nobody needs any more.
    pub async fn purge(&self, group: u32, upto: u64, log_id: Bytes) -> Result<(), StoreError> {
        self.write(Record::Purge {
            group,
            upto,
            log_id,
        })?;
        self.on_disk().await?;
        let moved = self.copy_forward()?;
        if !moved.is_empty() {
            self.on_disk().await?;
            self.forget_copied(&moved);
        }
        self.drop_purged();
        Ok(())
    }

    /// Copies the live entries of every group that keeps a segment more than [`KEEP_BEHIND`]
    /// segments behind the active one into the active segment (no sync), if they are small
    /// beside what they keep ([`COPY_RATIO`]). A group that writes rarely would otherwise keep
    /// every segment the busy groups fill until its own next purge, thousands of entries
    /// later. Returns each copied group with the segment holding its copy.
    fn copy_forward(&self) -> Result<Vec<(u32, u64)>, StoreError> {
        let mut st = self.state.lock();
        let active = st.active.seg.seq;
        let behind = active.saturating_sub(KEEP_BEHIND);
        // Each such group's oldest segment it keeps (`sealed` is oldest first).
        let mut old = BTreeMap::new();
        for seg in st.sealed.iter().filter(|s| s.seq < behind) {
            for (&g, &last) in &seg.last {
                if pins(&st.groups, g, last) {
                    old.entry(g).or_insert(seg.seq);
                }
            }
        }
        let mut moved = Vec::new();
        for (g, oldest) in old {
            let live: u64 = st.groups[&g].entries.values().map(|b| b.len() as u64).sum();
            let kept = (active - oldest).saturating_mul(self.segment_bytes);
            if live.saturating_mul(COPY_RATIO) > kept {
                continue;
            }
            let entries: Vec<(u64, Bytes)> = st.groups[&g]
                .entries
                .iter()
                .map(|(&i, b)| (i, b.clone()))
                .collect();
            self.write_locked(&mut st, Record::Append { group: g, entries })?;
            moved.push((g, st.active.seg.seq));
        }
        Ok(moved)
    }

    /// After the copies of [`Self::copy_forward`] are durable: the segments before each copy
    /// no longer hold anything of its group that is needed.
    fn forget_copied(&self, moved: &[(u32, u64)]) {
        let mut st = self.state.lock();
        for &(g, copy) in moved {
            for seg in st.sealed.iter_mut().filter(|s| s.seq < copy) {
                seg.last.remove(&g);
            }
        }
    }

    /// Records `group`'s vote, durably.
    pub async fn save_vote(&self, group: u32, vote: Bytes) -> Result<(), StoreError> {
        self.write(Record::Vote { group, vote })?;
        self.on_disk().await
    }

    /// Takes a log an older version kept elsewhere, durably (blocking): vote, last purge and
    /// entries, in index order.
    pub fn import(
        &self,
        group: u32,
        vote: Option<Bytes>,
        purged: Option<(u64, Bytes)>,
        entries: Vec<(u64, Bytes)>,
    ) -> Result<(), StoreError> {
        if let Some(vote) = vote {
            self.write(Record::Vote { group, vote })?;
        }
        let purged_upto = purged.as_ref().map(|(upto, _)| *upto);
        if let Some((upto, log_id)) = purged {
            self.write(Record::Purge {
                group,
                upto,
                log_id,
            })?;
        }
        // Entries a purge covers are gone already (an older store may have kept some).
        let from = purged_upto.map_or(0, |p| p.saturating_add(1));
        let entries: Vec<_> = entries.into_iter().filter(|(i, _)| *i >= from).collect();
        if !entries.is_empty() {
            self.write(Record::Append { group, entries })?;
        }
        self.syncer.wait()?;
        self.sync_to_disk()
    }

    /// Deletes sealed segments whose entries every group has purged (one is kept as the
    /// spare). The checkpoint of the segment after each holds what its other records changed.
    fn drop_purged(&self) {
        let mut st = self.state.lock();
        let State {
            groups,
            sealed,
            spare,
            ..
        } = &mut *st;
        let mut kept = VecDeque::with_capacity(sealed.len());
        for seg in sealed.drain(..) {
            let needed = seg.last.iter().any(|(&g, &last)| pins(groups, g, last));
            let gone = if needed {
                Ok(false)
            } else if spare.is_none() {
                let path = self.dir.join(SPARE);
                fs::rename(&seg.path, &path).map(|()| {
                    *spare = Some(path);
                    true
                })
            } else {
                fs::remove_file(&seg.path).map(|()| true)
            };
            match gone {
                Ok(true) => {}
                Ok(false) => kept.push_back(seg),
                Err(e) => {
                    // Kept, and tried again at the next purge; the purge itself is durable.
                    tracing::warn!(error = %e, path = %seg.path.display(), "purged raft log segment not removed");
                    kept.push_back(seg);
                }
            }
        }
        *sealed = kept;
    }

    /// `group`'s entries with `from <= index < to` (`to = None`: to the end), in index order.
    pub fn entries(&self, group: u32, from: u64, to: Option<u64>) -> Vec<Bytes> {
        let st = self.state.lock();
        let Some(g) = st.groups.get(&group) else {
            return Vec::new();
        };
        let range = match to {
            Some(to) if to <= from => return Vec::new(),
            Some(to) => g.entries.range(from..to),
            None => g.entries.range(from..),
        };
        range.map(|(_, b)| b.clone()).collect()
    }

    /// `group`'s last entry, if any.
    pub fn last_entry(&self, group: u32) -> Option<Bytes> {
        let st = self.state.lock();
        let g = st.groups.get(&group)?;
        g.entries.last_key_value().map(|(_, b)| b.clone())
    }

    pub fn vote(&self, group: u32) -> Option<Bytes> {
        self.state.lock().groups.get(&group)?.vote.clone()
    }

    /// The `log_id` of `group`'s last purge, if any.
    pub fn purged(&self, group: u32) -> Option<Bytes> {
        let st = self.state.lock();
        st.groups
            .get(&group)?
            .purged
            .as_ref()
            .map(|(_, b)| b.clone())
    }

    /// Whether the journal holds anything of `group`.
    pub fn has_group(&self, group: u32) -> bool {
        self.state.lock().groups.contains_key(&group)
    }

    /// Segment files in the directory, the active one included (tests and metrics).
    pub fn segment_files(&self) -> usize {
        let st = self.state.lock();
        st.sealed.len() + 1
    }
}
