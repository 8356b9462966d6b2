//! How `saker bench fs` times a phase: ops spread over OS threads sharing a queue ([`par`]),
//! each op's latency, and what the watched server process spent meanwhile ([`Usage`], from
//! /proc).

use super::*;

/// One phase's measurements before they become a [`PhaseResult`].
pub(super) struct Timed {
    pub(super) ops: u64,
    pub(super) errors: u64,
    pub(super) secs: f64,
    pub(super) bytes: u64,
    pub(super) lat_us: Vec<u32>,
    /// What the watched process spent meanwhile.
    pub(super) usage: Option<Usage>,
}

/// The process `--watch-pid` names, set once at start.
pub(super) static WATCHED: OnceLock<u32> = OnceLock::new();

/// CPU time and context switches of a process so far (or spent over an interval).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Usage {
    pub(super) cpu_us: u64,
    pub(super) switches: u64,
}

impl Usage {
    /// The watched process's usage so far; `None` without `--watch-pid` or once it is gone.
    pub(super) fn now() -> Option<Usage> {
        let pid = *WATCHED.get()?;
        let cpu_us = crate::process_cpu_us(pid)?;
        let mut switches = 0;
        for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            let Ok(status) = fs::read_to_string(task.path().join("status")) else {
                continue; // the thread ended meanwhile
            };
            for line in status.lines() {
                if let Some(v) = line
                    .strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                {
                    switches += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
        Some(Usage { cpu_us, switches })
    }

    /// What was spent between `before` and now.
    pub(super) fn since(before: Option<Usage>) -> Option<Usage> {
        let (before, now) = (before?, Usage::now()?);
        Some(Usage {
            cpu_us: now.cpu_us.saturating_sub(before.cpu_us),
            switches: now.switches.saturating_sub(before.switches),
        })
    }
}

impl Timed {
    pub(super) fn result(mut self, threads: usize, phase: &str) -> PhaseResult {
        self.lat_us.sort_unstable();
        let pct = |p: f64| {
            if self.lat_us.is_empty() {
                return 0.0;
            }
            let i = ((self.lat_us.len() as f64 - 1.0) * p).round() as usize;
            self.lat_us[i] as f64
        };
        PhaseResult {
            threads,
            phase: phase.to_string(),
            ops: self.ops,
            errors: self.errors,
            secs: self.secs,
            ops_per_sec: if self.secs > 0.0 {
                self.ops as f64 / self.secs
            } else {
                0.0
            },
            mib_per_sec: (self.bytes > 0).then(|| self.bytes as f64 / 1048576.0 / self.secs),
            p50_us: pct(0.5),
            p99_us: pct(0.99),
            watched: self.usage.filter(|_| self.ops > 0).map(|u| Watched {
                watched_cpu_us_per_op: u.cpu_us as f64 / self.ops as f64,
                watched_switches_per_op: u.switches as f64 / self.ops as f64,
            }),
        }
    }
}

/// What one op did: ops and bytes it counts for (a listing counts its entries).
pub(super) struct Done {
    pub(super) ops: u64,
    pub(super) bytes: u64,
}

impl Done {
    pub(super) fn one(bytes: u64) -> Self {
        Done { ops: 1, bytes }
    }
}

/// Runs `op` on every item with `threads` OS threads taking items from a shared queue; times
/// the whole and each op. Failed ops count as errors (the first few are printed).
pub(super) fn par<T: Sync>(
    threads: usize,
    phase: &str,
    items: &[T],
    op: impl Fn(&T) -> std::io::Result<Done> + Sync,
) -> Timed {
    let next = AtomicUsize::new(0);
    let shown = AtomicUsize::new(0);
    let usage = Usage::now();
    let start = Instant::now();
    let per_thread: Vec<(u64, u64, u64, Vec<u32>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let (mut ops, mut errors, mut bytes) = (0u64, 0u64, 0u64);
                    let mut lat = Vec::with_capacity(items.len() / threads + 1);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        let t = Instant::now();
                        match op(item) {
                            Ok(d) => {
                                lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                                ops += d.ops;
                                bytes += d.bytes;
                            }
                            Err(e) => {
                                errors += 1;
                                if shown.fetch_add(1, Ordering::Relaxed) < 5 {
                                    eprintln!("  {phase}: item {i}: {e}");
                                }
                            }
                        }
                    }
                    (ops, errors, bytes, lat)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a bench worker panicked"))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut t = Timed {
        ops: 0,
        errors: 0,
        secs,
        bytes: 0,
        lat_us: Vec::new(),
        usage: Usage::since(usage),
    };
    for (ops, errors, bytes, lat) in per_thread {
        t.ops += ops;
        t.errors += errors;
        t.bytes += bytes;
        t.lat_us.extend(lat);
    }
    let shown = shown.load(Ordering::Relaxed);
    if shown > 5 {
        eprintln!("  {phase}: {} more errors", shown - 5);
    }
    t
}
