//! The `wire` target: frame bodies of the RPC transport (`rpc/src/transport/wire.rs`).
//!
//! Input: one byte selecting the message type (`saker_rpc::transport::fuzzing::Kind`), then
//! the body as it travels (the wire version byte, then postcard). Every request and reply
//! type the client or the server decodes is reachable.

use saker_rpc::transport::fuzzing::{check_body, Kind};

/// Decodes a frame body as the selected type.
pub fn wire(data: &[u8]) {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    check_body(crate::select(&Kind::ALL, kind), body);
}
