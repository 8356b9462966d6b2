//! Result records: [`Cell`] (one measured configuration), [`RunFile`] (one run of one engine or
//! layout, written as JSON), and [`summarize`] (medians over runs and candidate/baseline ratios).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::hist::Hist;

/// One measured configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// load, get, scan, apply (non-durable write), commit (durable write); chunks: put, get.
    pub workload: String,
    /// Chunk size in bytes (chunk cells only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Ops per call (write batch size, keys per scan).
    pub batch: usize,
    /// Threads (metadata) or concurrent tasks (chunks).
    pub threads: usize,
    pub secs: f64,
    pub calls: u64,
    pub ops: u64,
    pub calls_per_s: f64,
    pub ops_per_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mib_per_s: Option<f64>,
    /// Per-call latency.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Volume layout: puts covered by one fdatasync, on average.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub puts_per_sync: Option<f64>,
}

impl Cell {
    pub fn new(
        workload: &str,
        batch: usize,
        threads: usize,
        secs: f64,
        calls: u64,
        ops: u64,
        hist: &Hist,
    ) -> Self {
        Self {
            workload: workload.to_string(),
            size: None,
            batch,
            threads,
            secs,
            calls,
            ops,
            calls_per_s: calls as f64 / secs,
            ops_per_s: ops as f64 / secs,
            mib_per_s: None,
            p50_us: hist.quantile_us(0.5),
            p99_us: hist.quantile_us(0.99),
            puts_per_sync: None,
        }
    }

    pub fn with_size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self.mib_per_s = Some(self.ops as f64 * size as f64 / self.secs / (1 << 20) as f64);
        self
    }

    fn key(&self) -> (String, u64, usize, usize) {
        (
            self.workload.clone(),
            self.size.unwrap_or(0),
            self.batch,
            self.threads,
        )
    }
}

/// One run of one engine (or layout).
#[derive(Debug, Serialize, Deserialize)]
pub struct RunFile {
    /// "meta" or "chunks".
    pub bench: String,
    /// Engine or layout name.
    pub subject: String,
    pub run: u32,
    pub unix_time: u64,
    pub data_dir: String,
    /// `df` of the data directory: device, file system type, mount point.
    pub filesystem: String,
    /// /proc/loadavg when the run started and ended: other work on the machine, i.e. noise.
    pub loadavg_start: String,
    pub loadavg_end: String,
    pub params: serde_json::Value,
    pub cells: Vec<Cell>,
}

/// The first three fields of /proc/loadavg.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

impl RunFile {
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("write {}", path.display()))
    }
}

