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

use std::collections::{BTreeSet, HashMap};

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
    sources: BTreeSet<GroupId>,
    token: u64,
}

pub struct DirtySet {
    dirs: HashMap<InodeId, Entry>,
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

    /// Group `source` has committed changes to `dir` that it may not have pushed.
    pub fn mark(&mut self, dir: InodeId, source: GroupId) {
        let token = self.next_token;
        self.next_token += 1;
        let e = self.dirs.entry(dir).or_insert_with(|| Entry {
            sources: BTreeSet::new(),
            token,
        });
        e.sources.insert(source);
        e.token = token;
    }

    pub fn check(&self, dir: InodeId) -> Need {
        if self.unreported.is_some() {
            return Need::PullAll;
        }
        match self.dirs.get(&dir) {
            None => Need::Clean,
            Some(e) => Need::Pull {
                sources: e.sources.iter().copied().collect(),
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
        for &d in dirs {
            self.mark(d, source);
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
        s.mark(7, 3);
        s.mark(7, 2);
        s.mark(8, 4);
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
        s.mark(7, 3);
        let Need::Pull { token, .. } = s.check(7) else {
            panic!("dirty")
        };
        // A mark arrives while the reader pulls: its change may not be in the pull.
        s.mark(7, 3);
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
}
