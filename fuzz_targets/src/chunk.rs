//! The `chunk` target: a chunk file (`chunkstore/src/format.rs`), decoded as a header and
//! checksum table, and read through a disk chunk store.
//!
//! Input: the offset (u32 LE) and length (u32 LE, `u32::MAX` for "to the end") of the range to
//! read, then the chunk file's bytes. A file whose every checksum holds reads back the data
//! it holds, for any range.

use std::sync::OnceLock;

use saker_chunkstore::format::{self, Header, ShardOf, CRC_LEN};
use saker_chunkstore::{reads_in_place, ChunkId, ChunkStore, DiskChunkStore};

/// The id every input is stored under.
const ID: ChunkId = ChunkId(0x5eed);

/// Decodes a chunk file and reads a range of it through the store.
pub fn chunk(data: &[u8]) {
    let Some((range, file)) = data.split_first_chunk::<8>() else {
        return;
    };
    let offset = u64::from(u32::from_le_bytes(range[..4].try_into().expect("4 bytes")));
    let len = match u32::from_le_bytes(range[4..].try_into().expect("4 bytes")) {
        u32::MAX => u64::MAX,
        n => u64::from(n),
    };
    let content = decode(file);

    let store = store();
    std::fs::write(store.chunk_path(ID), file).expect("scratch write");
    let whole = reads_in_place(|| crate::scratch::runtime().block_on(store.verify(ID)));
    let got = reads_in_place(|| crate::scratch::runtime().block_on(store.get(ID, offset, len)));
    match content {
        Some(content) => {
            let info = whole.expect("a file whose checksums hold verifies");
            assert_eq!(info.len, content.len() as u64);
            let start = (offset as usize).min(content.len());
            let end = (offset.saturating_add(len)).min(content.len() as u64) as usize;
            assert_eq!(
                got.expect("a file whose checksums hold reads"),
                content[start..end],
                "a range read back differs"
            );
        }
        None => {
            assert!(
                whole.is_err(),
                "the store verified a file the format refuses"
            );
        }
    }
}

/// The data of chunk file `file` if its header, length and every checksum hold.
fn decode(file: &[u8]) -> Option<&[u8]> {
    let header = Header::decode(ID, file).ok()?;
    if Some(file.len() as u64) != header.file_len() {
        return None;
    }
    let table_at = header.header_len() + header.data_len as usize;
    let data = &file[header.header_len()..table_at];
    let table = &file[table_at..file.len() - CRC_LEN];
    let whole = format::verify_blocks(ID, &header, 0, data, table).ok()?;
    (format::read_u32(&file[file.len() - CRC_LEN..]) == whole).then_some(data)
}

/// The store the inputs are read through (one per process).
fn store() -> &'static DiskChunkStore {
    static STORE: OnceLock<DiskChunkStore> = OnceLock::new();
    STORE.get_or_init(|| {
        DiskChunkStore::open(&crate::scratch::dir("chunk")).expect("a scratch chunk store")
    })
}

/// Chunk files for the seed corpus: chunks of a few sizes (around the block size), and shards
/// (format version 2), each with a range or two to read.
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let shard = |chunk_len: u64, index: u8| ShardOf {
        chunk: ChunkId(0xc0de),
        index,
        layout: "4+2".parse().expect("a layout"),
        chunk_len,
    };
    let cases = [
        (0, 16, None),
        (1, 16, None),
        (100, 16, None),
        (64, 16, None),
        (1000, 64, None),
        (5, 4096, None),
        (64, 16, Some(shard(200, 1))),
        (128, 64, Some(shard(500, 5))),
    ];
    for (len, block, shard) in cases {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 13) as u8).collect();
        let header = Header {
            data_len: len as u64,
            block_size: block,
            shard,
        };
        let (trailer, _) = format::encode_trailer(&data, block);
        let file = [&header.encode()[..], &data, &trailer].concat();
        for (offset, n) in [(0u32, u32::MAX), (len as u32 / 3, 17)] {
            let mut input = offset.to_le_bytes().to_vec();
            input.extend(n.to_le_bytes());
            input.extend(&file);
            out.push(input);
        }
    }
    out
}
