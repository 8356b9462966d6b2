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
//! the others fill. Recovery checks each checkpoint against the entries read before it, so a
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

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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
/// Names of spares being zero-filled: `spare-<n>.tmp`.
const SPARE_TMP: (&str, &str) = ("spare-", ".tmp");
/// Segments are written in whole blocks of this size, at offsets it divides (direct I/O).
const BLOCK: usize = 4096;

/// One frame's payload.
#[derive(Serialize, Deserialize)]
enum Record {
    /// Every group's state as a segment starts.
    Checkpoint(Vec<GroupState>),
    /// Entries `(index, bytes)` in index order; they replace any entries from the first index on.
    Append {
        group: u32,
        entries: Vec<(u64, Bytes)>,
    },
    /// Entries from index `from` on are gone.
    Truncate {
        group: u32,
        from: u64,
    },
    /// Entries up to index `upto` are gone; `log_id` is the caller's record of it.
    Purge {
        group: u32,
        upto: u64,
        log_id: Bytes,
    },
    Vote {
        group: u32,
        vote: Bytes,
    },
    /// The group's log, vote and purge record are gone (its replica left this node).
    Forget {
        group: u32,
    },
}

#[derive(Serialize, Deserialize)]
struct GroupState {
    group: u32,
    vote: Option<Bytes>,
    purged: Option<(u64, Bytes)>,
    /// Indexes of the first and last entries, if any.
    first: Option<u64>,
    last: Option<u64>,
}

/// One group's log as the journal holds it.
#[derive(Default)]
struct GroupLog {
    entries: BTreeMap<u64, Bytes>,
    vote: Option<Bytes>,
    purged: Option<(u64, Bytes)>,
    /// While reading the log back: the first and last index a checkpoint said were there, the
    /// last lowered by later truncations (a purge may still cover them).
    checkpointed: Option<(u64, u64)>,
}

impl GroupLog {
    fn purge(&mut self, upto: u64, log_id: Bytes) {
        self.entries = match upto.checked_add(1) {
            Some(next) => self.entries.split_off(&next),
            None => BTreeMap::new(),
        };
        self.purged = Some((upto, log_id));
    }

    fn truncate(&mut self, from: u64) {
        self.entries.split_off(&from);
        self.checkpointed = self
            .checkpointed
            .filter(|&(first, _)| from > first)
            .map(|(first, last)| (first, last.min(from - 1)));
    }

    fn purged_upto(&self) -> Option<u64> {
        self.purged.as_ref().map(|(i, _)| *i)
    }

    /// After reading the log back: the entries run without a hole from the last purge on,
    /// through the last index a checkpoint saw (a damaged frame in an older segment would
    /// otherwise leave a silent gap).
    fn check(&self, group: u32) -> Result<(), StoreError> {
        let first = self.entries.first_key_value().map(|(&i, _)| i);
        let end = self.entries.last_key_value().map(|(&i, _)| i);
        let purged = self.purged_upto();
        let gapless = match (first, end) {
            (Some(first), Some(end)) => {
                end - first + 1 == self.entries.len() as u64
                    && purged.is_none_or(|p| p + 1 == first)
            }
            _ => true,
        };
        let covered = self.checkpointed.is_none_or(|(first, last)| {
            let lo = purged.map_or(first, |p| first.max(p.saturating_add(1)));
            lo > last || (self.entries.contains_key(&lo) && self.entries.contains_key(&last))
        });
        if gapless && covered {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!(
                "raft log of group {group}: entries {first:?}..={end:?} with {} present, last purge {purged:?}, a checkpoint saw up to {:?}",
                self.entries.len(),
                self.checkpointed
            )))
        }
    }
}

/// A segment file and the highest entry index each group appended to it.
struct Segment {
    seq: u64,
    path: PathBuf,
    last: HashMap<u32, u64>,
}

/// The segment being written (its bytes go through the [`SegmentWriter`]).
struct Active {
    seg: Segment,
    pos: u64,
    len: u64,
}

/// The active segment's end that may not be durable yet.
struct Tail {
    file: Arc<File>,
    /// File offset of `bytes[0]`, a multiple of [`BLOCK`].
    start: u64,
    /// The segment's bytes from `start` to its end.
    bytes: Vec<u8>,
    /// The segment is durable up to here.
    durable: u64,
}

