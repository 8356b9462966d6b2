//! Where the chunk repair and scrub passes of this process are: the one running, or the last
//! one ([`REPAIR`], [`SCRUB`]), for `saker admin status` and `/metrics`. A pass counts the
//! referenced chunks it has looked at, the ones it found short of a good copy, the copies it
//! made and the bytes it moved (copied by a repair, read and checked by a scrub).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// One kind of pass.
pub struct Pass {
    running: AtomicBool,
    started_ms: AtomicU64,
    ended_ms: AtomicU64,
    total: AtomicU64,
    scanned: AtomicU64,
    found: AtomicU64,
    repaired: AtomicU64,
    bytes: AtomicU64,
}

/// The repair passes (every referenced chunk brought to all its replicas).
pub static REPAIR: Pass = Pass::new();
/// The scrub passes (every copy read whole and CRC-checked).
pub static SCRUB: Pass = Pass::new();
/// Counts no one shows (the passes over noted chunks, which are small and frequent).
pub(crate) static UNCOUNTED: Pass = Pass::new();

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Pass {
    const fn new() -> Self {
        Self {
            running: AtomicBool::new(false),
            started_ms: AtomicU64::new(0),
            ended_ms: AtomicU64::new(0),
            total: AtomicU64::new(0),
            scanned: AtomicU64::new(0),
            found: AtomicU64::new(0),
            repaired: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// A pass over `total` chunks begins; it ends when the guard is dropped.
    pub(crate) fn begin(&'static self, total: u64) -> Running {
        self.start(total);
        Running(self)
    }

    /// A pass over `total` chunks begins (the counts start again).
    fn start(&self, total: u64) {
        for c in [&self.scanned, &self.found, &self.repaired, &self.bytes] {
            c.store(0, Ordering::Relaxed);
        }
        self.total.store(total, Ordering::Relaxed);
        self.started_ms.store(now_ms(), Ordering::Relaxed);
        self.ended_ms.store(0, Ordering::Relaxed);
        self.running.store(true, Ordering::Release);
    }

    pub(crate) fn scanned(&self) {
        self.scanned.fetch_add(1, Ordering::Relaxed);
    }

    /// A chunk short of a good copy.
    pub(crate) fn found(&self) {
        self.found.fetch_add(1, Ordering::Relaxed);
    }

    /// A copy made.
    pub(crate) fn repaired(&self) {
        self.repaired.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn moved(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn end(&self) {
        self.ended_ms.store(now_ms(), Ordering::Relaxed);
        self.running.store(false, Ordering::Release);
    }

    /// The pass as it is now (`None`: none ran in this process).
    pub fn view(&self) -> Option<PassView> {
        let started = self.started_ms.load(Ordering::Relaxed);
        if started == 0 {
            return None;
        }
        let running = self.running.load(Ordering::Acquire);
        let ended = self.ended_ms.load(Ordering::Relaxed);
        let until = if running || ended == 0 {
            now_ms()
        } else {
            ended
        };
        let bytes = self.bytes.load(Ordering::Relaxed);
        let secs = (until.saturating_sub(started) as f64 / 1000.0).max(0.001);
        Some(PassView {
            running,
            started_unix_ms: started,
            seconds: secs,
            total: self.total.load(Ordering::Relaxed),
            scanned: self.scanned.load(Ordering::Relaxed),
            found: self.found.load(Ordering::Relaxed),
            repaired: self.repaired.load(Ordering::Relaxed),
            bytes,
            bytes_per_sec: bytes as f64 / secs,
        })
    }
}

/// A pass under way: ends it when dropped (however the pass returns).
pub(crate) struct Running(&'static Pass);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A pass's progress (see the module documentation).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PassView {
    pub running: bool,
    pub started_unix_ms: u64,
    /// Since it started (to its end, once it ended).
    pub seconds: f64,
    /// Referenced chunks it looks at, and has looked at so far.
    pub total: u64,
    pub scanned: u64,
    /// Chunks short of a good copy (missing or corrupt replicas).
    pub found: u64,
    /// Copies made.
    pub repaired: u64,
    /// Bytes copied (repair) or read and checked (scrub), and their rate.
    pub bytes: u64,
    pub bytes_per_sec: f64,
}

impl PassView {
    /// One line for `saker admin status`.
    pub fn render(&self, name: &str) -> String {
        let state = if self.running { "running" } else { "last" };
        format!(
            "chunk {name} ({state}): {}/{} chunks scanned, {} short, {} copies made, \
             {:.1} MiB in {:.1} s ({:.1} MiB/s)",
            self.scanned,
            self.total,
            self.found,
            self.repaired,
            self.bytes as f64 / (1 << 20) as f64,
            self.seconds,
            self.bytes_per_sec / (1 << 20) as f64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_counts_from_its_start() {
        let pass = Pass::new();
        assert_eq!(pass.view(), None);
        pass.start(3);
        pass.scanned();
        pass.found();
        pass.repaired();
        pass.moved(1 << 20);
        let v = pass.view().unwrap();
        assert!(v.running);
        assert_eq!((v.total, v.scanned, v.found, v.repaired), (3, 1, 1, 1));
        pass.end();
        let v = pass.view().unwrap();
        assert!(!v.running);
        assert!(v.bytes_per_sec > 0.0);
        assert!(v.render("repair").contains("1/3 chunks scanned"));
        pass.start(5);
        assert_eq!(
            pass.view().unwrap().scanned,
            0,
            "a new pass starts from zero"
        );
    }
}
