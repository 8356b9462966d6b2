//! Memory per cached dentry, as ARCHITECTURE.md defines it: allocator growth divided by the
//! number of dentries, for 1M directories with 9-byte names (FalconFS's figure: under 100
//! bytes, index, locks and epochs included). Allocation sizes are deterministic, so this is a
//! measurement that can be asserted, not a timing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use saker_namespace::{Dentry, DentryReplica};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn a_cached_dentry_costs_under_100_bytes_at_1m_directories() {
    const N: u64 = 1_000_000;
    // Names made before measuring, so only the replica's own allocations count.
    let names: Vec<String> = (0..1000).map(|i| format!("dir{i:06}")).collect();
    assert!(names.iter().all(|n| n.len() == 9));
    let before = LIVE.load(Ordering::Relaxed);
    let mut r = DentryReplica::new();
    let epoch = r.epoch();
    for i in 0..N {
        let d = Dentry {
            id: 1_000_000 + i,
            mode: 0o755,
            uid: 0,
            gid: 0,
        };
        // 1,000 parents with 1,000 subdirectories each.
        assert!(r.insert_at(epoch, 2 + i / 1000, &names[(i % 1000) as usize], d));
    }
    let grown = LIVE.load(Ordering::Relaxed) - before;
    let per = grown as f64 / N as f64;
    println!("replica: {N} dentries, {grown} bytes, {per:.1} bytes per dentry");
    assert_eq!(r.len() as u64, N);
    assert_eq!(
        r.get(2 + 999, "dir000123").map(|d| d.id),
        Some(1_000_000 + 999_123)
    );
    assert!(per <= 100.0, "{per:.1} bytes per cached dentry");
}