/// Writes the active segment: frames go to the tail in memory, a flush writes the tail's
/// blocks with one synchronous write (segment files are opened `O_DSYNC`).
struct SegmentWriter {
    /// Held by each flush: a roll's and the sync thread's must not interleave (a late, shorter
    /// write of the same block would undo a longer one).
    io: Mutex<()>,
    tail: Mutex<Tail>,
    /// Appended since the last sync to disk ([`Durability::Process`]).
    unsynced: AtomicBool,
    /// Syncs to disk so far ([`Self::to_disk_locked`]).
    disk_syncs: AtomicU64,
}

impl SegmentWriter {
    /// Writes to `file`, a new segment whose first frame, `first`, is durable.
    fn new(file: Arc<File>, first: &[u8]) -> Self {
        Self {
            io: Mutex::new(()),
            tail: Mutex::new(Tail::after(file, first)),
            unsynced: AtomicBool::new(false),
            disk_syncs: AtomicU64::new(0),
        }
    }

    fn append(&self, bytes: &[u8]) {
        self.tail.lock().bytes.extend_from_slice(bytes);
        self.unsynced.store(true, Ordering::Release);
    }

    /// Writes what was appended and makes the active segment durable on disk (with `io` held
    /// by the caller). For segments opened without `O_DSYNC`.
    fn to_disk_locked(&self) -> std::io::Result<()> {
        self.unsynced.store(false, Ordering::Release);
        self.flush_locked()?;
        let file = self.tail.lock().file.clone();
        file.sync_data()?;
        self.disk_syncs.fetch_add(1, Ordering::Relaxed);
        crate::metrics::JOURNAL_DISK_SYNCS.inc();
        Ok(())
    }

    /// Makes everything appended so far durable.
    fn flush(&self) -> std::io::Result<()> {
        let _io = self.io.lock();
        self.flush_locked()
    }

    /// [`Self::flush`] with `io` held by the caller.
    fn flush_locked(&self) -> std::io::Result<()> {
        let (file, start, end, data) = {
            let t = self.tail.lock();
            let end = t.start + t.bytes.len() as u64;
            if end <= t.durable {
                return Ok(());
            }
            (t.file.clone(), t.start, end, Blocks::of(&t.bytes))
        };
        // Appends go on meanwhile; they stay in the tail for the next flush.
        file.write_all_at(data.as_slice(), start)?;
        let mut t = self.tail.lock();
        t.durable = end;
        let keep = end / BLOCK as u64 * BLOCK as u64;
        let done = (keep - t.start) as usize;
        t.bytes.drain(..done);
        t.start = keep;
        Ok(())
    }

    /// Writes to `file` from now on, a new segment whose first frame, `first`, is durable
    /// (with `io` held, after a flush of the old segment).
    fn switch(&self, file: Arc<File>, first: &[u8]) {
        *self.tail.lock() = Tail::after(file, first);
    }
}

impl Tail {
    /// The tail of a segment that holds `first` from offset 0, durably.
    fn after(file: Arc<File>, first: &[u8]) -> Self {
        let start = first.len() / BLOCK * BLOCK;
        Self {
            file,
            start: start as u64,
            bytes: first[start..].to_vec(),
            durable: first.len() as u64,
        }
    }
}

/// Bytes in whole blocks, zero-padded, in a block-aligned buffer (what direct I/O accepts).
struct Blocks {
    buf: Vec<u8>,
    at: usize,
    len: usize,
}

impl Blocks {
    fn of(bytes: &[u8]) -> Self {
        let len = bytes.len().div_ceil(BLOCK) * BLOCK;
        let mut buf = vec![0u8; len + BLOCK];
        let at = (BLOCK - buf.as_ptr() as usize % BLOCK) % BLOCK;
        buf[at..at + bytes.len()].copy_from_slice(bytes);
        Self { buf, at, len }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[self.at..self.at + self.len]
    }
}

struct State {
    groups: BTreeMap<u32, GroupLog>,
    active: Active,
    /// Older segments, oldest first.
    sealed: VecDeque<Segment>,
    spare: Option<PathBuf>,
    /// The thread writing a zero-filled spare, if one is.
    zeroing: Option<std::thread::JoinHandle<()>>,
}

