//! The benefit policy (`--balance-policy benefit`, Origami): every window, the coordinator takes
//! each group's cost window ([`crate::load_report`]), keeps a short trace per group and per hot
//! file name, predicts the next window ([`crate::predict`]: the learned model once it has
//! enough windows to train on, the EWMA before), and runs Meta-OPT ([`crate::meta_opt`]) over
//! the predicted loads; the moves it picks become exception-table entries, carried out like the
//! `even` policy's (block, migrate, install).
//!
//! Loads are per second of window, so a move's one-off cost (its inodes) is spread over the
//! window it is expected to pay off in.

use std::collections::{BTreeMap, VecDeque};

use saker_namespace::{GroupId, Route, Router};
use saker_rpc::{CostKind, LoadWindow, MetaError};
use serde::{Deserialize, Serialize};

use crate::exceptions::route_text;
use crate::meta_opt::{meta_opt, Candidate, Params, Placement, Plan};
use crate::namespace::NamespaceCoordinator;
use crate::predict::{evaluate, Evaluation, Ewma, Linear};

/// Windows of history kept per group and per name.
const HISTORY: usize = 16;
/// Names traced at most (the heaviest recent ones).
const NAMES: usize = 256;
/// Windows seen before the learned model may be used (fewer teach it little, and leave it
/// too few held-out windows to be judged on).
const MODEL_AFTER: u64 = HISTORY as u64 / 2;
/// Names and directories asked of each group per window.
const TOP: u32 = 64;

/// One name's trace: requests per second, window by window, summed over the groups.
#[derive(Clone, Debug, Default)]
struct NameTrace {
    reads: VecDeque<f64>,
    writes: VecDeque<f64>,
    /// Writes seen in all (an estimate of its inodes until the groups count them).
    writes_seen: f64,
}

fn push(q: &mut VecDeque<f64>, x: f64) {
    if q.len() == HISTORY {
        q.pop_front();
    }
    q.push_back(x);
}

/// The policy's state between windows.
#[derive(Debug, Default)]
pub struct BenefitBalancer {
    pub params: Params,
    seen: BTreeMap<GroupId, u64>,
    groups: BTreeMap<GroupId, VecDeque<f64>>,
    names: BTreeMap<String, NameTrace>,
    /// The learned model, while it predicts held-out windows better than the EWMA.
    model: Option<Linear>,
    /// How both predictors did at the last window.
    evaluation: Option<Evaluation>,
    /// Names the table refused (directories have them): not candidates.
    refused: std::collections::BTreeSet<String>,
    /// Windows ingested.
    pub windows: u64,
}

impl BenefitBalancer {
    pub fn new(params: Params) -> Self {
        Self {
            params,
            ..Default::default()
        }
    }

    fn traces(&self) -> Vec<Vec<f64>> {
        let groups = self.groups.values().map(|q| q.iter().copied().collect());
        let names = self
            .names
            .values()
            .map(|t| t.reads.iter().zip(&t.writes).map(|(r, w)| r + w).collect());
        groups.chain(names).collect()
    }

    fn predict(&self, history: &VecDeque<f64>) -> f64 {
        let h: Vec<f64> = history.iter().copied().collect();
        match &self.model {
            Some(m) => m.predict(&h),
            None => Ewma::default().predict(&h),
        }
    }

