//! The on-disk encoding of one chunk file (format versions 1 and 2), with no I/O: encode the
//! header and checksum trailer, decode and validate a header, verify blocks against their
//! checksums.
//!
//! A chunk file is, all integers little-endian:
//!
//! ```text
//! offset                      size        field
//! 0                           4           magic b"SKCH"
//! 4                           2           format version u16: 1, or 2 for a shard
//! 6                           2           reserved u16, written 0
//! 8                           8           data length u64 (L)
//! 16                          4           block size u32 (B), 64 KiB when written by this code
//! (version 1)
//! 20                          4           CRC32C of bytes 0..20 (protects L and B)
//! (version 2: one shard of an erasure-coded chunk, crate::ec)
//! 20                          16          id of the chunk the shard belongs to (u128)
//! 36                          1           shard index (data shards first, then parity)
//! 37                          1           data shards of the layout (k)
//! 38                          1           parity shards of the layout (m)
//! 39                          1           reserved, written 0
//! 40                          8           the chunk's length (its shards hold k * L >= it)
//! 48                          4           CRC32C of bytes 0..48
//! (both; H, the header length, is 24 in version 1 and 52 in version 2)
//! H                           L           the data
//! H + L                       4 * N       CRC32C of each block, N = ceil(L / B); the last block
//!                                         may be short
//! H + L + 4 * N               4           CRC32C of the whole data (ChunkInfo::crc32c)
//! ```
//!
//! The file length must be exactly `H + L + 4 * N + 4`; anything else (a crash during `put`, a
//! truncation) is corrupt. A reader reads the header, the blocks covering the requested range and
//! their table entries, and verifies each block. Readers honour the block size in the header, so
//! it can change without a version bump; any other change to the layout needs a new version, and
//! readers keep decoding the old ones.

use crate::ec::Layout;
use crate::error::ChunkError;
use crate::id::ChunkId;

/// Block size used for new chunks: the unit of checksumming and of reads.
pub const BLOCK_SIZE: u32 = 64 * 1024;
/// File magic.
pub const MAGIC: [u8; 4] = *b"SKCH";
/// The format version of a chunk.
pub const VERSION: u16 = 1;
/// The format version of a shard of an erasure-coded chunk.
pub const SHARD_VERSION: u16 = 2;
/// Length of the fixed header of a chunk (version 1); the least any header has.
pub const HEADER_LEN: usize = 24;
/// Length of the fixed header of a shard (version 2); the most any header has.
pub const SHARD_HEADER_LEN: usize = 52;
/// Length of one checksum entry (table entry or whole-data CRC).
pub const CRC_LEN: usize = 4;
/// Largest block size a reader accepts (guards allocations against a bogus header).
pub const MAX_BLOCK_SIZE: u32 = 64 << 20;

/// Which shard of which chunk a shard file holds (format version 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardOf {
    /// The erasure-coded chunk.
    pub chunk: ChunkId,
    /// The shard's index: data shards `0..k`, then parity.
    pub index: u8,
    /// The chunk's layout.
    pub layout: Layout,
    /// The chunk's length.
    pub chunk_len: u64,
}

/// The decoded fixed header of a chunk file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Data length in bytes.
    pub data_len: u64,
    /// Checksum block size in bytes (never 0).
    pub block_size: u32,
    /// The chunk this is a shard of, for a shard (version 2).
    pub shard: Option<ShardOf>,
}

impl Header {
    /// The header for a new chunk of `data_len` bytes.
    pub fn new(data_len: u64) -> Self {
        Header {
            data_len,
            block_size: BLOCK_SIZE,
            shard: None,
        }
    }

    /// The header for a new shard of `data_len` bytes.
    pub fn shard(data_len: u64, of: ShardOf) -> Self {
        Header {
            shard: Some(of),
            ..Header::new(data_len)
        }
    }

    /// The length of this header in a file: [`HEADER_LEN`] or [`SHARD_HEADER_LEN`].
    pub fn header_len(&self) -> usize {
        match self.shard {
            None => HEADER_LEN,
            Some(_) => SHARD_HEADER_LEN,
        }
    }

