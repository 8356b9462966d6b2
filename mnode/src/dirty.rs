//! The dirty set of asynchronous parent updates (SwitchFS §5, ARCHITECTURE.md "Parent-directory
//! updates"), kept by a directory's owner: which of its directories other groups have changed
//! without pushing the change-log entries yet, and which groups did.
//!
//! Pure state, no I/O. A group that commits a batch changing directory D owned here sends one
//! mark per batch ([`DirtySet::mark`], via `MetaRequest::MarkDirty`) *before* it answers its
//! clients; a reader of D's attributes asks [`DirtySet::check`], pulls from the contributors it
//! names, and clears with the token it got ([`DirtySet::clear`]): a mark that arrived meanwhile
//! changed the token, so that stale clear is ignored and D stays dirty. After a restart the set
//! is empty but unknown: until every other group has reported the directories it still owes
//! entries for ([`DirtySet::reported`]), every directory counts as dirty with all groups as
//! contributors.
//!
//! A mark names the change-log seq of the records it announces; once the owner has applied
//! the source's records up to that seq (a push, or another reader's pull), the mark is void and
//! goes ([`DirtySet::applied`]), so directories nobody reads do not stay in the set.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use saker_namespace::GroupId;
use saker_rpc::InodeId;

/// What a reader of a directory's attributes must do first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// Nothing is pending: read.
    Clean,
    /// Pull from these groups, then clear with `token`.
    Pull { sources: Vec<GroupId>, token: u64 },
    /// The set is being rebuilt: pull from every group (nothing to clear).
    PullAll,
}

struct Entry {
    /// Per contributor, the highest seq of its marks.
    sources: BTreeMap<GroupId, u64>,
    token: u64,
}

pub struct DirtySet {
    dirs: HashMap<InodeId, Entry>,
    /// Per contributor, its marks by seq (what [`DirtySet::applied`] may void).
    by_source: HashMap<GroupId, BTreeMap<u64, Vec<InodeId>>>,
    /// Per contributor, the seq up to which its records are applied here (since start).
    applied: HashMap<GroupId, u64>,
    next_token: u64,
    /// Groups that have not reported since the owner started; `None` once all have.
    unreported: Option<BTreeSet<GroupId>>,
}

impl DirtySet {
    /// A set that counts everything dirty until each of `peers` has reported.
    pub fn rebuilding(peers: impl IntoIterator<Item = GroupId>) -> Self {
        let unreported: BTreeSet<GroupId> = peers.into_iter().collect();
        Self {
            dirs: HashMap::new(),
            by_source: HashMap::new(),
            applied: HashMap::new(),
            next_token: 1,
            unreported: (!unreported.is_empty()).then_some(unreported),
        }
    }

    /// From now on, counts everything dirty until each of `peers` has reported (marks taken
    /// so far are kept).
    pub fn await_reports(&mut self, peers: impl IntoIterator<Item = GroupId>) {
        let peers: BTreeSet<GroupId> = peers.into_iter().collect();
        self.unreported = (!peers.is_empty()).then_some(peers);
    }

    /// Group `source` has committed changes to `dir` (its change-log records up to `seq`)
    /// that it may not have pushed.
    pub fn mark(&mut self, dir: InodeId, source: GroupId, seq: u64) {
        if self.applied.get(&source).is_some_and(|&a| a >= seq) {
            // Applied already (the push overtook the mark).
            return;
        }
        let token = self.next_token;
        self.next_token += 1;
        let e = self.dirs.entry(dir).or_insert_with(|| Entry {
            sources: BTreeMap::new(),
            token,
        });
        let marked = e.sources.entry(source).or_insert(seq);
        *marked = (*marked).max(seq);
        e.token = token;
        if seq == u64::MAX {
            // A mark without a seq (a report after a restart) goes with a reader's pull only.
            return;
        }
        self.by_source
            .entry(source)
            .or_default()
            .entry(seq)
            .or_default()
            .push(dir);
    }

    /// This owner has applied `source`'s records up to `seq`: marks of `source` at or below it
    /// are void; a directory left without any goes.
    pub fn applied(&mut self, source: GroupId, seq: u64) {
        let a = self.applied.entry(source).or_insert(0);
        *a = (*a).max(seq);
        let Some(marks) = self.by_source.get_mut(&source) else {
            return;
        };
        let later = marks.split_off(&seq.saturating_add(1));
        let void = std::mem::replace(marks, later);
        for dir in void.into_values().flatten() {
            if let Some(e) = self.dirs.get_mut(&dir) {
                if e.sources.get(&source).is_some_and(|&m| m <= seq) {
                    e.sources.remove(&source);
                    if e.sources.is_empty() {
                        self.dirs.remove(&dir);
                    }
                }
            }
        }
    }