/// The file system holding `dir`, as `df` reports it.
pub fn filesystem_of(dir: &Path) -> String {
    std::process::Command::new("df")
        .arg("--output=source,fstype,target")
        .arg(dir)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.lines()
                .nth(1)
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Medians over runs of one subject for one cell.
#[derive(Debug, Serialize)]
struct Medians {
    calls_per_s: f64,
    ops_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    mib_per_s: Option<f64>,
    p50_us: f64,
    p99_us: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    puts_per_sync: Option<f64>,
    /// calls/s of every run, in run order: the noise.
    runs_calls_per_s: Vec<f64>,
    /// (max - min) / median of calls/s.
    spread: f64,
}

/// Whether the runs of one side all beat the runs of the other on calls/s.
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
enum Separated {
    /// Every candidate run beat every baseline run.
    Candidate,
    /// Every baseline run beat every candidate run.
    Baseline,
    /// The runs overlap: the difference is within the noise.
    Overlap,
}

fn separated(baseline: &[f64], candidate: &[f64]) -> Separated {
    let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
    let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    if min(candidate) > max(baseline) {
        Separated::Candidate
    } else if min(baseline) > max(candidate) {
        Separated::Baseline
    } else {
        Separated::Overlap
    }
}

#[derive(Debug, Serialize)]
struct Ratios {
    /// candidate / baseline calls per second (> 1: candidate faster).
    throughput: Option<f64>,
    /// candidate / baseline latency (< 1: candidate faster).
    p50: Option<f64>,
    p99: Option<f64>,
    /// Which side won calls/s in every run, or "overlap".
    separated: Separated,
}

#[derive(Debug, Serialize)]
struct SummaryCell {
    workload: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    batch: usize,
    threads: usize,
    baseline: Medians,
    candidate: Medians,
    ratio: Ratios,
}

#[derive(Debug, Serialize)]
struct Summary {
    bench: String,
    baseline: String,
    candidate: String,
    filesystem: String,
    cores: usize,
    /// Run files, in the order they ran.
    runs: Vec<RunRef>,
    params: serde_json::Value,
    cells: Vec<SummaryCell>,
    /// The run files themselves (per-run latencies included).
    run_data: Vec<RunFile>,
}

#[derive(Debug, Serialize)]
struct RunRef {
    file: String,
    subject: String,
    run: u32,
    unix_time: u64,
    loadavg_start: String,
    loadavg_end: String,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn medians(cells: &[&Cell]) -> Medians {
    let of = |f: &dyn Fn(&Cell) -> f64| median(cells.iter().map(|c| f(c)).collect());
    let opt = |f: &dyn Fn(&Cell) -> Option<f64>| {
        let v: Vec<f64> = cells.iter().filter_map(|c| f(c)).collect();
        (!v.is_empty()).then(|| median(v))
    };
    let runs: Vec<f64> = cells.iter().map(|c| c.calls_per_s).collect();
    let med = median(runs.clone());
    let (lo, hi) = runs
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    Medians {
        calls_per_s: med,
        ops_per_s: of(&|c| c.ops_per_s),
        mib_per_s: opt(&|c| c.mib_per_s),
        p50_us: of(&|c| c.p50_us),
        p99_us: of(&|c| c.p99_us),
        puts_per_sync: opt(&|c| c.puts_per_sync),
        runs_calls_per_s: runs,
        spread: if med > 0.0 { (hi - lo) / med } else { 0.0 },
    }
}

fn ratio(candidate: f64, baseline: f64) -> Option<f64> {
    (baseline > 0.0 && candidate > 0.0).then(|| candidate / baseline)
}

/// Reads run files, writes the summary JSON to `out` and prints a markdown table.
pub fn summarize(baseline: &str, candidate: &str, files: &[PathBuf], out: &Path) -> Result<()> {
    let mut runs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).with_context(|| format!("read {}", f.display()))?;
        let run: RunFile =
            serde_json::from_str(&text).with_context(|| format!("parse {}", f.display()))?;
        runs.push((f.clone(), run));
    }
    runs.sort_by_key(|(_, r)| r.unix_time);
    let first = &runs.first().context("no run files")?.1;
    anyhow::ensure!(
        runs.iter().all(|(_, r)| r.bench == first.bench),
        "run files of different benchmarks"
    );
    let mut by_cell: BTreeMap<_, (Vec<&Cell>, Vec<&Cell>)> = BTreeMap::new();
    let mut order = Vec::new();
    for (_, r) in &runs {
        for c in &r.cells {
            let entry = by_cell.entry(c.key()).or_insert_with(|| {
                order.push(c.key());
                Default::default()
            });
            if r.subject == baseline {
                entry.0.push(c);
            } else if r.subject == candidate {
                entry.1.push(c);
            }
        }
    }
    let mut cells = Vec::new();
    for k in order {
        let (b, c) = &by_cell[&k];
        if b.is_empty() || c.is_empty() {
            continue;
        }
        let (bm, cm) = (medians(b), medians(c));
        cells.push(SummaryCell {
            workload: k.0.clone(),
            size: b[0].size,
            batch: k.2,
            threads: k.3,
            ratio: Ratios {
                throughput: ratio(cm.calls_per_s, bm.calls_per_s),
                p50: ratio(cm.p50_us, bm.p50_us),
                p99: ratio(cm.p99_us, bm.p99_us),
                separated: separated(&bm.runs_calls_per_s, &cm.runs_calls_per_s),
            },
            baseline: bm,
            candidate: cm,
        });
    }
    let mut summary = Summary {
        bench: first.bench.clone(),
        baseline: baseline.to_string(),
        candidate: candidate.to_string(),
        filesystem: first.filesystem.clone(),
        cores: std::thread::available_parallelism().map_or(0, usize::from),
        runs: runs
            .iter()
            .map(|(f, r)| RunRef {
                file: f
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                subject: r.subject.clone(),
                run: r.run,
                unix_time: r.unix_time,
                loadavg_start: r.loadavg_start.clone(),
                loadavg_end: r.loadavg_end.clone(),
            })
            .collect(),
        params: first.params.clone(),
        cells,
        run_data: Vec::new(),
    };
    summary.run_data = runs.into_iter().map(|(_, r)| r).collect();
    std::fs::write(out, serde_json::to_string_pretty(&summary)? + "\n")?;
    print_summary(&summary);
    Ok(())
}

fn size_str(size: Option<u64>) -> String {
    match size {
        Some(s) if s >= 1 << 20 => format!("{} MiB", s >> 20),
        Some(s) => format!("{} KiB", s >> 10),
        None => "-".to_string(),
    }
}

fn num(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn opt_num(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), num)
}

fn print_summary(s: &Summary) {
    let (b, c) = (&s.baseline, &s.candidate);
    println!(
        "| workload | size | batch | threads | {b} calls/s | {c} calls/s | ratio | {b} ops/s or MiB/s \
         | {c} ops/s or MiB/s | {b} p50 / p99 µs | {c} p50 / p99 µs | p99 ratio | spread {b} / {c} \
         | all runs | {c} puts/sync |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for x in &s.cells {
        let vol = |m: &Medians| m.mib_per_s.map_or_else(|| num(m.ops_per_s), num);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {:.0}% / {:.0}% | {} | {} |",
            x.workload,
            size_str(x.size),
            x.batch,
            x.threads,
            num(x.baseline.calls_per_s),
            num(x.candidate.calls_per_s),
            opt_num(x.ratio.throughput),
            vol(&x.baseline),
            vol(&x.candidate),
            num(x.baseline.p50_us),
            num(x.baseline.p99_us),
            num(x.candidate.p50_us),
            num(x.candidate.p99_us),
            opt_num(x.ratio.p99),
            x.baseline.spread * 100.0,
            x.candidate.spread * 100.0,
            match x.ratio.separated {
                Separated::Candidate => c.as_str(),
                Separated::Baseline => b.as_str(),
                Separated::Overlap => "overlap",
            },
            opt_num(x.candidate.puts_per_sync),
        );
    }
}

/// Prints one run's cells.
pub fn print_run(r: &RunFile) {
    println!("{} {} run {} ({})", r.bench, r.subject, r.run, r.filesystem);
    println!(
        "| workload | size | batch | threads | calls/s | ops/s | MiB/s | p50 µs | p99 µs | puts/sync |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for c in &r.cells {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.workload,
            size_str(c.size),
            c.batch,
            c.threads,
            num(c.calls_per_s),
            num(c.ops_per_s),
            opt_num(c.mib_per_s),
            num(c.p50_us),
            num(c.p99_us),
            opt_num(c.puts_per_sync),
        );
    }
}