    /// Takes the groups' windows once every group has closed a new one; whether it did. A
    /// group's windows are numbered by the replica that serves it, so after a restart or a
    /// new leader the numbers start over: any number other than the last one seen is new.
    pub fn ingest(&mut self, windows: &BTreeMap<GroupId, LoadWindow>) -> bool {
        let fresh = windows
            .iter()
            .all(|(g, w)| w.seq > 0 && self.seen.get(g) != Some(&w.seq));
        if windows.is_empty() || !fresh {
            return false;
        }
        let units = &self.params.units;
        let mut names: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        for (g, w) in windows {
            self.seen.insert(*g, w.seq);
            let secs = (w.millis as f64 / 1000.0).max(0.001);
            push(
                self.groups.entry(*g).or_default(),
                units.time(&w.group) / secs,
            );
            for (name, c) in &w.names {
                let e = names.entry(name).or_default();
                e.0 += c.get(CostKind::Read) as f64 / secs;
                e.1 += c.get(CostKind::Write) as f64 / secs;
            }
        }
        for (name, (r, w)) in &names {
            let t = self.names.entry(name.to_string()).or_default();
            // A name first seen now had no load before (as far as anyone counted).
            while t.reads.len() + 1 < self.groups.values().map(VecDeque::len).max().unwrap_or(1) {
                push(&mut t.reads, 0.0);
                push(&mut t.writes, 0.0);
            }
            push(&mut t.reads, *r);
            push(&mut t.writes, *w);
            t.writes_seen += w;
        }
        for (name, t) in self.names.iter_mut() {
            if !names.contains_key(name.as_str()) {
                push(&mut t.reads, 0.0);
                push(&mut t.writes, 0.0);
            }
        }
        if self.names.len() > NAMES {
            let mut by_load: Vec<(f64, String)> = self
                .names
                .iter()
                .map(|(n, t)| (t.reads.iter().chain(&t.writes).sum(), n.clone()))
                .collect();
            by_load.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (_, n) in by_load.into_iter().skip(NAMES) {
                self.names.remove(&n);
            }
        }
        self.windows += 1;
        // The model is used only while it beats the baseline on the windows it did not
        // train on (a few windows of a changing load teach it little).
        let traces = self.traces();
        self.evaluation = evaluate(&traces, 0.6, Ewma::default());
        self.model = self
            .evaluation
            .as_ref()
            .filter(|e| self.windows >= MODEL_AFTER && e.model_error < e.ewma_error)
            .and_then(|_| Linear::fit(&traces, Ewma::default(), 0.01));
        true
    }

    /// How the learned model and the EWMA predicted the traces' later windows.
    pub fn evaluation(&self) -> Option<Evaluation> {
        self.evaluation.clone()
    }

    /// Whether the learned model (not the EWMA) makes the predictions now.
    pub fn uses_model(&self) -> bool {
        self.model.is_some()
    }

    /// Keeps `name` out of later plans (the table refused it).
    pub fn refuse(&mut self, name: &str) {
        self.refused.insert(name.to_string());
    }

    /// Meta-OPT over the predicted next window; `inodes` gives a name's inode count when the
    /// groups counted it (else the writes seen stand for it). `window_secs` spreads a move's
    /// cost over the window it pays off in.
    pub fn plan(
        &self,
        router: &Router,
        inodes: &dyn Fn(&str) -> Option<u64>,
        window_secs: f64,
    ) -> Plan {
        let rct: BTreeMap<GroupId, f64> = self
            .groups
            .iter()
            .map(|(g, q)| (*g, self.predict(q)))
            .collect();
        let candidates: Vec<Candidate> = self
            .names
            .iter()
            .filter(|(name, _)| !self.refused.contains(*name))
            .filter_map(|(name, t)| {
                let (r, w) = (self.predict(&t.reads), self.predict(&t.writes));
                if r + w <= 0.0 {
                    return None;
                }
                let placement = match router.route_name(name) {
                    Route::Group(g) => Placement::Group(g),
                    Route::PathWalk => Placement::Spread,
                };
                let home = router.home(name);
                Some(Candidate {
                    name: name.clone(),
                    placement,
                    home,
                    reads: r,
                    writes: w,
                    inodes: inodes(name).unwrap_or(t.writes_seen.ceil() as u64),
                })
            })
            .collect();
        let mut params = self.params.clone();
        params.units.migrate_inode /= window_secs.max(0.001);
        meta_opt(&rct, &candidates, &params)
    }
}

/// What one round of the benefit policy did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BenefitReport {
    /// Whether every group had closed a new window (else nothing was planned).
    pub ingested: bool,
    pub windows: u64,
    pub jct_before: f64,
    pub jct_after: f64,
    /// Moves made: name, route, predicted benefit.
    pub moves: Vec<(String, String, f64)>,
    /// Moves the table refused (a directory has the name).
    pub refused: Vec<(String, String)>,
    pub evaluation: Option<Evaluation>,
    /// Microseconds of the round spent predicting and planning (its own work, without the
    /// calls to the groups and the moves).
    pub plan_micros: u64,
}

