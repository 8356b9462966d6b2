//! A [`Router`] replaceable at run time by a newer exception table: an MNode installs the one
//! the coordinator pushes (`SetExceptions`) after it moved a redirected name's inodes; a
//! client installs the one it fetched when a reply showed its own was stale.

use std::sync::Arc;

use crate::{ExceptionTable, Router};
use parking_lot::RwLock;

/// A router shared by everything that routes requests (an MNode's request path and executor,
/// a client's requests).
#[derive(Clone)]
pub struct SharedRouter(Arc<RwLock<Arc<Router>>>);

impl SharedRouter {
    pub fn new(router: Router) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(router))))
    }

    /// The current router (a snapshot: one op routes by one table).
    pub fn get(&self) -> Arc<Router> {
        self.0.read().clone()
    }

    /// Installs `table` if it is newer than the one in use; returns whether it did.
    pub fn install(&self, table: &ExceptionTable) -> bool {
        let mut cur = self.0.write();
        if table.version() <= cur.exceptions_version() {
            return false;
        }
        let mut next = (**cur).clone();
        next.set_exceptions(table.clone());
        *cur = Arc::new(next);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Exception, Ring};

    #[test]
    fn only_newer_tables_are_installed() {
        let shared = SharedRouter::new(Router::new(Ring::new(&[1, 2], 64), ExceptionTable::new()));
        let mut t = ExceptionTable::new();
        t.set("Makefile", Exception::Override(2));
        assert!(shared.install(&t));
        assert_eq!(shared.get().route_name("Makefile"), crate::Route::Group(2));
        let stale = ExceptionTable::new();
        assert!(!shared.install(&stale), "an older table is ignored");
        assert!(!shared.install(&t), "the same version is ignored");
        assert_eq!(shared.get().exceptions_version(), t.version());
    }
}
