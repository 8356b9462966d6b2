//! The `journal` target: the raft log journal's segment files
//! (`mnode/src/store/log_journal.rs`), read back as at startup.
//!
//! Input: the bytes of segments 1, 2, …, separated by [`SEGMENT_SEPARATOR`]. What reads back
//! whole is written again as one new segment and must read back the same.

/// Separates the segments of one input.
pub const SEGMENT_SEPARATOR: &[u8] = b"\n~segment~\n";

/// Reads the segments back as a journal does at startup.
pub fn journal(data: &[u8]) {
    let segments = split(data);
    saker_mnode::fuzzing::journal(&segments);
}

/// `data` cut at each [`SEGMENT_SEPARATOR`].
fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest
        .windows(SEGMENT_SEPARATOR.len())
        .position(|w| w == SEGMENT_SEPARATOR)
    {
        out.push(&rest[..at]);
        rest = &rest[at + SEGMENT_SEPARATOR.len()..];
    }
    out.push(rest);
    out
}

/// One input holding `segments`.
pub(crate) fn join(segments: &[Vec<u8>]) -> Vec<u8> {
    segments.join(SEGMENT_SEPARATOR)
}
