//! `saker bench fs`: file-system operations through plain `std::fs` calls on any directory (a
//! saker FUSE mount, another FUSE file system, a local disk), so the numbers compare file
//! systems rather than clients. Workers are OS threads sharing a work queue; every phase is
//! timed on its own, for each `--threads` count:
//!
//! - `create`: `--files` empty files (open O_CREAT|O_WRONLY, close) spread round-robin over
//!   `--dirs` directories, made first and untimed;
//! - `stat`: a stat of each of those files, in a shuffled order;
//! - `write`: `--files` new files of `--read-size` bytes each (create, write, close), next to
//!   the empty ones;
//! - `read`: each of those files opened fresh and read whole, in a shuffled order (a data
//!   loader's epoch over small samples);
//! - `readdir`: every directory listed (names collected); ops are entries (2 x `--files`), the
//!   latencies are per directory listing;
//! - `unlink`: every file of `create` and `write` removed, in a shuffled order (2 x `--files`
//!   ops);
//! - `copy`: a tree of `--copy-files` files of `--copy-file-size` bytes in `--copy-dirs`
//!   directories (made untimed) copied to a new tree: the directories listed and made, then
//!   every file read and written; ops are files, latencies per file copy;
//! - `rmtree`: both trees of `copy` removed as `rm -rf` does (each directory listed, its files
//!   unlinked, then the directory removed), the directories spread over the threads; ops are
//!   files, latencies per directory. It runs `copy` first, timed or not;
//! - `build` (only when asked for): a dataset's files written into many leaf directories in a
//!   random order ([`build`]).
//!
//! Caches: files are always opened fresh, but the kernel's page cache (which also serves FUSE
//! file systems that keep it) and its dentry and attribute caches would still answer `stat`,
//! `read` and `readdir` from memory. With `--drop-caches` (root) the bench runs `sync` and
//! writes 3 to `/proc/sys/vm/drop_caches` before each of those three phases, so they measure
//! the file system; without it they measure whatever the caches leave to it. The creates are
//! as durable as the file system makes a create (no fsync), unless `--fsync` asks for an fsync
//! of every file before its close (create, write and copy) and of the directory after each
//! unlink.
//!
//! With `--watch-pid PID` (the file system's server process, e.g. `saker server --mount`) each
//! phase also reports that process's CPU time and context switches per op, read from /proc
//! before and after the timed part: the cost of an op in the server, which moves less with the
//! machine's noise than ops/s does.
//!
//! Everything lives in `DIR/saker-bench-fs-<pid>`, removed at the end.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use crate::units::parse_size;
use timing::{par, Done, Timed, Usage, WATCHED};

const PHASES: [&str; 9] = [
    "create", "stat", "write", "read", "readdir", "unlink", "copy", "rmtree", "build",
];

