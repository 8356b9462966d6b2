//! Garbage collection of MVCC versions below a safe point, as TiKV's GC does: for each key
//! the newest record at or below the safe point that is a put stays (a read at the safe point
//! or later needs it), and everything older goes, as do lock and rollback records and a
//! newest delete below it. A transaction's locks pin what is at or above its start: the GC
//! worker of a real cluster resolves every lock below the safe point before moving it; this
//! one collects only below the oldest lock instead.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::{Key, Kind, Mvcc};

/// The records of the keys under a prefix, for tests and stats.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Versions {
    /// Keys with records.
    pub keys: usize,
    /// Records held, over every key.
    pub held: usize,
    /// Records collected by GC so far, over every key.
    pub collected: u64,
    /// Locks held.
    pub locks: usize,
    /// Per key with more than one record written: records held and collected.
    pub per_key: Vec<(Key, usize, u64)>,
}

impl Mvcc {
    /// Collects the versions no read at `safe_point` or later needs; how many went.
    pub fn gc(&mut self, safe_point: u64) -> usize {
        let oldest_lock = self.locks.values().map(|l| l.start_ts).min();
        let below = oldest_lock.map_or(safe_point, |l| safe_point.min(l.saturating_sub(1)));
        if below <= self.collected_below {
            return 0;
        }
        self.collected_below = below;
        let mut removed = 0;
        let mut emptied = Vec::new();
        for (key, records) in self.writes.iter_mut() {
            let old: Vec<u64> = records.range(..=below).map(|(ts, _)| *ts).collect();
            // The newest put or delete at or below the safe point decides what a read there
            // sees: a put stays, a delete goes with everything older.
            let keep = records
                .range(..=below)
                .rev()
                .find(|(_, w)| matches!(w.kind, Kind::Put(_) | Kind::Del))
                .and_then(|(ts, w)| matches!(w.kind, Kind::Put(_)).then_some(*ts));
            let mut gone = 0;
            for ts in old {
                if Some(ts) != keep {
                    records.remove(&ts);
                    gone += 1;
                }
            }
            if gone > 0 {
                *self.collected.entry(key.clone()).or_default() += gone;
                removed += gone as usize;
            }
            if records.is_empty() {
                emptied.push(key.clone());
            }
        }
        for key in emptied {
            self.writes.remove(&key);
        }
        removed
    }

    /// The records of the keys starting with `prefix`.
    pub fn versions(&self, prefix: &[u8]) -> Versions {
        let from = (Bound::Included(prefix.to_vec()), Bound::Unbounded);
        let mut v = Versions {
            locks: self
                .locks
                .range::<Key, _>(from.clone())
                .take_while(|(k, _)| k.starts_with(prefix))
                .count(),
            ..Default::default()
        };
        let held = self
            .writes
            .range::<Key, _>(from.clone())
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, r)| (k, r.len()));
        let mut keys: BTreeMap<&Key, (usize, u64)> = BTreeMap::new();
        for (k, n) in held {
            v.keys += 1;
            v.held += n;
            keys.entry(k).or_default().0 = n;
        }
        let collected = self
            .collected
            .range::<Key, _>(from)
            .take_while(|(k, _)| k.starts_with(prefix));
        for (k, n) in collected {
            v.collected += n;
            keys.entry(k).or_default().1 = *n;
        }
        v.per_key = keys
            .into_iter()
            .filter(|(_, (held, collected))| *held as u64 + collected > 1)
            .map(|(k, (held, collected))| (k.clone(), held, collected))
            .collect();
        v
    }
}
