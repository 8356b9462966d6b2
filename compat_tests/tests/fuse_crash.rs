//! Durability through the mount: SIGKILL of `saker server --mount` while threads create,
//! write, fsync, close, unlink and rename files loses none of the calls that returned. Every
//! path keeps the states it may be in (acknowledged state, or either side of the call the kill
//! cut); after a restart on the same data directory, each path must be in one of them, listings
//! hold nothing else, and S3 reads acknowledged files back with ETag = MD5. The same with
//! `--durability process` (acknowledged once written to the kernel), where fsync(2) through the
//! mount syncs every MNode group and the chunks to disk.

mod common;

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::io::IntoRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::fuse::*;
use common::*;

/// Sizes of the files written: inline (up to 16 KiB) and chunked.
const SIZES: [usize; 5] = [100, 3_000, 20_000, 150_000, 1];
const WRITERS: usize = 6;

/// A file's content (its MD5) or its absence.
type State = Option<String>;

#[derive(Default)]
struct Ledger {
    /// Path (relative to the bucket) -> the states it may be found in after the kill.
    may_be: HashMap<String, Vec<State>>,
    /// Calls that returned.
    acked: usize,
    /// Calls the kill cut (they failed after it).
    cut: usize,
    /// Failures before the kill.
    errors: Vec<String>,
}

impl Ledger {
    fn state(&self, path: &str) -> Vec<State> {
        self.may_be.get(path).cloned().unwrap_or_else(|| vec![None])
    }
}

/// Runs one call: while it runs `path` may be in its old states or `new`; once it returns,
/// only `new`. `Err` means the writer stops (after the kill) or the test fails (before).
struct Writer {
    ledger: Arc<Mutex<Ledger>>,
    killed: Arc<AtomicBool>,
    /// Told of every close that returned (the kill follows one at once).
    closed: mpsc::Sender<()>,
}

impl Writer {
    fn call<T>(
        &self,
        changes: &[(&str, State)],
        what: &str,
        f: impl FnOnce() -> std::io::Result<T>,
    ) -> Result<T, ()> {
        {
            let mut l = self.ledger.lock().unwrap();
            for (path, new) in changes {
                let mut states = l.state(path);
                if !states.contains(new) {
                    states.push(new.clone());
                }
                l.may_be.insert(path.to_string(), states);
            }
        }
        let result = f();
        let mut l = self.ledger.lock().unwrap();
        match result {
            Ok(v) => {
                for (path, new) in changes {
                    l.may_be.insert(path.to_string(), vec![new.clone()]);
                }
                l.acked += 1;
                Ok(v)
            }
            Err(e) if self.killed.load(Ordering::SeqCst) => {
                l.cut += 1;
                drop(e);
                Err(())
            }
            Err(e) => {
                l.errors.push(format!("{what}: {e}"));
                Err(())
            }
        }
    }
}

