//! `Router`: hybrid metadata indexing — the ring plus the exception table decide which MNode
//! group owns a name.
//!
//! The owner of a path is decided by its last component only (FalconFS filename hashing); a
//! bucket, being the top-level directory, is routed by its own name like any other.

use crate::exception::{Exception, ExceptionTable};
use crate::hash::{name_hash, pid_name_hash};
use crate::key::ObjectPath;
use crate::ring::{GroupId, Ring, DEFAULT_VNODES};

/// Where a request for a name goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Straight to this group.
    Group(GroupId),
    /// The name is placed by `(pid, name)`: send to any MNode, which resolves the parent id
    /// and forwards with [`Router::route_pid_name`].
    PathWalk,
}

/// The ring and the exception table, as one holder (client, MNode, coordinator) knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Router {
    ring: Ring,
    exceptions: ExceptionTable,
}

impl Router {
    pub fn new(ring: Ring, exceptions: ExceptionTable) -> Router {
        Router { ring, exceptions }
    }

    /// Everything on one group, no exceptions.
    pub fn single(group: GroupId) -> Router {
        Router::new(Ring::new(&[group], DEFAULT_VNODES), ExceptionTable::new())
    }

    /// Routes a name: its override if any, `PathWalk` if it is path-walked, else the ring owner
    /// of [`name_hash`].
    pub fn route_name(&self, name: &str) -> Route {
        match self.exceptions.get(name) {
            Some(Exception::Override(g)) => Route::Group(*g),
            Some(Exception::PathWalk) => Route::PathWalk,
            None => Route::Group(self.home(name)),
        }
    }

    /// The ring owner of a name: where it lives without an exception-table entry.
    pub fn home(&self, name: &str) -> GroupId {
        self.ring.owner(name_hash(name.as_bytes()))
    }

    /// Routes a path by its last component.
    pub fn route_path(&self, path: &ObjectPath) -> Route {
        self.route_name(path.last())
    }

    /// The group that holds the inode `(pid, name)`: [`Router::route_name`], with a path-walked
    /// name placed by its parent.
    pub fn owner(&self, pid: u64, name: &str) -> GroupId {
        match self.route_name(name) {
            Route::Group(g) => g,
            Route::PathWalk => self.route_pid_name(pid, name),
        }
    }

    /// The owner of a path-walked name once its parent id is known.
    pub fn route_pid_name(&self, pid: u64, name: &str) -> GroupId {
        self.ring.owner(pid_name_hash(pid, name.as_bytes()))
    }

    pub fn exceptions_version(&self) -> u64 {
        self.exceptions.version()
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    pub fn exceptions(&self) -> &ExceptionTable {
        &self.exceptions
    }

    /// Installs a newer exception table (e.g. after a response carried a higher version).
    pub fn set_exceptions(&mut self, exceptions: ExceptionTable) {
        self.exceptions = exceptions;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_to_path;

    fn router() -> Router {
        let mut ex = ExceptionTable::new();
        ex.set("train", Exception::PathWalk);
        ex.set("hot", Exception::Override(42));
        Router::new(Ring::new(&[1, 2, 3, 4], DEFAULT_VNODES), ex)
    }

    #[test]
    fn exceptions_win_over_the_ring() {
        let r = router();
        assert_eq!(r.route_name("train"), Route::PathWalk);
        assert_eq!(r.route_name("hot"), Route::Group(42));
        let plain = r.ring().owner(name_hash(b"cold"));
        assert_eq!(r.route_name("cold"), Route::Group(plain));
        assert_eq!(r.exceptions_version(), 2);
    }

    #[test]
    fn pid_name_uses_the_pid_hash() {
        let r = router();
        for pid in 1..50u64 {
            assert_eq!(
                r.route_pid_name(pid, "train"),
                r.ring().owner(pid_name_hash(pid, b"train"))
            );
        }
        // Path-walked names spread over groups by parent.
        let owners: std::collections::BTreeSet<_> = (1..200u64)
            .map(|pid| r.route_pid_name(pid, "train"))
            .collect();
        assert_eq!(owners.len(), 4);
    }

    #[test]
    fn path_is_routed_by_last_component_only() {
        let r = router();
        let a = key_to_path("b1", "x/y/hot").unwrap();
        let b = key_to_path("other", "hot").unwrap();
        assert_eq!(r.route_path(&a), Route::Group(42));
        assert_eq!(r.route_path(&b), Route::Group(42));
        let d = key_to_path("b1", "x/cold/").unwrap();
        assert_eq!(r.route_path(&d), r.route_name("cold"));
    }

    #[test]
    fn owner_combines_both_routes() {
        let r = router();
        assert_eq!(r.owner(7, "hot"), 42);
        assert_eq!(r.owner(7, "train"), r.route_pid_name(7, "train"));
        assert_eq!(r.owner(7, "cold"), r.ring().owner(name_hash(b"cold")));
    }

    #[test]
    fn single_routes_everything_to_its_group() {
        let r = Router::single(5);
        for n in ["a", "b", "bucket", "x.jpg"] {
            assert_eq!(r.route_name(n), Route::Group(5));
            assert_eq!(r.route_pid_name(9, n), 5);
        }
        assert_eq!(r.exceptions_version(), 0);
    }

    #[test]
    fn set_exceptions_replaces_the_table() {
        let mut r = Router::single(5);
        let mut ex = ExceptionTable::new();
        ex.set("a", Exception::Override(6));
        r.set_exceptions(ex);
        assert_eq!(r.route_name("a"), Route::Group(6));
        assert_eq!(r.exceptions_version(), 1);
    }
}
