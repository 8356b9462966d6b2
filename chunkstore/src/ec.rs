//! Erasure coding of one chunk (a storage class such as 4+2): its [`Layout`] of k data and m
//! parity shards, the shards it splits into, and the chunk back from any k of them.
//!
//! Shards are contiguous pieces, not stripes: data shard i holds bytes `[i*s, (i+1)*s)` of the
//! chunk (zeros past its end), `s` = [`Layout::shard_len`], so a healthy read of a range reads
//! only the data shards that hold it, at the same offsets ([`Layout::pieces`]). Parity is
//! Reed-Solomon over GF(2^8) (`reed-solomon-erasure` with its SIMD kernels: faster than
//! `reed-solomon-simd` at these shard counts, 2-5x to encode and 6-25x to rebuild, measured by
//! `chunkstore/examples/ec_codecs.rs`). Shard i of chunk `id` is stored under
//! [`shard_id`]`(id, layout, i)`, so a store can hold a replica of a chunk and one of its shards
//! side by side, and two layouts of a chunk never share an id.

use bytes::Bytes;
use reed_solomon_erasure::galois_8::ReedSolomon;

use crate::error::ChunkError;
use crate::id::ChunkId;

/// Most data shards a layout may have.
pub const MAX_DATA: u8 = 16;
/// Most parity shards a layout may have.
pub const MAX_PARITY: u8 = 8;
/// Shard lengths are multiples of this (whole SIMD words; padding stays under 64 bytes a
/// shard).
pub const SHARD_ALIGN: u64 = 64;

/// k data shards and m parity shards: any k of the k + m rebuild the chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    data: u8,
    parity: u8,
}

impl Layout {
    /// `data` + `parity` shards: 2..=16 data, 1..=8 parity, no more parity than data.
    pub fn new(data: u8, parity: u8) -> Result<Self, ChunkError> {
        if !(2..=MAX_DATA).contains(&data) || !(1..=MAX_PARITY).contains(&parity) || parity > data {
            return Err(ChunkError::BadFormat(format!(
                "erasure-coding layout {data}+{parity}: data shards must be 2 to {MAX_DATA} and \
                 parity shards 1 to {MAX_PARITY}, no more than the data shards"
            )));
        }
        Ok(Layout { data, parity })
    }

    /// k: data shards.
    pub fn data(self) -> usize {
        usize::from(self.data)
    }

    /// m: parity shards (how many may be lost).
    pub fn parity(self) -> usize {
        usize::from(self.parity)
    }

    /// k + m.
    pub fn shards(self) -> usize {
        self.data() + self.parity()
    }

    /// The length of each shard of a chunk of `chunk_len` bytes: a k-th of it, rounded up to
    /// [`SHARD_ALIGN`] (never 0).
    pub fn shard_len(self, chunk_len: u64) -> u64 {
        chunk_len
            .div_ceil(self.data as u64)
            .div_ceil(SHARD_ALIGN)
            .max(1)
            * SHARD_ALIGN
    }

    /// Where the chunk's bytes `[offset, offset + len)` (clamped to `chunk_len`) are in its data
    /// shards, in order.
    pub fn pieces(self, chunk_len: u64, offset: u64, len: u64) -> Vec<Piece> {
        let s = self.shard_len(chunk_len);
        let end = offset.saturating_add(len).min(chunk_len);
        let mut at = offset.min(end);
        let mut out = Vec::new();
        while at < end {
            let shard = at / s;
            let shard_end = ((shard + 1) * s).min(end);
            out.push(Piece {
                shard: shard as usize,
                offset: at % s,
                len: shard_end - at,
            });
            at = shard_end;
        }
        out
    }

    /// The k + m shards of `chunk`: its data shards, then the parity.
    pub fn encode(self, chunk: &[u8]) -> Result<Vec<Bytes>, ChunkError> {
        let s = self.shard_len(chunk.len() as u64) as usize;
        let data = self.data_shards(chunk, s);
        let parity = self.encode_data(&data)?;
        Ok(data.into_iter().chain(parity).collect())
    }

    /// The chunk of `chunk_len` bytes from its shards (`shards[i]` shard i, `None` where it is
    /// missing): the data shards joined, any missing ones first rebuilt from the others.
    pub fn decode(self, chunk_len: u64, shards: &[Option<Bytes>]) -> Result<Bytes, ChunkError> {
        let parts = self.decode_parts(chunk_len, shards)?;
        let mut chunk = Vec::with_capacity(chunk_len as usize);
        for d in parts {
            chunk.extend_from_slice(&d);
        }
        Ok(chunk.into())
    }