impl NamespaceCoordinator {
    /// One round of the benefit policy: ingest the groups' new windows, plan, move.
    pub async fn balance_benefit_once(
        &self,
        balancer: &tokio::sync::Mutex<BenefitBalancer>,
        window_secs: f64,
    ) -> Result<BenefitReport, MetaError> {
        let mut bal = balancer.lock().await;
        let windows = self.load_windows(TOP).await?;
        let start = std::time::Instant::now();
        let mut report = BenefitReport {
            ingested: bal.ingest(&windows),
            windows: bal.windows,
            ..Default::default()
        };
        if !report.ingested {
            return Ok(report);
        }
        report.evaluation = bal.evaluation();
        let router = self.router.read().clone();
        let mut plan = bal.plan(&router, &|_| None, window_secs);
        report.plan_micros = start.elapsed().as_micros() as u64;
        if !plan.decisions.is_empty() {
            // The moves' cost counted with the groups' own inode counts (one scan each).
            let stats = self.stats().await?;
            let counted: BTreeMap<String, u64> = stats
                .values()
                .flat_map(|s| s.top_names.iter().cloned())
                .fold(BTreeMap::new(), |mut m, (n, c)| {
                    *m.entry(n).or_default() += c;
                    m
                });
            let start = std::time::Instant::now();
            plan = bal.plan(&router, &|n| counted.get(n).copied(), window_secs);
            report.plan_micros += start.elapsed().as_micros() as u64;
        }
        report.jct_before = plan.jct_before();
        report.jct_after = plan.jct_after();
        tracing::debug!(
            windows = bal.windows,
            model = bal.uses_model(),
            predicted = ?plan.before,
            decisions = ?plan.decisions,
            "benefit plan"
        );
        for d in plan.decisions {
            let exception = d.exception();
            let route = exception.as_ref().map_or("ring".into(), route_text);
            match self.set_exception(&d.name, exception).await {
                Ok(_) => report.moves.push((d.name, route, d.benefit)),
                Err(MetaError::Invalid(why)) => {
                    bal.refuse(&d.name);
                    report.refused.push((d.name, why))
                }
                Err(e) => return Err(e),
            }
        }
        if !report.moves.is_empty() {
            tracing::info!(?report, "benefit balancing round");
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use saker_namespace::{ExceptionTable, Ring};
    use saker_rpc::Costs;

    fn window(seq: u64, reads: u64, names: &[(&str, u64)]) -> LoadWindow {
        LoadWindow {
            seq,
            millis: 1000,
            group: Costs::of(CostKind::Read, reads),
            names: names
                .iter()
                .map(|(n, r)| (n.to_string(), Costs::of(CostKind::Read, *r)))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_name_that_stays_hot_is_moved_and_a_stale_window_is_not_taken_twice() {
        let router = Router::new(Ring::new(&[1, 2], 64), ExceptionTable::new());
        let hot_home = router.home("hot");
        let other = if hot_home == 1 { 2 } else { 1 };
        let mut bal = BenefitBalancer::new(Params {
            delta: 1.0,
            ..Params::default()
        });
        for seq in 1..=6 {
            let windows = BTreeMap::from([
                (hot_home, window(seq, 1000, &[("hot", 600)])),
                (other, window(seq, 200, &[])),
            ]);
            assert!(bal.ingest(&windows));
            // The same windows again: nothing new.
            assert!(!bal.ingest(&windows));
        }
        assert_eq!(bal.windows, 6);
        // The groups restarted: their windows are numbered from 1 again, and still taken.
        let restarted = BTreeMap::from([
            (hot_home, window(1, 1000, &[("hot", 600)])),
            (other, window(1, 200, &[])),
        ]);
        assert!(bal.ingest(&restarted));
        assert_eq!(bal.windows, 7);
        let plan = bal.plan(&router, &|_| Some(10), 10.0);
        assert_eq!(plan.decisions.len(), 1, "{plan:?}");
        assert_eq!(plan.decisions[0].name, "hot");
        assert_eq!(plan.decisions[0].to, Placement::Group(other));
        assert!(plan.jct_after() < plan.jct_before());
    }

    #[test]
    fn a_name_that_cooled_is_not_moved() {
        let router = Router::new(Ring::new(&[1, 2], 64), ExceptionTable::new());
        let home = router.home("was-hot");
        let other = if home == 1 { 2 } else { 1 };
        let mut bal = BenefitBalancer::default();
        for seq in 1..=10 {
            // Hot in the first windows, then gone; its group's load went with it.
            let hot = if seq <= 2 { 600 } else { 0 };
            let windows = BTreeMap::from([
                (home, window(seq, 400 + hot, &[("was-hot", hot)])),
                (other, window(seq, 400, &[])),
            ]);
            assert!(bal.ingest(&windows));
        }
        let plan = bal.plan(&router, &|_| Some(10), 10.0);
        assert!(plan.decisions.is_empty(), "{plan:?}");
        // The trace kept zeros for the windows it was not reported in.
        assert_eq!(bal.names["was-hot"].reads.len(), 10);
    }
}