    /// The header's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = vec![0u8; self.header_len()];
        buf[0..4].copy_from_slice(&MAGIC);
        let version = match self.shard {
            None => VERSION,
            Some(_) => SHARD_VERSION,
        };
        buf[4..6].copy_from_slice(&version.to_le_bytes());
        // 6..8 reserved, zero.
        buf[8..16].copy_from_slice(&self.data_len.to_le_bytes());
        buf[16..20].copy_from_slice(&self.block_size.to_le_bytes());
        if let Some(of) = &self.shard {
            buf[20..36].copy_from_slice(&of.chunk.0.to_le_bytes());
            buf[36] = of.index;
            buf[37] = of.layout.data() as u8;
            buf[38] = of.layout.parity() as u8;
            // 39 reserved, zero.
            buf[40..48].copy_from_slice(&of.chunk_len.to_le_bytes());
        }
        let at = buf.len() - CRC_LEN;
        let crc = crc32c::crc32c(&buf[..at]);
        buf[at..].copy_from_slice(&crc.to_le_bytes());
        buf
    }

    /// Decodes and validates the header at the start of `buf` (the file of chunk `id`), which
    /// holds at least the header ([`SHARD_HEADER_LEN`] bytes hold any; a chunk's own file may
    /// be shorter).
    ///
    /// A short buffer, bad magic, bad header checksum or impossible size or shard is
    /// [`ChunkError::Corrupt`]; an unknown version is [`ChunkError::BadFormat`].
    pub fn decode(id: ChunkId, buf: &[u8]) -> Result<Self, ChunkError> {
        let short = |len: usize| {
            ChunkError::corrupt(id, format!("header is {} bytes, expected {len}", buf.len()))
        };
        let prefix = buf.get(..HEADER_LEN).ok_or_else(|| short(HEADER_LEN))?;
        if prefix[0..4] != MAGIC {
            return Err(ChunkError::corrupt(
                id,
                format!("bad magic {:02x?}", &prefix[0..4]),
            ));
        }
        let version = u16::from_le_bytes([prefix[4], prefix[5]]);
        let len = match version {
            VERSION => HEADER_LEN,
            SHARD_VERSION => SHARD_HEADER_LEN,
            _ => {
                return Err(ChunkError::BadFormat(format!(
                    "chunk {id}: unsupported format version {version} (this build reads \
                     {VERSION} and {SHARD_VERSION})"
                )))
            }
        };
        let buf = buf.get(..len).ok_or_else(|| short(len))?;
        let stored_crc = read_u32(&buf[len - CRC_LEN..]);
        let crc = crc32c::crc32c(&buf[..len - CRC_LEN]);
        if stored_crc != crc {
            return Err(ChunkError::corrupt(
                id,
                format!("header crc mismatch: stored {stored_crc:08x}, computed {crc:08x}"),
            ));
        }
        let shard = match version {
            SHARD_VERSION => Some(decode_shard(id, buf)?),
            _ => None,
        };
        let header = Header {
            data_len: read_u64(&buf[8..16]),
            block_size: read_u32(&buf[16..20]),
            shard,
        };
        if header.block_size == 0 || header.block_size > MAX_BLOCK_SIZE {
            return Err(ChunkError::corrupt(
                id,
                format!("impossible block size {}", header.block_size),
            ));
        }
        if header.file_len().is_none() {
            return Err(ChunkError::corrupt(
                id,
                format!("impossible data length {}", header.data_len),
            ));
        }
        if let Some(of) = &header.shard {
            if of.layout.shard_len(of.chunk_len) != header.data_len {
                return Err(ChunkError::corrupt(
                    id,
                    format!(
                        "a shard of {} bytes for a {}-byte chunk in {}",
                        header.data_len, of.chunk_len, of.layout
                    ),
                ));
            }
        }
        Ok(header)
    }

    /// Number of checksum blocks.
    pub fn block_count(&self) -> u64 {
        self.data_len.div_ceil(u64::from(self.block_size))
    }

    /// File offset of the first checksum table entry.
    pub fn table_offset(&self) -> u64 {
        self.header_len() as u64 + self.data_len
    }

    /// The exact length of a complete file with this header, or None if it overflows.
    pub fn file_len(&self) -> Option<u64> {
        self.block_count()
            .checked_add(1)?
            .checked_mul(CRC_LEN as u64)?
            .checked_add(self.data_len)?
            .checked_add(self.header_len() as u64)
    }
}

/// The checksum trailer for `data` (block table then whole-data CRC), and the whole-data CRC.
pub fn encode_trailer(data: &[u8], block_size: u32) -> (Vec<u8>, u32) {
    let block_size = usize::try_from(block_size).expect("u32 fits in usize on supported targets");
    let blocks = data.len().div_ceil(block_size);
    let mut trailer = Vec::with_capacity((blocks + 1) * CRC_LEN);
    let mut whole = 0u32;
    for (i, block) in data.chunks(block_size).enumerate() {
        let crc = crc32c::crc32c(block);
        trailer.extend_from_slice(&crc.to_le_bytes());
        whole = extend(i, whole, crc, block);
    }
    trailer.extend_from_slice(&whole.to_le_bytes());
    (trailer, whole)
}

