//! The name hash that places names on MNode groups. Part of the on-disk and placement format.

use xxhash_rust::xxh3::xxh3_64;

/// Hash of a name for filename-hash placement: XXH3-64 of the bytes, seed 0.
///
/// This function is part of the on-disk and placement format: every stored inode sits on the
/// group this hash picks, so it must never change (not the algorithm, the seed, nor the input
/// bytes). The test `name_hash_is_frozen` pins it.
pub fn name_hash(name: &[u8]) -> u64 {
    xxh3_64(name)
}

/// Hash of `(pid, name)` for path-walk placement: XXH3-64, seed 0, of the parent id's 8
/// little-endian bytes followed by the name bytes.
///
/// Like [`name_hash`], part of the on-disk and placement format: it must never change. The test
/// `pid_name_hash_is_frozen` pins it.
pub fn pid_name_hash(pid: u64, name: &[u8]) -> u64 {
    let mut buf = Vec::with_capacity(8 + name.len());
    buf.extend_from_slice(&pid.to_le_bytes());
    buf.extend_from_slice(name);
    xxh3_64(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_hash_is_frozen() {
        // XXH3-64 of the empty input with seed 0, from the xxHash reference.
        assert_eq!(name_hash(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(name_hash(b"a"), FROZEN_A);
        assert_eq!(name_hash(b"train-000001.jpg"), FROZEN_TRAIN);
    }

    #[test]
    fn pid_name_hash_is_frozen() {
        assert_eq!(pid_name_hash(1, b"bucket"), FROZEN_PID_1);
        assert_eq!(pid_name_hash(0x0102_0304_0506_0708, b"x"), FROZEN_PID_2);
        assert_eq!(pid_name_hash(0, b""), name_hash(&[0u8; 8]));
    }

    #[test]
    fn pid_is_little_endian_prefix() {
        let mut bytes = 7u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"name");
        assert_eq!(pid_name_hash(7, b"name"), name_hash(&bytes));
        assert_ne!(pid_name_hash(7, b"name"), pid_name_hash(8, b"name"));
    }

    // Computed once with xxhash-rust 0.8.19 and frozen; never update these to make a test pass.
    // FROZEN_A also equals the xxHash reference value for "a".
    const FROZEN_A: u64 = 0xe6c6_32b6_1e96_4e1f;
    const FROZEN_TRAIN: u64 = 0x69fd_1deb_614a_c3a8;
    const FROZEN_PID_1: u64 = 0x8d46_ff92_478c_a199;
    const FROZEN_PID_2: u64 = 0x8ba6_ae97_c821_4dd8;
}
