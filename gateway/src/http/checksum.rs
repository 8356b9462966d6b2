//! S3 additional checksums: the algorithms, the whole-object checksum of a multipart upload
//! (COMPOSITE: a checksum of the parts' checksums, "-N"; FULL_OBJECT: the CRC of all the bytes,
//! combined from the parts' CRCs), and the checksum type an object reports.

use base64::Engine;
use s3s::checksum::ChecksumHasher;
use s3s::dto::ChecksumType;
use s3s::{s3_error, S3Result};
use saker_rpc::{Checksums, ObjectMeta};

/// A checksum algorithm of S3's `x-amz-checksum-*` family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

impl Algorithm {
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Crc32,
        Algorithm::Crc32c,
        Algorithm::Crc64Nvme,
        Algorithm::Sha1,
        Algorithm::Sha256,
    ];

    /// Parses S3's name of an algorithm (any case).
    pub fn parse(s: &str) -> Option<Algorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(s))
    }

    /// S3's name: `CRC32`, `CRC32C`, `CRC64NVME`, `SHA1`, `SHA256`.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "CRC32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Crc64Nvme => "CRC64NVME",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
        }
    }

    /// Whether parts' checksums can be combined into the checksum of all the bytes.
    pub fn is_crc(self) -> bool {
        matches!(
            self,
            Algorithm::Crc32 | Algorithm::Crc32c | Algorithm::Crc64Nvme
        )
    }

    /// The checksum type of a multipart upload that names this algorithm and no type.
    pub fn default_type(self) -> &'static str {
        if self == Algorithm::Crc64Nvme {
            ChecksumType::FULL_OBJECT
        } else {
            ChecksumType::COMPOSITE
        }
    }

    /// Whether a multipart upload may use this algorithm with the checksum type `t`.
    pub fn allows_type(self, t: &str) -> bool {
        match t {
            ChecksumType::COMPOSITE => self != Algorithm::Crc64Nvme,
            ChecksumType::FULL_OBJECT => self.is_crc(),
            _ => false,
        }
    }

    pub fn get(self, c: &Checksums) -> Option<&String> {
        match self {
            Algorithm::Crc32 => c.crc32.as_ref(),
            Algorithm::Crc32c => c.crc32c.as_ref(),
            Algorithm::Crc64Nvme => c.crc64nvme.as_ref(),
            Algorithm::Sha1 => c.sha1.as_ref(),
            Algorithm::Sha256 => c.sha256.as_ref(),
        }
    }

    pub fn slot(self, c: &mut Checksums) -> &mut Option<String> {
        match self {
            Algorithm::Crc32 => &mut c.crc32,
            Algorithm::Crc32c => &mut c.crc32c,
            Algorithm::Crc64Nvme => &mut c.crc64nvme,
            Algorithm::Sha1 => &mut c.sha1,
            Algorithm::Sha256 => &mut c.sha256,
        }
    }

    /// Only this algorithm's value of `c`.
    pub fn only(self, c: &Checksums) -> Checksums {
        let mut out = Checksums::default();
        *self.slot(&mut out) = self.get(c).cloned();
        out
    }

    /// Enables this algorithm in `h`.
    pub fn enable(self, h: &mut ChecksumHasher) {
        match self {
            Algorithm::Crc32 => h.crc32 = Some(Default::default()),
            Algorithm::Crc32c => h.crc32c = Some(Default::default()),
            Algorithm::Crc64Nvme => h.crc64nvme = Some(Default::default()),
            Algorithm::Sha1 => h.sha1 = Some(Default::default()),
            Algorithm::Sha256 => h.sha256 = Some(Default::default()),
        }
    }

    /// The checksum of `data`, base64 as S3 sends it.
    pub fn digest(self, data: &[u8]) -> String {
        let mut h = ChecksumHasher::default();
        self.enable(&mut h);
        h.update(data);
        let c = h.finalize();
        match self {
            Algorithm::Crc32 => c.checksum_crc32,
            Algorithm::Crc32c => c.checksum_crc32c,
            Algorithm::Crc64Nvme => c.checksum_crc64nvme,
            Algorithm::Sha1 => c.checksum_sha1,
            Algorithm::Sha256 => c.checksum_sha256,
        }
        .expect("the enabled algorithm has a value")
    }

    /// The one algorithm `c` has a value for, if exactly one.
    pub fn of(c: &Checksums) -> Option<Algorithm> {
        let mut present = Self::ALL.into_iter().filter(|a| a.get(c).is_some());
        match (present.next(), present.next()) {
            (Some(a), None) => Some(a),
            _ => None,
        }
    }
}

