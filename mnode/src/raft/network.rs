//! The raft network of a group: openraft's messages over the process's RPC transport.
//!
//! A message is [`Message`] in postcard inside the transport's `Raft` call, addressed to a
//! group; the other side's [`RaftPeers`] hands it to that group's replica and sends back an
//! [`Answer`]. Every group of a process shares one connection per peer node (the transport's
//! [`ChannelPool`]). A peer that cannot be reached (refused, timed out, or its replica failed)
//! is `Unreachable` to openraft, which backs off and tries again.
//!
//! openraft 0.9 follows every commit with an AppendEntries that carries only the new commit
//! index, to every follower: under a write load, half of all raft RPCs. A [`Peer`] that had a
//! real answer from its follower within [`COMMIT_PIGGYBACK`] answers such a message itself
//! instead of sending it: the next AppendEntries (entries or a heartbeat, at most a heartbeat
//! interval later) carries the commit index anyway, and a follower's commit index only decides
//! how far it applies, never what is committed. The leader loses nothing it had not already
//! learned: the message adds no entries, so its success says only that the follower still
//! holds what it acknowledged a moment ago; a follower that has since voted for another leader
//! says so to the next real message. The leader lease (`leadership`) counts an acknowledgement
//! from when its request was made, so one answered here stretches it by at most
//! [`COMMIT_PIGGYBACK`] past a real one, well inside the lease's half election timeout of
//! margin. Heartbeats that change nothing, and the rounds that renew a lease (openraft makes a
//! fresh client for them), always go out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, SnapshotMismatch,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, LogId, Vote};
use parking_lot::RwLock;
use saker_rpc::{ChannelPool, RaftService, RpcChannel};
use serde::{Deserialize, Serialize};

use super::liveness::{self, Liveness};
use super::{Raft, TypeConfig};

/// One raft message to a group's replica.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
enum Message {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
}

/// A message and the raft node id it is for: a node whose disk was lost comes back at the same
/// address under a new id, and must not answer for its old one (the leader would see that
/// replica's log go backwards).
#[derive(Serialize, Deserialize)]
struct Envelope {
    target: u64,
    msg: Message,
}

/// The replica's answer. A failure the sender cannot act on travels as text.
#[derive(Serialize, Deserialize)]
enum Answer {
    Append(Result<AppendEntriesResponse<u64>, String>),
    Vote(Result<VoteResponse<u64>, String>),
    Snapshot(Result<InstallSnapshotResponse<u64>, SnapshotFailure>),
}

#[derive(Serialize, Deserialize)]
enum SnapshotFailure {
    /// The chunk does not continue the snapshot being received: the sender starts over.
    Mismatch(SnapshotMismatch),
    Other(String),
}

/// How recent a real answer must be for a commit-only message to be answered locally.
pub const COMMIT_PIGGYBACK: Duration = Duration::from_millis(50);

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("raft messages encode")
}

/// Decodes `body` as a message to a replica ([`Envelope`]) and as a replica's answer, as the
/// network does; panics unless what decodes encodes to bytes that decode and encode the same
/// again. Returns whether either decoded.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_raft_body(body: &[u8]) -> bool {
    fn stable<T: Serialize + serde::de::DeserializeOwned>(body: &[u8]) -> bool {
        let Ok(value) = postcard::from_bytes::<T>(body) else {
            return false;
        };
        let once = encode(&value);
        let again: T = postcard::from_bytes(&once).expect("an encoding decodes");
        assert!(
            encode(&again) == once,
            "a raft message, decoded and encoded again, differs"
        );
        true
    }
    // Not short-circuiting: both decoders see every body.
    stable::<Envelope>(body) | stable::<Answer>(body)
}