#[derive(Args, Debug)]
pub struct FsBenchArgs {
    /// Directory to work in (must exist and be writable; the bench makes a subdirectory).
    #[arg(long)]
    dir: PathBuf,
    /// Thread counts; every phase runs once per count, on a fresh tree.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    threads: Vec<usize>,
    /// Empty files of `create` (and as many files of `write`).
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Directories the files are spread over.
    #[arg(long, default_value_t = 100)]
    dirs: usize,
    /// Size of each file of `write` and `read`.
    #[arg(long, default_value = "64KiB", value_parser = parse_size)]
    read_size: u64,
    /// Files in the tree `copy` copies.
    #[arg(long, default_value_t = 36_000)]
    copy_files: usize,
    /// Directories of that tree.
    #[arg(long, default_value_t = 36)]
    copy_dirs: usize,
    /// Size of each file of that tree.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    copy_file_size: u64,
    /// Files `build` writes (a dataset's samples).
    #[arg(long, default_value_t = 10_000)]
    build_files: usize,
    /// Leaf directories (a dataset's classes) they go into.
    #[arg(long, default_value_t = 1_000)]
    build_dirs: usize,
    /// Size of each of those files.
    #[arg(long, default_value = "16KiB", value_parser = parse_size)]
    build_size: u64,
    /// Phases to report, in the fixed order create, stat, write, read, readdir, unlink, copy,
    /// rmtree, build (the ones others need still run, untimed; `build` only when asked for).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "create,stat,write,read,readdir,unlink,copy,rmtree"
    )]
    phases: Vec<String>,
    /// Repetitions of everything; `results` holds the median of each (threads, phase).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Drop the kernel's caches (sync; echo 3 > /proc/sys/vm/drop_caches, needs root) before
    /// `stat`, `read`, `readdir`, `copy` and `rmtree`.
    #[arg(long)]
    drop_caches: bool,
    /// Before `stat`, `read`, `readdir`, `copy` and `rmtree`, run this shell command, which must restart
    /// the file system's serving processes and return once the mount answers again (their own
    /// caches cold too); then drop the kernel's caches if asked.
    #[arg(long, value_name = "CMD")]
    restart_cmd: Option<String>,
    /// fsync every file before closing it (create, write, copy), and the directory after an
    /// unlink: every acknowledged op durable, whatever the file system does on its own.
    #[arg(long)]
    fsync: bool,
    /// Seed of the shuffles.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A name for this run in the JSON (e.g. the file system under test).
    #[arg(long)]
    label: Option<String>,
    /// A process (the file system's server) whose CPU time and context switches per op each
    /// phase reports, from /proc.
    #[arg(long)]
    watch_pid: Option<u32>,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Serialize, Clone, Debug)]
struct PhaseResult {
    threads: usize,
    phase: String,
    ops: u64,
    errors: u64,
    secs: f64,
    ops_per_sec: f64,
    /// Data read or written per second (read, write, copy).
    #[serde(skip_serializing_if = "Option::is_none")]
    mib_per_sec: Option<f64>,
    p50_us: f64,
    p99_us: f64,
    /// With `--watch-pid`: what the watched process spent per op.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    watched: Option<Watched>,
}

/// What the `--watch-pid` process spent per op of a phase.
#[derive(Serialize, Clone, Copy, Debug)]
struct Watched {
    /// CPU time, microseconds (user + system).
    watched_cpu_us_per_op: f64,
    /// Context switches of its threads (voluntary and not).
    watched_switches_per_op: f64,
}

#[derive(Serialize)]
struct RunReport {
    run: usize,
    results: Vec<PhaseResult>,
}

#[derive(Serialize)]
struct Report<'a> {
    dir: String,
    label: Option<&'a str>,
    threads: &'a [usize],
    files: usize,
    dirs: usize,
    read_size: u64,
    copy_files: usize,
    copy_dirs: usize,
    copy_file_size: u64,
    drop_caches: bool,
    restarted: bool,
    fsync: bool,
    runs: Vec<RunReport>,
    /// Medians over the runs.
    results: Vec<PhaseResult>,
}

fn drop_caches() -> anyhow::Result<()> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    fs::write("/proc/sys/vm/drop_caches", "3")
        .context("cannot drop caches (writing /proc/sys/vm/drop_caches needs root)")
}

/// Makes `top` and `dirs` leaf directories in it (`<prefix>0000`, ...), and names `files`
/// files spread over them in turn (`<prefix>0000000`, ...), not yet written.
fn make_tree(
    top: &Path,
    dirs: usize,
    files: usize,
    (dir_prefix, file_prefix): (&str, &str),
) -> anyhow::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    fs::create_dir(top).with_context(|| format!("mkdir {}", top.display()))?;
    let dirs: Vec<PathBuf> = (0..dirs)
        .map(|d| top.join(format!("{dir_prefix}{d:04}")))
        .collect();
    for d in &dirs {
        fs::create_dir(d).with_context(|| format!("mkdir {}", d.display()))?;
    }
    let files = (0..files)
        .map(|i| dirs[i % dirs.len()].join(format!("{file_prefix}{i:07}")))
        .collect();
    Ok((dirs, files))
}