/// The checksum type an object reports beside its checksum: the stored one of a multipart
/// object, else COMPOSITE for a `-N` value (a checksum of checksums), else FULL_OBJECT.
pub fn object_type(meta: &ObjectMeta) -> Option<ChecksumType> {
    if meta.checksums.is_empty() {
        return None;
    }
    if let Some(t) = &meta.checksum_type {
        return Some(ChecksumType::from(t.clone()));
    }
    let composite = Algorithm::ALL
        .into_iter()
        .filter_map(|a| a.get(&meta.checksums))
        .any(|v| v.contains('-'));
    Some(ChecksumType::from_static(if composite {
        ChecksumType::COMPOSITE
    } else {
        ChecksumType::FULL_OBJECT
    }))
}

fn decode(alg: Algorithm, b64: &str) -> S3Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| {
            s3_error!(
                InvalidRequest,
                "the {} checksum is not valid base64",
                alg.as_str()
            )
        })
}

/// The whole-object checksum of a multipart upload from its parts' checksums (base64) and sizes.
pub fn multipart(alg: Algorithm, full_object: bool, parts: &[(&str, u64)]) -> S3Result<String> {
    if full_object {
        let width = match alg {
            Algorithm::Crc32 | Algorithm::Crc32c => 4,
            Algorithm::Crc64Nvme => 8,
            Algorithm::Sha1 | Algorithm::Sha256 => {
                return Err(s3_error!(
                    InvalidRequest,
                    "the FULL_OBJECT checksum type needs a CRC algorithm"
                ))
            }
        };
        let mut crc: Option<u64> = None;
        for (b64, len) in parts {
            let raw = decode(alg, b64)?;
            if raw.len() != width {
                return Err(s3_error!(
                    InvalidRequest,
                    "a part's {} checksum has the wrong length",
                    alg.as_str()
                ));
            }
            let v = raw.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
            crc = Some(match crc {
                None => v,
                Some(c) => crc_combine(alg, c, v, *len),
            });
        }
        let v = crc.unwrap_or(0);
        let bytes = v.to_be_bytes();
        Ok(base64::engine::general_purpose::STANDARD.encode(&bytes[8 - width..]))
    } else {
        let mut raw = Vec::new();
        for (b64, _) in parts {
            raw.extend(decode(alg, b64)?);
        }
        Ok(format!("{}-{}", alg.digest(&raw), parts.len()))
    }
}

/// Reflected polynomial and width of a CRC algorithm.
fn crc_params(alg: Algorithm) -> (u64, u32) {
    match alg {
        Algorithm::Crc32 => (0xEDB8_8320, 32),
        Algorithm::Crc32c => (0x82F6_3B78, 32),
        Algorithm::Crc64Nvme => (0x9A6C_9329_AC4B_C9B5, 64),
        Algorithm::Sha1 | Algorithm::Sha256 => unreachable!("only CRCs combine"),
    }
}

/// `a * b mod p` for polynomials in the reflected representation of a `width`-bit CRC
/// (the most significant bit is x^0).
fn mult_mod(a: u64, mut b: u64, poly: u64, width: u32) -> u64 {
    let mut p = 0;
    for i in 0..width {
        if a & (1u64 << (width - 1 - i)) != 0 {
            p ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ poly } else { b >> 1 };
    }
    p
}

