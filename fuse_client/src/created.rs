//! open(O_CREAT) as MKNOD then OPEN, with the sync between them.
//!
//! The kernel holds the directory's lock for the whole FUSE CREATE, so creates in one directory
//! run one at a time, each with its sync inside (a 16-thread copy into one directory made ~1
//! create per sync). A mount run as root answers CREATE with ENOSYS; the kernel then creates
//! with MKNOD under the lock and opens with OPEN after letting it go, both within the caller's
//! open(2). The MKNOD of an open(2) asks the MNode to answer as soon as the create is
//! evaluated (`Create { defer: true }`); the OPEN waits until the create is durable
//! (`Committed`). open(2) still returns only once its file is durable, and the next create in
//! the directory no longer waits for this one's sync.
//!
//! Answering before the sync pays only when creates queue on the directory's lock; otherwise
//! it costs CPU. So a MKNOD is answered early only when it follows another thread's create in
//! its directory by less than [`QUEUED_WITHIN`] ([`RecentCreates`]); otherwise it is answered
//! durable, and its OPEN has nothing to wait for.
//!
//! Which syscall a MKNOD serves is read from `/proc/TID/syscall` of the requesting thread
//! (root may read it for any process), only where it matters: the read waits until the thread
//! is off its CPU, ~20% of a 16-thread create's server CPU if done for every create. It is read
//! before answering early (a MKNOD of mknod(2) is always answered durable), for a mode that
//! denies the owner reading or writing (open(2)'s own OPEN still opens the new file), and when
//! the name turns out taken (an open(2) without O_EXCL then opens the other client's file).
//! A syscall that cannot be read is taken for an open(2).
//!
//! A create that was not probed (the common one: owner may read and write, nobody queued) is
//! remembered for [`FRESH_FOR`]: an OPEN of it by the same thread within that time opens the
//! new, empty file without asking the MNode again. That is open(2)'s own OPEN, or an open(2)
//! right after a mknod(2) by the same owner, which the MNode would let open it too (the mode
//! gives the owner read and write); what it skips is a re-read of an inode made microseconds
//! before, well inside the attribute TTL. Every other OPEN is checked by the MNode as usual.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use saker_rpc::{Attr, ClientTag, MetaError, MetaRequest};
use tokio::sync::OnceCell;

/// What the thread behind a MKNOD is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syscall {
    /// open(2), openat(2), openat2(2) or creat(2), with its flags when they could be read.
    Open { flags: Option<i32> },
    /// Something else: mknod(2), or an io_uring worker.
    Other,
    /// `/proc/TID/syscall` could not be read.
    Unknown,
}

/// The syscall thread `tid` is blocked in.
pub fn syscall_of(tid: u32) -> Syscall {
    use std::io::Read;
    // One open and one read: the line is ~100 bytes.
    let mut buf = [0u8; 256];
    let read =
        std::fs::File::open(format!("/proc/{tid}/syscall")).and_then(|mut f| f.read(&mut buf));
    match read {
        Ok(n) => parse_syscall(std::str::from_utf8(&buf[..n]).unwrap_or_default()),
        Err(_) => Syscall::Unknown,
    }
}

/// Parses `/proc/TID/syscall`: the number in decimal, then the arguments in hex.
pub fn parse_syscall(line: &str) -> Syscall {
    let mut fields = line.split_whitespace();
    let Some(Ok(nr)) = fields.next().map(str::parse::<i64>) else {
        return Syscall::Unknown;
    };
    let args: Vec<u64> = fields
        .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap_or(0))
        .collect();
    let arg = |i: usize| args.get(i).map(|&v| v as i32);
    match nr {
        libc::SYS_openat => Syscall::Open { flags: arg(2) },
        libc::SYS_openat2 => Syscall::Open { flags: None },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => Syscall::Open { flags: arg(1) },
        #[cfg(target_arch = "x86_64")]
        libc::SYS_creat => Syscall::Open {
            flags: Some(libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC),
        },
        _ => Syscall::Other,
    }
}

/// How soon after another thread's create in a directory the next one there counts as
/// queued behind it.
pub const QUEUED_WITHIN: Duration = Duration::from_millis(1);

/// How long an unprobed create's record lets its creator's OPEN skip the MNode.
pub const FRESH_FOR: Duration = Duration::from_millis(2);

/// When each directory last had a create answered, and for which thread, to tell which
/// creates queue on its lock.
#[derive(Default)]
pub struct RecentCreates {
    last: HashMap<u64, (Instant, u32)>,
}

impl RecentCreates {
    /// Whether a create by thread `tid` in `dir` now follows another thread's there by less
    /// than [`QUEUED_WITHIN`]: threads are queueing on the directory's lock, and answering
    /// before the sync lets the next one in. One thread's back-to-back creates (a `tar x`, a
    /// `cp -r`) do not count: nobody waits behind them.
    pub fn queued(&self, dir: u64, tid: u32, now: Instant) -> bool {
        self.last
            .get(&dir)
            .is_some_and(|&(t, by)| by != tid && now.saturating_duration_since(t) < QUEUED_WITHIN)
    }

    /// A create by thread `tid` in `dir` was answered at `now`.
    pub fn answered(&mut self, dir: u64, tid: u32, now: Instant) {
        if self.last.len() >= 4096 {
            self.last
                .retain(|_, (t, _)| now.saturating_duration_since(*t) < QUEUED_WITHIN);
            if self.last.len() >= 4096 {
                self.last.clear();
            }
        }
        self.last.insert(dir, (now, tid));
    }
}