/// Raft messages and answers for the seed corpus.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_raft_seeds() -> Vec<Vec<u8>> {
    use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
    use openraft::{CommittedLeaderId, Entry, EntryPayload, SnapshotMeta};

    use crate::store::WriteBatch;

    let log_id = LogId::new(CommittedLeaderId::new(3, 2), 9);
    let mut mutations = WriteBatch::default();
    mutations.put(b"k".to_vec(), b"v".to_vec());
    let members = BTreeMap::from([(1u64, BasicNode::new("a:1")), (2, BasicNode::new("b:2"))]);
    let membership = openraft::Membership::new(vec![[1u64, 2].into()], members);
    let entries = vec![
        Entry::<TypeConfig> {
            log_id,
            payload: EntryPayload::Normal(super::BatchEntry {
                mutations: mutations.into(),
                results: vec![Ok(saker_rpc::MetaResponse::Done)].into(),
                id_high_water: 77,
                trace: None,
            }),
        },
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 2), 10),
            payload: EntryPayload::Membership(membership.clone()),
        },
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 2), 11),
            payload: EntryPayload::Blank,
        },
    ];
    let vote = Vote::new_committed(3, 2);
    let messages = [
        Message::Append(AppendEntriesRequest {
            vote,
            prev_log_id: Some(LogId::new(CommittedLeaderId::new(3, 2), 8)),
            entries,
            leader_commit: Some(log_id),
        }),
        Message::Append(AppendEntriesRequest {
            vote,
            prev_log_id: None,
            entries: vec![],
            leader_commit: None,
        }),
        Message::Vote(VoteRequest::new(vote, Some(log_id))),
        Message::Snapshot(InstallSnapshotRequest {
            vote,
            meta: SnapshotMeta {
                last_log_id: Some(log_id),
                last_membership: openraft::StoredMembership::new(Some(log_id), membership),
                snapshot_id: "snap-1".into(),
            },
            offset: 0,
            data: b"SKSNAP1\n".to_vec(),
            done: false,
        }),
    ];
    let mut out: Vec<Vec<u8>> = messages
        .into_iter()
        .map(|msg| encode(&Envelope { target: 2, msg }))
        .collect();
    let answers = [
        Answer::Append(Ok(openraft::raft::AppendEntriesResponse::Success)),
        Answer::Append(Err("no replica".into())),
        Answer::Vote(Ok(openraft::raft::VoteResponse::new(
            vote,
            Some(log_id),
            true,
        ))),
        Answer::Snapshot(Ok(openraft::raft::InstallSnapshotResponse { vote })),
        Answer::Snapshot(Err(SnapshotFailure::Mismatch(sample_mismatch()))),
        Answer::Snapshot(Err(SnapshotFailure::Other("disk".into()))),
    ];
    out.extend(answers.iter().map(encode));
    out
}

/// A snapshot chunk at offset 5 of "b" where offset 0 of "a" was expected.
#[cfg(any(test, feature = "fuzzing"))]
fn sample_mismatch() -> SnapshotMismatch {
    let segment = |id: &str, offset| openraft::SnapshotSegmentId {
        id: id.into(),
        offset,
    };
    SnapshotMismatch {
        expect: segment("a", 0),
        got: segment("b", 5),
    }
}

/// Makes a group's connections to its peers (openraft asks once per peer and keeps it).
#[derive(Clone)]
pub struct Network {
    group: u32,
    pool: Option<Arc<ChannelPool>>,
}

impl Network {
    /// The network of `group`; `None` for a group with no peers (one voter, no transport).
    pub fn new(group: u32, pool: Option<Arc<ChannelPool>>) -> Self {
        Self { group, pool }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        let channel = match &self.pool {
            Some(pool) => pool.get(&node.addr).map_err(|e| e.to_string()),
            None => Err("this group has no network (a single voter)".to_string()),
        };
        Peer {
            group: self.group,
            target,
            channel,
            answered: None,
        }
    }
}

/// One peer replica of a group.
pub struct Peer {
    group: u32,
    target: u64,
    channel: Result<RpcChannel, String>,
    /// The last AppendEntries the follower answered with success: when the answer came, the
    /// leader's vote and the commit index it carried.
    answered: Option<(Instant, Vote<u64>, Option<LogId<u64>>)>,
}

fn unreachable<E: std::error::Error>(why: impl std::fmt::Display) -> RPCError<u64, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other(why.to_string())))
}

impl Peer {
    /// Whether `rpc` only moves the follower's commit index, right after a real answer from it
    /// under the same vote: the next message carries that index (see the module docs).
    fn commit_only(&self, rpc: &AppendEntriesRequest<TypeConfig>) -> bool {
        let Some((at, vote, commit)) = &self.answered else {
            return false;
        };
        rpc.entries.is_empty()
            && rpc.leader_commit != *commit
            && rpc.vote == *vote
            && at.elapsed() < COMMIT_PIGGYBACK
    }

