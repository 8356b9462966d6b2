//! Replay of one volume at open: its records, in order, into the index (the rules are in the
//! [`volume`](super) module docs).
//!
//! Replay is a sequential parse, and a store appends to a volume only where a parse of every
//! longer file will pass: the end of a volume parsed cleanly from its first byte. Each record's
//! place follows from the one before and only bytes before the end decide it, so the records
//! appended after it are found the next time. A resync after a damaged record is not like that:
//! it searches ahead for a whole record, and which one it finds depends on the bytes after the
//! end (a garbage header claiming more bytes than the file has becomes whole once appends make
//! the file long enough, and then swallows them). So a volume that needed a resync is never
//! appended to ([`Replayed::damaged`]).
//!
//! What a resync finds may also not be a record at all: it can land in a chunk body, whose user
//! data can hold bytes that look like whole records. So after a resync a record may add a chunk
//! but not undo what came before it: a put of a chunk already indexed moves it only if it is a
//! compaction copy (the same header, its image whole), and a tombstone removes only a chunk found
//! after the resync in the same volume. A real delete ignored that way brings a chunk back, an
//! unreferenced leak the scrub removes; a fake one honoured would lose an acknowledged chunk.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{decode_header, Loc, DELETE_MAGIC, PUT_MAGIC, RECORD_HEADER_LEN};
use crate::error::ChunkError;
use crate::format::HEADER_LEN;
use crate::id::ChunkId;
use crate::image::read_image;

/// The header of the whole record at `offset` of a volume `len` bytes long, if there is one.
fn record_at(file: &File, offset: u64, len: u64) -> Option<(bool, ChunkId, u64, u64)> {
    let mut head = [0u8; RECORD_HEADER_LEN as usize];
    if offset.checked_add(RECORD_HEADER_LEN)? > len
        || file.read_exact_at(&mut head, offset).is_err()
    {
        return None;
    }
    let (put, id, body_len, written_ns) = decode_header(&head)?;
    let whole = if put {
        body_len >= HEADER_LEN as u64
            && offset
                .checked_add(RECORD_HEADER_LEN)
                .and_then(|o| o.checked_add(body_len))
                .is_some_and(|end| end <= len)
    } else {
        body_len == 0
    };
    whole.then_some((put, id, body_len, written_ns))
}

/// The offset of the first whole record at or after `from`, searching for a record magic.
fn next_record(file: &File, from: u64, len: u64) -> Result<Option<u64>, ChunkError> {
    const WINDOW: u64 = 1 << 20;
    let mut at = from;
    let mut buf = vec![0u8; WINDOW as usize];
    while at < len {
        let n = WINDOW.min(len - at) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        for i in 0..n.saturating_sub(3) {
            let magic = &buf[i..i + 4];
            if (magic == PUT_MAGIC || magic == DELETE_MAGIC)
                && record_at(file, at + i as u64, len).is_some()
            {
                return Ok(Some(at + i as u64));
            }
        }
        at += (n as u64).saturating_sub(3).max(1);
    }
    Ok(None)
}

/// What follows the last whole record of a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rest {
    Nothing,
    /// Zeros (or a hole) to the end of the file: what a crash leaves where the file's new
    /// length reached the disk before its data.
    Zeros,
    /// Anything else: a torn record on the last volume, damage on a sealed one.
    Torn,
}

/// What replaying a volume found.
pub(super) struct Replayed {
    /// Where its records end.
    pub end: u64,
    /// The file's length.
    pub len: u64,
    pub rest: Rest,
    /// A damaged record was found *followed by* whole ones (replay resynced after it): never
    /// appended to, never compacted.
    pub damaged: bool,
}