    pub fn check(&self, dir: InodeId) -> Need {
        if self.unreported.is_some() {
            return Need::PullAll;
        }
        match self.dirs.get(&dir) {
            None => Need::Clean,
            Some(e) => Need::Pull {
                sources: e.sources.keys().copied().collect(),
                token: e.token,
            },
        }
    }

    /// The pull of `check`'s answer is applied: clears `dir` unless a mark came in since.
    /// Returns whether it was cleared.
    pub fn clear(&mut self, dir: InodeId, token: u64) -> bool {
        match self.dirs.get(&dir) {
            Some(e) if e.token == token => {
                self.dirs.remove(&dir);
                true
            }
            _ => false,
        }
    }

    /// Group `source` reported, after this owner started, the directories it still holds
    /// change-log entries for.
    pub fn reported(&mut self, source: GroupId, dirs: &[InodeId]) {
        // Without their seqs: voided by a reader's pull only.
        for &d in dirs {
            self.mark(d, source, u64::MAX);
        }
        if let Some(left) = &mut self.unreported {
            left.remove(&source);
            if left.is_empty() {
                self.unreported = None;
            }
        }
    }

    /// Groups that have not reported yet.
    pub fn unreported(&self) -> Vec<GroupId> {
        self.unreported
            .as_ref()
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Dirty directories now.
    pub fn len(&self) -> usize {
        self.dirs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> DirtySet {
        DirtySet::rebuilding([])
    }

    #[test]
    fn a_marked_directory_needs_a_pull_from_its_contributors_only() {
        let mut s = ready();
        assert_eq!(s.check(7), Need::Clean);
        s.mark(7, 3, 1);
        s.mark(7, 2, 1);
        s.mark(8, 4, 1);
        let Need::Pull { sources, token } = s.check(7) else {
            panic!("dirty")
        };
        assert_eq!(sources, vec![2, 3]);
        assert!(s.clear(7, token));
        assert_eq!(s.check(7), Need::Clean);
        assert!(matches!(s.check(8), Need::Pull { ref sources, .. } if sources == &[4]));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_clear_that_raced_a_new_mark_is_ignored() {
        let mut s = ready();
        s.mark(7, 3, 1);
        let Need::Pull { token, .. } = s.check(7) else {
            panic!("dirty")
        };
        // A mark arrives while the reader pulls: its change may not be in the pull.
        s.mark(7, 3, 2);
        assert!(!s.clear(7, token));
        let Need::Pull { token: newer, .. } = s.check(7) else {
            panic!("still dirty")
        };
        assert_ne!(newer, token);
        assert!(s.clear(7, newer));
        // Clearing an absent directory does nothing.
        assert!(!s.clear(7, newer));
    }

    #[test]
    fn after_a_restart_everything_is_dirty_until_every_group_reported() {
        let mut s = DirtySet::rebuilding([2, 3]);
        assert_eq!(s.check(9), Need::PullAll);
        s.reported(2, &[5]);
        assert_eq!(s.unreported(), vec![3]);
        assert_eq!(
            s.check(9),
            Need::PullAll,
            "group 3 may still owe entries for 9"
        );
        s.reported(3, &[]);
        assert_eq!(s.check(9), Need::Clean);
        assert!(matches!(s.check(5), Need::Pull { ref sources, .. } if sources == &[2]));
        // A late second report changes nothing but marks.
        s.reported(3, &[9]);
        assert!(matches!(s.check(9), Need::Pull { .. }));
    }

    #[test]
    fn marks_go_once_their_records_are_applied() {
        let mut s = ready();
        s.mark(7, 3, 10);
        s.mark(7, 2, 4);
        s.mark(8, 3, 12);
        // Group 3's records up to 10 are applied: its mark on 7 is void, on 8 not.
        s.applied(3, 10);
        assert!(matches!(s.check(7), Need::Pull { ref sources, .. } if sources == &[2]));
        assert!(matches!(s.check(8), Need::Pull { ref sources, .. } if sources == &[3]));
        s.applied(2, 4);
        assert_eq!(s.check(7), Need::Clean);
        s.applied(3, 12);
        assert_eq!(s.len(), 0);
        // A mark its push overtook is no mark; a later one is.
        s.mark(9, 3, 11);
        assert_eq!(s.check(9), Need::Clean);
        s.mark(9, 3, 13);
        assert!(matches!(s.check(9), Need::Pull { .. }));
        // A directory marked again with a later seq stays for that one.
        s.mark(9, 3, 15);
        s.applied(3, 13);
        assert!(matches!(s.check(9), Need::Pull { .. }));
        s.applied(3, 15);
        assert_eq!(s.check(9), Need::Clean);
    }
}
