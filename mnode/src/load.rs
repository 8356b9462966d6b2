//! What a group's work costs, window by window (Origami §3.1), for the benefit-driven
//! balancer: every request served, forwarded or looked up is counted by [`CostKind`] for the
//! group, for its file name and for its directory. Names and directories are kept in
//! bounded heavy-hitter lists (the lighter half dropped whenever they fill), so a window of a
//! million distinct names costs as much memory as one of a thousand, and a request a hash
//! insert. The last closed window is what `LoadStats` answers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use saker_rpc::{CostKind, Costs, LoadWindow};

/// Default window: Origami's epoch.
pub const WINDOW: Duration = Duration::from_secs(10);

/// Names (and directories) tracked per window: enough to hold the heaviest ones reported
/// with room for newcomers to climb.
const TRACKED: usize = 512;

/// One name's or directory's entry: its count, and the events of each kind.
#[derive(Clone, Copy, Default)]
struct Tracked {
    weight: u64,
    costs: Costs,
}

/// Heavy hitters over keys, in bounded memory: up to twice `cap` keys are counted; when
/// that many are, the lighter half is dropped (the heaviest `cap` stay), and `error`
/// remembers the heaviest count dropped, which bounds how far a listed key's count may be
/// short (one dropped and seen again starts over). A key inserted costs a hash insert; the
/// pruning's sort is paid once per `cap` new keys.
struct TopK {
    cap: usize,
    map: HashMap<String, Tracked>,
    error: u64,
}

impl TopK {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            map: HashMap::new(),
            error: 0,
        }
    }

    fn add(&mut self, key: &str, kind: CostKind, n: u64) {
        if let Some(t) = self.map.get_mut(key) {
            t.weight += n;
            t.costs.0[kind.index()] += n;
            return;
        }
        if self.map.len() >= self.cap * 2 {
            let mut weights: Vec<u64> = self.map.values().map(|t| t.weight).collect();
            let (_, &mut kept_min, _) =
                weights.select_nth_unstable_by(self.cap - 1, |a, b| b.cmp(a));
            // Keys tied at the cut all go, so at most `cap` stay.
            self.map.retain(|_, t| t.weight > kept_min);
            self.error = self.error.max(kept_min);
        }
        let entry = Tracked {
            weight: n,
            costs: Costs::of(kind, n),
        };
        self.map.insert(key.to_string(), entry);
    }

    /// The `top` heaviest, heaviest first (ties by key), and how far their counts may be
    /// short.
    fn heaviest(&self, top: usize) -> (Vec<(String, Costs)>, u64) {
        let mut all: Vec<(&String, &Tracked)> = self.map.iter().collect();
        all.sort_by(|a, b| b.1.weight.cmp(&a.1.weight).then_with(|| a.0.cmp(b.0)));
        all.truncate(top);
        (
            all.into_iter().map(|(k, t)| (k.clone(), t.costs)).collect(),
            self.error,
        )
    }
}

struct Open {
    seq: u64,
    start: Instant,
    group: Costs,
    micros: Costs,
    names: TopK,
    dirs: TopK,
}

impl Open {
    fn new(seq: u64, start: Instant) -> Self {
        Self {
            seq,
            start,
            group: Costs::default(),
            micros: Costs::default(),
            names: TopK::new(TRACKED),
            dirs: TopK::new(TRACKED),
        }
    }

    fn close(&self, now: Instant, top: usize) -> LoadWindow {
        let (names, e1) = self.names.heaviest(top);
        let (dirs, e2) = self.dirs.heaviest(top);
        LoadWindow {
            seq: self.seq,
            millis: now.duration_since(self.start).as_millis() as u64,
            group: self.group,
            micros: self.micros,
            names,
            dirs,
            error: e1.max(e2),
        }
    }
}

/// One group's cost accounting.
pub struct LoadRecorder {
    window: Duration,
    /// Names and directories a closed window keeps.
    top: usize,
    open: Mutex<Open>,
    closed: Mutex<LoadWindow>,
    /// `saker_mnode_cost_events_total{group, kind}`, one per kind.
    counters: Vec<prometheus::IntCounter>,
}

/// A path's directory key: its components but the last, joined by `/` (the bucket first).
pub fn dir_key(path: &[String]) -> String {
    path[..path.len().saturating_sub(1)].join("/")
}

impl LoadRecorder {
    pub fn new(group: u32, window: Duration) -> Self {
        let g = group.to_string();
        let counters = CostKind::ALL
            .iter()
            .map(|k| crate::metrics::COST_EVENTS.with_label_values(&[&g, k.name()]))
            .collect();
        Self {
            window: window.max(Duration::from_millis(10)),
            top: TRACKED / 4,
            open: Mutex::new(Open::new(1, Instant::now())),
            closed: Mutex::new(LoadWindow::default()),
            counters,
        }
    }

