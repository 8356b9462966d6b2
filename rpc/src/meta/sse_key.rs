//! Data keys that leave a node: what a library mount (which never holds the master key) is
//! given for the SSE-S3 files it reads and writes ([`crate::MetaRequest::SseKey`]), and the
//! node's side that opens and makes them ([`SseKeys`]).

use serde::{Deserialize, Serialize};

use crate::attr::Sse;
use crate::capability::FreshKey;

/// A version's data key in plaintext, as a node hands it to a mount over mutual TLS. Never
/// printed (its `Debug` is redacted) and zeroed when dropped.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlainKey(pub [u8; 32]);

impl std::fmt::Debug for PlainKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlainKey(..)")
    }
}

impl Drop for PlainKey {
    fn drop(&mut self) {
        self.0.fill(0);
    }
}

/// A node's master keys, as the MNode uses them to answer [`crate::MetaRequest::SseKey`]
/// (implemented over `saker_client`'s master key file, which the MNode crate cannot name).
pub trait SseKeys: Send + Sync + std::fmt::Debug + 'static {
    /// The data key of the SSE-S3 record `sse`, if one of the master keys opens it.
    fn open(&self, sse: &Sse) -> Option<PlainKey>;
    /// A fresh data key and its record, wrapped under the current master key.
    fn fresh(&self) -> (PlainKey, Sse);
}

/// Whether `sse` is SSE-S3 (under the master key), not SSE-C or SSE-KMS.
pub fn is_sse_s3(sse: &Sse) -> bool {
    sse.customer_key_md5.is_none() && sse.kms_key_id.is_none()
}

/// The SSE record of a commit's new bytes, with the proof that a node gave its data key out
/// for them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitSeal {
    pub sse: Sse,
    pub fresh: FreshKey,
}
