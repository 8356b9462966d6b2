//! What a group's work cost over one window, decomposed as Origami (ICPP'25 §3.1) decomposes a
//! request's completion time: local reads and writes, forwards of requests for names it does
//! not own, remote dentry lookups it made and answered, change-log records it pushed and
//! applied, and dirty marks it took. Counted per group, and per file name and per directory
//! for the heaviest ones.

use serde::{Deserialize, Serialize};

/// One kind of work a group does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum CostKind {
    /// A request served here that changes nothing.
    Read,
    /// A request served here that changes state.
    Write,
    /// A request sent on to the group that owns its name (path-walked, redirected, or from a
    /// client with an older exception table).
    Forward,
    /// A dentry this group had to fetch from its owner to resolve a path.
    RemoteLookup,
    /// A dentry lookup this group answered for another.
    LookupServed,
    /// Change-log records (parent-directory updates) this group pushed to their owners.
    ChangePush,
    /// Change-log records from other groups this group applied to its directories.
    ChangeApply,
    /// Dirty marks (a directory another group has unpushed changes for) this group took.
    DirtyMark,
}

impl CostKind {
    pub const ALL: [CostKind; 8] = [
        CostKind::Read,
        CostKind::Write,
        CostKind::Forward,
        CostKind::RemoteLookup,
        CostKind::LookupServed,
        CostKind::ChangePush,
        CostKind::ChangeApply,
        CostKind::DirtyMark,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in metrics and reports.
    pub fn name(self) -> &'static str {
        match self {
            CostKind::Read => "read",
            CostKind::Write => "write",
            CostKind::Forward => "forward",
            CostKind::RemoteLookup => "remote_lookup",
            CostKind::LookupServed => "lookup_served",
            CostKind::ChangePush => "change_push",
            CostKind::ChangeApply => "change_apply",
            CostKind::DirtyMark => "dirty_mark",
        }
    }
}

/// Events of each [`CostKind`], indexed by [`CostKind::index`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Costs(pub [u64; 8]);

impl Costs {
    pub fn of(kind: CostKind, n: u64) -> Self {
        let mut c = Costs::default();
        c.0[kind.index()] = n;
        c
    }

    pub fn get(&self, kind: CostKind) -> u64 {
        self.0[kind.index()]
    }

    pub fn add(&mut self, other: &Costs) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// Every event, whatever its kind.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Requests served here for the name or directory: reads and writes.
    pub fn served(&self) -> u64 {
        self.get(CostKind::Read) + self.get(CostKind::Write)
    }
}

/// One group's costs over one closed window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadWindow {
    /// The window's number since the group's replica started (0: no window closed yet).
    pub seq: u64,
    /// Its length in milliseconds.
    pub millis: u64,
    /// Everything the group did.
    pub group: Costs,
    /// Microseconds spent serving requests, by kind (what a unit of each kind costs, on
    /// average, is `micros / group`).
    pub micros: Costs,
    /// The heaviest file names (by events), each with what it cost here; the count of a name
    /// that was dropped from the bounded list and came back may be up to `error` short.
    pub names: Vec<(String, Costs)>,
    /// The heaviest directories (by their path, bucket first), the same way.
    pub dirs: Vec<(String, Costs)>,
    /// How far a listed name's or directory's count may be short (0 when every name and
    /// directory of the window fit in the lists).
    pub error: u64,
}