impl State {
    /// Applies `rec` to the groups (and notes its entries in `seg`): the one place the meaning
    /// of a record lives, for writes and for recovery alike. (Recovery checks the result
    /// against the checkpoints afterwards, [`GroupLog::check`].)
    fn apply(groups: &mut BTreeMap<u32, GroupLog>, seg: &mut Segment, rec: Record) {
        match rec {
            Record::Checkpoint(states) => {
                // A checkpoint lists every group there is: one it omits was forgotten.
                groups.retain(|g, _| states.iter().any(|s| s.group == *g));
                for s in states {
                    let g = groups.entry(s.group).or_default();
                    g.vote = s.vote;
                    match s.last {
                        Some(last) => g.truncate(last.saturating_add(1)),
                        None => g.entries.clear(),
                    }
                    if let Some((upto, log_id)) = s.purged {
                        g.purge(upto, log_id);
                    }
                    g.checkpointed = s.first.zip(s.last);
                }
            }
            Record::Append { group, entries } => {
                let g = groups.entry(group).or_default();
                if let (Some(&(first, _)), Some(&(end, _))) = (entries.first(), entries.last()) {
                    g.truncate(first);
                    let last = seg.last.entry(group).or_default();
                    *last = (*last).max(end);
                }
                g.entries.extend(entries);
            }
            Record::Truncate { group, from } => groups.entry(group).or_default().truncate(from),
            Record::Purge {
                group,
                upto,
                log_id,
            } => groups.entry(group).or_default().purge(upto, log_id),
            Record::Vote { group, vote } => groups.entry(group).or_default().vote = Some(vote),
            Record::Forget { group } => {
                groups.remove(&group);
            }
        }
    }
}

/// Whether entries of `group` up to index `last` are still needed (not all purged).
fn pins(groups: &BTreeMap<u32, GroupLog>, group: u32, last: u64) -> bool {
    groups
        .get(&group)
        .is_some_and(|g| g.purged_upto().is_none_or(|p| p < last))
}

/// Every group's state, as the first frame of a new segment.
fn checkpoint(groups: &BTreeMap<u32, GroupLog>) -> Record {
    Record::Checkpoint(
        groups
            .iter()
            .map(|(&group, g)| GroupState {
                group,
                vote: g.vote.clone(),
                purged: g.purged.clone(),
                first: g.entries.first_key_value().map(|(&i, _)| i),
                last: g.entries.last_key_value().map(|(&i, _)| i),
            })
            .collect(),
    )
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

fn frame(seq: u64, rec: &Record) -> Vec<u8> {
    let payload = encode(rec);
    let mut f = Vec::with_capacity(HEADER + payload.len());
    f.extend_from_slice(&seq.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&f[..12]), &payload);
    f.extend_from_slice(&crc.to_le_bytes());
    f.extend_from_slice(&payload);
    f
}

/// The whole, valid frames at the start of segment `seq`'s bytes.
fn read_records(seq: u64, bytes: &[u8]) -> Result<Vec<Record>, StoreError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(h) = bytes.get(pos..pos + HEADER) {
        let word =
            |r: std::ops::Range<usize>| u32::from_le_bytes(h[r].try_into().expect("4 bytes"));
        let frame_seq = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
        let len = word(8..12) as usize;
        let Some(payload) = bytes.get(pos + HEADER..pos + HEADER + len) else {
            break;
        };
        if frame_seq != seq
            || len == 0
            || crc32c::crc32c_append(crc32c::crc32c(&h[..12]), payload) != word(12..16)
        {
            break;
        }
        // A whole frame that does not decode is damage, not a torn write: refuse to guess.
        out.push(decode(payload)?);
        pos += HEADER + len;
    }
    Ok(out)
}

/// Applies the records of segment `seq` (file `path`, holding `bytes`) to `groups`, reading
/// the journal back.
fn read_back(
    groups: &mut BTreeMap<u32, GroupLog>,
    seq: u64,
    path: PathBuf,
    bytes: &[u8],
) -> Result<Segment, StoreError> {
    let mut seg = Segment {
        seq,
        path,
        last: HashMap::new(),
    };
    for rec in read_records(seq, bytes)? {
        State::apply(groups, &mut seg, rec);
    }
    Ok(seg)
}

/// Checks the groups read back from every segment against their checkpoints
/// ([`GroupLog::check`]).
fn check_read_back(groups: &mut BTreeMap<u32, GroupLog>) -> Result<(), StoreError> {
    for (&group, g) in groups.iter_mut() {
        g.check(group)?;
        g.checkpointed = None;
    }
    Ok(())
}

