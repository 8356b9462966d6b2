//! The coordinator's path locks (FalconFS §4.3): an operation locks its target paths
//! exclusively and every ancestor of them shared, all in one global order (sorted paths), so
//! a rename never runs while another moves or removes a directory above it, and two
//! operations never wait on each other in a cycle.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use tracing::Instrument;

type Table = Arc<Mutex<HashMap<Vec<String>, Arc<RwLock<()>>>>>;

#[derive(Default)]
pub struct PathLocks {
    table: Table,
}

enum Guard {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Exclusive(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// Held locks; dropping releases them and forgets paths nobody waits on.
pub struct Held {
    table: Table,
    guards: Vec<(Vec<String>, Guard)>,
}

impl PathLocks {
    /// Locks `targets` exclusively and their ancestors (not the root) shared.
    pub async fn lock(&self, targets: &[&[String]]) -> Held {
        let span = tracing::debug_span!("coordinator.lock", targets = targets.len());
        self.lock_all(targets).instrument(span).await
    }

    async fn lock_all(&self, targets: &[&[String]]) -> Held {
        let mut want: BTreeMap<Vec<String>, bool> = BTreeMap::new();
        for t in targets {
            for depth in 1..t.len() {
                want.entry(t[..depth].to_vec()).or_insert(false);
            }
            want.insert(t.to_vec(), true);
        }
        let mut held = Held {
            table: self.table.clone(),
            guards: Vec::with_capacity(want.len()),
        };
        for (path, exclusive) in want {
            let lock = self.table.lock().entry(path.clone()).or_default().clone();
            let guard = if exclusive {
                Guard::Exclusive(lock.write_owned().await)
            } else {
                Guard::Shared(lock.read_owned().await)
            };
            held.guards.push((path, guard));
        }
        held
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let guards = std::mem::take(&mut self.guards);
        let mut table = self.table.lock();
        for (path, guard) in guards {
            drop(guard);
            // Only the table holds it: nobody holds or waits.
            if table.get(&path).is_some_and(|l| Arc::strong_count(l) == 1) {
                table.remove(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(str::to_string).collect()
    }

    #[tokio::test]
    async fn an_ancestor_lock_excludes_a_rename_of_the_ancestor() {
        let locks = Arc::new(PathLocks::default());
        let child = locks.lock(&[&p("b/a/x")]).await;
        // Shared ancestors do not exclude each other.
        let sibling = locks.lock(&[&p("b/a/y")]).await;
        // Moving b/a waits for both.
        let l2 = locks.clone();
        let mover = tokio::spawn(async move {
            let _g = l2.lock(&[&p("b/a"), &p("b/z")]).await;
        });
        tokio::task::yield_now().await;
        assert!(
            tokio::time::timeout(Duration::from_millis(50), async {
                while !mover.is_finished() {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .is_err(),
            "the rename of an ancestor ran while a descendant was locked"
        );
        drop(child);
        drop(sibling);
        mover.await.unwrap();
        assert!(
            locks.table.lock().is_empty(),
            "released paths are forgotten"
        );
    }
}
