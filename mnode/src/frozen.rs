//! Directories frozen by the coordinator's rmdir and rename protocols, paths blocked by its
//! file moves, and the waits on them: the leader's memory of the coordinator's holds.
//!
//! While a directory is frozen at its owner, writes that resolve through it are held back and
//! remote lookups of it wait, so no new entry can appear under it while the coordinator checks
//! that it is empty. Each hold is also a record in the group's state machine (`node::holds`),
//! so a new leader (or a restarted owner) holds what its predecessor held. A coordinator that
//! restarts finishes its logged work (renames, name migrations), then releases whatever its
//! previous run still held at every group (`ThawAll`) before it takes new protocol calls.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use saker_rpc::{InodeId, MetaError};
use tokio::sync::watch;

/// How long an operation waits for a frozen directory before giving up.
pub const FREEZE_WAIT: Duration = Duration::from_secs(30);

/// How many holds are on one key, and the sender whose drop wakes the waiters.
type Holds<K> = Mutex<HashMap<K, (u32, watch::Sender<()>)>>;

#[derive(Default)]
pub struct FrozenDirs {
    dirs: Holds<InodeId>,
    /// Bumped by every freeze and thaw, so a reader can tell that one happened meanwhile.
    generation: std::sync::atomic::AtomicU64,
    /// Paths whose writes are held back while the coordinator moves the file there.
    paths: Holds<Vec<String>>,
    /// Names whose requests are held back while their inodes move between groups.
    names: Holds<String>,
}

/// Waits until `rx`'s sender is dropped, for at most [`FREEZE_WAIT`].
async fn until_dropped(mut rx: watch::Receiver<()>, what: &str) -> Result<(), MetaError> {
    match tokio::time::timeout(FREEZE_WAIT, async {
        // Err means the sender is gone: thawed or unblocked.
        while rx.changed().await.is_ok() {}
    })
    .await
    {
        Ok(()) => Ok(()),
        Err(_) => Err(MetaError::Unavailable(format!(
            "{what} stayed frozen for {FREEZE_WAIT:?}"
        ))),
    }
}

impl FrozenDirs {
    pub fn is_frozen(&self, id: InodeId) -> bool {
        self.dirs.lock().contains_key(&id)
    }

    /// Changes with every freeze and thaw of any directory.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Freezes `id` (freezes nest: each needs its own `thaw`).
    pub fn freeze(&self, id: InodeId) {
        let mut dirs = self.dirs.lock();
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        dirs.entry(id)
            .or_insert_with(|| (0, watch::channel(()).0))
            .0 += 1;
    }

    /// Ends one freeze of `id`; the last one wakes the waiters.
    pub fn thaw(&self, id: InodeId) {
        let mut dirs = self.dirs.lock();
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Some((count, _)) = dirs.get_mut(&id) {
            *count -= 1;
            if *count == 0 {
                // Dropping the sender wakes every receiver.
                dirs.remove(&id);
            }
        }
    }

    /// Releases every freeze and block (what a coordinator that stopped mid-protocol left
    /// behind: its successor calls this once it has finished the logged work); returns how
    /// many holds there were.
    pub fn thaw_all(&self) -> usize {
        let mut dirs = self.dirs.lock();
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut paths = self.paths.lock();
        let mut names = self.names.lock();
        let held = dirs.len() + paths.len() + names.len();
        // Dropping the senders wakes every waiter.
        dirs.clear();
        paths.clear();
        names.clear();
        held
    }

    /// Waits until `id` is not frozen.
    pub async fn wait(&self, id: InodeId) -> Result<(), MetaError> {
        let rx = match self.dirs.lock().get(&id) {
            Some((_, tx)) => tx.subscribe(),
            None => return Ok(()),
        };
        until_dropped(rx, &format!("directory {id}")).await
    }

    /// Blocks writes to `path` (blocks nest: each needs its own `unblock`).
    pub fn block(&self, path: &[String]) {
        self.paths
            .lock()
            .entry(path.to_vec())
            .or_insert_with(|| (0, watch::channel(()).0))
            .0 += 1;
    }