/// Verifies `data`, the consecutive blocks starting at block `first_block`, against `table`,
/// their checksum entries. Returns the CRC32C of `data` as a whole.
pub fn verify_blocks(
    id: ChunkId,
    header: &Header,
    first_block: u64,
    data: &[u8],
    table: &[u8],
) -> Result<u32, ChunkError> {
    let block_size = usize::try_from(header.block_size).expect("u32 fits in usize");
    let blocks = data.len().div_ceil(block_size);
    if table.len() != blocks * CRC_LEN {
        return Err(ChunkError::corrupt(
            id,
            format!("{} checksum bytes for {blocks} blocks", table.len()),
        ));
    }
    let mut whole = 0u32;
    for (i, (block, entry)) in data
        .chunks(block_size)
        .zip(table.chunks_exact(CRC_LEN))
        .enumerate()
    {
        let stored = read_u32(entry);
        let crc = crc32c::crc32c(block);
        if stored != crc {
            return Err(ChunkError::corrupt(
                id,
                format!(
                    "block {} crc mismatch: stored {stored:08x}, computed {crc:08x}",
                    first_block + i as u64
                ),
            ));
        }
        whole = extend(i, whole, crc, block);
    }
    Ok(whole)
}

/// The shard fields of a version 2 header whose checksum holds.
fn decode_shard(id: ChunkId, buf: &[u8]) -> Result<ShardOf, ChunkError> {
    let layout = Layout::new(buf[37], buf[38])
        .map_err(|e| ChunkError::corrupt(id, format!("shard header: {e}")))?;
    let of = ShardOf {
        chunk: ChunkId(u128::from_le_bytes(
            buf[20..36].try_into().expect("16 bytes"),
        )),
        index: buf[36],
        layout,
        chunk_len: read_u64(&buf[40..48]),
    };
    if usize::from(of.index) >= layout.shards() {
        return Err(ChunkError::corrupt(
            id,
            format!("shard {} of a {layout} layout", of.index),
        ));
    }
    Ok(of)
}

