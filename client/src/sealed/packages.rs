//! Authenticated encryption of a version's bytes in packages (the format this release writes).
//!
//! The bytes of each stream a version was uploaded as (the object, or one multipart part) are
//! cut into packages of [`PACKAGE`] bytes from the stream's start (the last may be short), each
//! sealed alone with AES-256-GCM under the version's data key. A package's ciphertext has its
//! plaintext's length, so offsets map one to one. Its [`RECORD`] (a random 96-bit nonce and the
//! 128-bit tag) is kept apart from the data: after the data in the chunk that holds the package,
//! or after the data of inline bytes. Chunks of a sealed stream start on a package boundary
//! ([`aligned_chunk_size`]), so a package never spans two chunks.
//!
//! Each package's additional data binds it to its place: the version's nonce ([`Sse::nonce`],
//! random per version or multipart upload), the part number (0 for an object written at once)
//! and its index in the part. Nonces are random per package and per sealing, so a part uploaded
//! twice, or a file rewritten, never reuses a keystream; the data key is new for every version
//! and upload, which keeps the count of random nonces under one key far below GCM's bound.

use std::sync::atomic::{AtomicU64, Ordering};

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM, NONCE_LEN};
use saker_rpc::Sse;

/// Bytes of plaintext per package (the chunk format's checksum block).
pub const PACKAGE: u64 = 64 * 1024;
/// Bytes of a package's record: its nonce then its tag.
pub const RECORD: u64 = (NONCE_LEN + 16) as u64;
/// Tags that did not match their package, since the process started (a metric).
pub static TAG_FAILURES: AtomicU64 = AtomicU64::new(0);

/// What the additional data starts with (binds a package to this use).
const AAD_PREFIX: &[u8; 12] = b"saker sse v2";

/// Why a package would not open.
#[derive(Debug, thiserror::Error)]
#[error("package {index} of part {part} fails its authentication tag")]
pub struct TagFailure {
    pub part: u32,
    pub index: u64,
}

/// The length of the records of `data_len` bytes of one stream's packages.
pub fn records_len(data_len: u64) -> u64 {
    data_len.div_ceil(PACKAGE) * RECORD
}

/// The size of the chunks a sealed stream is cut into: `chunk_size` rounded down to whole
/// packages (one package at least).
pub fn aligned_chunk_size(chunk_size: usize) -> usize {
    let p = PACKAGE as usize;
    (chunk_size / p).max(1) * p
}

/// One version's packages: its data key and nonce.
pub struct Packager {
    key: LessSafeKey,
    nonce: [u8; 8],
}

impl std::fmt::Debug for Packager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Packager(..)")
    }
}

impl Packager {
    pub(super) fn new(key: &[u8; 32], sse: &Sse) -> Self {
        let unbound = UnboundKey::new(&AES_256_GCM, key).expect("32-byte AES-256 key");
        Self {
            key: LessSafeKey::new(unbound),
            nonce: sse.nonce,
        }
    }

    fn aad(&self, part: u32, index: u64) -> [u8; 32] {
        let mut aad = [0u8; 32];
        aad[..12].copy_from_slice(AAD_PREFIX);
        aad[12..20].copy_from_slice(&self.nonce);
        aad[20..24].copy_from_slice(&part.to_le_bytes());
        aad[24..].copy_from_slice(&index.to_le_bytes());
        aad
    }

    /// Encrypts `data` in place, packages `first..` of `part` (all whole but the last), and
    /// answers their records.
    pub fn seal(&self, part: u32, first: u64, data: &mut [u8]) -> Vec<u8> {
        let mut records = Vec::with_capacity(records_len(data.len() as u64) as usize);
        for (i, package) in data.chunks_mut(PACKAGE as usize).enumerate() {
            let nonce: [u8; NONCE_LEN] = rand::random();
            let aad = self.aad(part, first + i as u64);
            let tag = self
                .key
                .seal_in_place_separate_tag(
                    Nonce::assume_unique_for_key(nonce),
                    Aad::from(aad),
                    package,
                )
                .expect("AES-GCM seals a package of 64 KiB");
            records.extend_from_slice(&nonce);
            records.extend_from_slice(tag.as_ref());
        }
        records
    }

