//! Entry points for fuzzing the frame bodies (feature `fuzzing`; the `saker-fuzz-targets`
//! crate drives them).
//!
//! The body types are private to the transport, so the decoding under test lives here: a
//! [`Kind`] names the type a body is decoded as at one place in the client or the server, and
//! [`check_body`] decodes it there as the transport does, then checks that what decodes
//! encodes to a body that decodes to the same encoding again; the canonical encodings it
//! returns make the seed corpus.

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::pipe::{PipedCall, PipedReply};
use super::wire::{
    decode, encode, LinkCall, MetaCall, MetaReply, RaftCall, RemoveDirCall, RenameCall,
    SetDirAttrCall, TierReadCall,
};
use crate::attr::Attr;
use crate::chunk::{ChunkReply, ChunkRequest, ChunkWireError};
use crate::cluster_map::ClusterMap;
use crate::error::MetaError;
use crate::service::{AdminCall, AdminReply};

/// The type a body is decoded as, one per place the transport decodes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Server: `Meta` (then `MetaRequest::validate`).
    MetaCall,
    RemoveDirCall,
    RenameCall,
    SetDirAttrCall,
    LinkCall,
    AdminCall,
    RaftCall,
    TierReadCall,
    ChunkRequest,
    /// Server: a message on the raft pipe.
    PipedCall,
    /// Client: the reply to `Meta`.
    MetaReply,
    /// Client: the reply to a chunk request.
    ChunkReply,
    /// Client: a reply on the raft pipe.
    PipedReply,
    /// Client: the cluster map.
    ClusterMap,
    AdminReply,
    /// Client: the reply to `RemoveDir`.
    UnitReply,
    /// Client: the reply to `Rename`, `SetDirAttr` and `Link`.
    AttrReply,
    /// Client: the reply to `Raft` and `TierRead`.
    BytesReply,
}

impl Kind {
    /// Every kind (a fuzz input's first byte selects one, by its index here).
    pub const ALL: [Kind; 18] = [
        Kind::MetaCall,
        Kind::RemoveDirCall,
        Kind::RenameCall,
        Kind::SetDirAttrCall,
        Kind::LinkCall,
        Kind::AdminCall,
        Kind::RaftCall,
        Kind::TierReadCall,
        Kind::ChunkRequest,
        Kind::PipedCall,
        Kind::MetaReply,
        Kind::ChunkReply,
        Kind::PipedReply,
        Kind::ClusterMap,
        Kind::AdminReply,
        Kind::UnitReply,
        Kind::AttrReply,
        Kind::BytesReply,
    ];
}

/// Decodes `body` as `kind`, as the transport does, and returns the canonical encoding of
/// what it decoded to, if it decodes; panics if that does not decode and encode to the same
/// bytes again, or if a request that validates names an invalid path component (the fuzzer's
/// findings).
pub fn check_body(kind: Kind, body: &[u8]) -> Option<Vec<u8>> {
    match kind {
        Kind::MetaCall => {
            let (call, canonical) = stable::<MetaCall>(body)?;
            if call.req.validate().is_ok() {
                let paths = call.req.path().into_iter().chain(call.req.written_paths());
                for c in paths.flatten() {
                    assert!(
                        saker_namespace::Name::check(c).is_ok(),
                        "a validated request carries the invalid name {c:?}"
                    );
                }
            }
            Some(canonical)
        }
        Kind::RemoveDirCall => canonical::<RemoveDirCall>(body),
        Kind::RenameCall => canonical::<RenameCall>(body),
        Kind::SetDirAttrCall => canonical::<SetDirAttrCall>(body),
        Kind::LinkCall => canonical::<LinkCall>(body),
        Kind::AdminCall => canonical::<AdminCall>(body),
        Kind::RaftCall => canonical::<RaftCall>(body),
        Kind::TierReadCall => canonical::<TierReadCall>(body),
        Kind::ChunkRequest => canonical::<ChunkRequest>(body),
        Kind::PipedCall => canonical::<PipedCall>(body),
        Kind::MetaReply => canonical::<MetaReply>(body),
        Kind::ChunkReply => canonical::<Result<ChunkReply, ChunkWireError>>(body),
        Kind::PipedReply => canonical::<PipedReply>(body),
        Kind::ClusterMap => canonical::<ClusterMap>(body),
        Kind::AdminReply => canonical::<AdminReply>(body),
        Kind::UnitReply => canonical::<Result<(), MetaError>>(body),
        Kind::AttrReply => canonical::<Result<Attr, MetaError>>(body),
        Kind::BytesReply => canonical::<Result<bytes::Bytes, String>>(body),
    }
}

fn canonical<T: Serialize + DeserializeOwned>(body: &[u8]) -> Option<Vec<u8>> {
    stable::<T>(body).map(|(_, canonical)| canonical)
}

/// `body` decoded as `T` and its encoding, if it decodes; panics unless that encoding decodes
/// and encodes to the same bytes again.
fn stable<T: Serialize + DeserializeOwned>(body: &[u8]) -> Option<(T, Vec<u8>)> {
    round_trip(body, |b| decode::<T>(b).ok(), |v| encode(v).to_vec())
}

/// `bytes` decoded (by `decode`) and the encoding of what it decodes to (by `encode`), if it
/// decodes; panics unless that encoding decodes and encodes to the same bytes again. For the
/// decoders of every crate.
pub fn round_trip<T>(
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> Option<T>,
    encode: impl Fn(&T) -> Vec<u8>,
) -> Option<(T, Vec<u8>)> {
    let value = decode(bytes)?;
    let once = encode(&value);
    let again = decode(&once).expect("an encoding decodes");
    assert!(
        encode(&again) == once,
        "decode(encode(x)) encodes differently"
    );
    Some((value, once))
}