/// Reads `segments` back as segments 1, 2, … of a journal (what `LogJournal::open` does
/// with the files' bytes); panics if what reads back, written again as one new segment (its
/// checkpoint, then each group's entries), does not read back the same. Returns whether the
/// segments read back (false: the journal would refuse to open).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_read_back(segments: &[&[u8]]) -> bool {
    type Summary = Vec<(u32, Vec<(u64, Bytes)>, Option<Bytes>, Option<(u64, Bytes)>)>;
    fn summary(groups: &BTreeMap<u32, GroupLog>) -> Summary {
        groups
            .iter()
            .map(|(&group, g)| {
                let entries = g.entries.iter().map(|(&i, b)| (i, b.clone())).collect();
                (group, entries, g.vote.clone(), g.purged.clone())
            })
            .collect()
    }
    let mut groups = BTreeMap::new();
    for (seq, bytes) in (1..).zip(segments) {
        if read_back(&mut groups, seq, PathBuf::new(), bytes).is_err() {
            return false;
        }
    }
    if check_read_back(&mut groups).is_err() {
        return false;
    }
    let seq = segments.len() as u64 + 1;
    let mut bytes = frame(seq, &checkpoint(&groups));
    for (&group, g) in &groups {
        if !g.entries.is_empty() {
            let entries = g.entries.iter().map(|(&i, b)| (i, b.clone())).collect();
            bytes.extend(frame(seq, &Record::Append { group, entries }));
        }
    }
    let mut again = BTreeMap::new();
    read_back(&mut again, seq, PathBuf::new(), &bytes).expect("a new segment reads back");
    check_read_back(&mut again).expect("a new segment is whole");
    assert!(
        summary(&again) == summary(&groups),
        "the journal read back, written again, reads back differently"
    );
    true
}

/// Journals for the seed corpus, each a list of segments' bytes: the frames a few appends,
/// votes, truncations and purges of three groups write.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_seeds() -> Vec<Vec<Vec<u8>>> {
    let entry = |group: u32, i: u64| (i, Bytes::from(format!("entry {group}.{i}")));
    let vote = |group: u32| Bytes::from(format!("vote of {group}"));
    let records = [
        Record::Checkpoint(Vec::new()),
        Record::Vote {
            group: 1,
            vote: vote(1),
        },
        Record::Append {
            group: 1,
            entries: (1..=3).map(|i| entry(1, i)).collect(),
        },
        Record::Append {
            group: 2,
            entries: vec![entry(2, 1)],
        },
        Record::Truncate { group: 1, from: 3 },
        Record::Append {
            group: 1,
            entries: vec![entry(1, 3), entry(1, 4)],
        },
        Record::Purge {
            group: 1,
            upto: 1,
            log_id: Bytes::from_static(b"log id 1"),
        },
        Record::Vote {
            group: 3,
            vote: vote(3),
        },
        Record::Forget { group: 3 },
    ];
    let frames: Vec<Vec<u8>> = records.iter().map(|r| frame(1, r)).collect();
    let mut out: Vec<Vec<Vec<u8>>> = (1..=frames.len())
        .map(|n| vec![frames[..n].concat()])
        .collect();
    // A later segment starts with a checkpoint of every group.
    let mut groups = BTreeMap::new();
    read_back(&mut groups, 1, PathBuf::new(), &frames.concat()).expect("seed frames read back");
    let mut two = frame(2, &checkpoint(&groups));
    two.extend(frame(
        2,
        &Record::Append {
            group: 2,
            entries: vec![entry(2, 2)],
        },
    ));
    out.push(vec![frames.concat(), two]);
    out
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
    /// segments behind the active one into the active segment (no sync). A group that writes
    /// rarely would otherwise keep every segment the busy groups fill until its own next purge,
    /// thousands of entries later. Returns each copied group with the segment holding its copy.
    fn copy_forward(&self) -> Result<Vec<(u32, u64)>, StoreError> {
        let mut st = self.state.lock();
        let behind = st.active.seg.seq.saturating_sub(KEEP_BEHIND);
        let mut old = BTreeSet::new();
        for seg in st.sealed.iter().filter(|s| s.seq < behind) {
            for (&g, &last) in &seg.last {
                if pins(&st.groups, g, last) {
                    old.insert(g);
                }
            }
        }
        let mut moved = Vec::new();
        for g in old {
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

/// Writes `tmp`, a zero-filled file of `size` bytes, and makes it the spare of the journal
/// whose state is `state`, if that journal is still open and has no spare by then.
fn zero_spare(tmp: &Path, size: u64, state: &Weak<Mutex<State>>) {
    let written = File::create(tmp).and_then(|f| {
        let zeros = vec![0u8; 1 << 20];
        let mut pos = 0;
        while pos < size {
            let n = zeros.len().min((size - pos) as usize);
            f.write_all_at(&zeros[..n], pos)?;
            pos += n as u64;
        }
        f.sync_data()
    });
    let Some(state) = state.upgrade() else {
        let _ = fs::remove_file(tmp);
        return;
    };
    let mut st = state.lock();
    // (A joiner may have taken the handle already.)
    st.zeroing = None;
    let spare = tmp.with_file_name(SPARE);
    let kept = match written {
        Ok(()) if st.spare.is_none() => fs::rename(tmp, &spare),
        Ok(()) => Err(std::io::Error::other(
            "a purged segment became the spare first",
        )),
        Err(e) => Err(e),
    };
    match kept {
        Ok(()) => st.spare = Some(spare),
        Err(e) => {
            tracing::debug!(error = %e, "zero-filled raft log spare not kept");
            let _ = fs::remove_file(tmp);
        }
    }
}

/// Starts segment `seq` in `dir` (in `spare`'s file if there is one), at least `size` bytes,
/// with `checkpoint` as its first frame, durable; returns it, its file (open for durable
/// writes) and that frame.
fn start_segment(
    dir: &Path,
    seq: u64,
    spare: Option<PathBuf>,
    size: u64,
    checkpoint: &Record,
    durability: Durability,
) -> Result<(Active, Arc<File>, Vec<u8>), StoreError> {
    let path = dir.join(segment_name(seq));
    match spare {
        Some(old) => fs::rename(&old, &path).map_err(io)?,
        // Made first, then opened: an open that fails for O_DIRECT may have made the file.
        None => drop(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(io)?,
        ),
    }
    let synchronous = durability == Durability::Disk;
    let mut file = open_segment(&path, synchronous).map_err(io)?;
    let mut len = file.metadata().map_err(io)?.len();
    if len < size {
        file.set_len(size).map_err(io)?;
        len = size;
    }
    sync_dir(dir)?;
    let first = frame(seq, checkpoint);
    let blocks = Blocks::of(&first);
    if let Err(e) = file.write_all_at(blocks.as_slice(), 0) {
        // A file system that takes O_DIRECT at open but not these writes: without it.
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(io(e));
        }
        file = open_flags(&path, libc::O_DSYNC).map_err(io)?;
        file.write_all_at(blocks.as_slice(), 0).map_err(io)?;
    }
    if !synchronous {
        // The checkpoint is on disk before anything relies on it.
        file.sync_data().map_err(io)?;
    }
    let active = Active {
        seg: Segment {
            seq,
            path,
            last: HashMap::new(),
        },
        pos: first.len() as u64,
        len,
    };
    Ok((active, Arc::new(file), first))
}

/// Opens a segment file for reading and writing: with `synchronous`, for durable writes
/// (`O_DSYNC`, and `O_DIRECT` where the file system has it); else plain (writes go to the
/// page cache).
fn open_segment(path: &Path, synchronous: bool) -> std::io::Result<File> {
    if !synchronous {
        return open_flags(path, 0);
    }
    match open_flags(path, libc::O_DSYNC | libc::O_DIRECT) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open_flags(path, libc::O_DSYNC),
        opened => opened,
    }
}

