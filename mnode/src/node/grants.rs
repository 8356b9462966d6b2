//! Chunk grants: an `Access` that checked read or write permission answers, with the file's
//! layout, leave to read its chunks and its remote tier copy ([`saker_rpc::capability`]); a
//! chunkstore (a node reading a tier through) serves a client's read only with one. (Write: a mount rewrites a file whole, so it reads the
//! bytes it keeps.)

use saker_rpc::capability::{readable, ChunkGrant};
use saker_rpc::{access, MetaRequest, MetaResponse};

/// Whether `req`'s answer carries grants: an `Access` whose check covered read or write.
pub(super) fn wanted(req: &MetaRequest) -> bool {
    matches!(req, MetaRequest::Access { mask, .. } if mask & (access::READ | access::WRITE) != 0)
}

/// `answer` with grants for the chunks of the layout it shows.
pub(super) fn add(answer: MetaResponse) -> MetaResponse {
    match answer {
        MetaResponse::Object(mut view) => {
            let id = view.attr.id;
            view.grants = ChunkGrant::sign_all(id, readable(&view.attr.layout));
            MetaResponse::Object(view)
        }
        other => other,
    }
}