    async fn send<E: std::error::Error>(
        &self,
        msg: Message,
        option: &RPCOption,
    ) -> Result<Answer, RPCError<u64, BasicNode, E>> {
        let channel = self.channel.as_ref().map_err(unreachable)?;
        let envelope = Envelope {
            target: self.target,
            msg,
        };
        let reply = channel
            .raft(self.group, encode(&envelope).into(), option.hard_ttl())
            .await
            .map_err(unreachable)?;
        postcard::from_bytes(&reply)
            .map_err(|e| RPCError::Network(NetworkError::new(&std::io::Error::other(e))))
    }
}

fn unexpected<E: std::error::Error>() -> RPCError<u64, BasicNode, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(
        "answer of another kind",
    )))
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        if self.commit_only(&rpc) {
            crate::metrics::RAFT_COMMITS_PIGGYBACKED.inc();
            return Ok(AppendEntriesResponse::Success);
        }
        let (vote, commit) = (rpc.vote, rpc.leader_commit);
        let answer = match self.send(Message::Append(rpc), &option).await? {
            Answer::Append(r) => r.map_err(unreachable)?,
            _ => return Err(unexpected()),
        };
        self.answered = match answer {
            AppendEntriesResponse::Success => Some((Instant::now(), vote, commit)),
            _ => None,
        };
        Ok(answer)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        match self.send(Message::Snapshot(rpc), &option).await? {
            Answer::Snapshot(Ok(r)) => Ok(r),
            Answer::Snapshot(Err(SnapshotFailure::Mismatch(m))) => Err(RPCError::RemoteError(
                RemoteError::new(self.target, RaftError::APIError(m.into())),
            )),
            Answer::Snapshot(Err(SnapshotFailure::Other(e))) => Err(unreachable(e)),
            _ => Err(unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        match self.send(Message::Vote(rpc), &option).await? {
            Answer::Vote(r) => r.map_err(unreachable),
            _ => Err(unexpected()),
        }
    }
}

/// The receiving side: the replicas of this process's groups, by group id, as the
/// transport's [`RaftService`]; and the node's liveness pings (see [`liveness`]).
#[derive(Default)]
pub struct RaftPeers {
    groups: RwLock<BTreeMap<u32, Raft>>,
    pub(super) liveness: Liveness,
}

impl RaftPeers {
    /// Starts pinging the peer nodes of this process's groups (`me` is this node's RPC
    /// address), which lets idle groups go quiet; it stops when `self` is dropped.
    pub fn start_liveness(self: &Arc<Self>, me: String, pool: Arc<ChannelPool>) {
        tokio::spawn(liveness::run(Arc::downgrade(self), me, pool));
    }

    /// The replicas registered now.
    pub(super) fn replicas(&self) -> BTreeMap<u32, Raft> {
        self.groups.read().clone()
    }

    pub fn register(&self, group: u32, raft: Raft) {
        self.groups.write().insert(group, raft);
    }

    pub fn unregister(&self, group: u32) {
        self.groups.write().remove(&group);
    }
}

