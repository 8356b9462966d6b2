//! A group's feed clock: a number its leader raises each time a batch that wrote change-feed
//! records is applied, and that a consumer long-polls (`FeedRequest::Wait`), so that quiet
//! groups cost a consumer one waiting request each rather than a read every few hundred
//! milliseconds.
//!
//! The clock lives in memory: a new leader starts it again (at another value than any a
//! consumer saw, which wakes it: a consumer reads the feeds on any change, so a spurious wake
//! costs one read and a missed one is impossible for records applied on this leader).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Most a `Wait` is held before it is answered anyway.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

pub struct FeedClock {
    value: AtomicU64,
    changed: Notify,
}

impl Default for FeedClock {
    fn default() -> Self {
        // Not 0, and different on every start (a consumer that saw another leader's value
        // is woken at once).
        let start = rand::random::<u32>() as u64 + 1;
        Self {
            value: AtomicU64::new(start << 32),
            changed: Notify::new(),
        }
    }
}

impl FeedClock {
    /// Feed records were applied.
    pub fn bump(&self) {
        self.value.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    pub fn now(&self) -> u64 {
        self.value.load(Ordering::SeqCst)
    }

    /// The clock once it is not `seen`, or as it is after `wait` (at most [`MAX_WAIT`]).
    pub async fn wait(&self, seen: u64, wait: Duration) -> u64 {
        let deadline = tokio::time::Instant::now() + wait.min(MAX_WAIT);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check: a bump between the two is not lost.
            changed.as_mut().enable();
            let now = self.now();
            if now != seen {
                return now;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_wait_ends_at_a_bump_or_its_deadline() {
        let clock = Arc::new(FeedClock::default());
        let seen = clock.now();
        // Another value: at once.
        assert_eq!(clock.wait(seen - 1, MAX_WAIT).await, seen);
        let waiter = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.wait(seen, MAX_WAIT).await })
        };
        tokio::task::yield_now().await;
        clock.bump();
        assert_eq!(waiter.await.unwrap(), seen + 1);
        // Nothing happens: the deadline answers.
        let started = tokio::time::Instant::now();
        assert_eq!(
            clock.wait(seen + 1, Duration::from_millis(50)).await,
            seen + 1
        );
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
