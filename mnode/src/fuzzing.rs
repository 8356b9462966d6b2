//! Entry points for fuzzing what the MNode reads from disk and from its raft peers (feature
//! `fuzzing`; the `saker-fuzz-targets` crate drives them): persisted records ([`record`]), the
//! raft log journal's segments ([`journal`]), snapshot files ([`snapshot`]) and raft messages
//! ([`raft_message`]). Each decodes as the MNode does, returns whether the input decoded, and
//! panics where what decoded does not encode back to the same value; `*_seeds` are real
//! encodings for the seed corpus.

use openraft::{LogId, Vote};
use saker_namespace::ExceptionTable;
use saker_rpc::transport::fuzzing::round_trip;
use saker_rpc::{
    Attr, DirChange, MetaError, MetaResponse, ObjectLock, ObjectMeta, PartRecord, TierRef,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::raft::{BatchEntry, TypeConfig};
use crate::records::{decode, decode_bytes, encode, encode_bytes, SmMeta};

/// A persisted record: the type a stored value is decoded as, one per kind of value the MNode
/// keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// An inode.
    Attr,
    ObjectMeta,
    Tags,
    Acl,
    Lock,
    /// Inline data (raw bytes behind the version byte).
    Inline,
    TierRef,
    PartRecord,
    Version,
    /// A multipart upload (three record versions).
    Upload,
    SmMeta,
    RaftEntry,
    LogId,
    Vote,
    DirChanges,
    Exceptions,
    /// A remembered result (the dedupe window).
    Dedupe,
    ChangeSeq,
}

impl Record {
    /// Every kind (a fuzz input's first byte selects one, by its index here).
    pub const ALL: [Record; 18] = [
        Record::Attr,
        Record::ObjectMeta,
        Record::Tags,
        Record::Acl,
        Record::Lock,
        Record::Inline,
        Record::TierRef,
        Record::PartRecord,
        Record::Version,
        Record::Upload,
        Record::SmMeta,
        Record::RaftEntry,
        Record::LogId,
        Record::Vote,
        Record::DirChanges,
        Record::Exceptions,
        Record::Dedupe,
        Record::ChangeSeq,
    ];
}

/// Decodes `bytes` as a record of `kind`, as the MNode does; returns the encoding of what it
/// decoded to (what this release writes), if it decodes. Panics unless that decodes and
/// encodes to the same bytes again.
pub fn record(kind: Record, bytes: &[u8]) -> Option<Vec<u8>> {
    match kind {
        Record::Attr => stable::<Attr>(bytes),
        Record::ObjectMeta => stable::<ObjectMeta>(bytes),
        Record::Tags => stable::<Vec<(String, String)>>(bytes),
        Record::Acl => stable::<String>(bytes),
        Record::Lock => stable::<ObjectLock>(bytes),
        Record::Inline => {
            let data = decode_bytes(bytes).ok()?;
            let once = encode_bytes(data);
            assert_eq!(decode_bytes(&once).ok(), Some(data));
            Some(once)
        }
        Record::TierRef => stable::<TierRef>(bytes),
        Record::PartRecord => stable::<PartRecord>(bytes),
        Record::Version => stable::<crate::ops::versions::Stored>(bytes),
        Record::Upload => round_trip(
            bytes,
            |b| crate::ops::uploads::decode_upload(b).ok(),
            crate::records::encode_v3,
        )
        .map(|(_, once)| once),
        Record::SmMeta => stable::<SmMeta>(bytes),
        Record::RaftEntry => stable::<openraft::Entry<TypeConfig>>(bytes),
        Record::LogId => stable::<LogId<u64>>(bytes),
        Record::Vote => stable::<Vote<u64>>(bytes),
        Record::DirChanges => stable::<Vec<DirChange>>(bytes),
        Record::Exceptions => stable::<ExceptionTable>(bytes),
        Record::Dedupe => stable::<Result<MetaResponse, MetaError>>(bytes),
        Record::ChangeSeq => stable::<u64>(bytes),
    }
}

/// The encoding of `bytes` decoded as `T`, if it decodes; panics unless it decodes and
/// encodes to the same bytes again.
fn stable<T: Serialize + DeserializeOwned>(bytes: &[u8]) -> Option<Vec<u8>> {
    round_trip(bytes, |b| decode::<T>(b).ok(), encode).map(|(_, once)| once)
}

/// Hand-made records for the seed corpus (the `saker-fuzz-targets` generator finds one of
/// each enum variant besides).
pub fn record_seeds() -> Vec<(Record, Vec<u8>)> {
    let entry = BatchEntry {
        id_high_water: 9,
        results: vec![Ok(MetaResponse::Done), Err(MetaError::NotEmpty)].into(),
        ..Default::default()
    };
    let entry = openraft::Entry::<TypeConfig> {
        log_id: LogId::new(openraft::CommittedLeaderId::new(3, 1), 7),
        payload: openraft::EntryPayload::Normal(entry),
    };
    vec![
        (Record::RaftEntry, encode(&entry)),
        (Record::Inline, encode_bytes(b"inline object bytes")),
    ]
}

/// Reads `segments` back as the segments of a raft log journal (see
/// `LogJournal::open`); returns whether it would open.
pub fn journal(segments: &[&[u8]]) -> bool {
    crate::store::log_journal::fuzz_read_back(segments)
}

/// Journals for the seed corpus, each a list of segments.
pub fn journal_seeds() -> Vec<Vec<Vec<u8>>> {
    crate::store::log_journal::fuzz_seeds()
}

/// Reads `bytes` as a snapshot file, as installing one does; returns whether it is whole.
pub fn snapshot(bytes: &[u8]) -> bool {
    crate::raft::snapshot::fuzz_check(bytes)
}

/// Snapshot files for the seed corpus: a few pairs of real records, and none.
pub fn snapshot_seeds() -> Vec<Vec<u8>> {
    let values = record_seeds().into_iter().map(|(_, v)| v);
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..6)
        .flat_map(|i| [(i, b"value".to_vec()), (i + 6, Vec::new())])
        .chain((12..).zip(values))
        .map(|(i, v)| (format!("key {i:04}").into_bytes(), v))
        .collect();
    (0..=3)
        .map(|n| crate::raft::snapshot::fuzz_file(&pairs[..n * pairs.len() / 3]))
        .collect()
}

/// Decodes `body` as a raft message to a replica and as a replica's answer (as the MNode's
/// raft network does); returns whether either decoded.
pub fn raft_message(body: &[u8]) -> bool {
    crate::raft::fuzz_raft_body(body)
}

/// Raft messages and answers for the seed corpus.
pub fn raft_seeds() -> Vec<Vec<u8>> {
    crate::raft::fuzz_raft_seeds()
}