/// The CRC of `A || B` from `crc(A)`, `crc(B)` and the length of B in bytes: `crc(A)` shifted
/// over `len_b` zero bytes (times x^(8·len_b) mod p), plus `crc(B)`. The pre- and
/// post-conditioning of these CRCs (all ones) cancels out (zlib's `crc32_combine`).
pub fn crc_combine(alg: Algorithm, crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
    let (poly, width) = crc_params(alg);
    let one = 1u64 << (width - 1);
    // x^8, then squared for every bit of len_b.
    let mut sq = one >> 1;
    for _ in 0..3 {
        sq = mult_mod(sq, sq, poly, width);
    }
    let mut shift = one;
    let mut n = len_b;
    while n != 0 {
        if n & 1 != 0 {
            shift = mult_mod(shift, sq, poly, width);
        }
        sq = mult_mod(sq, sq, poly, width);
        n >>= 1;
    }
    mult_mod(shift, crc_a, poly, width) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(alg: Algorithm, data: &[u8]) -> u64 {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(alg.digest(data))
            .unwrap();
        raw.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
    }

    #[test]
    fn crc_combine_matches_whole_buffer_crcs() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for alg in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme] {
            for cut in [0, 1, 7, 4096, 9_999, 10_000] {
                let (a, b) = data.split_at(cut);
                let combined = crc_combine(alg, value(alg, a), value(alg, b), b.len() as u64);
                assert_eq!(combined, value(alg, &data), "{alg:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn full_object_checksum_of_three_parts() {
        let parts: Vec<Vec<u8>> = vec![vec![b'A'; 3000], vec![b'B'; 5000], vec![b'C'; 17]];
        let whole = parts.concat();
        for alg in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64Nvme] {
            let sums: Vec<String> = parts.iter().map(|p| alg.digest(p)).collect();
            let list: Vec<(&str, u64)> = sums
                .iter()
                .zip(&parts)
                .map(|(s, p)| (s.as_str(), p.len() as u64))
                .collect();
            assert_eq!(multipart(alg, true, &list).unwrap(), alg.digest(&whole));
        }
        assert!(multipart(Algorithm::Sha256, true, &[]).is_err());
    }

    #[test]
    fn composite_checksum_is_a_checksum_of_the_part_checksums() {
        // s3-tests: one 1024-byte part of 'A', SHA256.
        let part = vec![b'A'; 1024];
        let sum = Algorithm::Sha256.digest(&part);
        assert_eq!(sum, "arcu6553sHVAiX4MjW0j7I7vD4w6R+Gz9Ok0Q9lTa+0=");
        assert_eq!(
            multipart(Algorithm::Sha256, false, &[(&sum, 1024)]).unwrap(),
            "Ok6Cs5b96ux6+MWQkJO7UBT5sKPBeXBLwvj/hK89smg=-1"
        );
    }

    /// Published vectors (ceph s3-tests): three 5 MiB parts of 'A', 'B' and 'C'.
    #[test]
    fn three_part_vectors() {
        const MIB5: u64 = 5 * 1024 * 1024;
        let cases = [
            (
                Algorithm::Crc32,
                true,
                ["JRTCyQ==", "QoZTGg==", "YAgjqw=="],
                "WgDhBQ==",
            ),
            (
                Algorithm::Crc32c,
                true,
                ["MDaLrw==", "TH4EZg==", "Z7mBIQ=="],
                "xU+Krw==",
            ),
            (
                Algorithm::Crc64Nvme,
                true,
                ["L/E4WYn8v98=", "xW1l19VobYM=", "cK5MnNaWrW4="],
                "i+6LR0y3eFo=",
            ),
            (
                Algorithm::Sha1,
                false,
                [
                    "iIaTCGbm+vdVjNqIMF2S0T7ibMk=",
                    "LS/TJ32bAVKEwRu+sE3X7awh/lk=",
                    "6DDwovUaHwrKNXDMzOGbuvj9kxI=",
                ],
                "sizjvY4eud3MrcHdZM3cQ/ol39o=-3",
            ),
            (
                Algorithm::Sha256,
                false,
                [
                    "275VF5loJr1YYawit0XSHREhkFXYkkPKGuoK0x9VKxI=",
                    "mrHwOfjTL5Zwfj74F05HOQGLdUb7E5szdCbxgUSq6NM=",
                    "Vw7oB/nKQ5xWb3hNgbyfkvDiivl+U+/Dft48nfJfDow=",
                ],
                "uWBwpe1dxI4Vw8Gf0X9ynOdw/SS6VBzfWm9giiv1sf4=-3",
            ),
        ];
        for (alg, full, parts, want) in cases {
            let list: Vec<(&str, u64)> = parts.iter().map(|p| (*p, MIB5)).collect();
            assert_eq!(multipart(alg, full, &list).unwrap(), want, "{alg:?}");
        }
    }

    #[test]
    fn types_by_algorithm() {
        assert_eq!(Algorithm::parse("crc64nvme"), Some(Algorithm::Crc64Nvme));
        assert_eq!(Algorithm::Crc64Nvme.default_type(), "FULL_OBJECT");
        assert_eq!(Algorithm::Sha1.default_type(), "COMPOSITE");
        assert!(!Algorithm::Sha256.allows_type("FULL_OBJECT"));
        assert!(!Algorithm::Crc64Nvme.allows_type("COMPOSITE"));
        assert!(Algorithm::Crc32.allows_type("FULL_OBJECT"));
        assert!(Algorithm::Crc32c.allows_type("COMPOSITE"));
    }
}
