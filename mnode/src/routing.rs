//! The router an MNode routes by, replaceable at run time: the coordinator pushes a newer
//! exception table (`SetExceptions`) after it moved the inodes of a redirected name.

use std::sync::Arc;

use parking_lot::RwLock;
use saker_namespace::{ExceptionTable, Router};

/// A router shared by an MNode's request path and its executor.
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
    use saker_namespace::{Exception, Ring};

    #[test]
    fn only_newer_tables_are_installed() {
        let shared = SharedRouter::new(Router::new(Ring::new(&[1, 2], 64), ExceptionTable::new()));
        let mut t = ExceptionTable::new();
        t.set("Makefile", Exception::Override(2));
        assert!(shared.install(&t));
        assert_eq!(
            shared.get().route_name("Makefile"),
            saker_namespace::Route::Group(2)
        );
        let stale = ExceptionTable::new();
        assert!(!shared.install(&stale), "an older table is ignored");
        assert!(!shared.install(&t), "the same version is ignored");
        assert_eq!(shared.get().exceptions_version(), t.version());
    }
}