fn write_file(path: &Path, data: &[u8], fsync: bool) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    f.write_all(data)?;
    if fsync {
        f.sync_all()?;
    }
    Ok(())
}

/// Reads `path` whole into `buf` (reused); returns its length.
fn read_file(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<u64> {
    buf.clear();
    File::open(path)?.read_to_end(buf)?;
    Ok(buf.len() as u64)
}

fn check_len(path: &Path, got: u64, want: u64) -> std::io::Result<()> {
    if got == want {
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "{}: read {got} bytes, expected {want}",
        path.display()
    )))
}

thread_local! {
    static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

struct Bench<'a> {
    args: &'a FsBenchArgs,
    /// Filled with a repeating pattern; the data of `write` and of the copy tree.
    data: Vec<u8>,
}

impl Bench<'_> {
    fn wants(&self, phase: &str) -> bool {
        self.args.phases.iter().any(|p| p == phase)
    }

    /// Before a phase that reads: the serving processes restarted (`--restart-cmd`) and the
    /// kernel's caches dropped (`--drop-caches`), as asked.
    fn make_cold(&self) -> anyhow::Result<()> {
        if let Some(cmd) = &self.args.restart_cmd {
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .status()
                .with_context(|| format!("cannot run --restart-cmd {cmd:?}"))?;
            anyhow::ensure!(status.success(), "--restart-cmd {cmd:?}: {status}");
        }
        if self.args.drop_caches {
            drop_caches()?;
        }
        Ok(())
    }

    /// Every phase with `threads` threads in `root` (made here, removed at the end).
    fn run_threads(
        &self,
        threads: usize,
        root: &Path,
        rng: &mut StdRng,
    ) -> anyhow::Result<Vec<PhaseResult>> {
        let a = self.args;
        let mut out = Vec::new();
        let mut report = |phase: &str, t: Timed| {
            if !self.wants(phase) {
                return;
            }
            let r = t.result(threads, phase);
            println!(
                "  t={threads:<3} {phase:<8} {:>8} ops {:>8.2} s {:>10.0} ops/s  p50 {:>8.0} us  p99 {:>8.0} us{}{}{}",
                r.ops,
                r.secs,
                r.ops_per_sec,
                r.p50_us,
                r.p99_us,
                r.mib_per_sec
                    .map(|m| format!("  {m:.1} MiB/s"))
                    .unwrap_or_default(),
                r.watched
                    .map(|w| format!(
                        "  watched: {:.0} us CPU, {:.1} switches per op",
                        w.watched_cpu_us_per_op, w.watched_switches_per_op
                    ))
                    .unwrap_or_default(),
                if r.errors > 0 {
                    format!("  {} ERRORS", r.errors)
                } else {
                    String::new()
                }
            );
            out.push(r);
        };
        fs::create_dir(root).with_context(|| format!("mkdir {}", root.display()))?;

        // The directories (untimed), then the names.
        let dirs: Vec<PathBuf> = (0..a.dirs).map(|d| root.join(format!("d{d:04}"))).collect();
        for d in &dirs {
            fs::create_dir(d).with_context(|| format!("mkdir {}", d.display()))?;
        }
        let empty: Vec<PathBuf> = (0..a.files)
            .map(|i| dirs[i % a.dirs].join(format!("f{i:07}")))
            .collect();
        let full: Vec<PathBuf> = (0..a.files)
            .map(|i| dirs[i % a.dirs].join(format!("w{i:07}")))
            .collect();
        let fsync = a.fsync;

        let t = par(threads, "create", &empty, |p| {
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(p)?;
            if fsync {
                f.sync_all()?;
            }
            Ok(Done::one(0))
        });
        report("create", t);

        if self.wants("stat") {
            let mut order = empty.clone();
            order.shuffle(rng);
            self.make_cold()?;
            let t = par(threads, "stat", &order, |p| {
                fs::metadata(p)?;
                Ok(Done::one(0))
            });
            report("stat", t);
        }

        let data = &self.data[..a.read_size as usize];
        let t = par(threads, "write", &full, |p| {
            write_file(p, data, fsync)?;
            Ok(Done::one(data.len() as u64))
        });
        report("write", t);

        if self.wants("read") {
            let mut order = full.clone();
            order.shuffle(rng);
            self.make_cold()?;
            let want = a.read_size;
            let t = par(threads, "read", &order, |p| {
                let n = BUF.with(|b| read_file(p, &mut b.borrow_mut()))?;
                check_len(p, n, want)?;
                Ok(Done::one(n))
            });
            report("read", t);
        }

        if self.wants("readdir") {
            self.make_cold()?;
            let expect = (2 * a.files) as u64;
            let t = par(threads, "readdir", &dirs, |d| {
                let names = fs::read_dir(d)?
                    .map(|e| e.map(|e| e.file_name()))
                    .collect::<std::io::Result<Vec<_>>>()?;
                Ok(Done {
                    ops: names.len() as u64,
                    bytes: 0,
                })
            });
            if t.ops != expect {
                eprintln!("  readdir: listed {} entries, expected {expect}", t.ops);
            }
            report("readdir", t);
        }

        let mut order: Vec<PathBuf> = empty.into_iter().chain(full).collect();
        order.shuffle(rng);
        let t = par(threads, "unlink", &order, |p| {
            fs::remove_file(p)?;
            if fsync {
                // An unlink is durable once its directory is.
                File::open(p.parent().expect("a file in a directory"))?.sync_all()?;
            }
            Ok(Done::one(0))
        });
        report("unlink", t);
        for d in &dirs {
            fs::remove_dir(d).with_context(|| format!("rmdir {}", d.display()))?;
        }

        if self.wants("copy") || self.wants("rmtree") {
            let t = self.copy(threads, root)?;
            report("copy", t);
        }
        if self.wants("rmtree") {
            self.make_cold()?;
            let t = self.rmtree(threads, root)?;
            report("rmtree", t);
        }
        if self.wants("build") {
            let t = self.build(threads, root, rng)?;
            report("build", t);
        }
        fs::remove_dir_all(root).with_context(|| format!("rm -r {}", root.display()))?;
        Ok(out)
    }

    /// The copy phase: makes the source tree (untimed, with the most threads asked for), then
    /// copies it to a new tree (timed): the source directories listed and the new ones made in
    /// parallel over directories, then the files in parallel over files.
    fn copy(&self, threads: usize, root: &Path) -> anyhow::Result<Timed> {
        let a = self.args;
        let src = root.join("copy-src");
        let dst = root.join("copy-dst");
        let (src_dirs, files) = make_tree(&src, a.copy_dirs, a.copy_files, ("d", "f"))?;
        let data = &self.data[..a.copy_file_size as usize];
        let setup_threads = a.threads.iter().copied().max().unwrap_or(1);
        let made = par(setup_threads, "copy setup", &files, |p| {
            write_file(p, data, false)?;
            Ok(Done::one(0))
        });
        anyhow::ensure!(
            made.errors == 0,
            "copy: {} of the source files could not be written",
            made.errors
        );
        // The source tree's files and directories leave the caches.
        self.make_cold()?;

        let fsync = a.fsync;
        let usage = Usage::now();
        let start = Instant::now();
        fs::create_dir(&dst).with_context(|| format!("mkdir {}", dst.display()))?;
        let listed = Mutex::new(Vec::with_capacity(a.copy_files));
        let dirs_t = par(threads, "copy mkdir", &src_dirs, |d| {
            let to = dst.join(d.file_name().expect("a directory name"));
            fs::create_dir(&to)?;
            let mut mine = Vec::new();
            for e in fs::read_dir(d)? {
                let name = e?.file_name();
                mine.push((d.join(&name), to.join(&name)));
            }
            listed.lock().unwrap().extend(mine);
            Ok(Done::one(0))
        });
        let pairs = listed.into_inner().unwrap();
        let files_t = par(threads, "copy", &pairs, |(from, to)| {
            BUF.with(|b| {
                let mut buf = b.borrow_mut();
                let n = read_file(from, &mut buf)?;
                write_file(to, &buf, fsync)?;
                Ok(Done::one(2 * n))
            })
        });
        let secs = start.elapsed().as_secs_f64();
        if pairs.len() != a.copy_files {
            eprintln!(
                "  copy: listed {} files, expected {}",
                pairs.len(),
                a.copy_files
            );
        }
        Ok(Timed {
            ops: files_t.ops,
            errors: dirs_t.errors
                + files_t.errors
                + (a.copy_files - pairs.len().min(a.copy_files)) as u64,
            secs,
            bytes: files_t.bytes,
            lat_us: files_t.lat_us,
            usage: Usage::since(usage),
        })
    }

    /// The rmtree phase: `rm -rf` of both copy trees, their directories spread over `threads`.
    fn rmtree(&self, threads: usize, root: &Path) -> anyhow::Result<Timed> {
        let a = self.args;
        let trees = [root.join("copy-src"), root.join("copy-dst")];
        let dirs: Vec<PathBuf> = trees
            .iter()
            .flat_map(|t| (0..a.copy_dirs).map(move |d| t.join(format!("d{d:04}"))))
            .collect();
        let usage = Usage::now();
        let start = Instant::now();
        let t = par(threads, "rmtree", &dirs, |d| {
            let mut n = 0;
            for e in fs::read_dir(d)? {
                fs::remove_file(e?.path())?;
                n += 1;
            }
            fs::remove_dir(d)?;
            Ok(Done { ops: n, bytes: 0 })
        });
        let mut errors = t.errors;
        for tree in &trees {
            errors += u64::from(fs::remove_dir(tree).is_err());
        }
        let secs = start.elapsed().as_secs_f64();
        let expect = 2 * a.copy_files as u64;
        if t.ops != expect {
            eprintln!("  rmtree: removed {} files, expected {expect}", t.ops);
        }
        Ok(Timed {
            ops: t.ops,
            errors: errors + expect.saturating_sub(t.ops),
            secs,
            bytes: 0,
            lat_us: t.lat_us,
            usage: Usage::since(usage),
        })
    }
}

