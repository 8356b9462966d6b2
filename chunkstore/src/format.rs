//! The on-disk encoding of one chunk file (format version 1), with no I/O: encode the header and
//! checksum trailer, decode and validate a header, verify blocks against their checksums.
//!
//! A chunk file is, all integers little-endian:
//!
//! ```text
//! offset                      size        field
//! 0                           4           magic b"SKCH"
//! 4                           2           format version u16 = 1
//! 6                           2           reserved u16, written 0
//! 8                           8           data length u64 (L)
//! 16                          4           block size u32 (B), 64 KiB when written by this code
//! 20                          4           CRC32C of bytes 0..20 (protects L and B)
//! 24                          L           the data
//! 24 + L                      4 * N       CRC32C of each block, N = ceil(L / B); the last block
//!                                         may be short
//! 24 + L + 4 * N              4           CRC32C of the whole data (ChunkInfo::crc32c)
//! ```
//!
//! The file length must be exactly `24 + L + 4 * N + 4`; anything else (a crash during `put`, a
//! truncation) is corrupt. A reader reads the header, the blocks covering the requested range and
//! their table entries, and verifies each block. Readers honour the block size in the header, so
//! it can change without a version bump; any other change to the layout needs a new version, and
//! readers keep decoding the old ones.

use crate::error::ChunkError;
use crate::id::ChunkId;

/// Block size used for new chunks: the unit of checksumming and of reads.
pub const BLOCK_SIZE: u32 = 64 * 1024;
/// File magic.
pub const MAGIC: [u8; 4] = *b"SKCH";
/// The format version written by this code.
pub const VERSION: u16 = 1;
/// Length of the fixed header.
pub const HEADER_LEN: usize = 24;
/// Length of one checksum entry (table entry or whole-data CRC).
pub const CRC_LEN: usize = 4;
/// Largest block size a reader accepts (guards allocations against a bogus header).
pub const MAX_BLOCK_SIZE: u32 = 64 << 20;

/// The decoded fixed header of a chunk file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Data length in bytes.
    pub data_len: u64,
    /// Checksum block size in bytes (never 0).
    pub block_size: u32,
}

impl Header {
    /// The header for a new chunk of `data_len` bytes.
    pub fn new(data_len: u64) -> Self {
        Header {
            data_len,
            block_size: BLOCK_SIZE,
        }
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut buf = [0u8; HEADER_LEN];
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4..6].copy_from_slice(&VERSION.to_le_bytes());
        // 6..8 reserved, zero.
        buf[8..16].copy_from_slice(&self.data_len.to_le_bytes());
        buf[16..20].copy_from_slice(&self.block_size.to_le_bytes());
        let crc = crc32c::crc32c(&buf[0..20]);
        buf[20..24].copy_from_slice(&crc.to_le_bytes());
        buf
    }

    /// Decodes and validates the header at the start of `buf` (the file of chunk `id`).
    ///
    /// A short buffer, bad magic, bad header checksum or impossible block size is
    /// [`ChunkError::Corrupt`]; an unknown version is [`ChunkError::BadFormat`].
    pub fn decode(id: ChunkId, buf: &[u8]) -> Result<Self, ChunkError> {
        let Some(buf) = buf.get(..HEADER_LEN) else {
            return Err(ChunkError::corrupt(
                id,
                format!("header is {} bytes, expected {HEADER_LEN}", buf.len()),
            ));
        };
        if buf[0..4] != MAGIC {
            return Err(ChunkError::corrupt(
                id,
                format!("bad magic {:02x?}", &buf[0..4]),
            ));
        }
        let version = u16::from_le_bytes([buf[4], buf[5]]);
        if version != VERSION {
            return Err(ChunkError::BadFormat(format!(
                "chunk {id}: unsupported format version {version} (this build reads {VERSION})"
            )));
        }
        let stored_crc = read_u32(&buf[20..24]);
        let crc = crc32c::crc32c(&buf[0..20]);
        if stored_crc != crc {
            return Err(ChunkError::corrupt(
                id,
                format!("header crc mismatch: stored {stored_crc:08x}, computed {crc:08x}"),
            ));
        }
        let mut len_bytes = [0u8; 8];
        len_bytes.copy_from_slice(&buf[8..16]);
        let header = Header {
            data_len: u64::from_le_bytes(len_bytes),
            block_size: read_u32(&buf[16..20]),
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
        Ok(header)
    }

    /// Number of checksum blocks.
    pub fn block_count(&self) -> u64 {
        self.data_len.div_ceil(u64::from(self.block_size))
    }

    /// File offset of the first checksum table entry.
    pub fn table_offset(&self) -> u64 {
        HEADER_LEN as u64 + self.data_len
    }

    /// The exact length of a complete file with this header, or None if it overflows.
    pub fn file_len(&self) -> Option<u64> {
        self.block_count()
            .checked_add(1)?
            .checked_mul(CRC_LEN as u64)?
            .checked_add(self.data_len)?
            .checked_add(HEADER_LEN as u64)
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
        let mut bad = good;
        bad[0] = b'X';
        assert!(matches!(
            Header::decode(ID, &bad),
            Err(ChunkError::Corrupt { .. })
        ));
        let mut bad = good;
        bad[4] = 2;
        assert!(matches!(
            Header::decode(ID, &bad),
            Err(ChunkError::BadFormat(_))
        ));
        for byte in [6, 8, 12, 16, 21] {
            let mut bad = good;
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
            }
            .encode();
            assert!(matches!(
                Header::decode(ID, &buf),
                Err(ChunkError::Corrupt { .. })
            ));
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
