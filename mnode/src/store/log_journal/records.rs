//! What the journal's frames hold and how segments read back: the [`Record`] a frame carries,
//! each group's log as the journal holds it ([`GroupLog`]), what a record means for it
//! ([`State::apply`], for writes and recovery alike), and the framing (segment number,
//! length, CRC-32C) read until the first frame that is not whole and valid.

use super::*;

/// One frame's payload.
#[derive(Serialize, Deserialize)]
pub(super) enum Record {
    /// Every group's state as a segment starts.
    Checkpoint(Vec<GroupState>),
    /// Entries `(index, bytes)` in index order; they replace any entries from the first index on.
    Append {
        group: u32,
        entries: Vec<(u64, Bytes)>,
    },
    /// Entries from index `from` on are gone.
    Truncate {
        group: u32,
        from: u64,
    },
    /// Entries up to index `upto` are gone; `log_id` is the caller's record of it.
    Purge {
        group: u32,
        upto: u64,
        log_id: Bytes,
    },
    Vote {
        group: u32,
        vote: Bytes,
    },
    /// The group's log, vote and purge record are gone (its replica left this node).
    Forget {
        group: u32,
    },
}

#[derive(Serialize, Deserialize)]
pub(super) struct GroupState {
    pub(super) group: u32,
    pub(super) vote: Option<Bytes>,
    pub(super) purged: Option<(u64, Bytes)>,
    /// Indexes of the first and last entries, if any.
    pub(super) first: Option<u64>,
    pub(super) last: Option<u64>,
}

/// One group's log as the journal holds it.
#[derive(Default)]
pub(super) struct GroupLog {
    pub(super) entries: BTreeMap<u64, Bytes>,
    pub(super) vote: Option<Bytes>,
    pub(super) purged: Option<(u64, Bytes)>,
    /// While reading the log back: the first and last index a checkpoint said were there, the
    /// last lowered by later truncations (a purge may still cover them).
    pub(super) checkpointed: Option<(u64, u64)>,
}

impl GroupLog {
    pub(super) fn purge(&mut self, upto: u64, log_id: Bytes) {
        self.entries = match upto.checked_add(1) {
            Some(next) => self.entries.split_off(&next),
            None => BTreeMap::new(),
        };
        self.purged = Some((upto, log_id));
    }

    pub(super) fn truncate(&mut self, from: u64) {
        self.entries.split_off(&from);
        self.checkpointed = self
            .checkpointed
            .filter(|&(first, _)| from > first)
            .map(|(first, last)| (first, last.min(from - 1)));
    }

    pub(super) fn purged_upto(&self) -> Option<u64> {
        self.purged.as_ref().map(|(i, _)| *i)
    }

    /// After reading the log back: the entries run without a hole from the last purge on,
    /// through the last index a checkpoint saw (a damaged frame in an older segment would
    /// otherwise leave a silent gap).
    pub(super) fn check(&self, group: u32) -> Result<(), StoreError> {
        let first = self.entries.first_key_value().map(|(&i, _)| i);
        let end = self.entries.last_key_value().map(|(&i, _)| i);
        let purged = self.purged_upto();
        let gapless = match (first, end) {
            (Some(first), Some(end)) => {
                end - first + 1 == self.entries.len() as u64
                    && purged.is_none_or(|p| p + 1 == first)
            }
            _ => true,
        };
        let covered = self.checkpointed.is_none_or(|(first, last)| {
            let lo = purged.map_or(first, |p| first.max(p.saturating_add(1)));
            lo > last || (self.entries.contains_key(&lo) && self.entries.contains_key(&last))
        });
        if gapless && covered {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!(
                "raft log of group {group}: entries {first:?}..={end:?} with {} present, last purge {purged:?}, a checkpoint saw up to {:?}",
                self.entries.len(),
                self.checkpointed
            )))
        }
    }
}

/// A segment file and the highest entry index each group appended to it.
pub(super) struct Segment {
    pub(super) seq: u64,
    pub(super) path: PathBuf,
    pub(super) last: HashMap<u32, u64>,
}

