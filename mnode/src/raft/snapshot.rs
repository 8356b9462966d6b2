//! Snapshot files: a group's state-machine tables as one ordered stream of key/value frames.
//!
//! A snapshot is written page by page from the store's ordered scan into an unnamed file (made
//! in the snapshot directory and unlinked at once), so neither side ever holds the keyspace in
//! memory; openraft sends it in chunks and the receiver writes the chunks into another unnamed
//! file. Installing reads that file twice: once to check it is whole (its trailer's CRC32C
//! covers every frame), then to replace the group's tables in bounded batches.
//!
//! Layout: `MAGIC`, then frames `[klen u32 LE][key][vlen u32 LE][value]`, then `END` as a
//! klen and the CRC32C of the frames.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::keys::{Keys, SM_TABLES};
use crate::store::{delete_range, Kv, MetaStore, StoreError, WriteBatch};

const MAGIC: &[u8; 8] = b"SKSNAP1\n";
const END: u32 = u32::MAX;
/// Keys per scan page while writing or clearing.
const PAGE: usize = 1024;
/// Bytes of puts per store batch while installing.
const BATCH_BYTES: usize = 4 << 20;
/// Most bytes reserved for a frame before its bytes are read.
const PREALLOCATE: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot file: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("snapshot is damaged or incomplete: {0}")]
    Damaged(String),
}

/// An unnamed read-write file in `dir` (gone when closed).
pub fn unnamed_file(dir: &Path, what: &str) -> io::Result<File> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!(
        ".{what}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// Calls `f` with every (key, value) of the group's state-machine tables, in key order, a page
/// at a time.
pub fn for_each_pair(
    store: &dyn MetaStore,
    keys: Keys,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), SnapshotError>,
) -> Result<(), SnapshotError> {
    for tag in SM_TABLES {
        let end = keys.table_end(tag);
        let mut start = keys.table(tag);
        loop {
            let page = store.scan(&start, Some(&end), PAGE)?;
            for (k, v) in &page {
                f(k, v)?;
            }
            match page.last() {
                Some((k, _)) if page.len() == PAGE => {
                    start = k.clone();
                    start.push(0);
                }
                _ => break,
            }
        }
    }
    Ok(())
}

/// Deletes the group's state-machine tables, a page at a time.
fn clear_tables(store: &dyn MetaStore, keys: Keys) -> Result<(), SnapshotError> {
    for tag in SM_TABLES {
        delete_range(store, &keys.table(tag), Some(&keys.table_end(tag)), false)?;
    }
    Ok(())
}

/// `crc` extended over one (key, value) pair as a snapshot frames it (each part's length, then
/// its bytes).
pub fn crc_pair(crc: u32, key: &[u8], value: &[u8]) -> u32 {
    [key, value].iter().fold(crc, |crc, part| {
        let crc = crc32c::crc32c_append(crc, &(part.len() as u32).to_le_bytes());
        crc32c::crc32c_append(crc, part)
    })
}

/// Writes the group's state-machine tables into `file` (from its start) and rewinds it.
pub fn write(store: &dyn MetaStore, keys: Keys, file: &mut File) -> Result<u64, SnapshotError> {
    let pairs = {
        let mut out = Writer::new(BufWriter::with_capacity(1 << 20, &mut *file))?;
        for_each_pair(store, keys, |k, v| out.pair(k, v))?;
        out.finish()?
    };
    file.seek(SeekFrom::Start(0))?;
    Ok(pairs)
}

/// Writes the frames of a snapshot.
pub(crate) struct Writer<W: Write> {
    out: W,
    crc: u32,
    pairs: u64,
}

impl<W: Write> Writer<W> {
    pub(crate) fn new(mut out: W) -> Result<Self, SnapshotError> {
        out.write_all(MAGIC)?;
        Ok(Self {
            out,
            crc: 0,
            pairs: 0,
        })
    }

    pub(crate) fn pair(&mut self, key: &[u8], value: &[u8]) -> Result<(), SnapshotError> {
        self.crc = crc_pair(self.crc, key, value);
        for part in [key, value] {
            self.out.write_all(&(part.len() as u32).to_le_bytes())?;
            self.out.write_all(part)?;
        }
        self.pairs += 1;
        Ok(())
    }

    /// Writes the trailer and flushes; returns the number of pairs.
    pub(crate) fn finish(mut self) -> Result<u64, SnapshotError> {
        self.out.write_all(&END.to_le_bytes())?;
        self.out.write_all(&self.crc.to_le_bytes())?;
        self.out.flush()?;
        Ok(self.pairs)
    }
}

/// Reads the frames of a snapshot file, checking the trailer at the end.
struct Frames<R> {
    input: R,
    crc: u32,
    done: bool,
}

