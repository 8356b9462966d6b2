//! Directory reads through a real mount of a directory larger than a page of every MNode
//! group (the listing is streamed a page per group at a time): every entry once, with entries
//! created during the read appearing at most once, and `seekdir` back to a `telldir` position
//! going on from the same entry. Needs /dev/fuse and root (as CI has); fails loudly without.

mod common;

use std::collections::BTreeSet;
use std::ffi::{CStr, CString};
use std::path::Path;

use common::fuse::*;
use common::*;

/// Files in the directory: more than a 1,000-entry page of each of the 2 groups.
const FILES: usize = 2_400;
const SUBDIRS: usize = 10;

/// A directory stream of libc's, closed when dropped.
struct Dir(*mut libc::DIR);

impl Dir {
    fn open(path: &Path) -> Dir {
        let c = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        let d = unsafe { libc::opendir(c.as_ptr()) };
        assert!(!d.is_null(), "opendir {}", path.display());
        Dir(d)
    }

    /// The next name (`.` and `..` skipped), or None at the end.
    fn next(&mut self) -> Option<String> {
        loop {
            // SAFETY: an open stream; the entry is read before the next call.
            let e = unsafe { libc::readdir(self.0) };
            if e.is_null() {
                return None;
            }
            // SAFETY: d_name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            if name != "." && name != ".." {
                return Some(name);
            }
        }
    }

    fn tell(&mut self) -> libc::c_long {
        // SAFETY: an open stream.
        unsafe { libc::telldir(self.0) }
    }

    fn seek(&mut self, pos: libc::c_long) {
        // SAFETY: an open stream and a position telldir gave.
        unsafe { libc::seekdir(self.0, pos) }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: opened by opendir, closed once.
        unsafe { libc::closedir(self.0) };
    }
}

#[test]
fn a_directory_larger_than_a_page_per_group_lists_every_entry_once() {
    let m = Mounted::start(Opts::default().arg("--mnodes", "2"));
    let b = m.bucket("listing");
    let dir = b.join("d");
    std::fs::create_dir(&dir).unwrap();
    let mut want: BTreeSet<String> = (0..FILES).map(|i| format!("f{i:05}")).collect();
    // Made through S3, 32 at once (quicker than creates through the mount).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s3 = m.srv.client();
    rt.block_on(async {
        use futures::StreamExt;
        futures::stream::iter(want.iter())
            .map(|name| {
                let s3 = s3.clone();
                async move { put(&s3, "listing", &format!("d/{name}"), b"").await }
            })
            .buffer_unordered(32)
            .collect::<Vec<_>>()
            .await;
    });
    for i in 0..SUBDIRS {
        let name = format!("f{i:05}.d");
        std::fs::create_dir(dir.join(&name)).unwrap();
        want.insert(name);
    }

    // std's read_dir (readdir through getdents, several kernel reads).
    let listed: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let set: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(listed.len(), set.len(), "an entry was listed twice");
    assert_eq!(set, want);

    // Entries created halfway through a read appear at most once, and none is lost.
    let mut d = Dir::open(&dir);
    let mut seen = Vec::new();
    for _ in 0..FILES / 2 {
        seen.push(d.next().unwrap());
    }
    for i in 0..100 {
        std::fs::write(dir.join(format!("new{i:03}")), b"").unwrap();
    }
    while let Some(n) = d.next() {
        seen.push(n);
    }
    let set: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), set.len(), "an entry was listed twice");
    assert!(
        set.is_superset(&want),
        "missing: {:?}",
        want.difference(&set)
    );
    assert!(set.iter().all(|n| want.contains(n) || n.starts_with("new")));

    // telldir/seekdir: back to a position, the read goes on from the same entry, even when
    // the position is before where the last read of the kernel stopped.
    let mut d = Dir::open(&dir);
    for _ in 0..1_321 {
        d.next().unwrap();
    }
    let pos = d.tell();
    let after: Vec<String> = (0..5).map(|_| d.next().unwrap()).collect();
    for _ in 0..700 {
        d.next().unwrap();
    }
    d.seek(pos);
    let again: Vec<String> = (0..5).map(|_| d.next().unwrap()).collect();
    assert_eq!(again, after);
    let mut rest = 5;
    while d.next().is_some() {
        rest += 1;
    }
    assert_eq!(1_321 + rest, want.len() + 100);
}
