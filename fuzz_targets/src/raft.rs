//! The `raft` target: the body of a `Raft` RPC (`mnode/src/raft/network.rs`): openraft's
//! append, vote and snapshot messages to a replica, and the replica's answers.

/// Decodes a raft message body and a raft answer.
pub fn raft(data: &[u8]) {
    saker_mnode::fuzzing::raft_message(data);
}
