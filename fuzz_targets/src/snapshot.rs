//! The `snapshot` target: snapshot files of an MNode group (`mnode/src/raft/snapshot.rs`), as
//! installing one reads them. A whole one, written again from its pairs, gives its bytes.

/// Reads a snapshot file.
pub fn snapshot(data: &[u8]) {
    saker_mnode::fuzzing::snapshot(data);
}