    /// Ends one block of `path`; the last one wakes the waiters. Unblocking a path that is not
    /// blocked does nothing (a coordinator finishing a move after its restart does that).
    pub fn unblock(&self, path: &[String]) {
        let mut paths = self.paths.lock();
        if let Some((count, _)) = paths.get_mut(path) {
            *count -= 1;
            if *count == 0 {
                paths.remove(path);
            }
        }
    }

    /// The first path `paths` that is blocked, if any.
    pub fn blocked(&self, paths: &[&[String]]) -> Option<Vec<String>> {
        let blocked = self.paths.lock();
        if blocked.is_empty() {
            return None;
        }
        paths
            .iter()
            .find(|p| blocked.contains_key(**p))
            .map(|p| p.to_vec())
    }

    /// Blocks every request for a path ending in `name` (blocks nest).
    pub fn block_name(&self, name: &str) {
        self.names
            .lock()
            .entry(name.to_string())
            .or_insert_with(|| (0, watch::channel(()).0))
            .0 += 1;
    }

    /// Ends one block of `name` (nothing if it is not blocked).
    pub fn unblock_name(&self, name: &str) {
        let mut names = self.names.lock();
        if let Some((count, _)) = names.get_mut(name) {
            *count -= 1;
            if *count == 0 {
                names.remove(name);
            }
        }
    }

    /// The blocked name the last component of one of `paths` is, if any.
    pub fn blocked_name(&self, paths: &[&[String]]) -> Option<String> {
        let names = self.names.lock();
        if names.is_empty() {
            return None;
        }
        paths
            .iter()
            .filter_map(|p| p.last())
            .find(|n| names.contains_key(n.as_str()))
            .cloned()
    }

    /// Waits until `name` is not blocked.
    pub async fn wait_name(&self, name: &str) -> Result<(), MetaError> {
        let rx = match self.names.lock().get(name) {
            Some((_, tx)) => tx.subscribe(),
            None => return Ok(()),
        };
        until_dropped(rx, &format!("name {name}")).await
    }

    /// Waits until `path` is not blocked.
    pub async fn wait_path(&self, path: &[String]) -> Result<(), MetaError> {
        let rx = match self.paths.lock().get(path) {
            Some((_, tx)) => tx.subscribe(),
            None => return Ok(()),
        };
        until_dropped(rx, &format!("path /{}", path.join("/"))).await
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn blocked_paths_hold_writers_until_unblocked() {
        let f = std::sync::Arc::new(FrozenDirs::default());
        let p = vec!["b".to_string(), "f".to_string()];
        let other = vec!["b".to_string(), "g".to_string()];
        f.block(&p);
        f.block(&p);
        assert_eq!(f.blocked(&[&other, &p]), Some(p.clone()));
        assert_eq!(f.blocked(&[&other]), None);
        f.unblock(&p);
        assert!(f.blocked(&[&p]).is_some(), "blocks nest");
        let waiter = {
            let (f, p) = (f.clone(), p.clone());
            tokio::spawn(async move { f.wait_path(&p).await })
        };
        f.unblock(&p);
        waiter.await.unwrap().unwrap();
        assert_eq!(f.blocked(&[&p]), None);
        f.unblock(&p); // not blocked: nothing happens
        assert_eq!(f.blocked(&[&p]), None);
    }

    use super::*;

    #[tokio::test]
    async fn waiters_wake_on_the_last_thaw() {
        let f = std::sync::Arc::new(FrozenDirs::default());
        f.wait(7).await.unwrap();
        f.freeze(7);
        f.freeze(7);
        assert!(f.is_frozen(7));
        let waiter = tokio::spawn({
            let f = f.clone();
            async move { f.wait(7).await }
        });
        // Single-threaded runtime: yielding runs the waiter until it blocks.
        tokio::task::yield_now().await;
        f.thaw(7);
        tokio::task::yield_now().await;
        assert!(f.is_frozen(7));
        assert!(!waiter.is_finished(), "one freeze is still held");
        f.thaw(7);
        assert!(!f.is_frozen(7));
        waiter.await.unwrap().unwrap();
        f.thaw(7); // a stray thaw is harmless
        assert!(!f.is_frozen(7));
    }
}