    /// [`Self::decode`] without joining: the chunk's bytes in order, as its data shards (the
    /// present ones themselves, not copies; padding cut off, empty ones left out).
    pub fn decode_parts(
        self,
        chunk_len: u64,
        shards: &[Option<Bytes>],
    ) -> Result<Vec<Bytes>, ChunkError> {
        let s = self.shard_len(chunk_len);
        let mut parts = self.data_from(chunk_len, shards)?;
        for (i, d) in parts.iter_mut().enumerate() {
            let keep = chunk_len.saturating_sub(i as u64 * s).min(s) as usize;
            d.truncate(keep);
        }
        parts.retain(|d| !d.is_empty());
        Ok(parts)
    }

    /// Shards `want` of a chunk of `chunk_len` bytes, rebuilt from the others (`shards` as in
    /// [`Self::decode`]): what a repair writes to a store that lost them.
    pub fn rebuild(
        self,
        chunk_len: u64,
        shards: &[Option<Bytes>],
        want: &[usize],
    ) -> Result<Vec<Bytes>, ChunkError> {
        let data = self.data_from(chunk_len, shards)?;
        let parity = if want.iter().any(|&i| i >= self.data()) {
            self.encode_data(&data)?
        } else {
            Vec::new()
        };
        want.iter()
            .map(|&i| match i.checked_sub(self.data()) {
                None => Ok(data[i].clone()),
                Some(p) => parity
                    .get(p)
                    .cloned()
                    .ok_or_else(|| ChunkError::BadFormat(format!("shard {i} of a {self} layout"))),
            })
            .collect()
    }

    /// Whether `shards` (all k + m, equally long) agree: the parity is that of the data. What
    /// a scrub checks beyond each shard's own CRCs.
    pub fn verify(self, shards: &[Bytes]) -> Result<bool, ChunkError> {
        if shards.len() != self.shards() || shards.iter().any(|s| s.len() != shards[0].len()) {
            return Err(ChunkError::BadFormat(format!(
                "{} shards of unequal or wrong count for a {self} layout",
                shards.len()
            )));
        }
        let refs: Vec<&[u8]> = shards.iter().map(|s| &s[..]).collect();
        self.codec()?.verify(&refs).map_err(codec)
    }

    /// The k data shards of `chunk`, each `s` bytes.
    fn data_shards(self, chunk: &[u8], s: usize) -> Vec<Bytes> {
        (0..self.data())
            .map(|i| {
                let start = (i * s).min(chunk.len());
                let end = ((i + 1) * s).min(chunk.len());
                if end - start == s {
                    Bytes::copy_from_slice(&chunk[start..end])
                } else {
                    let mut padded = vec![0u8; s];
                    padded[..end - start].copy_from_slice(&chunk[start..end]);
                    padded.into()
                }
            })
            .collect()
    }

    /// The parity of `data`, the k data shards.
    fn encode_data(self, data: &[Bytes]) -> Result<Vec<Bytes>, ChunkError> {
        let s = data.first().map_or(0, Bytes::len);
        let mut parity = vec![vec![0u8; s]; self.parity()];
        let data: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        let mut parity_refs: Vec<&mut [u8]> = parity.iter_mut().map(|p| &mut p[..]).collect();
        self.codec()?
            .encode_sep(&data, &mut parity_refs)
            .map_err(codec)?;
        Ok(parity.into_iter().map(Bytes::from).collect())
    }

    /// The Reed-Solomon codec of this layout.
    fn codec(self) -> Result<ReedSolomon, ChunkError> {
        ReedSolomon::new(self.data(), self.parity()).map_err(codec)
    }

    /// The k data shards, those missing rebuilt from any k present.
    fn data_from(self, chunk_len: u64, shards: &[Option<Bytes>]) -> Result<Vec<Bytes>, ChunkError> {
        let s = self.shard_len(chunk_len) as usize;
        if shards.len() != self.shards() {
            return Err(ChunkError::BadFormat(format!(
                "{} shards given for a {self} layout",
                shards.len()
            )));
        }
        if let Some((i, b)) = shards
            .iter()
            .enumerate()
            .find_map(|(i, b)| b.as_ref().filter(|b| b.len() != s).map(|b| (i, b)))
        {
            return Err(ChunkError::BadFormat(format!(
                "shard {i} is {} bytes, expected {s} for a {chunk_len}-byte chunk",
                b.len()
            )));
        }
        let present = shards.iter().filter(|b| b.is_some()).count();
        if present < self.data() {
            return Err(ChunkError::BadFormat(format!(
                "{present} of {} shards left, {} needed to rebuild a {self} chunk",
                self.shards(),
                self.data()
            )));
        }
        if shards[..self.data()].iter().all(Option::is_some) {
            return Ok(shards[..self.data()].iter().flatten().cloned().collect());
        }
        // The codec works on owned buffers: copy only the k present shards it needs, and
        // hand back the present data shards themselves.
        let mut wanted = self.data();
        let mut work: Vec<Option<Vec<u8>>> = shards
            .iter()
            .map(|b| match b {
                Some(b) if wanted > 0 => {
                    wanted -= 1;
                    Some(b.to_vec())
                }
                _ => None,
            })
            .collect();
        self.codec()?.reconstruct_data(&mut work).map_err(codec)?;
        work.truncate(self.data());
        work.into_iter()
            .zip(shards)
            .enumerate()
            .map(|(i, (rebuilt, given))| match given {
                Some(b) => Ok(b.clone()),
                None => rebuilt
                    .map(Bytes::from)
                    .ok_or_else(|| codec(format!("data shard {i} not rebuilt"))),
            })
            .collect()
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}+{}", self.data, self.parity)
    }
}

