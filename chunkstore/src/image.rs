//! Reading a chunk image (the chunk file format, in a chunk file or a volume record): the
//! header checked against the image's length, the blocks a range touches read (direct, from
//! resident pages, or copied) and checked against their CRCs, and the whole-data CRC when the
//! read covers the whole chunk.

use std::fs::File;
use std::os::unix::fs::FileExt;

use bytes::Bytes;

use crate::error::ChunkError;
use crate::format::{self, Header, CRC_LEN, HEADER_LEN, SHARD_HEADER_LEN};
use crate::id::ChunkId;

/// What a range read found.
pub(crate) struct ReadOut {
    /// The requested bytes, verified.
    pub data: Bytes,
    /// The chunk's data length.
    pub data_len: u64,
    /// The stored whole-data CRC, checked, when the read covered the whole chunk.
    pub whole_crc: Option<u32>,
}

/// Buffered reads of at least this many bytes take the pages straight from the page cache when
/// they are all there ([`crate::mapped`]), instead of copying them into a buffer of ours.
const MAP_READ_MIN: usize = 256 * 1024;

/// Reads `[offset, offset + len)` of the chunk image (the chunk file format) that occupies
/// `image_len` bytes of `file` from `base` on: a chunk file (`base` 0) or a volume record.
/// With `direct` (the same file opened with `O_DIRECT`), the data blocks are read through it.
pub(crate) fn read_image(
    file: &File,
    direct: Option<&File>,
    base: u64,
    image_len: u64,
    id: ChunkId,
    offset: u64,
    len: u64,
) -> Result<ReadOut, ChunkError> {
    if image_len < HEADER_LEN as u64 {
        return Err(ChunkError::corrupt(
            id,
            format!("chunk image is {image_len} bytes, shorter than the header"),
        ));
    }
    // Enough for any header; a chunk's own image may be shorter.
    let mut header_buf = [0u8; SHARD_HEADER_LEN];
    let header_buf = &mut header_buf[..image_len.min(SHARD_HEADER_LEN as u64) as usize];
    file.read_exact_at(header_buf, base)?;
    let header = Header::decode(id, header_buf)?;
    let expected_len = header.file_len().unwrap_or(u64::MAX);
    if image_len != expected_len {
        return Err(ChunkError::corrupt(
            id,
            format!("chunk image is {image_len} bytes, its header implies {expected_len}"),
        ));
    }

    let data_len = header.data_len;
    let start = offset.min(data_len);
    let end = offset.saturating_add(len).min(data_len);
    let whole = start == 0 && end == data_len;
    if start == end && !whole {
        return Ok(ReadOut {
            data: Bytes::new(),
            data_len,
            whole_crc: None,
        });
    }

    // Blocks [first, last_excl) cover [start, end).
    let block_size = u64::from(header.block_size);
    let (first, last_excl) = if start == end {
        (0, 0)
    } else {
        (start / block_size, (end - 1) / block_size + 1)
    };
    let read_start = first * block_size;
    let read_end = (last_excl * block_size).min(data_len);
    let data_at = base + header.header_len() as u64 + read_start;
    let data = match direct {
        Some(direct) => crate::direct::read_at(direct, data_at, to_usize(read_end - read_start)?)?,
        None => {
            let n = to_usize(read_end - read_start)?;
            let mapped = if n >= MAP_READ_MIN {
                crate::mapped::read_resident(file, data_at, n)
            } else {
                None
            };
            match mapped {
                Some(data) => data,
                None => {
                    let mut data = vec![0u8; n];
                    file.read_exact_at(&mut data, data_at)?;
                    Bytes::from(data)
                }
            }
        }
    };

    let entries = to_usize(last_excl - first)? * CRC_LEN;
    let mut table = vec![0u8; entries + if whole { CRC_LEN } else { 0 }];
    file.read_exact_at(
        &mut table,
        base + header.table_offset() + first * CRC_LEN as u64,
    )?;
    let computed = format::verify_blocks(id, &header, first, &data, &table[..entries])?;
    let whole_crc = if whole {
        let stored = format::read_u32(&table[entries..]);
        if stored != computed {
            return Err(ChunkError::corrupt(
                id,
                format!("whole-data crc mismatch: stored {stored:08x}, computed {computed:08x}"),
            ));
        }
        Some(stored)
    } else {
        None
    };

    let data = data.slice(to_usize(start - read_start)?..to_usize(end - read_start)?);
    Ok(ReadOut {
        data,
        data_len,
        whole_crc,
    })
}

pub(crate) fn to_usize(n: u64) -> Result<usize, ChunkError> {
    usize::try_from(n).map_err(|_| ChunkError::BadFormat(format!("{n} bytes do not fit in memory")))
}
