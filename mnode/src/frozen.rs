//! Directories frozen by the coordinator's rmdir protocol, and the waits on them.
//!
//! While a directory is frozen at its owner, writes that resolve through it are held back and
//! remote lookups of it wait, so no new entry can appear under it while the coordinator checks
//! that it is empty. Freezes live in memory: a restarted owner has none, and the coordinator's
//! final `RemoveDir` re-checks emptiness at the owner.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;
use saker_rpc::{InodeId, MetaError};
use tokio::sync::watch;

/// How long an operation waits for a frozen directory before giving up.
pub const FREEZE_WAIT: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct FrozenDirs {
    dirs: Mutex<HashMap<InodeId, (u32, watch::Sender<()>)>>,
}

impl FrozenDirs {
    pub fn is_frozen(&self, id: InodeId) -> bool {
        self.dirs.lock().contains_key(&id)
    }

    /// Freezes `id` (freezes nest: each needs its own `thaw`).
    pub fn freeze(&self, id: InodeId) {
        let mut dirs = self.dirs.lock();
        dirs.entry(id)
            .or_insert_with(|| (0, watch::channel(()).0))
            .0 += 1;
    }

    /// Ends one freeze of `id`; the last one wakes the waiters.
    pub fn thaw(&self, id: InodeId) {
        let mut dirs = self.dirs.lock();
        if let Some((count, _)) = dirs.get_mut(&id) {
            *count -= 1;
            if *count == 0 {
                // Dropping the sender wakes every receiver.
                dirs.remove(&id);
            }
        }
    }

    /// Waits until `id` is not frozen.
    pub async fn wait(&self, id: InodeId) -> Result<(), MetaError> {
        let rx = match self.dirs.lock().get(&id) {
            Some((_, tx)) => tx.subscribe(),
            None => return Ok(()),
        };
        let mut rx = rx;
        match tokio::time::timeout(FREEZE_WAIT, async {
            // Err means the sender is gone: the directory was thawed.
            while rx.changed().await.is_ok() {}
        })
        .await
        {
            Ok(()) => Ok(()),
            Err(_) => Err(MetaError::Unavailable(format!(
                "directory {id} stayed frozen for {FREEZE_WAIT:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
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
