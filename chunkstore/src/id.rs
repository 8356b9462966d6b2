//! [`ChunkId`]: the random 128-bit name of a chunk, and its canonical text form.

use std::fmt;
use std::str::FromStr;

use crate::error::ChunkError;

/// Random 128-bit chunk id chosen by the writer. Ids are never reused.
///
/// Display/FromStr use exactly 32 lowercase hex characters; this is also the chunk's file name
/// on disk, so no other spelling is accepted.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, serde::Serialize, serde::Deserialize,
)]
pub struct ChunkId(pub u128);

impl ChunkId {
    /// Length of the text form.
    pub const HEX_LEN: usize = 32;

    /// A fresh id from the thread-local CSPRNG.
    pub fn random() -> Self {
        ChunkId(rand::random::<u128>())
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for ChunkId {
    type Err = ChunkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let canonical = s.len() == Self::HEX_LEN
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !canonical {
            return Err(ChunkError::BadFormat(format!(
                "chunk id must be {} lowercase hex characters, got {:?}",
                Self::HEX_LEN,
                s
            )));
        }
        u128::from_str_radix(s, 16)
            .map(ChunkId)
            .map_err(|e| ChunkError::BadFormat(format!("chunk id {s:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_32_lowercase_hex() {
        assert_eq!(ChunkId(0).to_string(), "0".repeat(32));
        assert_eq!(ChunkId(0xAB).to_string(), format!("{}ab", "0".repeat(30)));
        assert_eq!(ChunkId(u128::MAX).to_string(), "f".repeat(32));
    }

    #[test]
    fn round_trips() {
        for _ in 0..100 {
            let id = ChunkId::random();
            assert_eq!(id.to_string().parse::<ChunkId>().unwrap(), id);
        }
    }

    #[test]
    fn rejects_non_canonical() {
        for bad in [
            "",
            "0",
            &"0".repeat(31),
            &"0".repeat(33),
            &"A".repeat(32),
            &format!("+{}", "0".repeat(31)),
            &format!("{}g", "0".repeat(31)),
            &format!("{}é", "0".repeat(30)),
        ] {
            assert!(bad.parse::<ChunkId>().is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(ChunkId::random(), ChunkId::random());
    }
}