impl State {
    /// Applies `rec` to the groups (and notes its entries in `seg`): the one place the meaning
    /// of a record lives, for writes and for recovery alike. (Recovery checks the result
    /// against the checkpoints afterwards, [`GroupLog::check`].)
    pub(super) fn apply(groups: &mut BTreeMap<u32, GroupLog>, seg: &mut Segment, rec: Record) {
        match rec {
            Record::Checkpoint(states) => {
                // A checkpoint lists every group there is: one it omits was forgotten.
                groups.retain(|g, _| states.iter().any(|s| s.group == *g));
                for s in states {
                    let g = groups.entry(s.group).or_default();
                    g.vote = s.vote;
                    match s.last {
                        Some(last) => g.truncate(last.saturating_add(1)),
                        None => g.entries.clear(),
                    }
                    if let Some((upto, log_id)) = s.purged {
                        g.purge(upto, log_id);
                    }
                    g.checkpointed = s.first.zip(s.last);
                }
            }
            Record::Append { group, entries } => {
                let g = groups.entry(group).or_default();
                if let (Some(&(first, _)), Some(&(end, _))) = (entries.first(), entries.last()) {
                    g.truncate(first);
                    let last = seg.last.entry(group).or_default();
                    *last = (*last).max(end);
                }
                g.entries.extend(entries);
            }
            Record::Truncate { group, from } => groups.entry(group).or_default().truncate(from),
            Record::Purge {
                group,
                upto,
                log_id,
            } => groups.entry(group).or_default().purge(upto, log_id),
            Record::Vote { group, vote } => groups.entry(group).or_default().vote = Some(vote),
            Record::Forget { group } => {
                groups.remove(&group);
            }
        }
    }
}

/// Whether entries of `group` up to index `last` are still needed (not all purged).
pub(super) fn pins(groups: &BTreeMap<u32, GroupLog>, group: u32, last: u64) -> bool {
    groups
        .get(&group)
        .is_some_and(|g| g.purged_upto().is_none_or(|p| p < last))
}

/// Every group's state, as the first frame of a new segment.
pub(super) fn checkpoint(groups: &BTreeMap<u32, GroupLog>) -> Record {
    Record::Checkpoint(
        groups
            .iter()
            .map(|(&group, g)| GroupState {
                group,
                vote: g.vote.clone(),
                purged: g.purged.clone(),
                first: g.entries.first_key_value().map(|(&i, _)| i),
                last: g.entries.last_key_value().map(|(&i, _)| i),
            })
            .collect(),
    )
}

pub(super) fn frame(seq: u64, rec: &Record) -> Vec<u8> {
    let payload = encode(rec);
    let mut f = Vec::with_capacity(HEADER + payload.len());
    f.extend_from_slice(&seq.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&f[..12]), &payload);
    f.extend_from_slice(&crc.to_le_bytes());
    f.extend_from_slice(&payload);
    f
}

/// The whole, valid frames at the start of segment `seq`'s bytes.
pub(super) fn read_records(seq: u64, bytes: &[u8]) -> Result<Vec<Record>, StoreError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(h) = bytes.get(pos..pos + HEADER) {
        let word =
            |r: std::ops::Range<usize>| u32::from_le_bytes(h[r].try_into().expect("4 bytes"));
        let frame_seq = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
        let len = word(8..12) as usize;
        let Some(payload) = bytes.get(pos + HEADER..pos + HEADER + len) else {
            break;
        };
        if frame_seq != seq
            || len == 0
            || crc32c::crc32c_append(crc32c::crc32c(&h[..12]), payload) != word(12..16)
        {
            break;
        }
        // A whole frame that does not decode is damage, not a torn write: refuse to guess.
        out.push(decode(payload)?);
        pos += HEADER + len;
    }
    Ok(out)
}

/// Applies the records of segment `seq` (file `path`, holding `bytes`) to `groups`, reading
/// the journal back.
pub(super) fn read_back(
    groups: &mut BTreeMap<u32, GroupLog>,
    seq: u64,
    path: PathBuf,
    bytes: &[u8],
) -> Result<Segment, StoreError> {
    let mut seg = Segment {
        seq,
        path,
        last: HashMap::new(),
    };
    for rec in read_records(seq, bytes)? {
        State::apply(groups, &mut seg, rec);
    }
    Ok(seg)
}