/// Replays volume `n` into `index`. A damaged record followed by whole ones cannot come from a
/// crash (an acknowledged record was synced with every byte before it), only from damage to the
/// medium: the records after it are replayed, and the caller keeps the volume whole and never
/// compacts it, nor appends to it (see the module docs).
pub(super) fn replay(
    file: &File,
    n: u32,
    index: &mut HashMap<ChunkId, Loc>,
) -> Result<Replayed, ChunkError> {
    let len = file.metadata()?.len();
    let mut offset = 0u64;
    let mut damaged = false;
    // Where the first resync landed: the records from there on are suspect (module docs).
    let mut resynced: Option<u64> = None;
    let mut rest = Rest::Nothing;
    // The last record if it is a put: its offset, id, and what the index had for the id before.
    let mut last_put: Option<(u64, ChunkId, Option<Loc>)> = None;
    while offset < len {
        let Some((put, id, body_len, written_ns)) = record_at(file, offset, len) else {
            if zeros_to_end(file, offset, len)? {
                rest = Rest::Zeros;
                break;
            }
            match next_record(file, offset + 1, len)? {
                Some(next) => {
                    tracing::error!(
                        volume = n,
                        at = offset,
                        resumed_at = next,
                        "damaged record in a chunk volume; the records after it are kept"
                    );
                    damaged = true;
                    resynced.get_or_insert(next);
                    offset = next;
                    continue;
                }
                None => {
                    rest = Rest::Torn;
                    break;
                }
            }
        };
        if put {
            let loc = Loc {
                volume: n,
                offset,
                body_len,
                written_ns,
            };
            let before = index.get(&id).copied();
            // A compaction copy moves the chunk only if the copy is whole: a crash before the
            // copies were synced may have left this one torn, the original intact. After a
            // resync it must also be a copy of the same record (a fake in user data is not).
            let moves = match before {
                None => true,
                Some(b) if resynced.is_some() && !same_put(&b, &loc) => false,
                Some(_) => image_is_whole(file, &loc, id),
            };
            if moves {
                index.insert(id, loc);
                last_put = Some((offset, id, before));
            } else {
                last_put = None;
            }
        } else {
            let undoes = match (resynced, index.get(&id)) {
                (Some(from), Some(l)) => l.volume != n || l.offset < from,
                _ => false,
            };
            if undoes {
                tracing::warn!(
                    volume = n,
                    at = offset,
                    "a tombstone after damage in a chunk volume is ignored (its chunk comes back as a leak)"
                );
            } else {
                index.remove(&id);
            }
            last_put = None;
        }
        offset += RECORD_HEADER_LEN + body_len;
    }
    // Its length does not prove the last put whole: a crash can leave a record its full length
    // with part of its body never written (zeros).
    if let (Some((at, id, before)), Rest::Zeros | Rest::Nothing) = (last_put, rest) {
        let loc = index[&id];
        if !image_is_whole(file, &loc, id) {
            match before {
                Some(before) => index.insert(id, before),
                None => index.remove(&id),
            };
            offset = at;
            rest = Rest::Torn;
        }
    }
    Ok(Replayed {
        end: offset.min(len),
        len,
        rest,
        damaged,
    })
}

/// Whether the chunk image of the put record at `loc` reads back whole (every CRC matches).
pub(super) fn image_is_whole(file: &File, loc: &Loc, id: ChunkId) -> bool {
    let base = loc.offset + RECORD_HEADER_LEN;
    read_image(file, None, base, loc.body_len, id, 0, u64::MAX).is_ok()
}

/// Whether `[from, len)` of `file` is all zeros.
fn zeros_to_end(file: &File, from: u64, len: u64) -> Result<bool, ChunkError> {
    let mut buf = vec![0u8; (1 << 20).min(len - from) as usize];
    let mut at = from;
    while at < len {
        let n = buf.len().min((len - at) as usize);
        file.read_exact_at(&mut buf[..n], at)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// Whether put records `a` and `b` have the same header (one a compaction copy of the other).
fn same_put(a: &Loc, b: &Loc) -> bool {
    a.body_len == b.body_len && a.written_ns == b.written_ns
}
