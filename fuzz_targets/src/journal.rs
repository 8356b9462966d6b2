//! The `journal` target: the raft log journal's segment files
//! (`mnode/src/store/log_journal.rs`), read back as at startup.
//!
//! Input: the bytes of segments 1, 2, …, separated by [`SEGMENT_SEPARATOR`]. Every whole
//! frame's CRC is set right first (else a mutated payload would almost never get past its
//! CRC), and half the time its segment number too. What reads back whole is written again as
//! one new segment and must read back the same.

/// Separates the segments of one input.
pub const SEGMENT_SEPARATOR: &[u8] = b"\n~segment~\n";

/// Reads the segments back as a journal does at startup.
pub fn journal(data: &[u8]) {
    let fixed: Vec<Vec<u8>> = (1..)
        .zip(split(data))
        .map(|(seq, s)| fix_frames(seq, s))
        .collect();
    let segments: Vec<&[u8]> = fixed.iter().map(Vec::as_slice).collect();
    saker_mnode::fuzzing::journal(&segments);
}

/// `segment` with the CRC of every whole frame (segment number u64 LE, length u32 LE, CRC32C
/// of both and the payload u32 LE, payload) set right, and its segment number set to `seq`
/// where the length's low bit is clear.
fn fix_frames(seq: u64, segment: &[u8]) -> Vec<u8> {
    let mut out = segment.to_vec();
    let mut pos = 0;
    while pos + 16 <= out.len() {
        let len = u32::from_le_bytes(out[pos + 8..pos + 12].try_into().expect("4 bytes"));
        let end = pos + 16 + len as usize;
        if len == 0 || end > out.len() {
            break;
        }
        if len & 1 == 0 {
            out[pos..pos + 8].copy_from_slice(&seq.to_le_bytes());
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&out[pos..pos + 12]), &out[pos + 16..end]);
        out[pos + 12..pos + 16].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
    out
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
