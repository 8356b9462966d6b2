//! What an MNode signs for a client, so that a later request of that client can prove it
//! without the MNode keeping state: a commit's receipt (which version the commit made, so
//! that the same open's next commit may replace those bytes without keeping them as a
//! noncurrent version).
//!
//! The key is derived from the cluster secret every node credential holds, so any MNode of
//! any group checks what another signed. A process without a node credential (tests that
//! run groups in one process) signs with a random key of its own: what it signed is refused
//! after a restart, which costs one extra noncurrent version at most.

use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::InodeId;

const COMMIT_LABEL: &str = "saker commit receipt v1";

fn key(label: &str) -> Vec<u8> {
    static FALLBACK: OnceLock<[u8; 32]> = OnceLock::new();
    crate::auth::node_key(label).unwrap_or_else(|| FALLBACK.get_or_init(rand::random).to_vec())
}

fn mac(label: &str, parts: &[&[u8]]) -> [u8; 16] {
    let mut m = Hmac::<Sha256>::new_from_slice(&key(label)).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    let full = m.finalize().into_bytes();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// Proof that a commit made the version of file `id` whose S3 mtime is `mtime_ns`
/// ([`crate::MetaRequest::CommitFile`] answers one; the open's next commit sends it back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitReceipt {
    pub mtime_ns: i64,
    mac: [u8; 16],
}

impl CommitReceipt {
    /// Signs the version of file `id` made at `mtime_ns`.
    pub fn sign(id: InodeId, mtime_ns: i64) -> Self {
        Self {
            mtime_ns,
            mac: mac(COMMIT_LABEL, &[&id.to_le_bytes(), &mtime_ns.to_le_bytes()]),
        }
    }

    /// The S3 mtime of the version this receipt proves a commit of file `id` made; `None`
    /// for a receipt this cluster did not sign for `id`.
    pub fn verify(&self, id: InodeId) -> Option<i64> {
        let expected = Self::sign(id, self.mtime_ns);
        // Constant time: the comparison does not tell how much of a forged MAC was right.
        let diff = expected
            .mac
            .iter()
            .zip(self.mac)
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        (diff == 0).then_some(self.mtime_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_proves_its_file_and_version_only() {
        let r = CommitReceipt::sign(7, 1_000);
        assert_eq!(r.verify(7), Some(1_000));
        assert_eq!(r.verify(8), None, "another file");
        let moved = CommitReceipt {
            mtime_ns: 2_000,
            ..r
        };
        assert_eq!(moved.verify(7), None, "another version");
        let mut forged = r;
        forged.mac[0] ^= 1;
        assert_eq!(forged.verify(7), None);
    }
}