impl<R: Read> Frames<R> {
    fn new(mut input: R) -> Result<Self, SnapshotError> {
        let mut magic = [0u8; 8];
        input
            .read_exact(&mut magic)
            .map_err(|e| SnapshotError::Damaged(format!("no header: {e}")))?;
        if &magic != MAGIC {
            return Err(SnapshotError::Damaged("not a saker snapshot".into()));
        }
        Ok(Self {
            input,
            crc: 0,
            done: false,
        })
    }

    fn u32(&mut self) -> Result<u32, SnapshotError> {
        let mut b = [0u8; 4];
        self.input
            .read_exact(&mut b)
            .map_err(|e| SnapshotError::Damaged(format!("cut short: {e}")))?;
        Ok(u32::from_le_bytes(b))
    }

    fn part(&mut self, len: u32) -> Result<Vec<u8>, SnapshotError> {
        if len > 1 << 30 {
            return Err(SnapshotError::Damaged(format!("frame of {len} bytes")));
        }
        // The buffer grows with what is read, not with what the length claims: a damaged
        // length is an error at the end of the file, not a 1 GiB allocation.
        let mut buf = Vec::with_capacity((len as usize).min(PREALLOCATE));
        let read = (&mut self.input)
            .take(u64::from(len))
            .read_to_end(&mut buf)
            .map_err(|e| SnapshotError::Damaged(format!("cut short: {e}")))?;
        if read != len as usize {
            return Err(SnapshotError::Damaged(format!(
                "cut short: {read} of a {len} byte frame"
            )));
        }
        self.crc = crc32c::crc32c_append(self.crc, &len.to_le_bytes());
        self.crc = crc32c::crc32c_append(self.crc, &buf);
        Ok(buf)
    }

    /// The next pair, or `None` after a whole file's trailer.
    fn next_pair(&mut self) -> Result<Option<Kv>, SnapshotError> {
        if self.done {
            return Ok(None);
        }
        let klen = self.u32()?;
        if klen == END {
            let crc = self.u32()?;
            if crc != self.crc {
                return Err(SnapshotError::Damaged("checksum mismatch".into()));
            }
            self.done = true;
            return Ok(None);
        }
        let k = self.part(klen)?;
        let vlen = self.u32()?;
        let v = self.part(vlen)?;
        Ok(Some((k, v)))
    }
}

/// Checks that `input` is a whole snapshot (every frame, the trailer and its checksum);
/// returns the number of pairs.
pub fn check(input: impl Read) -> Result<u64, SnapshotError> {
    let mut frames = Frames::new(input)?;
    let mut pairs = 0;
    while frames.next_pair()?.is_some() {
        pairs += 1;
    }
    Ok(pairs)
}

/// Reads the snapshot in `bytes` as `install` does; panics unless a snapshot that checks
/// whole is one whose pairs, written again, give the same bytes up to its trailer's end.
/// Returns whether it was whole.
#[cfg(feature = "fuzzing")]
pub fn fuzz_check(bytes: &[u8]) -> bool {
    if check(bytes).is_err() {
        return false;
    }
    let mut frames = Frames::new(bytes).expect("checked");
    let mut written = Vec::new();
    let mut again = Writer::new(&mut written).expect("writes to memory");
    while let Some((k, v)) = frames.next_pair().expect("checked") {
        again.pair(&k, &v).expect("writes to memory");
    }
    again.finish().expect("writes to memory");
    assert!(
        bytes.starts_with(&written),
        "a whole snapshot, written again, differs"
    );
    true
}

/// The snapshot file of `pairs`, for the seed corpus.
#[cfg(feature = "fuzzing")]
pub fn fuzz_file(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out).expect("writes to memory");
    for (k, v) in pairs {
        w.pair(k, v).expect("writes to memory");
    }
    w.finish().expect("writes to memory");
    out
}

