//! Chunk file I/O past the page cache (`O_DIRECT`).
//!
//! Writes: the image (header, data, checksum trailer) is copied once into an aligned buffer and
//! written past the page cache, then the file is cut to its length and synced as before. A
//! buffered write costs the kernel's page-cache copy, which took about 40% of the server's CPU
//! in a 16 MiB PUT run here (`copy_folio_from_iter_atomic`), far more than one user-space copy
//! into a warm buffer.
//!
//! Reads of large ranges: the disk fills an aligned buffer from a pool, which becomes the
//! returned [`Bytes`] without a copy and goes back to the pool when the last slice of it is
//! dropped. A buffered read costs the kernel's copy out of the page cache, which was half of
//! the server's CPU in a 1 GiB GET run here (`copy_page_to_iter`).
//!
//! A file system without `O_DIRECT` (tmpfs) refuses the open with `EINVAL`: the caller then
//! reads or writes the file the buffered way.

use std::alloc::Layout;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use bytes::Bytes;
use parking_lot::Mutex;

/// Offsets, lengths and buffer addresses of direct I/O are multiples of this.
const ALIGN: usize = 4096;

/// A zero-initialised buffer of `len` bytes aligned to [`ALIGN`].
struct Aligned {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for Aligned {}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len, ALIGN).expect("valid layout");
        // SAFETY: `len` is non-zero (callers round up to ALIGN).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Aligned { ptr, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` initialised bytes this value owns.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, ALIGN).expect("valid layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

/// Buffers kept for reuse: warm, already faulted in.
struct Pool {
    buffers: Mutex<Vec<Aligned>>,
    /// How many it keeps.
    keep: usize,
    /// The largest buffer it keeps (larger ones are freed).
    keep_len: usize,
}

impl Pool {
    /// A buffer of at least `len` bytes (a multiple of [`ALIGN`]).
    fn take(&self, len: usize) -> Aligned {
        let taken = {
            let mut pool = self.buffers.lock();
            let at = pool.iter().position(|b| b.len >= len);
            at.map(|i| pool.swap_remove(i))
        };
        taken.unwrap_or_else(|| Aligned::new(len))
    }

    fn give(&self, buf: Aligned) {
        if buf.len > self.keep_len {
            return;
        }
        let mut pool = self.buffers.lock();
        if pool.len() < self.keep {
            pool.push(buf);
        }
    }
}

/// `len` rounded up to a whole number of [`ALIGN`] blocks (at least one).
fn aligned_len(len: usize) -> usize {
    len.div_ceil(ALIGN).max(1) * ALIGN
}

/// Write buffers, each at least a chunk image.
static WRITES: Pool = Pool {
    buffers: Mutex::new(Vec::new()),
    keep: 8,
    keep_len: usize::MAX,
};
/// Read buffers, each at least a read piece (about 1 MiB): enough for every piece in flight
/// with 16 concurrent large GETs. A whole-chunk read (the scrub's) takes a buffer too large
/// to keep: 48 of those would hold 400 MiB.
static READS: Pool = Pool {
    buffers: Mutex::new(Vec::new()),
    keep: 48,
    keep_len: 2 << 20,
};

/// Writes `parts`, one after the other, from offset 0 of `file` (opened with `O_DIRECT`),
/// and cuts the file to their total length. Does not sync.
pub(crate) fn write_parts(file: &File, parts: &[&[u8]]) -> io::Result<()> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let padded = aligned_len(total);
    let mut buf = WRITES.take(padded);
    let bytes = &mut buf.as_mut()[..padded];
    let mut at = 0;
    for p in parts {
        bytes[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    bytes[total..].fill(0);
    let written = file
        .write_all_at(bytes, 0)
        .and_then(|()| file.set_len(total as u64));
    WRITES.give(buf);
    written
}

/// A read buffer that goes back to its pool when dropped.
struct Pooled(Option<Aligned>, usize);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        let buf = self.0.as_ref().expect("taken only on drop");
        // SAFETY: `ptr` points to `buf.len` initialised bytes, and `self.1 <= buf.len`.
        unsafe { std::slice::from_raw_parts(buf.ptr.as_ptr(), self.1) }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(buf) = self.0.take() {
            READS.give(buf);
        }
    }
}

/// Reads `[pos, pos + len)` of `file` (opened with `O_DIRECT`) as one aligned read.
/// A range past the end of the file is `UnexpectedEof`.
pub(crate) fn read_at(file: &File, pos: u64, len: usize) -> io::Result<Bytes> {
    let start = pos - pos % ALIGN as u64;
    let skip = (pos - start) as usize;
    let want = skip + len;
    let padded = aligned_len(want);
    let mut buf = READS.take(padded);
    let bytes = &mut buf.as_mut()[..padded];
    let mut got = 0;
    // Short reads happen at the end of the file (its last block is partial) and on signals.
    let filled = loop {
        if got >= want {
            break Ok(());
        }
        match file.read_at(&mut bytes[got..], start + got as u64) {
            Ok(0) => break Err(io::ErrorKind::UnexpectedEof.into()),
            // Only whole blocks may follow: a short read ends the file or went partway.
            Ok(n) if (got + n) % ALIGN != 0 && got + n < want => {
                break Err(io::ErrorKind::UnexpectedEof.into())
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    match filled {
        Ok(()) => Ok(Bytes::from_owner(Pooled(Some(buf), want)).slice(skip..)),
        Err(e) => {
            READS.give(buf);
            Err(e)
        }
    }
}

/// Creates `path` (it must not exist) for writing with `O_DIRECT`.
pub(crate) fn create(path: &std::path::Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_land_whole_and_the_file_has_their_exact_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = match create(&path) {
            Ok(f) => f,
            // A file system without direct I/O (tmpfs under TMPDIR): nothing to test here.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) => panic!("{e}"),
        };
        let a = vec![1u8; 24];
        let b: Vec<u8> = (0..(3 * ALIGN + 5)).map(|i| i as u8).collect();
        let c = vec![9u8; 13];
        write_parts(&file, &[&a, &b, &c]).unwrap();
        let back = std::fs::read(&path).unwrap();
        assert_eq!(back, [a, b, c].concat());
        // A reused buffer holds no bytes of an earlier, longer image.
        write_parts(&file, &[&[5u8; 7]]).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), vec![5u8; 7]);
    }

    #[test]
    fn reads_return_exactly_the_range_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..(5 * ALIGN + 77))
            .map(|i| (i * 7 + i / 300) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            match std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
                Err(e) => panic!("{e}"),
            }
        };
        for (pos, len) in [
            (0, 24),
            (24, 3 * ALIGN),
            (ALIGN - 1, 2),
            (4 * ALIGN + 5, ALIGN + 72),
        ] {
            let got = read_at(&file, pos as u64, len).unwrap();
            assert_eq!(&got[..], &data[pos..pos + len], "{pos}+{len}");
        }
        // Buffers come back from the pool with other bytes in them: still exact.
        let again = read_at(&file, 10, 4 * ALIGN).unwrap();
        assert_eq!(&again[..], &data[10..10 + 4 * ALIGN]);
        let past = read_at(&file, (5 * ALIGN) as u64, 78).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::UnexpectedEof);
    }
}