#[async_trait]
impl RaftService for RaftPeers {
    async fn raft(&self, group: u32, body: bytes::Bytes) -> Result<Vec<u8>, String> {
        if group == liveness::PING_GROUP {
            return liveness::answer(&self.liveness, &self.groups.read(), &body);
        }
        let raft = self
            .groups
            .read()
            .get(&group)
            .cloned()
            .ok_or_else(|| format!("no replica of group {group} here"))?;
        let Envelope { target, msg } =
            postcard::from_bytes(&body).map_err(|e| format!("undecodable raft message: {e}"))?;
        let id = raft.metrics().borrow().id;
        if id != target {
            return Err(format!(
                "group {group}'s replica here is raft node {id}, not {target}"
            ));
        }
        // A disk about to fill takes no entries (heartbeats still pass): see `crate::space`.
        let full = || format!("the disk of group {group}'s replica here is full");
        let answer = match msg {
            Message::Append(rpc) if !rpc.entries.is_empty() && crate::space::critical() => {
                Answer::Append(Err(full()))
            }
            Message::Snapshot(_) if crate::space::critical() => {
                Answer::Snapshot(Err(SnapshotFailure::Other(full())))
            }
            Message::Append(rpc) => {
                Answer::Append(raft.append_entries(rpc).await.map_err(|e| e.to_string()))
            }
            Message::Vote(rpc) => Answer::Vote(raft.vote(rpc).await.map_err(|e| e.to_string())),
            Message::Snapshot(rpc) => {
                Answer::Snapshot(raft.install_snapshot(rpc).await.map_err(|e| match e {
                    RaftError::APIError(InstallSnapshotError::SnapshotMismatch(m)) => {
                        SnapshotFailure::Mismatch(m)
                    }
                    e => SnapshotFailure::Other(e.to_string()),
                }))
            }
        };
        Ok(encode(&answer))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

    use super::*;
    use crate::raft::BatchEntry;
    use crate::store::WriteBatch;

    #[test]
    fn messages_round_trip_through_postcard() {
        let mut mutations = WriteBatch::default();
        mutations.put(b"k".to_vec(), b"v".to_vec());
        let log_id = LogId::new(CommittedLeaderId::new(3, 2), 9);
        let msg = Message::Append(AppendEntriesRequest {
            vote: Vote::new_committed(3, 2),
            prev_log_id: Some(LogId::new(CommittedLeaderId::new(3, 2), 8)),
            entries: vec![Entry {
                log_id,
                payload: EntryPayload::Normal(BatchEntry {
                    mutations: mutations.into(),
                    results: vec![Ok(saker_rpc::MetaResponse::Done)].into(),
                    id_high_water: 77,
                    trace: None,
                }),
            }],
            leader_commit: Some(log_id),
        });
        let back: Message = postcard::from_bytes(&encode(&msg)).unwrap();
        let Message::Append(req) = back else {
            panic!("kind changed")
        };
        assert_eq!(req.entries.len(), 1);
        assert_eq!(req.entries[0].log_id, log_id);
        let EntryPayload::Normal(b) = &req.entries[0].payload else {
            panic!("payload changed")
        };
        assert_eq!(b.id_high_water, 77);
        assert_eq!(b.mutations.ops.len(), 1);

        let members = BTreeMap::from([(1u64, BasicNode::new("a:1")), (2, BasicNode::new("b:2"))]);
        let m = openraft::Membership::new(vec![[1u64, 2].into()], members);
        let entry = Entry::<TypeConfig> {
            log_id,
            payload: EntryPayload::Membership(m.clone()),
        };
        let back: Entry<TypeConfig> = postcard::from_bytes(&encode(&entry)).unwrap();
        assert!(matches!(back.payload, EntryPayload::Membership(b) if b == m));

        let mismatch = Answer::Snapshot(Err(SnapshotFailure::Mismatch(sample_mismatch())));
        let back: Answer = postcard::from_bytes(&encode(&mismatch)).unwrap();
        assert!(matches!(
            back,
            Answer::Snapshot(Err(SnapshotFailure::Mismatch(m))) if m.got.offset == 5
        ));
    }

    #[test]
    fn only_a_commit_moving_right_after_a_real_answer_is_answered_locally() {
        let log = |i| Some(LogId::new(CommittedLeaderId::new(3, 2), i));
        let vote = Vote::new_committed(3, 2);
        let req = |entries: usize, commit| AppendEntriesRequest::<TypeConfig> {
            vote,
            prev_log_id: log(8),
            entries: (0..entries)
                .map(|i| Entry {
                    log_id: log(9 + i as u64).unwrap(),
                    payload: EntryPayload::Blank,
                })
                .collect(),
            leader_commit: commit,
        };
        let mut peer = Peer {
            group: 1,
            target: 2,
            channel: Err("none".into()),
            answered: None,
        };
        // A fresh client (a lease renewal, or the first message) always sends.
        assert!(!peer.commit_only(&req(0, log(8))));
        peer.answered = Some((Instant::now(), vote, log(7)));
        assert!(peer.commit_only(&req(0, log(8))));
        // Entries, an unchanged commit (a heartbeat) or another vote go out.
        assert!(!peer.commit_only(&req(1, log(8))));
        assert!(!peer.commit_only(&req(0, log(7))));
        peer.answered = Some((Instant::now(), Vote::new_committed(4, 1), log(7)));
        assert!(!peer.commit_only(&req(0, log(8))));
        // So does everything once the last real answer is older than the window.
        let long_ago = Instant::now() - COMMIT_PIGGYBACK * 2;
        peer.answered = Some((long_ago, vote, log(7)));
        assert!(!peer.commit_only(&req(0, log(8))));
    }
}