/// The median of each (threads, phase) over the runs (a field at a time).
fn medians(runs: &[RunReport]) -> Vec<PhaseResult> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    first
        .results
        .iter()
        .map(|r0| {
            let same: Vec<&PhaseResult> = runs
                .iter()
                .flat_map(|r| &r.results)
                .filter(|r| r.threads == r0.threads && r.phase == r0.phase)
                .collect();
            let f = |g: fn(&PhaseResult) -> f64| med(same.iter().map(|r| g(r)).collect());
            PhaseResult {
                threads: r0.threads,
                phase: r0.phase.clone(),
                ops: f(|r| r.ops as f64) as u64,
                errors: same.iter().map(|r| r.errors).sum(),
                secs: f(|r| r.secs),
                ops_per_sec: f(|r| r.ops_per_sec),
                mib_per_sec: r0.mib_per_sec.map(|_| f(|r| r.mib_per_sec.unwrap_or(0.0))),
                p50_us: f(|r| r.p50_us),
                p99_us: f(|r| r.p99_us),
                watched: r0.watched.map(|_| Watched {
                    watched_cpu_us_per_op: f(|r| {
                        r.watched.map_or(0.0, |w| w.watched_cpu_us_per_op)
                    }),
                    watched_switches_per_op: f(|r| {
                        r.watched.map_or(0.0, |w| w.watched_switches_per_op)
                    }),
                }),
            }
        })
        .collect()
}