/// A create answered before it was durable: where to ask for its outcome, and how to ask
/// again should the group's leader have changed since (its tickets live in its memory).
#[derive(Clone)]
pub struct Ticket {
    pub group: u32,
    pub ticket: u64,
    /// The create as sent, not deferred, and the tag it was sent under.
    pub path: Vec<String>,
    pub tag: ClientTag,
    pub create: MetaRequest,
}

/// A file a MKNOD made (or found), until its creator's OPEN: a probed open(2)'s until that
/// OPEN, an unprobed create's for [`FRESH_FOR`] at most.
#[derive(Clone)]
pub struct Created {
    /// The thread in open(2): its OPEN of this inode opens what it created, unchecked.
    pub tid: u32,
    /// The create's ticket while it may not be durable yet.
    pub ticket: Option<Ticket>,
    /// The answer to `Committed { ticket }`, asked once whoever waits first.
    pub settled: Arc<OnceCell<Result<(), MetaError>>>,
    /// open(2) asked for O_TRUNC (applied if the file existed).
    pub trunc: bool,
    /// The file existed already (an open(2) without O_EXCL racing another client's create):
    /// its OPEN is checked like any other.
    pub existing: bool,
    pub attr: Attr,
    /// Set for a create whose syscall was not read: the record serves only its creator's
    /// OPEN, and only until then ([`FRESH_FOR`]).
    pub fresh_until: Option<Instant>,
}

impl Created {
    pub fn new(tid: u32, attr: Attr, ticket: Option<Ticket>, trunc: bool, existing: bool) -> Self {
        Self {
            tid,
            ticket,
            settled: Arc::default(),
            trunc,
            existing,
            attr,
            fresh_until: None,
        }
    }

    /// The record of an unprobed create, good for its creator's OPEN until [`FRESH_FOR`]
    /// from `now`.
    pub fn fresh(tid: u32, attr: Attr, now: Instant) -> Self {
        Self {
            fresh_until: Some(now + FRESH_FOR),
            ..Self::new(tid, attr, None, false, false)
        }
    }

    /// Whether the record is past its use at `now` (an unprobed create's, after
    /// [`FRESH_FOR`]).
    pub fn stale(&self, now: Instant) -> bool {
        self.fresh_until.is_some_and(|t| now > t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_family_is_told_from_mknod() {
        let openat = format!(
            "{} 0xffffff9c 0x7ffd5a1c 0x{:x} 0x1a4 0x0 0x0 0x7ffd5a00 0x7f00aa",
            libc::SYS_openat,
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY
        );
        assert_eq!(
            parse_syscall(&openat),
            Syscall::Open {
                flags: Some(libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY)
            }
        );
        let mknodat = format!("{} 0xffffff9c 0x7ffd 0x81a4 0x0", libc::SYS_mknodat);
        assert_eq!(parse_syscall(&mknodat), Syscall::Other);
        assert_eq!(parse_syscall("running"), Syscall::Unknown);
        assert_eq!(parse_syscall(""), Syscall::Unknown);
    }

    #[test]
    fn a_create_soon_after_another_threads_in_its_directory_is_queued() {
        let mut recent = RecentCreates::default();
        let t0 = Instant::now();
        assert!(!recent.queued(7, 1, t0), "nothing answered in 7 yet");
        recent.answered(7, 1, t0);
        let soon = t0 + QUEUED_WITHIN / 2;
        assert!(recent.queued(7, 2, soon));
        assert!(
            !recent.queued(7, 1, soon),
            "the same thread waits behind nobody"
        );
        assert!(!recent.queued(8, 2, soon), "another directory");
        assert!(!recent.queued(7, 2, t0 + QUEUED_WITHIN * 2), "long after");
        // The table stays bounded.
        for d in 0..5000 {
            recent.answered(100 + d, 1, t0 + QUEUED_WITHIN * 3);
        }
        assert!(recent.last.len() <= 4096, "{}", recent.last.len());
    }

    #[test]
    fn an_unprobed_create_serves_only_for_a_moment() {
        let attr = Attr {
            id: 9,
            kind: saker_rpc::FileKind::File,
            mode: 0o644,
            uid: 1000,
            gid: 1000,
            nlink: 1,
            size: 0,
            atime_ns: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            etag: String::new(),
            implicit: false,
            children: 0,
            layout: saker_rpc::Layout::Inline,
            parts: Vec::new(),
            s3_mtime_ns: 0,
            sealed: false,
        };
        let t0 = Instant::now();
        let fresh = Created::fresh(3, attr.clone(), t0);
        assert!(!fresh.stale(t0 + FRESH_FOR / 2));
        assert!(fresh.stale(t0 + FRESH_FOR * 2));
        assert!(fresh.ticket.is_none() && !fresh.existing && !fresh.trunc);
        let probed = Created::new(3, attr, None, false, false);
        assert!(
            !probed.stale(t0 + FRESH_FOR * 1000),
            "a probed create waits for its OPEN"
        );
    }

    #[test]
    fn a_thread_blocked_in_open_is_seen_in_proc() {
        let dir = std::env::temp_dir().join(format!("saker-created-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening a FIFO for reading blocks until a writer comes.
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        let reader = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            std::fs::File::open(&path).map(|_| ())
        });
        let tid = rx.recv().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let seen = loop {
            match syscall_of(tid) {
                Syscall::Open { flags } => break flags,
                other => {
                    assert!(std::time::Instant::now() < deadline, "last seen: {other:?}");
                    std::thread::yield_now();
                }
            }
        };
        let flags = seen.expect("openat's flags");
        assert_eq!(flags & libc::O_ACCMODE, libc::O_RDONLY);
        assert_eq!(flags & libc::O_CREAT, 0);
        // A writer lets the reader go.
        drop(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap());
        reader.join().unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
