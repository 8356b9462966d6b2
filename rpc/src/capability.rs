//! What an MNode signs for a client, so that a later request of that client can prove it
//! without anyone keeping state: a commit's receipt (which version the commit made, so that
//! the same open's next commit may replace those bytes without keeping them as a noncurrent
//! version), and chunk grants (a chunkstore serves a client's read of a chunk only with a
//! grant an MNode gave with the file's layout, after the permission check of the open), and
//! fresh data keys (a commit of sealed bytes brings the proof that a node gave its key out
//! for new bytes of that file).
//!
//! The key is derived from the cluster secret every node credential holds, so any MNode of
//! any group checks what another signed. A process without a node credential (tests that
//! run groups in one process) signs with a random key of its own: what it signed is refused
//! after a restart, which costs one extra noncurrent version at most.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::InodeId;

const COMMIT_LABEL: &str = "saker commit receipt v1";
const GRANT_LABEL: &str = "saker chunk grant v1";
const FRESH_KEY_LABEL: &str = "saker fresh data key v1";
/// How long a chunk grant lasts: a reader holding a file open longer asks again (and is
/// checked again).
pub const GRANT_FOR: Duration = Duration::from_secs(600);

/// The key of one kind of capability (`label`), derived once for what it signs or checks.
struct Signer(Vec<u8>);

impl Signer {
    fn new(label: &str) -> Self {
        static FALLBACK: OnceLock<[u8; 32]> = OnceLock::new();
        Self(
            crate::auth::node_key(label)
                .unwrap_or_else(|| FALLBACK.get_or_init(rand::random).to_vec()),
        )
    }

    fn hmac(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        for p in parts {
            m.update(p);
        }
        m
    }

    /// The first 16 bytes of the HMAC of `parts`.
    fn mac(&self, parts: &[&[u8]]) -> [u8; 16] {
        let full = self.hmac(parts).finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// Whether `mac` is [`Signer::mac`] of `parts` (compared in constant time).
    fn checks(&self, parts: &[&[u8]], mac: &[u8; 16]) -> bool {
        self.hmac(parts).verify_truncated_left(mac).is_ok()
    }
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
            mac: Signer::new(COMMIT_LABEL).mac(&[&id.to_le_bytes(), &mtime_ns.to_le_bytes()]),
        }
    }

    /// The S3 mtime of the version this receipt proves a commit of file `id` made; `None`
    /// for a receipt this cluster did not sign for `id`.
    pub fn verify(&self, id: InodeId) -> Option<i64> {
        let parts: [&[u8]; 2] = [&id.to_le_bytes(), &self.mtime_ns.to_le_bytes()];
        Signer::new(COMMIT_LABEL)
            .checks(&parts, &self.mac)
            .then_some(self.mtime_ns)
    }
}

/// Proof that a node gave out the data key of SSE record `sse` for new bytes of file `id`
/// ([`crate::MetaRequest::SseKey`] with `fresh`): the commit of those bytes brings it, so a
/// client cannot seal a file under a key it read from another file, or the file's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreshKey {
    mac: [u8; 16],
}

impl FreshKey {
    pub fn sign(id: InodeId, sse: &crate::Sse) -> Self {
        let id = id.to_le_bytes();
        Self {
            mac: Signer::new(FRESH_KEY_LABEL).mac(&[&id, &sse.wrapped, &sse.nonce]),
        }
    }