impl std::str::FromStr for Layout {
    type Err = ChunkError;

    /// `k+m`, e.g. `4+2`.
    fn from_str(s: &str) -> Result<Self, ChunkError> {
        let bad = || {
            ChunkError::BadFormat(format!(
                "erasure-coding layout {s:?}: expected DATA+PARITY, e.g. 4+2"
            ))
        };
        let (k, m) = s.split_once('+').ok_or_else(bad)?;
        Layout::new(k.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?)
    }
}

/// `Ok` if `len` bytes are what shard `of` holds ([`Layout::shard_len`] of its chunk).
pub fn check_shard_len(of: &crate::format::ShardOf, len: u64) -> Result<(), ChunkError> {
    let want = of.layout.shard_len(of.chunk_len);
    if len != want || usize::from(of.index) >= of.layout.shards() {
        return Err(ChunkError::BadFormat(format!(
            "shard {} of chunk {} ({}, {} bytes): {len} bytes given, {want} expected",
            of.index, of.chunk, of.layout, of.chunk_len
        )));
    }
    Ok(())
}

/// Part of a chunk range in one data shard ([`Layout::pieces`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The data shard's index.
    pub shard: usize,
    /// Offset in the shard.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// The id shard `index` of chunk `chunk` coded in `layout` is stored under
/// ([`saker_rpc::shard_id`]).
pub fn shard_id(chunk: ChunkId, layout: Layout, index: u8) -> ChunkId {
    ChunkId(saker_rpc::shard_id(
        chunk.0,
        layout.data,
        layout.parity,
        index,
    ))
}