/// close(2) with its result (dropping a `File` ignores it, and close is where the mount
/// commits).
fn close(f: std::fs::File) -> std::io::Result<()> {
    let fd = f.into_raw_fd();
    if unsafe { libc::close(fd) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn md5_of(data: &[u8]) -> State {
    Some(md5_hex(data))
}

/// One writer: files in its own directory and in a shared one, some written in two parts
/// with an fsync between, some unlinked or renamed after they are complete.
fn writer(i: usize, bucket: PathBuf, w: Writer) {
    let mut done: Vec<String> = Vec::new();
    for k in 0.. {
        let dir = if k % 2 == 0 {
            format!("t{i}")
        } else {
            "shared".to_string()
        };
        let rel = format!("{dir}/f{i}_{k}");
        let path = bucket.join(&rel);
        let data = random_bytes(SIZES[k % SIZES.len()]);
        let Ok(mut f) = w.call(&[(&rel, md5_of(b""))], "create", || {
            OpenOptions::new().write(true).create_new(true).open(&path)
        }) else {
            return;
        };
        let mut written: &[u8] = b"";
        if k % 4 == 1 {
            let half = data.len() / 2;
            let first = &data[..half];
            if w.call(&[(&rel, md5_of(first))], "write+fsync", || {
                f.write_all(first)?;
                f.sync_all()
            })
            .is_err()
            {
                return;
            }
            written = first;
        }
        if w.call(&[(&rel, md5_of(&data))], "write+close", || {
            f.write_all(&data[written.len()..])?;
            close(f)
        })
        .is_err()
        {
            return;
        }
        let _ = w.closed.send(());
        done.push(rel.clone());
        if k % 3 == 2 {
            let victim = done.remove(0);
            let p = bucket.join(&victim);
            if w.call(&[(&victim, None)], "unlink", || std::fs::remove_file(&p))
                .is_err()
            {
                return;
            }
        }
        if k % 5 == 4 {
            let Some(from) = done.pop() else { continue };
            let to = format!("{dir}/r{i}_{k}");
            let (pf, pt) = (bucket.join(&from), bucket.join(&to));
            let content = w.ledger.lock().unwrap().state(&from)[0].clone();
            if w.call(&[(&from, None), (&to, content)], "rename", || {
                std::fs::rename(&pf, &pt)
            })
            .is_err()
            {
                return;
            }
            done.push(to);
        }
    }
}

fn read_state(path: &Path) -> Result<State, String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(md5_of(&bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[test]
fn acknowledged_calls_on_the_mount_survive_sigkill() {
    calls_survive_sigkill(Opts::default());
}

#[test]
fn acknowledged_calls_on_the_mount_survive_sigkill_with_process_durability() {
    calls_survive_sigkill(Opts::default().arg("--durability", "process"));
}

fn calls_survive_sigkill(opts: Opts) {
    let mut m = Mounted::start(opts);
    let bucket = m.bucket("fcrash");
    std::fs::create_dir(bucket.join("shared")).unwrap();
    for i in 0..WRITERS {
        std::fs::create_dir(bucket.join(format!("t{i}"))).unwrap();
    }

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let killed = Arc::new(AtomicBool::new(false));
    let running = Arc::new(AtomicUsize::new(WRITERS));
    let (closed, close_acks) = mpsc::channel();
    let threads: Vec<_> = (0..WRITERS)
        .map(|i| {
            let w = Writer {
                ledger: ledger.clone(),
                killed: killed.clone(),
                closed: closed.clone(),
            };
            let (b, running) = (bucket.clone(), running.clone());
            std::thread::spawn(move || {
                writer(i, b, w);
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();

    // Load until enough calls returned, then kill with calls in flight, right after a close
    // returned: whatever that close acknowledged must already be durable, not on its way.
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    loop {
        {
            let l = ledger.lock().unwrap();
            assert!(l.errors.is_empty(), "errors under load: {:?}", l.errors);
            if start.elapsed() >= Duration::from_secs(1) && l.acked >= 300 {
                break;
            }
        }
        assert_eq!(
            running.load(Ordering::SeqCst),
            WRITERS,
            "a writer stopped before the kill: {:?}",
            ledger.lock().unwrap().errors
        );
        assert!(Instant::now() < deadline, "the load did not get going");
        std::thread::sleep(Duration::from_millis(5));
    }
    while close_acks.try_recv().is_ok() {}
    close_acks.recv().expect("writers are running");
    killed.store(true, Ordering::SeqCst);
    m.srv.kill();
    for t in threads {
        t.join().expect("writer thread");
    }
    let ledger = Arc::try_unwrap(ledger)
        .ok()
        .expect("writers are done")
        .into_inner()
        .unwrap();
    assert!(ledger.errors.is_empty(), "{:?}", ledger.errors);
    assert_eq!(ledger.cut, WRITERS, "every writer was cut by the kill");
    eprintln!(
        "fuse crash: {} calls returned, {} cut, {} paths",
        ledger.acked,
        ledger.cut,
        ledger.may_be.len()
    );

    m.remount_after_kill();

    let mut acked_files = Vec::new();
    for (rel, may_be) in &ledger.may_be {
        let found = read_state(&bucket.join(rel)).unwrap();
        assert!(
            may_be.contains(&found),
            "{rel}: found {found:?} after the restart, may be only {may_be:?}"
        );
        if let [Some(md5)] = may_be.as_slice() {
            acked_files.push((rel.clone(), md5.clone()));
        }
    }
    // Listings hold exactly the files that may exist.
    for dir in std::fs::read_dir(&bucket).unwrap() {
        let dir = dir.unwrap();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let rel = format!(
                "{}/{}",
                dir.file_name().to_str().unwrap(),
                e.unwrap().file_name().to_str().unwrap()
            );
            let may_be = ledger.may_be.get(&rel);
            assert!(
                may_be.is_some_and(|s| s.iter().any(Option::is_some)),
                "{rel} is listed but was never (or no longer may be) there: {may_be:?}"
            );
        }
    }
    // S3 sees the acknowledged files, with ETag = MD5 of the bytes.
    assert!(
        acked_files.len() >= 50,
        "only {} files acknowledged",
        acked_files.len()
    );
    acked_files.sort();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s3 = m.srv.client();
    for (rel, md5) in acked_files.iter().step_by(acked_files.len() / 20) {
        let got = rt
            .block_on(s3.get_object().bucket("fcrash").key(rel).send())
            .unwrap_or_else(|e| panic!("GET {rel}: {e:?}"));
        assert_eq!(got.e_tag(), Some(format!("\"{md5}\"").as_str()), "{rel}");
        let body = rt.block_on(got.body.collect()).unwrap().into_bytes();
        assert_eq!(&md5_hex(&body), md5, "{rel}");
    }
}

/// The value of the first sample of /metrics whose line starts with `prefix` (0 if none).
fn metric(m: &Mounted, prefix: &str) -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = format!("{}/metrics", m.srv.admin);
    let text = rt
        .block_on(async { reqwest::get(url).await?.text().await })
        .expect("GET /metrics");
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(0.0)
}

#[test]
fn with_process_durability_closes_do_not_sync_and_fsync_syncs_every_group() {
    let m = Mounted::start(Opts::default().arg("--durability", "process"));
    let bucket = m.bucket("psync");
    let syncs_asked = r#"saker_mnode_ops_total{op="sync_to_disk",outcome="ok"}"#;
    let volume_syncs = "saker_chunkstore_volume_syncs_total";
    let journal_syncs = "saker_mnode_journal_disk_syncs_total";

    // 100 files of one chunk each (above the 16 KiB inline threshold), closed, not fsynced:
    // no chunk volume sync per close, only the background one each second.
    let start = Instant::now();
    let volume_before = metric(&m, volume_syncs);
    for i in 0..100 {
        std::fs::write(bucket.join(format!("f{i}")), random_bytes(20_000)).unwrap();
    }
    let background = start.elapsed().as_secs_f64().ceil() + 1.0;
    let volume_after = metric(&m, volume_syncs);
    assert!(
        volume_after - volume_before <= background,
        "{} volume syncs for 100 closes in {:?}",
        volume_after - volume_before,
        start.elapsed()
    );

    // fsync(2) asks every group (4 by default) and the chunkstore to sync to disk.
    let (asked, journal) = (metric(&m, syncs_asked), metric(&m, journal_syncs));
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(bucket.join("synced"))
        .unwrap();
    (&f).write_all(&random_bytes(20_000)).unwrap();
    let volume = metric(&m, volume_syncs);
    f.sync_all().unwrap();
    assert!(
        metric(&m, syncs_asked) >= asked + 4.0,
        "every group was asked"
    );
    assert!(metric(&m, journal_syncs) > journal, "the journal synced");
    assert!(metric(&m, volume_syncs) > volume, "the chunks synced");
    close(f).unwrap();
    // fsync of a directory syncs too.
    let asked = metric(&m, syncs_asked);
    std::fs::File::open(&bucket).unwrap().sync_all().unwrap();
    assert!(
        metric(&m, syncs_asked) >= asked + 4.0,
        "fsyncdir asked every group"
    );
}

#[test]
fn with_disk_durability_every_close_syncs_and_the_journal_never_needs_to() {
    let m = Mounted::start(Opts::default());
    let bucket = m.bucket("dsync");
    let volume_before = metric(&m, "saker_chunkstore_volume_syncs_total");
    for i in 0..20 {
        std::fs::write(bucket.join(format!("f{i}")), random_bytes(20_000)).unwrap();
    }
    let f = std::fs::File::open(bucket.join("f0")).unwrap();
    f.sync_all().unwrap();
    assert!(metric(&m, "saker_chunkstore_volume_syncs_total") - volume_before >= 20.0);
    assert_eq!(metric(&m, "saker_mnode_journal_disk_syncs_total"), 0.0);
}

/// A create answered before its sync (threads creating in one directory) whose group's
/// leader changed before its OPEN asked `Committed`: the ticket is gone with the old leader
/// (the failpoint makes every ticket unknown), so the mount sends the create again under its
/// tag and the MNode answers its first result. Every open(2) succeeds on the file it made.
#[test]
fn creates_whose_ticket_was_lost_are_sent_again_under_their_tag() {
    let m = Mounted::start(Opts::default().env("SAKER_FAILPOINT", "lose_tickets"));
    let dir = m.bucket("tickets");
    const THREADS: usize = 8;
    const FILES: usize = 60;
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                for i in 0..FILES {
                    let p = dir.join(format!("t{t}-{i}"));
                    let mut f = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&p)
                        .unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
                    f.write_all(format!("{t}/{i}").as_bytes()).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a creating thread failed");
    }
    for t in 0..THREADS {
        for i in 0..FILES {
            let got = std::fs::read_to_string(dir.join(format!("t{t}-{i}"))).unwrap();
            assert_eq!(got, format!("{t}/{i}"));
        }
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let text = rt.block_on(metrics_text(&m.srv.admin));
    let resends: f64 = text
        .lines()
        .find(|l| l.starts_with("saker_fuse_create_resends_total "))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    assert!(resends > 0.0, "no create was answered early and sent again");
}