/// Reads a little-endian u64 from an 8-byte slice.
fn read_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// Reads a little-endian u32 from a 4-byte slice.
pub fn read_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// The CRC32C of the data through block `index` (`crc` its own), from `acc`, that of the
/// blocks before it: a second pass over the block while it is in cache costs about half of
/// `crc32c_combine`'s matrix arithmetic at 64 KiB blocks.
fn extend(index: usize, acc: u32, crc: u32, block: &[u8]) -> u32 {
    if index == 0 {
        crc
    } else {
        crc32c::crc32c_append(acc, block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: ChunkId = ChunkId(7);

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn header_round_trips() {
        for len in [0, 1, 65_535, 65_536, 65_537, 10 << 20] {
            let h = Header::new(len);
            assert_eq!(Header::decode(ID, &h.encode()).unwrap(), h);
        }
    }

    #[test]
    fn header_rejects_damage() {
        let good = Header::new(1000).encode();
        assert!(matches!(
            Header::decode(ID, &good[..10]),
            Err(ChunkError::Corrupt { .. })
        ));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(
            Header::decode(ID, &bad),
            Err(ChunkError::Corrupt { .. })
        ));
        let mut bad = good.clone();
        bad[4] = 3;
        assert!(matches!(
            Header::decode(ID, &bad),
            Err(ChunkError::BadFormat(_))
        ));
        for byte in [6, 8, 12, 16, 21] {
            let mut bad = good.clone();
            bad[byte] ^= 0x40;
            assert!(
                matches!(Header::decode(ID, &bad), Err(ChunkError::Corrupt { .. })),
                "flip at {byte} accepted"
            );
        }
    }

    #[test]
    fn header_rejects_impossible_sizes_even_with_valid_crc() {
        for (len, bs) in [(10, 0), (10, MAX_BLOCK_SIZE + 1), (u64::MAX, 1)] {
            let buf = Header {
                data_len: len,
                block_size: bs,
                shard: None,
            }
            .encode();
            assert!(matches!(
                Header::decode(ID, &buf),
                Err(ChunkError::Corrupt { .. })
            ));
        }
    }

    fn shard_of(chunk_len: u64, index: u8) -> ShardOf {
        ShardOf {
            chunk: ChunkId(0xfeed_beef << 64 | 9),
            index,
            layout: "4+2".parse().unwrap(),
            chunk_len,
        }
    }

    #[test]
    fn a_shard_header_round_trips_and_names_its_chunk() {
        for (chunk_len, index) in [(0, 0), (1000, 5), (8 << 20, 3)] {
            let of = shard_of(chunk_len, index);
            let h = Header::shard(of.layout.shard_len(chunk_len), of);
            let bytes = h.encode();
            assert_eq!(bytes.len(), SHARD_HEADER_LEN);
            assert_eq!(Header::decode(ID, &bytes).unwrap(), h);
            // A buffer longer than the header is fine (readers take SHARD_HEADER_LEN bytes).
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[7; 40]);
            assert_eq!(Header::decode(ID, &longer).unwrap(), h);
            assert_eq!(h.table_offset(), (SHARD_HEADER_LEN as u64) + h.data_len);
        }
    }

    #[test]
    fn a_damaged_shard_header_is_corrupt() {
        let of = shard_of(1000, 2);
        let good = Header::shard(of.layout.shard_len(1000), of).encode();
        assert!(matches!(
            Header::decode(ID, &good[..HEADER_LEN]),
            Err(ChunkError::Corrupt { .. })
        ));
        for byte in [8, 20, 35, 36, 37, 38, 40, 47, 50] {
            let mut bad = good.clone();
            bad[byte] ^= 0x04;
            assert!(
                matches!(Header::decode(ID, &bad), Err(ChunkError::Corrupt { .. })),
                "flip at {byte} accepted"
            );
        }
        // Consistent checksums, impossible contents: an index past the layout, a layout that
        // cannot be, a shard length that does not fit the chunk.
        for h in [
            Header::shard(256, shard_of(1000, 6)),
            Header::shard(
                256,
                ShardOf {
                    layout: Layout::new(2, 1).unwrap(),
                    ..shard_of(1000, 0)
                },
            ),
            Header::shard(64, shard_of(1000, 0)),
        ] {
            let mut bytes = h.encode();
            if h.shard.unwrap().layout.parity() == 1 {
                bytes[38] = 0; // no layout has 0 parity shards
                let crc = crc32c::crc32c(&bytes[..48]);
                bytes[48..].copy_from_slice(&crc.to_le_bytes());
            }
            assert!(
                matches!(Header::decode(ID, &bytes), Err(ChunkError::Corrupt { .. })),
                "{h:?} accepted"
            );
        }
    }

    #[test]
    fn sizes() {
        let h = Header::new(65_537);
        assert_eq!(h.block_count(), 2);
        assert_eq!(h.table_offset(), 24 + 65_537);
        assert_eq!(h.file_len(), Some(24 + 65_537 + 8 + 4));
        assert_eq!(Header::new(0).file_len(), Some(28));
        assert_eq!(Header::new(65_536).block_count(), 1);
    }

    #[test]
    fn trailer_crc_is_crc_of_whole_data() {
        for len in [0, 1, 65_536, 65_537, 3 * 65_536 + 17] {
            let d = data(len);
            let (trailer, whole) = encode_trailer(&d, BLOCK_SIZE);
            assert_eq!(whole, crc32c::crc32c(&d));
            let blocks = len.div_ceil(BLOCK_SIZE as usize);
            assert_eq!(trailer.len(), (blocks + 1) * CRC_LEN);
            assert_eq!(read_u32(&trailer[blocks * CRC_LEN..]), whole);
            let verified = verify_blocks(
                ID,
                &Header::new(len as u64),
                0,
                &d,
                &trailer[..blocks * CRC_LEN],
            )
            .unwrap();
            assert_eq!(verified, whole);
        }
    }

    #[test]
    fn verify_detects_flips_and_table_mismatch() {
        let mut d = data(2 * 65_536 + 5);
        let (trailer, _) = encode_trailer(&d, BLOCK_SIZE);
        let table = &trailer[..3 * CRC_LEN];
        let h = Header::new(d.len() as u64);
        // Verifying only block 1 with its entry works.
        verify_blocks(ID, &h, 1, &d[65_536..131_072], &table[4..8]).unwrap();
        assert!(verify_blocks(ID, &h, 0, &d, &table[..8]).is_err());
        d[70_000] ^= 1;
        match verify_blocks(ID, &h, 0, &d, table) {
            Err(ChunkError::Corrupt { detail, .. }) => assert!(detail.contains("block 1")),
            other => panic!("expected corrupt, got {other:?}"),
        }
    }
}
