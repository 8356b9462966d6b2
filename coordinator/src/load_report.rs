//! The groups' cost accounting gathered in one view (`saker admin balance stats`): each
//! group's last closed window and its request completion time under the cost model, and the
//! heaviest names and directories summed over the groups that reported them.

use std::collections::BTreeMap;

use saker_namespace::GroupId;
use saker_rpc::{CostKind, Costs, LoadWindow, MetaError, MetaRequest, MetaResponse};
use serde::{Deserialize, Serialize};

use crate::calls::tag;
use crate::meta_opt::UnitCosts;
use crate::namespace::NamespaceCoordinator;

/// Costs by kind name, for people and JSON.
pub fn by_kind(c: &Costs) -> BTreeMap<String, u64> {
    CostKind::ALL
        .iter()
        .filter(|k| c.get(**k) > 0)
        .map(|k| (k.name().to_string(), c.get(*k)))
        .collect()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupLoad {
    pub group: GroupId,
    /// The window's number at that group (0: none closed yet) and its length.
    pub window: u64,
    pub secs: f64,
    /// Its request completion time under the default cost model, per second of window.
    pub rct_per_sec: f64,
    /// Requests it served (reads and writes) per second.
    pub ops_per_sec: f64,
    pub costs: BTreeMap<String, u64>,
    /// Mean microseconds a request took to serve, reads and writes.
    pub read_micros: f64,
    pub write_micros: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HotSpot {
    /// A file name, or a directory's path.
    pub key: String,
    pub events: u64,
    /// Its events by group.
    pub by_group: BTreeMap<GroupId, u64>,
    pub costs: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub groups: Vec<GroupLoad>,
    pub names: Vec<HotSpot>,
    pub dirs: Vec<HotSpot>,
    /// How far a listed name's or directory's count may be short, at worst.
    pub error: u64,
}

fn merge(lists: impl Iterator<Item = (GroupId, Vec<(String, Costs)>)>, top: usize) -> Vec<HotSpot> {
    let mut all: BTreeMap<String, (Costs, BTreeMap<GroupId, u64>)> = BTreeMap::new();
    for (g, list) in lists {
        for (key, c) in list {
            let e = all.entry(key).or_default();
            e.0.add(&c);
            *e.1.entry(g).or_default() += c.total();
        }
    }
    let mut out: Vec<HotSpot> = all
        .into_iter()
        .map(|(key, (c, by_group))| HotSpot {
            key,
            events: c.total(),
            by_group,
            costs: by_kind(&c),
        })
        .collect();
    out.sort_by(|a, b| b.events.cmp(&a.events).then_with(|| a.key.cmp(&b.key)));
    out.truncate(top);
    out
}

/// The report over every group's window.
pub fn report(
    windows: &BTreeMap<GroupId, LoadWindow>,
    units: &UnitCosts,
    top: usize,
) -> LoadReport {
    let per_sec = |n: f64, w: &LoadWindow| {
        if w.millis == 0 {
            0.0
        } else {
            n * 1000.0 / w.millis as f64
        }
    };
    let mean = |micros: u64, n: u64| {
        if n == 0 {
            0.0
        } else {
            micros as f64 / n as f64
        }
    };
    let groups = windows
        .iter()
        .map(|(g, w)| GroupLoad {
            group: *g,
            window: w.seq,
            secs: w.millis as f64 / 1000.0,
            rct_per_sec: per_sec(units.time(&w.group), w),
            ops_per_sec: per_sec(w.group.served() as f64, w),
            costs: by_kind(&w.group),
            read_micros: mean(w.micros.get(CostKind::Read), w.group.get(CostKind::Read)),
            write_micros: mean(w.micros.get(CostKind::Write), w.group.get(CostKind::Write)),
        })
        .collect();
    LoadReport {
        groups,
        names: merge(windows.iter().map(|(g, w)| (*g, w.names.clone())), top),
        dirs: merge(windows.iter().map(|(g, w)| (*g, w.dirs.clone())), top),
        error: windows.values().map(|w| w.error).max().unwrap_or(0),
    }
}

impl NamespaceCoordinator {
    /// Every group's last closed cost window, with its `top` heaviest names and directories.
    pub async fn load_windows(&self, top: u32) -> Result<BTreeMap<GroupId, LoadWindow>, MetaError> {
        let calls = self.groups.iter().map(|(g, svc)| async move {
            (*g, svc.call(tag(), MetaRequest::LoadStats { top }).await)
        });
        let mut out = BTreeMap::new();
        for (g, answer) in futures::future::join_all(calls).await {
            match answer? {
                MetaResponse::Load(w) => {
                    out.insert(g, w);
                }
                other => {
                    return Err(MetaError::Internal(format!(
                        "load stats answered {other:?}"
                    )))
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_sums_names_over_groups() {
        let read = |n| Costs::of(CostKind::Read, n);
        let w1 = LoadWindow {
            seq: 4,
            millis: 2000,
            group: read(300),
            micros: Costs::of(CostKind::Read, 600),
            names: vec![("label.txt".into(), read(200)), ("a.jpg".into(), read(1))],
            dirs: vec![("b/train".into(), read(300))],
            error: 0,
        };
        let w2 = LoadWindow {
            seq: 9,
            millis: 2000,
            group: Costs::of(CostKind::Forward, 100),
            names: vec![("label.txt".into(), Costs::of(CostKind::Forward, 100))],
            ..Default::default()
        };
        let windows = BTreeMap::from([(1, w1), (2, w2)]);
        let r = report(&windows, &UnitCosts::default(), 1);
        assert_eq!(r.groups[0].ops_per_sec, 150.0);
        assert_eq!(r.groups[0].read_micros, 2.0);
        assert_eq!(r.groups[1].rct_per_sec, 50.0);
        assert_eq!(r.groups[1].ops_per_sec, 0.0);
        assert_eq!(r.names.len(), 1);
        assert_eq!(r.names[0].key, "label.txt");
        assert_eq!(r.names[0].events, 300);
        assert_eq!(r.names[0].by_group, BTreeMap::from([(1, 200), (2, 100)]));
        assert_eq!(r.names[0].costs["forward"], 100);
        assert_eq!(r.dirs[0].key, "b/train");
    }
}