    /// Decrypts `data` in place, packages `first..` of `part` with their `records`; a package
    /// whose tag does not match fails the whole (and is counted in [`TAG_FAILURES`]), its
    /// bytes never given out.
    pub fn open(
        &self,
        part: u32,
        first: u64,
        data: &mut [u8],
        records: &[u8],
    ) -> Result<(), TagFailure> {
        let packages = data.chunks_mut(PACKAGE as usize);
        if records.len() as u64 != records_len(packages.len() as u64 * PACKAGE) {
            return Err(self.failed(part, first));
        }
        for (i, (package, record)) in packages
            .zip(records.chunks_exact(RECORD as usize))
            .enumerate()
        {
            let index = first + i as u64;
            let (nonce, tag) = record.split_at(NONCE_LEN);
            let nonce = Nonce::try_assume_unique_for_key(nonce).expect("12-byte nonce");
            let tag: [u8; 16] = tag.try_into().expect("16-byte tag");
            let opened = self.key.open_in_place_separate_tag(
                nonce,
                Aad::from(self.aad(part, index)),
                Tag::from(tag),
                package,
                0..,
            );
            if opened.is_err() {
                return Err(self.failed(part, index));
            }
        }
        Ok(())
    }

    /// Whether `payload` (a chunk's data of `data_len` bytes then its records), packages
    /// `first..` of `part`, opens: a check that reads nothing out.
    pub fn verifies(&self, part: u32, first: u64, data_len: u64, payload: &[u8]) -> bool {
        if payload.len() as u64 != data_len + records_len(data_len) {
            return false;
        }
        let (data, records) = payload.split_at(data_len as usize);
        self.open(part, first, &mut data.to_vec(), records).is_ok()
    }

    fn failed(&self, part: u32, index: u64) -> TagFailure {
        TAG_FAILURES.fetch_add(1, Ordering::Relaxed);
        TagFailure { part, index }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packager(nonce: u8) -> Packager {
        let sse = Sse {
            customer_key_md5: None,
            kms_key_id: None,
            wrapped: Vec::new(),
            nonce: [nonce; 8],
            parts: Vec::new(),
        };
        Packager::new(&[9; 32], &sse)
    }

    #[test]
    fn packages_open_where_they_were_sealed_and_nowhere_else() {
        let p = packager(1);
        let plain: Vec<u8> = (0..(PACKAGE as usize * 2 + 100))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut data = plain.clone();
        let records = p.seal(3, 5, &mut data);
        assert_eq!(records.len() as u64, 3 * RECORD);
        assert_ne!(data, plain);
        // Any whole-package range opens on its own.
        let mut second = data[PACKAGE as usize..].to_vec();
        p.open(3, 6, &mut second, &records[RECORD as usize..])
            .unwrap();
        assert_eq!(second, plain[PACKAGE as usize..]);
        // Another place, part, version or a flipped bit does not.
        let before = TAG_FAILURES.load(Ordering::Relaxed);
        assert!(p.open(3, 6, &mut data.clone(), &records).is_err());
        assert!(p.open(4, 5, &mut data.clone(), &records).is_err());
        assert!(packager(2).open(3, 5, &mut data.clone(), &records).is_err());
        let mut flipped = data.clone();
        flipped[PACKAGE as usize + 7] ^= 1;
        assert!(p.open(3, 5, &mut flipped, &records).is_err());
        assert!(TAG_FAILURES.load(Ordering::Relaxed) >= before + 4);
        p.open(3, 5, &mut data, &records).unwrap();
        assert_eq!(data, plain);
    }

    #[test]
    fn sealing_twice_never_repeats_a_keystream() {
        let p = packager(1);
        let (a, b) = (vec![0u8; 1000], vec![0xffu8; 1000]);
        let (mut ca, mut cb) = (a.clone(), b.clone());
        p.seal(1, 0, &mut ca);
        p.seal(1, 0, &mut cb);
        // Under one keystream the ciphertexts' XOR would be the plaintexts' XOR.
        let xor: Vec<u8> = ca.iter().zip(&cb).map(|(x, y)| x ^ y).collect();
        assert!(xor.iter().any(|&x| x != 0xff));
    }

    #[test]
    fn chunk_sizes_are_whole_packages() {
        assert_eq!(aligned_chunk_size(8 << 20), 8 << 20);
        assert_eq!(aligned_chunk_size(100_000), PACKAGE as usize);
        assert_eq!(aligned_chunk_size(1), PACKAGE as usize);
        assert_eq!(aligned_chunk_size(200_000), 3 * PACKAGE as usize);
    }
}