fn validate(a: &FsBenchArgs) -> anyhow::Result<()> {
    for p in &a.phases {
        anyhow::ensure!(
            PHASES.contains(&p.as_str()),
            "unknown phase {p}; known: {PHASES:?}"
        );
    }
    anyhow::ensure!(
        !a.threads.is_empty() && a.threads.iter().all(|&t| t > 0),
        "--threads must be one or more counts > 0"
    );
    anyhow::ensure!(
        a.files > 0 && a.dirs > 0 && a.runs > 0,
        "--files, --dirs and --runs must be > 0"
    );
    anyhow::ensure!(
        a.copy_files > 0 && a.copy_dirs > 0,
        "--copy-files and --copy-dirs must be > 0"
    );
    anyhow::ensure!(
        a.read_size > 0 && a.read_size <= 1 << 30,
        "--read-size must be 1 B .. 1 GiB"
    );
    anyhow::ensure!(
        a.copy_file_size <= 1 << 30 && a.build_size <= 1 << 30,
        "--copy-file-size and --build-size must be at most 1 GiB"
    );
    anyhow::ensure!(
        a.build_files > 0 && a.build_dirs > 0,
        "--build-files and --build-dirs must be > 0"
    );
    let meta = fs::metadata(&a.dir)
        .with_context(|| format!("--dir {}: cannot stat it", a.dir.display()))?;
    anyhow::ensure!(
        meta.is_dir(),
        "--dir {} is not a directory",
        a.dir.display()
    );
    if a.drop_caches {
        OpenOptions::new()
            .write(true)
            .open("/proc/sys/vm/drop_caches")
            .context("--drop-caches: cannot open /proc/sys/vm/drop_caches for writing (root?)")?;
    }
    Ok(())
}

