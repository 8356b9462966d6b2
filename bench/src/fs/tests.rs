//! `saker bench fs` on a local directory: the JSON, the watched process's usage and the
//! restart command.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: FsBenchArgs,
}

/// Runs the bench with `args` (plus `--json` to a file of its own) and gives the results.
fn results_of(args: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let mut argv = vec!["fs"];
    argv.extend_from_slice(args);
    argv.extend(["--json", json.to_str().expect("utf-8")]);
    run_blocking(Cli::parse_from(argv).args).expect("bench runs");
    let report: serde_json::Value =
        serde_json::from_slice(&fs::read(&json).expect("json written")).expect("json");
    report["results"].as_array().expect("results").clone()
}

/// `--restart-cmd` runs before each reading phase asked for (and a failing one stops the
/// bench): here a command that counts its runs in a file.
#[test]
fn the_restart_command_runs_before_each_reading_phase() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    fs::create_dir(&work).expect("mkdir");
    let count = dir.path().join("restarts");
    let run = |cmd: &str| {
        let cli = Cli::parse_from([
            "fs",
            "--dir",
            work.to_str().expect("utf-8"),
            "--threads",
            "1",
            "--files",
            "20",
            "--dirs",
            "2",
            "--read-size",
            "4KiB",
            "--phases",
            "stat,read,readdir",
            "--restart-cmd",
            cmd,
        ]);
        run_blocking(cli.args)
    };
    run(&format!("echo restart >> {}", count.display())).expect("bench runs");
    let runs = fs::read_to_string(&count).expect("the command ran");
    assert_eq!(
        runs.lines().count(),
        3,
        "once before stat, read and readdir"
    );
    let e = run("exit 3").expect_err("a failing restart stops the bench");
    assert!(format!("{e:#}").contains("--restart-cmd"), "{e:#}");
}

/// The bench on a local directory, watching this very process: every phase reports its
/// CPU time and context switches per op, and the JSON carries them.
#[test]
fn a_run_watching_a_process_reports_its_cpu_and_switches_per_op() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pid = std::process::id().to_string();
    let results = results_of(&[
        "--dir",
        dir.path().to_str().expect("utf-8"),
        "--threads",
        "2",
        "--files",
        "200",
        "--dirs",
        "4",
        "--read-size",
        "4KiB",
        "--copy-files",
        "100",
        "--copy-dirs",
        "4",
        "--watch-pid",
        &pid,
    ]);
    assert_eq!(results.len(), PHASES.len() - 1, "every phase but build");
    for r in results {
        let cpu = r["watched_cpu_us_per_op"].as_f64();
        let switches = r["watched_switches_per_op"].as_f64();
        assert!(cpu.is_some_and(|c| c >= 0.0), "{r}");
        assert!(switches.is_some_and(|s| s >= 0.0), "{r}");
    }
}

#[test]
fn usage_counts_cpu_time_and_switches_of_the_watched_process() {
    let me = std::process::id();
    assert_eq!(*WATCHED.get_or_init(|| me), me);
    let before = Usage::now();
    assert!(before.is_some(), "/proc/{me}/stat readable");
    // Spin until /proc says this process spent 100 ms of CPU (a loaded machine may give
    // it little of its wall time; a usage that never grows fails after 60 s), then a few
    // sleeps (each one a voluntary switch).
    let start = Instant::now();
    let mut x = 0u64;
    while Usage::since(before).is_some_and(|u| u.cpu_us < 100_000)
        && start.elapsed() < std::time::Duration::from_secs(60)
    {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let spent = Usage::since(before).expect("still running");
    assert!(spent.cpu_us >= 100_000, "{spent:?}");
    assert!(spent.switches >= 5, "{spent:?}");
}

/// `build` writes its files, all of them, and leaves nothing behind.
#[test]
fn the_build_phase_writes_every_file_of_the_dataset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    fs::create_dir(&work).expect("mkdir");
    let results = results_of(&[
        "--dir",
        work.to_str().expect("utf-8"),
        "--threads",
        "3",
        "--phases",
        "build",
        "--build-files",
        "50",
        "--build-dirs",
        "7",
        "--build-size",
        "1KiB",
    ]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["phase"], "build");
    assert_eq!(results[0]["ops"], 50);
    assert_eq!(results[0]["errors"], 0);
    assert_eq!(
        fs::read_dir(&work).expect("ls").count(),
        0,
        "the tree is removed"
    );
}
