//! How a segment is written: the active segment's tail in memory, flushed in whole blocks by
//! one synchronous write ([`SegmentWriter`]); starting a segment (in the spare's file when
//! there is one) with its checkpoint; zero-filling spares; and poisoning the journal after a
//! failed write or sync.

use super::*;

/// The segment being written (its bytes go through the [`SegmentWriter`]).
pub(super) struct Active {
    pub(super) seg: Segment,
    pub(super) pos: u64,
    pub(super) len: u64,
}

/// The active segment's end that may not be durable yet.
pub(super) struct Tail {
    pub(super) file: Arc<File>,
    /// File offset of `bytes[0]`, a multiple of [`BLOCK`].
    pub(super) start: u64,
    /// The segment's bytes from `start` to its end.
    pub(super) bytes: Vec<u8>,
    /// The segment is durable up to here.
    pub(super) durable: u64,
}

/// Writes the active segment: frames go to the tail in memory, a flush writes the tail's
/// blocks with one synchronous write (segment files are opened `O_DSYNC`).
pub(super) struct SegmentWriter {
    /// Held by each flush: a roll's and the sync thread's must not interleave (a late, shorter
    /// write of the same block would undo a longer one).
    pub(super) io: Mutex<()>,
    pub(super) tail: Mutex<Tail>,
    /// Appended since the last sync to disk ([`Durability::Process`]).
    pub(super) unsynced: AtomicBool,
    /// Syncs to disk so far ([`Self::to_disk_locked`]).
    pub(super) disk_syncs: AtomicU64,
}

impl SegmentWriter {
    /// Writes to `file`, a new segment whose first frame, `first`, is durable.
    pub(super) fn new(file: Arc<File>, first: &[u8]) -> Self {
        Self {
            io: Mutex::new(()),
            tail: Mutex::new(Tail::after(file, first)),
            unsynced: AtomicBool::new(false),
            disk_syncs: AtomicU64::new(0),
        }
    }

    pub(super) fn append(&self, bytes: &[u8]) {
        self.tail.lock().bytes.extend_from_slice(bytes);
        self.unsynced.store(true, Ordering::Release);
    }

    /// Writes what was appended and makes the active segment durable on disk (with `io` held
    /// by the caller). For segments opened without `O_DSYNC`.
    pub(super) fn to_disk_locked(&self) -> std::io::Result<()> {
        self.unsynced.store(false, Ordering::Release);
        self.flush_locked()?;
        let file = self.tail.lock().file.clone();
        file.sync_data()?;
        self.disk_syncs.fetch_add(1, Ordering::Relaxed);
        crate::metrics::JOURNAL_DISK_SYNCS.inc();
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub(super) fn flush(&self) -> std::io::Result<()> {
        let _io = self.io.lock();
        self.flush_locked()
    }

    /// [`Self::flush`] with `io` held by the caller.
    pub(super) fn flush_locked(&self) -> std::io::Result<()> {
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
    pub(super) fn switch(&self, file: Arc<File>, first: &[u8]) {
        *self.tail.lock() = Tail::after(file, first);
    }
}

impl Tail {
    /// The tail of a segment that holds `first` from offset 0, durably.
    pub(super) fn after(file: Arc<File>, first: &[u8]) -> Self {
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
pub(super) struct Blocks {
    pub(super) buf: Vec<u8>,
    pub(super) at: usize,
    pub(super) len: usize,
}

impl Blocks {
    pub(super) fn of(bytes: &[u8]) -> Self {
        let len = bytes.len().div_ceil(BLOCK) * BLOCK;
        let mut buf = vec![0u8; len + BLOCK];
        let at = (BLOCK - buf.as_ptr() as usize % BLOCK) % BLOCK;
        buf[at..at + bytes.len()].copy_from_slice(bytes);
        Self { buf, at, len }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.buf[self.at..self.at + self.len]
    }
}

/// Writes `tmp`, a zero-filled file of `size` bytes, and makes it the spare of the journal
/// whose state is `state`, if that journal is still open and has no spare by then.
pub(super) fn zero_spare(tmp: &Path, size: u64, state: &Weak<Mutex<State>>) {
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
pub(super) fn start_segment(
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
pub(super) fn open_segment(path: &Path, synchronous: bool) -> std::io::Result<File> {
    if !synchronous {
        return open_flags(path, 0);
    }
    match open_flags(path, libc::O_DSYNC | libc::O_DIRECT) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open_flags(path, libc::O_DSYNC),
        opened => opened,
    }
}

/// Opens `path` for reading and writing with `flags`.
pub(super) fn open_flags(path: &Path, flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(flags)
        .open(path)
}

/// Marks the journal as refusing writes from now on (and says so in `/metrics`).
pub(super) fn poison(poisoned: &AtomicBool) {
    poisoned.store(true, Ordering::Release);
    crate::metrics::JOURNAL_POISONED.set(1);
}

/// `result` of a write or sync of the journal, or the poisoned error once one failed: after a
/// failed write what the file holds is unknown (and the kernel may answer a later sync with
/// success), so no sync succeeds after it.
pub(super) fn poisoning(
    poisoned: &AtomicBool,
    result: std::io::Result<()>,
) -> Result<(), StoreError> {
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
pub(super) fn sync_writer_to_disk(
    w: &SegmentWriter,
    poisoned: &AtomicBool,
) -> Result<(), StoreError> {
    if poisoned.load(Ordering::Acquire) {
        return Err(poisoned_error());
    }
    let _io = w.io.lock();
    poisoning(poisoned, w.to_disk_locked())
}