/// Removes the bench's directory when dropped (also on errors).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.0.exists() {
            if let Err(e) = fs::remove_dir_all(&self.0) {
                eprintln!("cannot remove {}: {e}", self.0.display());
            }
        }
    }
}

fn run_blocking(args: FsBenchArgs) -> anyhow::Result<()> {
    validate(&args)?;
    if let Some(pid) = args.watch_pid {
        let watched = *WATCHED.get_or_init(|| pid);
        anyhow::ensure!(
            watched == pid,
            "--watch-pid {pid}: this process already watches {watched}"
        );
        anyhow::ensure!(
            Usage::now().is_some(),
            "--watch-pid {pid}: cannot read /proc/{pid}/stat"
        );
    }
    let base = args
        .dir
        .join(format!("saker-bench-fs-{}", std::process::id()));
    fs::create_dir(&base).with_context(|| {
        format!(
            "--dir {}: cannot make {} in it (is it writable?)",
            args.dir.display(),
            base.display()
        )
    })?;
    let _cleanup = Cleanup(base.clone());
    let size = args.read_size.max(args.copy_file_size).max(args.build_size) as usize;
    let bench = Bench {
        args: &args,
        data: (0..size).map(|i| (i % 251) as u8).collect(),
    };
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let mut results = Vec::new();
        for &threads in &args.threads {
            println!(
                "run {run}/{}: {threads} threads in {}",
                args.runs,
                args.dir.display()
            );
            let root = base.join(format!("r{run}-t{threads}"));
            results.extend(bench.run_threads(threads, &root, &mut rng)?);
        }
        runs.push(RunReport { run, results });
    }
    let results = medians(&runs);
    if let Some(path) = &args.json {
        let report = Report {
            dir: args.dir.display().to_string(),
            label: args.label.as_deref(),
            threads: &args.threads,
            files: args.files,
            dirs: args.dirs,
            read_size: args.read_size,
            copy_files: args.copy_files,
            copy_dirs: args.copy_dirs,
            copy_file_size: args.copy_file_size,
            drop_caches: args.drop_caches,
            restarted: args.restart_cmd.is_some(),
            fsync: args.fsync,
            runs,
            results,
        };
        fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

pub async fn run(args: FsBenchArgs) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || run_blocking(args)).await?
}

mod build;
#[cfg(test)]
mod tests;
mod timing;