    /// Counts `n` events of `kind` for the group, for file name `name` and directory `dir`
    /// (either may be absent), taking `micros` of the group's time.
    pub fn record(
        &self,
        kind: CostKind,
        n: u64,
        name: Option<&str>,
        dir: Option<&str>,
        micros: u64,
    ) {
        self.counters[kind.index()].inc_by(n);
        let now = Instant::now();
        let mut open = self.open.lock();
        self.roll(&mut open, now);
        open.group.0[kind.index()] += n;
        open.micros.0[kind.index()] += micros;
        if let Some(name) = name {
            open.names.add(name, kind, n);
        }
        if let Some(dir) = dir {
            open.dirs.add(dir, kind, n);
        }
    }

    /// Counts a request for `path` (a name and its directory).
    pub fn record_path(&self, kind: CostKind, path: &[String], micros: u64) {
        let dir = dir_key(path);
        self.record(kind, 1, path.last().map(String::as_str), Some(&dir), micros);
    }

    /// Closes the open window if its time is up.
    fn roll(&self, open: &mut Open, now: Instant) {
        if now.duration_since(open.start) < self.window {
            return;
        }
        *self.closed.lock() = open.close(now, self.top);
        *open = Open::new(open.seq + 1, now);
    }

    /// The last closed window, `top` names and directories of it at most.
    pub fn last(&self, top: usize) -> LoadWindow {
        self.last_at(top, Instant::now())
    }

    fn last_at(&self, top: usize, now: Instant) -> LoadWindow {
        self.roll(&mut self.open.lock(), now);
        let mut w = self.closed.lock().clone();
        w.names.truncate(top);
        w.dirs.truncate(top);
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_names_survive_a_flood_of_distinct_ones() {
        let mut top = TopK::new(100);
        for i in 0..10_000 {
            top.add(&format!("file-{i}"), CostKind::Write, 1);
            if i % 10 == 0 {
                top.add("label.txt", CostKind::Read, 1);
            }
            if i % 50 == 0 {
                top.add("meta.json", CostKind::Write, 1);
            }
        }
        let (heaviest, error) = top.heaviest(2);
        assert_eq!(heaviest[0].0, "label.txt");
        assert_eq!(heaviest[1].0, "meta.json");
        // Never dropped, so counted exactly; the dropped ones were seen once each.
        assert_eq!(heaviest[0].1.get(CostKind::Read), 1000);
        assert_eq!(heaviest[1].1.get(CostKind::Write), 200);
        assert_eq!(error, 1);
        assert!(top.map.len() <= 200);
    }

    #[test]
    fn a_closed_window_has_the_group_names_and_directories() {
        let rec = LoadRecorder::new(7, WINDOW);
        let path = |p: &str| p.split('/').map(String::from).collect::<Vec<_>>();
        for _ in 0..3 {
            rec.record_path(CostKind::Read, &path("b/train/x/label.txt"), 5);
        }
        rec.record_path(CostKind::Write, &path("b/train/y/label.txt"), 7);
        rec.record(CostKind::ChangeApply, 4, None, None, 0);
        // Nothing closed yet.
        assert_eq!(rec.last(10).seq, 0);
        let later = Instant::now() + WINDOW;
        let w = rec.last_at(10, later);
        assert_eq!(w.seq, 1);
        assert!(w.millis >= WINDOW.as_millis() as u64);
        assert_eq!(w.group.get(CostKind::Read), 3);
        assert_eq!(w.group.get(CostKind::Write), 1);
        assert_eq!(w.group.get(CostKind::ChangeApply), 4);
        assert_eq!(w.micros.get(CostKind::Read), 15);
        assert_eq!(
            w.names,
            vec![("label.txt".to_string(), {
                let mut c = Costs::of(CostKind::Read, 3);
                c.0[CostKind::Write.index()] = 1;
                c
            })]
        );
        assert_eq!(
            w.dirs[0],
            ("b/train/x".to_string(), Costs::of(CostKind::Read, 3))
        );
        assert_eq!(
            w.dirs[1],
            ("b/train/y".to_string(), Costs::of(CostKind::Write, 1))
        );
        assert_eq!(w.error, 0);
        // The next window starts empty.
        rec.record(CostKind::Read, 1, None, None, 0);
        assert_eq!(rec.last_at(10, later).seq, 1);
        assert_eq!(rec.last_at(10, later + WINDOW).group.total(), 1);
    }
}
