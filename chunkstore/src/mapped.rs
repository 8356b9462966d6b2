//! Reads of chunk file ranges already in the page cache through a read-only shared mapping.
//!
//! The returned [`Bytes`] *are* the page cache's pages, so the kernel's copy out of the page
//! cache into a buffer of ours (`copy_page_to_iter`), and the zeroing of that buffer, go away:
//! the checksum pass and the socket send read the pages where they are.
//!
//! A mapping is used only when every page of the range is resident (`mincore`) and mapped in
//! (`MADV_POPULATE_READ`, which reports a failed read as an error), so touching it does not
//! read the disk: a disk error surfaces through `pread`, as an error, where through a mapping
//! it would be `SIGBUS`. (Left: memory pressure that unmaps a page while its response is being
//! sent, a few milliseconds, and then a disk error reading it back.) Chunk files are never cut or rewritten once written
//! (ids are never reused, `put` creates the file with `create_new`, and a reader checks the
//! file's length against its header first), so a mapped page does not vanish under a reader; a
//! deleted file's pages live until the last mapping goes.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

use bytes::Bytes;

/// A read-only shared mapping of part of a file, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes from the mapping's (page-aligned) start to the range asked for.
    skip: usize,
}

// SAFETY: the mapping is read-only memory owned by this value; reading it from any thread is
// sound.
unsafe impl Send for Mapping {}
// SAFETY: as above, nothing writes through it.
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `[ptr, ptr + len)` is mapped readable for the life of `self`.
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr().add(self.skip), self.len - self.skip)
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `map_resident` with this address and length, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| {
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    })
}

/// `len` bytes of `file` from `offset`, as the page cache's own pages, if every page of them
/// is in the page cache now; `None` otherwise (the caller reads them with `pread`, which also
/// brings them into the cache for the next read; also when no mapping can be had). The range
/// must lie within the file.
pub(crate) fn read_resident(file: &File, offset: u64, len: usize) -> Option<Bytes> {
    if len == 0 {
        return None;
    }
    let page = page_size();
    let skip = (offset % page as u64) as usize;
    let map_len = skip + len;
    let at = libc::off_t::try_from(offset - skip as u64).ok()?;
    // SAFETY: a fresh read-only shared mapping of an open file; the kernel picks the address.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            at,
        )
    };
    // No mapping to be had (the process's map count at `vm.max_map_count` under very many
    // reads at once, say): `pread` serves the read as before.
    if ptr == libc::MAP_FAILED {
        return None;
    }
    let mapping = Mapping {
        ptr: NonNull::new(ptr.cast()).expect("mmap does not return null on success"),
        len: map_len,
        skip,
    };
    let pages = map_len.div_ceil(page);
    let mut resident = vec![0u8; pages];
    // SAFETY: `resident` has one byte per page of the mapping.
    if unsafe { libc::mincore(ptr, map_len, resident.as_mut_ptr()) } != 0
        || resident.iter().any(|b| b & 1 == 0)
    {
        return None;
    }
    // Map the pages in one call instead of a fault per few of them. A page the kernel let go
    // since `mincore` is read again here, where a disk error is an error return, not SIGBUS:
    // then the caller reads with `pread`. A kernel without this advice (before 5.14) says
    // EINVAL, and the pages are mapped as they are touched.
    // SAFETY: advice on our own mapping.
    if unsafe { libc::madvise(ptr, map_len, libc::MADV_POPULATE_READ) } != 0
        && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
    {
        return None;
    }
    Some(Bytes::from_owner(mapping))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_cached_range_reads_back_exactly_from_any_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..3 * 4096 + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let file = File::open(&path).unwrap();
        // Just written through the page cache, so resident.
        for (off, len) in [
            (0, data.len()),
            (5, 4096),
            (4095, 2),
            (8000, data.len() - 8000),
        ] {
            let got = read_resident(&file, off as u64, len)
                .expect("the file's pages are in the page cache");
            assert_eq!(&got[..], &data[off..off + len], "offset {off} length {len}");
        }
        assert!(read_resident(&file, 0, 0).is_none());
    }

    #[test]
    fn a_range_not_in_the_page_cache_is_not_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data = vec![9u8; 64 * 4096];
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
        // Written back, so the pages may leave the cache: ask the kernel to drop them.
        // SAFETY: advice on our own descriptor.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0);
        let file = File::open(&path).unwrap();
        let mut resident = 0;
        for _ in 0..3 {
            if read_resident(&file, 0, data.len()).is_some() {
                resident += 1;
            }
        }
        assert_eq!(resident, 0, "dropped pages were mapped as if cached");
    }
}