/// Checks the groups read back from every segment against their checkpoints
/// ([`GroupLog::check`]).
pub(super) fn check_read_back(groups: &mut BTreeMap<u32, GroupLog>) -> Result<(), StoreError> {
    for (&group, g) in groups.iter_mut() {
        g.check(group)?;
        g.checkpointed = None;
    }
    Ok(())
}

/// Reads `segments` back as segments 1, 2, … of a journal (what `LogJournal::open` does
/// with the files' bytes); panics if what reads back, written again as one new segment (its
/// checkpoint, then each group's entries), does not read back the same. Returns whether the
/// segments read back (false: the journal would refuse to open).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_read_back(segments: &[&[u8]]) -> bool {
    type Summary = Vec<(u32, Vec<(u64, Bytes)>, Option<Bytes>, Option<(u64, Bytes)>)>;
    pub(super) fn summary(groups: &BTreeMap<u32, GroupLog>) -> Summary {
        groups
            .iter()
            .map(|(&group, g)| {
                let entries = g.entries.iter().map(|(&i, b)| (i, b.clone())).collect();
                (group, entries, g.vote.clone(), g.purged.clone())
            })
            .collect()
    }
    let mut groups = BTreeMap::new();
    for (seq, bytes) in (1..).zip(segments) {
        if read_back(&mut groups, seq, PathBuf::new(), bytes).is_err() {
            return false;
        }
    }
    if check_read_back(&mut groups).is_err() {
        return false;
    }
    let seq = segments.len() as u64 + 1;
    let mut bytes = frame(seq, &checkpoint(&groups));
    for (&group, g) in &groups {
        if !g.entries.is_empty() {
            let entries = g.entries.iter().map(|(&i, b)| (i, b.clone())).collect();
            bytes.extend(frame(seq, &Record::Append { group, entries }));
        }
    }
    let mut again = BTreeMap::new();
    read_back(&mut again, seq, PathBuf::new(), &bytes).expect("a new segment reads back");
    check_read_back(&mut again).expect("a new segment is whole");
    assert!(
        summary(&again) == summary(&groups),
        "the journal read back, written again, reads back differently"
    );
    true
}

/// Journals for the seed corpus, each a list of segments' bytes: the frames a few appends,
/// votes, truncations and purges of three groups write.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_seeds() -> Vec<Vec<Vec<u8>>> {
    let entry = |group: u32, i: u64| (i, Bytes::from(format!("entry {group}.{i}")));
    let vote = |group: u32| Bytes::from(format!("vote of {group}"));
    let records = [
        Record::Checkpoint(Vec::new()),
        Record::Vote {
            group: 1,
            vote: vote(1),
        },
        Record::Append {
            group: 1,
            entries: (1..=3).map(|i| entry(1, i)).collect(),
        },
        Record::Append {
            group: 2,
            entries: vec![entry(2, 1)],
        },
        Record::Truncate { group: 1, from: 3 },
        Record::Append {
            group: 1,
            entries: vec![entry(1, 3), entry(1, 4)],
        },
        Record::Purge {
            group: 1,
            upto: 1,
            log_id: Bytes::from_static(b"log id 1"),
        },
        Record::Vote {
            group: 3,
            vote: vote(3),
        },
        Record::Forget { group: 3 },
    ];
    let frames: Vec<Vec<u8>> = records.iter().map(|r| frame(1, r)).collect();
    let mut out: Vec<Vec<Vec<u8>>> = (1..=frames.len())
        .map(|n| vec![frames[..n].concat()])
        .collect();
    // A later segment starts with a checkpoint of every group.
    let mut groups = BTreeMap::new();
    read_back(&mut groups, 1, PathBuf::new(), &frames.concat()).expect("seed frames read back");
    let mut two = frame(2, &checkpoint(&groups));
    two.extend(frame(
        2,
        &Record::Append {
            group: 2,
            entries: vec![entry(2, 2)],
        },
    ));
    out.push(vec![frames.concat(), two]);
    out
}