fn codec(e: impl std::fmt::Display) -> ChunkError {
    ChunkError::BadFormat(format!("erasure coding: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
            .collect()
    }

    #[test]
    fn layouts_parse_print_and_refuse_what_cannot_work() {
        for s in ["4+2", "8+3", "6+3", "2+1", "16+8"] {
            assert_eq!(s.parse::<Layout>().unwrap().to_string(), s);
        }
        for s in [
            "4", "4+0", "1+1", "17+2", "4+9", "2+3", "a+b", "+2", "4+", "4+2+1", " 4+2",
        ] {
            assert!(s.parse::<Layout>().is_err(), "{s} accepted");
        }
        let l: Layout = "4+2".parse().unwrap();
        assert_eq!((l.data(), l.parity(), l.shards()), (4, 2, 6));
    }

    #[test]
    fn shard_lengths_cover_the_chunk_in_aligned_pieces() {
        let l: Layout = "4+2".parse().unwrap();
        assert_eq!(l.shard_len(0), 64);
        assert_eq!(l.shard_len(1), 64);
        assert_eq!(l.shard_len(256), 64);
        assert_eq!(l.shard_len(257), 128);
        assert_eq!(l.shard_len(4 << 20), 1 << 20);
        for len in [0u64, 1, 255, 4096, 1_000_003, 8 << 20] {
            let s = l.shard_len(len);
            assert!(s * 4 >= len && s.is_multiple_of(SHARD_ALIGN), "{len}: {s}");
            assert!(
                s * 4 < len + 4 * SHARD_ALIGN + 4,
                "{len}: {s} wastes too much"
            );
        }
    }

    #[test]
    fn every_chunk_comes_back_from_any_k_shards() {
        for layout in ["4+2", "8+3", "6+3", "2+1"] {
            let l: Layout = layout.parse().unwrap();
            for len in [0usize, 1, 63, 64 * 8 + 1, 100_000, 300_007] {
                let chunk = bytes(len, len as u8);
                let shards = l.encode(&chunk).unwrap();
                assert_eq!(shards.len(), l.shards());
                let all: Vec<Option<Bytes>> = shards.iter().cloned().map(Some).collect();
                assert_eq!(l.decode(len as u64, &all).unwrap(), chunk);
                // Every set of m lost shards (all of them for small layouts, a spread else).
                for lost in lost_sets(l.shards(), l.parity()) {
                    let mut some = all.clone();
                    for &i in &lost {
                        some[i] = None;
                    }
                    assert_eq!(
                        l.decode(len as u64, &some).unwrap(),
                        chunk,
                        "{layout} len {len} lost {lost:?}"
                    );
                    let rebuilt = l.rebuild(len as u64, &some, &lost).unwrap();
                    for (i, r) in lost.iter().zip(rebuilt) {
                        assert_eq!(r, shards[*i], "{layout} len {len} shard {i}");
                    }
                }
                // One more lost is too many, and says so.
                let mut short = all.clone();
                for s in short.iter_mut().take(l.parity() + 1) {
                    *s = None;
                }
                let e = l.decode(len as u64, &short).unwrap_err().to_string();
                assert!(e.contains("needed to rebuild"), "{e}");
            }
        }
    }

    /// Sets of `m` shard indexes out of `n`: all of them when there are few, else every
    /// window of m consecutive shards (wrapping).
    fn lost_sets(n: usize, m: usize) -> Vec<Vec<usize>> {
        if m == 1 {
            return (0..n).map(|i| vec![i]).collect();
        }
        if m == 2 {
            return (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| vec![i, j]))
                .collect();
        }
        (0..n)
            .map(|i| (0..m).map(|d| (i + d) % n).collect())
            .collect()
    }

    #[test]
    fn a_damaged_or_mis_sized_shard_set_is_an_error_not_a_panic() {
        let l: Layout = "4+2".parse().unwrap();
        let shards = l.encode(&bytes(1000, 3)).unwrap();
        let mut some: Vec<Option<Bytes>> = shards.into_iter().map(Some).collect();
        some[1] = Some(Bytes::from_static(b"short"));
        assert!(l.decode(1000, &some).is_err());
        assert!(l.decode(1000, &some[..5]).is_err());
        // The wrong chunk length for the shards' size.
        some[1] = None;
        assert!(l.decode(100_000, &some).is_err());
    }

    #[test]
    fn verify_finds_parity_that_does_not_match_the_data() {
        let l: Layout = "6+3".parse().unwrap();
        let mut shards = l.encode(&bytes(50_000, 1)).unwrap();
        assert!(l.verify(&shards).unwrap());
        for i in [0, 5, 6, 8] {
            let mut bad = shards.clone();
            let mut b = bad[i].to_vec();
            b[17] ^= 0x20;
            bad[i] = b.into();
            assert!(!l.verify(&bad).unwrap(), "flip in shard {i} not found");
        }
        shards.pop();
        assert!(l.verify(&shards).is_err());
    }

    #[test]
    fn range_pieces_are_the_data_shards_that_hold_the_range() {
        let l: Layout = "4+2".parse().unwrap();
        let len = 1000u64; // shards of 256 bytes
        let chunk = bytes(len as usize, 9);
        let shards = l.encode(&chunk).unwrap();
        for (offset, n) in [
            (0, 1000),
            (0, 1),
            (255, 2),
            (256, 256),
            (700, 5000),
            (999, 1),
        ] {
            let mut got = Vec::new();
            for p in l.pieces(len, offset, n) {
                assert!(p.shard < 4 && p.offset + p.len <= 256, "{p:?}");
                got.extend_from_slice(
                    &shards[p.shard][p.offset as usize..(p.offset + p.len) as usize],
                );
            }
            let end = (offset + n).min(len) as usize;
            assert_eq!(got, chunk[offset as usize..end], "{offset}+{n}");
        }
        assert!(l.pieces(len, 1000, 10).is_empty());
        assert!(l.pieces(len, 5000, 10).is_empty());
        assert!(l.pieces(0, 0, 10).is_empty());
    }

    #[test]
    fn shard_ids_are_distinct_per_chunk_layout_and_index_and_stable() {
        let a = ChunkId(42);
        let (l, other): (Layout, Layout) = ("4+2".parse().unwrap(), "8+2".parse().unwrap());
        let ids: std::collections::HashSet<ChunkId> = (0..6)
            .flat_map(|i| {
                [
                    shard_id(a, l, i),
                    shard_id(ChunkId(43), l, i),
                    shard_id(a, other, i),
                ]
            })
            .collect();
        assert_eq!(ids.len(), 18);
        assert!(!ids.contains(&a));
        assert_eq!(shard_id(a, l, 3), shard_id(a, l, 3));
    }
}