/// Opens `path` for reading and writing with `flags`.
fn open_flags(path: &Path, flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .open(path)
}

/// Marks the journal as refusing writes from now on (and says so in `/metrics`).
fn poison(poisoned: &AtomicBool) {
    poisoned.store(true, Ordering::Release);
    crate::metrics::JOURNAL_POISONED.set(1);
}

/// `result` of a write or sync of the journal, or the poisoned error once one failed: after a
/// failed write what the file holds is unknown (and the kernel may answer a later sync with
/// success), so no sync succeeds after it.
fn poisoning(poisoned: &AtomicBool, result: std::io::Result<()>) -> Result<(), StoreError> {
    if poisoned.load(Ordering::Acquire) {
        return Err(poisoned_error());
    }
    result.map_err(|e| {
        poison(poisoned);
        tracing::error!(error = %e, "raft log fdatasync failed; the journal refuses writes from now on");
        io(e)
    })
}

/// Writes `w`'s tail and syncs its segment to disk (a segment opened without `O_DSYNC`),
/// unless the journal is poisoned.
fn sync_writer_to_disk(w: &SegmentWriter, poisoned: &AtomicBool) -> Result<(), StoreError> {
    if poisoned.load(Ordering::Acquire) {
        return Err(poisoned_error());
    }
    let _io = w.io.lock();
    poisoning(poisoned, w.to_disk_locked())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(group: u32, index: u64, tag: &str) -> Bytes {
        Bytes::from(format!("{group}/{index}/{tag}"))
    }

    fn entries(group: u32, indexes: std::ops::RangeInclusive<u64>, tag: &str) -> Vec<(u64, Bytes)> {
        indexes.map(|i| (i, bytes(group, i, tag))).collect()
    }

    fn all(j: &LogJournal, group: u32) -> Vec<Bytes> {
        j.entries(group, 0, None)
    }

    fn expect(group: u32, parts: &[(std::ops::RangeInclusive<u64>, &str)]) -> Vec<Bytes> {
        parts
            .iter()
            .flat_map(|(r, tag)| entries(group, r.clone(), tag))
            .map(|(_, b)| b)
            .collect()
    }

    #[tokio::test]
    async fn reopens_with_entries_votes_purges_and_truncations() {
        let dir = tempfile::tempdir().unwrap();
        {
            let j = LogJournal::open(dir.path()).unwrap();
            j.append(1, entries(1, 1..=5, "a")).await.unwrap();
            j.append(2, entries(2, 1..=3, "a")).await.unwrap();
            j.save_vote(1, Bytes::from_static(b"vote-1")).await.unwrap();
            j.truncate(1, 4).await.unwrap();
            j.append(1, entries(1, 4..=6, "b")).await.unwrap();
            // An append over existing entries replaces them from its first index on.
            j.append(1, entries(1, 6..=6, "c")).await.unwrap();
            j.purge(2, 2, Bytes::from_static(b"purged-2"))
                .await
                .unwrap();
            assert_eq!(j.entries(1, 2, Some(4)), expect(1, &[(2..=3, "a")]));
        }
        let j = LogJournal::open(dir.path()).unwrap();
        assert_eq!(
            all(&j, 1),
            expect(1, &[(1..=3, "a"), (4..=5, "b"), (6..=6, "c")])
        );
        assert_eq!(all(&j, 2), expect(2, &[(3..=3, "a")]));
        assert_eq!(j.vote(1).as_deref(), Some(&b"vote-1"[..]));
        assert_eq!(j.vote(2), None);
        assert_eq!(j.purged(2).as_deref(), Some(&b"purged-2"[..]));
        assert_eq!(j.purged(1), None);
        assert_eq!(j.last_entry(1), Some(bytes(1, 6, "c")));
        assert!(!j.has_group(3));
    }

    /// A forgotten group is gone, across segment rolls and a reopen: no entry, vote or purge
    /// record comes back from an older segment, and its segments are not kept for it.
    #[tokio::test]
    async fn a_forgotten_group_stays_gone_and_frees_its_segments() {
        let dir = tempfile::tempdir().unwrap();
        let pad = "p".repeat(2000);
        {
            let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
            for i in 1..=40 {
                j.append(7, entries(7, i..=i, &pad)).await.unwrap();
            }
            j.save_vote(7, Bytes::from_static(b"vote-7")).await.unwrap();
            j.purge(7, 3, Bytes::from_static(b"purged-7"))
                .await
                .unwrap();
            j.append(1, entries(1, 1..=2, "a")).await.unwrap();
            let before = j.segment_files();
            assert!(before > 1, "group 7 filled more than one segment");
            j.forget(7).await.unwrap();
            assert!(!j.has_group(7));
            // Group 1 writes on: the segments only group 7 needed are dropped.
            for i in 3..=40 {
                j.append(1, entries(1, i..=i, &pad)).await.unwrap();
            }
            j.purge(1, 39, Bytes::from_static(b"purged-1"))
                .await
                .unwrap();
            assert!(
                j.segment_files() < before,
                "{} segments of {before} kept",
                j.segment_files()
            );
        }
        let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
        assert!(!j.has_group(7), "group 7 came back");
        assert_eq!(j.vote(7), None);
        assert_eq!(j.purged(7), None);
        assert!(all(&j, 7).is_empty());
        assert_eq!(all(&j, 1), expect(1, &[(40..=40, &pad)]));
    }

    /// Entries of many sizes (frames that end anywhere in a block, and span blocks), with a
    /// sync after each, across segment rolls; all read back after a reopen. Returns the
    /// journal's syncs to disk beyond the writes' own and the segments it rolled.
    async fn entries_of_every_size_survive_a_reopen(
        dir: &Path,
        durability: Durability,
    ) -> (u64, usize) {
        let sized = |i: u64| Bytes::from(vec![(i % 251) as u8 + 1; (i as usize * 397) % 9000]);
        let counts = {
            let j = LogJournal::open_with(dir, 64 << 10, durability).unwrap();
            for i in 1..=60 {
                j.append(1, vec![(i, sized(i))]).await.unwrap();
            }
            let rolled = j.segment_files() - 1;
            assert!(rolled > 0, "the segments rolled");
            (j.disk_syncs(), rolled)
        };
        let j = LogJournal::open_with(dir, 64 << 10, durability).unwrap();
        assert_eq!(all(&j, 1), (1..=60).map(sized).collect::<Vec<_>>());
        counts
    }

    #[tokio::test]
    async fn frames_that_end_anywhere_in_a_block_are_all_durable() {
        let dir = tempfile::tempdir().unwrap();
        let (disk_syncs, _) =
            entries_of_every_size_survive_a_reopen(dir.path(), Durability::Disk).await;
        assert_eq!(disk_syncs, 0, "every write is on disk by itself");
    }

    #[tokio::test]
    async fn with_process_durability_appends_are_kept_and_each_sealed_segment_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let start = std::time::Instant::now();
        let (disk_syncs, rolled) =
            entries_of_every_size_survive_a_reopen(dir.path(), Durability::Process).await;
        // One sync per sealed segment, plus at most one background sync per second; none of
        // the 60 appends synced on its own.
        let background = start.elapsed().as_secs() + 1;
        assert!(
            disk_syncs >= rolled as u64 && disk_syncs <= rolled as u64 + background,
            "{disk_syncs} syncs to disk for {rolled} rolls"
        );
    }

    #[tokio::test]
    async fn with_process_durability_votes_and_fsyncs_go_to_disk() {
        let dir = tempfile::tempdir().unwrap();
        let j = LogJournal::open_with(dir.path(), 1 << 20, Durability::Process).unwrap();
        j.append(1, entries(1, 1..=3, "a")).await.unwrap();
        let before = j.disk_syncs();
        j.save_vote(1, Bytes::from_static(b"vote")).await.unwrap();
        assert!(j.disk_syncs() > before, "a vote is on disk when it returns");
        let before = j.disk_syncs();
        j.sync_to_disk().unwrap();
        assert!(j.disk_syncs() > before);

        let disk = tempfile::tempdir().unwrap();
        let j = LogJournal::open_with(disk.path(), 1 << 20, Durability::Disk).unwrap();
        j.save_vote(1, Bytes::from_static(b"vote")).await.unwrap();
        j.sync_to_disk().unwrap();
        assert_eq!(j.disk_syncs(), 0, "nothing to do: every write is on disk");
    }

    #[test]
    fn a_segment_opened_without_direct_io_is_written_the_same() {
        // Segments opened without O_DIRECT (O_DSYNC alone, where the file system refuses it,
        // or plain, for `Durability::Process`) hold the same frames.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(segment_name(7));
        File::create(&path).unwrap();
        let file = Arc::new(open_segment(&path, false).unwrap());
        let first = frame(7, &Record::Checkpoint(Vec::new()));
        file.write_all_at(Blocks::of(&first).as_slice(), 0).unwrap();
        let w = SegmentWriter::new(file, &first);
        let votes: Vec<Record> = (0..40)
            .map(|i| Record::Vote {
                group: i,
                vote: Bytes::from(vec![i as u8; 300 * i as usize]),
            })
            .collect();
        for (i, rec) in votes.iter().enumerate() {
            w.append(&frame(7, rec));
            if i % 3 == 0 {
                w.flush().unwrap();
            }
        }
        w.flush().unwrap();
        let back = read_records(7, &fs::read(&path).unwrap()).unwrap();
        assert_eq!(back.len(), 41);
        for (i, rec) in back[1..].iter().enumerate() {
            let Record::Vote { group, vote } = rec else {
                panic!("frame {i} is not a vote");
            };
            assert_eq!((*group, vote.len()), (i as u32, 300 * i));
        }
    }

    #[tokio::test]
    async fn a_torn_tail_is_dropped_and_what_follows_it_never_read() {
        let dir = tempfile::tempdir().unwrap();
        {
            let j = LogJournal::open(dir.path()).unwrap();
            j.append(1, entries(1, 1..=3, "a")).await.unwrap();
            j.append(1, entries(1, 4..=4, "a")).await.unwrap();
        }
        // Tear the last frame: flip its last byte.
        let newest = |d: &Path| {
            let mut segs: Vec<_> = fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.to_string_lossy().contains("seg-"))
                .collect();
            segs.sort();
            segs
        };
        let segs = newest(dir.path());
        let path = segs.last().unwrap();
        let mut data = fs::read(path).unwrap();
        let end = data.iter().rposition(|&b| b != 0).unwrap();
        data[end] ^= 0xff;
        fs::write(path, &data).unwrap();
        {
            let j = LogJournal::open(dir.path()).unwrap();
            assert_eq!(all(&j, 1), expect(1, &[(1..=3, "a")]));
            j.append(1, entries(1, 4..=4, "b")).await.unwrap();
        }
        let j = LogJournal::open(dir.path()).unwrap();
        assert_eq!(all(&j, 1), expect(1, &[(1..=3, "a"), (4..=4, "b")]));
    }

    #[tokio::test]
    async fn a_new_journal_gets_a_zero_filled_spare_and_starts_its_next_segment_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
        j.join_zeroing();
        let spare = fs::read(dir.path().join(SPARE)).unwrap();
        assert_eq!(spare.len(), 64 << 10);
        assert!(spare.iter().all(|&b| b == 0));
        // Fill the first segment: the second one takes the spare, and another is written.
        let pad = "y".repeat(1000);
        for i in 1..=80 {
            j.append(1, entries(1, i..=i, &pad)).await.unwrap();
        }
        assert_eq!(j.segment_files(), 2);
        j.join_zeroing();
        assert!(dir.path().join(SPARE).exists());
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
        drop(j);
        let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
        assert_eq!(all(&j, 1), expect(1, &[(1..=80, &pad)]));
    }

    #[tokio::test]
    async fn a_damaged_frame_in_an_older_segment_is_an_error_not_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let pad = "z".repeat(600);
        {
            let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
            for i in 1..=20 {
                j.append(1, entries(1, i..=i, &pad)).await.unwrap();
            }
            assert!(j.segment_files() >= 3);
        }
        // Damage the first entry frame of the first segment (after its checkpoint).
        let first = dir.path().join(segment_name(1));
        let mut data = fs::read(&first).unwrap();
        let cp_len = u32::from_le_bytes(data[8..12].try_into().unwrap()) as usize;
        data[HEADER + cp_len + HEADER + 5] ^= 0xff;
        fs::write(&first, &data).unwrap();
        match LogJournal::open_with(dir.path(), 4096, Durability::Disk) {
            Err(StoreError::Corrupt(msg)) => assert!(msg.contains("group 1"), "{msg}"),
            Err(e) => panic!("expected a corrupt-log error, got {e}"),
            Ok(j) => panic!("opened with entries {:?}", j.entries(1, 0, None).len()),
        }
    }

    #[tokio::test]
    async fn purged_segments_go_and_their_files_are_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pad = "x".repeat(600);
        {
            let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
            j.save_vote(1, Bytes::from_static(b"early-vote"))
                .await
                .unwrap();
            // Group 3 writes once and never purges: its entry is copied forward at a purge,
            // and its old segment can go too.
            j.append(3, entries(3, 1..=1, "idle")).await.unwrap();
            for i in 1..=40 {
                j.append(1, entries(1, i..=i, &pad)).await.unwrap();
                j.append(2, entries(2, i..=i, &pad)).await.unwrap();
            }
            let before = j.segment_files();
            assert!(before > 10, "{before} segments");
            j.purge(1, 35, Bytes::from_static(b"p1")).await.unwrap();
            j.purge(2, 35, Bytes::from_static(b"p2")).await.unwrap();
            let after = j.segment_files();
            assert!(after < before / 2, "{before} -> {after} segments");
            assert!(dir.path().join(SPARE).exists());
        }
        let check = |j: &LogJournal| {
            assert_eq!(j.vote(1).as_deref(), Some(&b"early-vote"[..]));
            assert_eq!(j.purged(1).as_deref(), Some(&b"p1"[..]));
            assert_eq!(j.purged(2).as_deref(), Some(&b"p2"[..]));
            assert_eq!(all(j, 3), expect(3, &[(1..=1, "idle")]));
        };
        {
            let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
            check(&j);
            assert_eq!(all(&j, 1), expect(1, &[(36..=40, &pad)]));
            // The next segment takes the spare file; its old frames must not come back.
            for i in 41..=50 {
                j.append(1, entries(1, i..=i, "new")).await.unwrap();
            }
        }
        let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
        check(&j);
        assert_eq!(all(&j, 1), expect(1, &[(36..=40, &pad), (41..=50, "new")]));
        assert_eq!(all(&j, 2), expect(2, &[(36..=40, &pad)]));
    }
}