    /// Whether a node gave out `sse` for new bytes of file `id`.
    pub fn verify(&self, id: InodeId, sse: &crate::Sse) -> bool {
        let id = id.to_le_bytes();
        Signer::new(FRESH_KEY_LABEL).checks(&[&id, &sse.wrapped, &sse.nonce], &self.mac)
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Leave to read one chunk of file `inode` until `expires_s` (Unix seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkGrant {
    pub inode: InodeId,
    pub expires_s: u64,
    mac: [u8; 16],
}

impl ChunkGrant {
    /// Grants reading chunk `chunk` of file `inode` for [`GRANT_FOR`].
    pub fn sign(chunk: u128, inode: InodeId) -> Self {
        Self::sign_all(inode, [chunk]).remove(0).1
    }

    /// Grants reading each of `chunks` (of file `inode`) for [`GRANT_FOR`], with one key.
    pub fn sign_all(
        inode: InodeId,
        chunks: impl IntoIterator<Item = u128>,
    ) -> Vec<(u128, ChunkGrant)> {
        let signer = Signer::new(GRANT_LABEL);
        let expires_s = now_s() + GRANT_FOR.as_secs();
        chunks
            .into_iter()
            .map(|c| (c, Self::signed(&signer, c, inode, expires_s)))
            .collect()
    }

    fn signed(signer: &Signer, chunk: u128, inode: InodeId, expires_s: u64) -> Self {
        Self {
            inode,
            expires_s,
            mac: signer.mac(&[&Self::message(chunk, inode, expires_s)]),
        }
    }

    /// What a grant's MAC covers: the chunk id, the inode and the expiry.
    fn message(chunk: u128, inode: InodeId, expires_s: u64) -> [u8; 32] {
        let mut m = [0u8; 32];
        m[..16].copy_from_slice(&chunk.to_le_bytes());
        m[16..24].copy_from_slice(&inode.to_le_bytes());
        m[24..].copy_from_slice(&expires_s.to_le_bytes());
        m
    }

    /// Whether this grant, signed by this cluster, lets its holder read `chunk` now.
    pub fn allows(&self, chunk: u128) -> bool {
        self.expires_s > now_s()
            && Signer::new(GRANT_LABEL).checks(
                &[&Self::message(chunk, self.inode, self.expires_s)],
                &self.mac,
            )
    }
}

/// What a grant for a version's remote tier copy names in place of a chunk id: the first 128
/// bits of the SHA-256 of its tier and key.
pub fn tier_copy(t: &crate::TierRef) -> u128 {
    use sha2::Digest;
    let mut h = Sha256::new();
    h.update(t.tier.as_bytes());
    h.update([0]);
    h.update(t.key.as_bytes());
    let d = h.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&d[..16]);
    u128::from_le_bytes(first)
}

/// What reading the bytes of `layout` takes grants for: its chunks, and its remote tier
/// copy if it has one.
pub fn readable(layout: &crate::Layout) -> impl Iterator<Item = u128> + '_ {
    let tiered = layout.tiered().map(tier_copy);
    layout.chunks().iter().map(|c| c.id).chain(tiered)
}

/// The chunk grants this process holds (a client's), by chunk id: what its chunk reads
/// show the chunkstores.
static HELD: Mutex<Option<HashMap<u128, ChunkGrant>>> = Mutex::new(None);

/// Keeps `grants` for this process's chunk reads.
pub fn hold(grants: &[(u128, ChunkGrant)]) {
    if grants.is_empty() {
        return;
    }
    let mut held = HELD.lock().expect("grants lock");
    let map = held.get_or_insert_with(HashMap::new);
    if map.len() > 100_000 {
        let now = now_s();
        map.retain(|_, g| g.expires_s > now);
    }
    map.extend(grants.iter().copied());
}

/// The grant this process holds for reading `chunk`, if any.
pub fn held(chunk: u128) -> Option<ChunkGrant> {
    HELD.lock()
        .expect("grants lock")
        .as_ref()?
        .get(&chunk)
        .copied()
}

/// Whether this process holds grants for every chunk of `chunks` lasting at least `margin`.
pub fn covers(chunks: impl IntoIterator<Item = u128>, margin: Duration) -> bool {
    let until = now_s() + margin.as_secs();
    let held = HELD.lock().expect("grants lock");
    chunks.into_iter().all(|c| {
        held.as_ref()
            .and_then(|m| m.get(&c))
            .is_some_and(|g| g.expires_s > until)
    })
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

    #[test]
    fn a_grant_allows_its_chunk_until_it_expires() {
        let g = ChunkGrant::sign(42, 7);
        assert!(g.allows(42));
        assert!(!g.allows(43), "another chunk");
        let mut longer = g;
        longer.expires_s += 3600;
        assert!(!longer.allows(42), "extended by its holder");
        let past = ChunkGrant::signed(&Signer::new(GRANT_LABEL), 42, 7, now_s() - 1);
        assert!(!past.allows(42), "expired");
        hold(&[(42, g)]);
        assert_eq!(held(42), Some(g));
        assert!(covers([42], Duration::from_secs(60)));
        assert!(!covers([42, 43], Duration::from_secs(60)));
        assert!(!covers([42], GRANT_FOR * 2));
    }
}
