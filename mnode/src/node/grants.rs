//! Chunk grants: an `Access` that checked read or write permission answers, with the file's
//! layout, leave to read its chunks ([`saker_rpc::capability`]); a chunkstore serves a
//! client's chunk read only with one. (Write: a mount rewrites a file whole, so it reads the
//! bytes it keeps.)

use saker_rpc::capability::ChunkGrant;
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
            view.grants = view
                .attr
                .layout
                .chunks()
                .iter()
                .map(|c| (c.id, ChunkGrant::sign(c.id, id)))
                .collect();
            MetaResponse::Object(view)
        }
        other => other,
    }
}
