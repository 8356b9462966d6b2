//! The tail of a group's raft log as entries, beside its encoded copy in the journal or store.
//!
//! openraft reads every entry back from the log after it appended it: on the leader once per
//! follower to replicate it, and on every replica to apply it. Decoding each of those reads
//! cost more server CPU per write than anything else the log did (a 4 KiB PUT on three nodes:
//! five decodes of the same entry). The entries handed to `append` are kept here instead, by
//! index, and read back as clones that share their batch ([`super::BatchEntry`] holds it in
//! an `Arc`).
//!
//! What the tail holds is always a suffix of the log: every entry the log has from the
//! tail's first index on, and nothing else. Appends, truncations and purges change both
//! alike; the tail drops its oldest entries to stay within [`TAIL_BYTES`] (of encoded
//! entries), and starts empty after a restart. A read takes from the tail what it has and
//! decodes the rest from the log.

use std::collections::BTreeMap;

use openraft::Entry;
use parking_lot::Mutex;

use super::TypeConfig;

/// Encoded bytes of entries a group's tail keeps at most. The log before a snapshot is
/// purged, and a group snapshots after 32 MiB of applied mutations (`SNAPSHOT_BYTES`) or
/// `snapshot_logs` entries: the tail holds the whole unpurged log of a group under a
/// steady load, and the few entries at its end that matter most under any load.
pub const TAIL_BYTES: usize = 32 << 20;

/// A group's newest log entries ([module docs](self)).
pub struct LogTail {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each entry with the size of its encoding.
    entries: BTreeMap<u64, (Entry<TypeConfig>, usize)>,
    bytes: usize,
}

impl Inner {
    /// Drops the entries from index `from` on.
    fn cut(&mut self, from: u64) {
        let dropped = self.entries.split_off(&from);
        self.bytes -= dropped.values().map(|(_, n)| n).sum::<usize>();
    }
}

impl LogTail {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            inner: Mutex::default(),
        }
    }

    /// `entries` (in index order, each with the size of its encoding) were appended to the
    /// log, replacing any it had from the first one's index on.
    pub fn appended(&self, entries: impl IntoIterator<Item = (Entry<TypeConfig>, usize)>) {
        let mut t = self.inner.lock();
        for (entry, size) in entries {
            let index = entry.log_id.index;
            let last = t.entries.last_key_value().map(|(&i, _)| i);
            match last {
                // The log has nothing between the tail's end and this entry: no gap.
                Some(last) if index > last && index - last > 1 => {
                    t.entries.clear();
                    t.bytes = 0;
                }
                Some(last) if index <= last => t.cut(index),
                _ => {}
            }
            t.entries.insert(index, (entry, size));
            t.bytes += size;
        }
        while t.bytes > self.cap {
            let Some((_, (_, size))) = t.entries.pop_first() else {
                break;
            };
            t.bytes -= size;
        }
    }

    /// The log dropped its entries from index `from` on.
    pub fn truncated(&self, from: u64) {
        self.inner.lock().cut(from);
    }

    /// The log dropped its entries up to index `upto`.
    pub fn purged(&self, upto: u64) {
        let mut t = self.inner.lock();
        let kept = match upto.checked_add(1) {
            Some(next) => t.entries.split_off(&next),
            None => BTreeMap::new(),
        };
        let dropped = std::mem::replace(&mut t.entries, kept);
        t.bytes -= dropped.values().map(|(_, n)| n).sum::<usize>();
    }

    /// The entries the tail has with `from <= index < to` (`to = None`: to the end), and the
    /// index from which on it has all of them: the caller reads those below it from the log.
    pub fn read(&self, from: u64, to: Option<u64>) -> (u64, Vec<Entry<TypeConfig>>) {
        let t = self.inner.lock();
        let Some(&first) = t.entries.keys().next() else {
            return (to.unwrap_or(u64::MAX), Vec::new());
        };
        let start = from.max(first);
        let (start, got) = match to {
            Some(to) if to <= start => (to, Vec::new()),
            Some(to) => (start, t.entries.range(start..to).map(clone_entry).collect()),
            None => (start, t.entries.range(start..).map(clone_entry).collect()),
        };
        (start, got)
    }
}

fn clone_entry((_, (e, _)): (&u64, &(Entry<TypeConfig>, usize))) -> Entry<TypeConfig> {
    e.clone()
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload, LogId};

    use super::*;

    fn entry(term: u64, index: u64) -> (Entry<TypeConfig>, usize) {
        let e = Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Blank,
        };
        (e, 10)
    }

    fn run(term: u64, r: std::ops::RangeInclusive<u64>) -> Vec<(Entry<TypeConfig>, usize)> {
        r.map(|i| entry(term, i)).collect()
    }

    /// (first index held, log ids read for `from..to`).
    fn read(t: &LogTail, from: u64, to: Option<u64>) -> (u64, Vec<(u64, u64)>) {
        let (start, got) = t.read(from, to);
        let ids = got
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect();
        (start, ids)
    }

    #[test]
    fn a_truncation_and_the_append_after_it_replace_the_conflicting_suffix() {
        let t = LogTail::new(usize::MAX);
        t.appended(run(1, 1..=6));
        // A follower's log diverged at 4: raft truncates, then appends the leader's entries.
        t.truncated(4);
        assert_eq!(read(&t, 1, None), (1, vec![(1, 1), (1, 2), (1, 3)]));
        t.appended(run(2, 4..=5));
        assert_eq!(read(&t, 3, Some(6)), (3, vec![(1, 3), (2, 4), (2, 5)]));
        // An append over held entries replaces them from its first index on, as the log does.
        t.appended(run(3, 2..=2));
        assert_eq!(read(&t, 0, None), (1, vec![(1, 1), (3, 2)]));
        assert_eq!(t.inner.lock().bytes, 20);
        // An append that would leave a hole starts the tail anew.
        t.appended(run(3, 9..=9));
        assert_eq!(read(&t, 0, None), (9, vec![(3, 9)]));
    }

    #[test]
    fn a_purge_drops_the_entries_up_to_its_index() {
        let t = LogTail::new(usize::MAX);
        t.appended(run(1, 1..=10));
        t.purged(4);
        // Below the tail's first index the caller reads the log.
        assert_eq!(read(&t, 2, Some(7)), (5, vec![(1, 5), (1, 6)]));
        assert_eq!(t.inner.lock().bytes, 60);
        // A purge past the end (a follower installed a snapshot) leaves nothing.
        t.purged(1 << 40);
        assert_eq!(read(&t, 0, None), (u64::MAX, vec![]));
        assert_eq!(read(&t, 0, Some(12)), (12, vec![]));
        assert_eq!(t.inner.lock().bytes, 0);
        t.appended(run(2, (1 << 40) + 1..=(1 << 40) + 1));
        assert_eq!(read(&t, 0, None).1, vec![(2, (1 << 40) + 1)]);
    }

    #[test]
    fn the_tail_keeps_its_newest_entries_within_its_bytes() {
        let t = LogTail::new(35);
        t.appended(run(1, 1..=5));
        assert_eq!(read(&t, 1, None), (3, vec![(1, 3), (1, 4), (1, 5)]));
        t.appended(run(1, 6..=6));
        assert_eq!(read(&t, 1, Some(5)), (4, vec![(1, 4)]));
        assert_eq!(t.inner.lock().bytes, 30);
    }
}
