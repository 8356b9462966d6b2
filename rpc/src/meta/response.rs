//! What metadata requests answer.

use serde::{Deserialize, Serialize};

use super::*;

/// The successful outcome of a [`MetaRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaResponse {
    Done,
    Attr(Attr),
    /// A `CommitFile`'s file as committed, with the receipt its next commit sends back.
    Committed {
        attr: Attr,
        receipt: crate::capability::CommitReceipt,
    },
    Object(Box<ObjectView>),
    /// A data key and its record (`SseKey`), with the proof a commit brings for a fresh one.
    SseKey {
        key: PlainKey,
        sse: crate::attr::Sse,
        fresh: Option<crate::capability::FreshKey>,
    },
    Entries(Vec<Entry>),
    Attrs(Vec<Attr>),
    /// A yes/no answer.
    Flag(bool),
    Uploads(Vec<UploadInfo>),
    Upload(Box<UploadInfo>),
    Versions(Vec<VersionEntry>),
    /// What a delete in a bucket that keeps versions did: the version it removed for good,
    /// or the delete marker it wrote (`delete_marker`).
    Deleted {
        version_id: String,
        delete_marker: bool,
    },
    Gc(Vec<(Vec<u8>, u128)>),
    TierGc(Vec<(Vec<u8>, crate::attr::TierRef)>),
    TierKeys(Vec<String>),
    ChunkIds(Vec<u128>),
    Dentry(Dentry),
    Usage(DirUsage),
    Counters(GroupCounters),
    /// Directory ids.
    Dirs(Vec<InodeId>),
    /// Inodes a migration moved away from this group.
    Moved(u64),
    /// A group's inode count and most frequent file names.
    NameStats {
        inodes: u64,
        top: Vec<(String, u64)>,
    },
    /// The exception table a group routes by.
    Exceptions(saker_namespace::ExceptionTable),
    /// A directory frozen for the rmdir protocol, and its parent's id.
    Frozen {
        parent: InodeId,
        attr: Attr,
    },
    /// A deferred write's answer as evaluated (`resp`), not yet durable: `Committed { ticket }`
    /// at `group` waits until it is.
    Deferred {
        #[serde(deserialize_with = "super::nesting::boxed")]
        resp: Box<MetaResponse>,
        group: u32,
        ticket: u64,
    },
    /// One replica's raft state.
    Replica(ReplicaStatus),
    /// Coordinator records: key and value.
    Records(Vec<(String, Vec<u8>)>),
    /// Bytes of backup `id` (`size` bytes in all) from the offset asked for.
    BackupPiece {
        id: u64,
        size: u64,
        data: Vec<u8>,
    },
    /// What a group's work cost over its last closed window.
    Load(super::LoadWindow),
    /// A group's copy of a bucket's write settings.
    Sealed(super::SealedWrites),
    /// Erasure-coded chunks: id, data and parity shards, stored length (`CodedRefs`).
    /// (Appended last: answers persisted before it decode as they were.)
    CodedChunks(Vec<(u128, u8, u8, u64)>),
    /// A page of a bucket's change feed in one group (`Feed`).
    Feed(super::FeedPage),
    /// A group's feed clock (`FeedRequest::Wait`).
    FeedClock(u64),
}

/// One replica of a group, as its raft instance sees itself (`saker admin status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaStatus {
    /// This replica's raft node id.
    pub node_id: u64,
    /// `leader`, `follower`, `candidate` or `learner`.
    pub state: String,
    /// Whether it serves requests now (the caught-up leader).
    pub serving: bool,
    pub term: u64,
    /// The leader it knows of (raft node id).
    pub leader: Option<u64>,
    /// Last index in its log, last applied, last in its snapshot.
    pub last_log: u64,
    pub applied: u64,
    pub snapshot: u64,
    /// The group's voters and learners: raft node id and RPC address.
    pub voters: Vec<(u64, String)>,
    pub learners: Vec<(u64, String)>,
    /// On the leader: per replica (raft node id), the last log index it is known to hold.
    pub matched: Vec<(u64, u64)>,
}
