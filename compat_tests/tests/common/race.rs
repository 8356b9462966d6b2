//! A setting changed while writes run: when each change was sent and when it was answered,
//! so a write can be checked against the setting that was in force for the whole of it.
//!
//! A write sent after a change was answered and answered before the next one was sent ran
//! under that change's setting and nothing else: it must show it. A write that overlapped a
//! change may show either side (it was ordered before or after it).

use std::time::Instant;

/// The changes of one setting, in order, from `initial`.
pub struct Changes<S> {
    initial: S,
    /// (sent, answered, the setting).
    changes: Vec<(Instant, Instant, S)>,
}

impl<S: Clone> Changes<S> {
    pub fn new(initial: S) -> Self {
        Self {
            initial,
            changes: Vec::new(),
        }
    }

    /// A change to `setting`, sent at `sent` and answered at `answered` (after every change
    /// recorded before).
    pub fn record(&mut self, sent: Instant, answered: Instant, setting: S) {
        assert!(
            self.changes.last().is_none_or(|c| c.1 <= sent),
            "changes overlap"
        );
        self.changes.push((sent, answered, setting));
    }

    /// The setting in force from `sent` to `answered`, if no change overlapped that time.
    pub fn in_force(&self, sent: Instant, answered: Instant) -> Option<S> {
        let before = self.changes.iter().rposition(|c| c.1 <= sent);
        let next = before.map_or(0, |i| i + 1);
        if self.changes.get(next).is_some_and(|c| c.0 < answered) {
            return None;
        }
        Some(match before {
            Some(i) => self.changes[i].2.clone(),
            None => self.initial.clone(),
        })
    }

    pub fn len(&self) -> usize {
        self.changes.len()
    }
}