/// Replaces the group's state-machine tables with the snapshot in `file`: checked whole first
/// (nothing is changed for a damaged file), then the old tables are cleared and the new pairs
/// written in bounded batches. `keep` is given every pair and may hold some back (the caller
/// writes its own state record last). Not atomic: a crash in between leaves a mixed state,
/// which the state record written last tells apart (it still names the older state).
pub fn install(
    store: &dyn MetaStore,
    keys: Keys,
    file: &mut File,
    mut keep: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<u64, SnapshotError> {
    file.seek(SeekFrom::Start(0))?;
    check(BufReader::with_capacity(1 << 20, &mut *file))?;

    clear_tables(store, keys)?;

    file.seek(SeekFrom::Start(0))?;
    let mut frames = Frames::new(BufReader::with_capacity(1 << 20, &mut *file))?;
    let mut batch = WriteBatch::default();
    let mut bytes = 0;
    let mut pairs = 0u64;
    while let Some((k, v)) = frames.next_pair()? {
        pairs += 1;
        if !keep(&k, &v) {
            continue;
        }
        bytes += k.len() + v.len();
        batch.put(k, v);
        if bytes >= BATCH_BYTES {
            store.write(&std::mem::take(&mut batch), false)?;
            bytes = 0;
        }
    }
    store.write(&batch, false)?;
    Ok(pairs)
}

/// Installs backup `file` (written by [`write`]) as group `keys.group`'s state in `store`: its
/// tables as backed up, without their raft history (no applied entry, no membership), so the
/// group is created afresh around them. Refused unless `store` holds no state of the group.
pub fn restore(store: &dyn MetaStore, keys: Keys, file: &mut File) -> Result<u64, SnapshotError> {
    use crate::keys::{HOLDS, SM_META};
    use crate::records::{decode, encode, SmMeta};
    let existing = SmMeta::load(store, keys)?;
    if existing.last_applied.is_some() || existing.id_high_water != 0 {
        return Err(SnapshotError::Damaged(format!(
            "group {} has state here already: restore into an empty data directory",
            keys.group
        )));
    }
    let meta_key = keys.single(SM_META);
    // The coordinator's holds and fence stay behind: the restored cluster's coordinator
    // terms begin again.
    let holds = keys.table(HOLDS);
    let mut high_water = 0;
    let mut bad_meta = None;
    let pairs = install(store, keys, file, |k, v| {
        if k.starts_with(&holds) {
            return false;
        }
        if k != meta_key.as_slice() {
            return true;
        }
        match decode::<SmMeta>(v) {
            Ok(m) => high_water = m.id_high_water,
            Err(e) => bad_meta = Some(e.to_string()),
        }
        false
    })?;
    if let Some(e) = bad_meta {
        return Err(SnapshotError::Damaged(format!("state record: {e}")));
    }
    let fresh = SmMeta {
        id_high_water: high_water,
        ..SmMeta::default()
    };
    let mut batch = WriteBatch::default();
    batch.put(meta_key, encode(&fresh));
    store.write(&batch, true)?;
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::keys::{INODE, SM_META};
    use crate::store::MemStore;

    fn filled(group: u32, n: usize) -> Arc<dyn MetaStore> {
        let store: Arc<dyn MetaStore> = Arc::new(MemStore::default());
        let keys = Keys::new(group);
        let mut b = WriteBatch::default();
        for i in 0..n {
            let mut k = keys.table(INODE);
            k.extend_from_slice(format!("name-{i:06}").as_bytes());
            b.put(k, vec![i as u8; 100]);
        }
        b.put(keys.single(SM_META), b"meta".to_vec());
        store.write(&b, true).unwrap();
        store
    }

    fn dump(store: &dyn MetaStore, keys: Keys) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut all = vec![];
        for_each_pair(store, keys, |k, v| {
            all.push((k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        all
    }

    #[test]
    fn a_snapshot_replaces_the_receivers_tables_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let keys = Keys::new(3);
        // More pairs than a page, so paging is exercised on both sides.
        let source = filled(3, 2 * PAGE + 17);
        let mut file = unnamed_file(dir.path(), "snap").unwrap();
        assert_eq!(
            write(source.as_ref(), keys, &mut file).unwrap(),
            2 * PAGE as u64 + 18
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "unnamed");

        // The receiver has other pairs of the group (to be dropped) and another group's.
        let target = filled(3, 5);
        let mut stale = keys.table(INODE);
        stale.extend_from_slice(b"zzz-stale");
        let other = filled(4, 3);
        let mut b = WriteBatch::default();
        b.put(stale.clone(), b"x".to_vec());
        for (k, v) in dump(other.as_ref(), Keys::new(4)) {
            b.put(k, v);
        }
        target.write(&b, true).unwrap();

        let meta = keys.single(SM_META);
        let n = install(target.as_ref(), keys, &mut file, |k, _| k != meta).unwrap();
        assert_eq!(n, 2 * PAGE as u64 + 18);
        let mut want = dump(source.as_ref(), keys);
        want.retain(|(k, _)| *k != meta);
        assert_eq!(dump(target.as_ref(), keys), want);
        assert_eq!(
            dump(target.as_ref(), Keys::new(4)).len(),
            4,
            "group 4 untouched"
        );
    }

    #[test]
    fn a_cut_or_damaged_snapshot_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let keys = Keys::new(1);
        let source = filled(1, 50);
        let mut file = unnamed_file(dir.path(), "snap").unwrap();
        write(source.as_ref(), keys, &mut file).unwrap();
        let mut whole = vec![];
        file.read_to_end(&mut whole).unwrap();

        let target = filled(1, 3);
        let before = dump(target.as_ref(), keys);
        let mut flipped = whole.clone();
        flipped[40] ^= 1;
        for bad in [whole[..whole.len() / 2].to_vec(), flipped] {
            let mut f = unnamed_file(dir.path(), "snap").unwrap();
            f.write_all(&bad).unwrap();
            let err = install(target.as_ref(), keys, &mut f, |_, _| true).unwrap_err();
            assert!(matches!(err, SnapshotError::Damaged(_)), "{err}");
            assert_eq!(dump(target.as_ref(), keys), before);
        }
    }
}
