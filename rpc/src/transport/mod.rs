//! The network transport between roles: gRPC (tonic, HTTP/2) carrying postcard bodies.
//!
//! One endpoint per process (`saker server --rpc-addr`) serves every MNode group and the
//! coordinator that process runs, plus the cluster map. [`RpcServer`] serves the same
//! [`MetaService`](crate::MetaService) and [`CoordinatorService`](crate::CoordinatorService)
//! objects the in-process roles call; [`RemoteMeta`] and [`RemoteCoordinator`] implement those
//! traits over the network, so a client cannot tell a remote group from a local one.
//!
//! # Why gRPC with opaque bodies
//!
//! `proto/saker.proto` declares one service with three unary methods, and every request and
//! reply is the same message, `Frame { bytes body }`. The body is one version byte
//! ([`WIRE_VERSION`]) followed by the postcard encoding of a serde type of this crate
//! ([`MetaRequest`](crate::MetaRequest), [`MetaResponse`](crate::MetaResponse),
//! [`MetaError`](crate::MetaError), [`ClusterMap`](crate::ClusterMap), …):
//!
//! - **One framing for every message.** Requests, replies and errors all travel the same way,
//!   so a new request variant or error needs no transport change, and the application error
//!   travels inside a successful reply (`Result<MetaResponse, MetaError>`), never as a gRPC
//!   status: a status always means the transport failed ([`MetaError::Unavailable`]).
//! - **The types are defined once, in Rust.** A protobuf schema for ~30 request variants would
//!   be a second definition to keep in step with the Rust one, with conversions both ways;
//!   postcard encodes the serde types directly (compact varints, no field names).
//! - **gRPC still does the rest**: HTTP/2 multiplexing of concurrent calls over one
//!   connection, flow control, keepalives, reconnection and standard tooling.
//!
//! postcard is not self-describing: changing a field or reordering variants changes the
//! encoding. Such a change bumps [`WIRE_VERSION`]; a peer answers a body of another version
//! with an error rather than misreading it.
//!
//! [`MetaError::Unavailable`]: crate::MetaError::Unavailable

mod client;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod pipe;
mod secure;
mod server;
mod wire;

pub use client::{
    fetch_cluster_map, group_services, replica_sets, ChannelPool, RemoteCoordinator, RemoteMeta,
    RpcChannel,
};
pub use secure::PeerInfo;
pub use server::{RpcServer, ServedGroups};
pub use wire::{WireError, WIRE_VERSION};

/// The request header naming the caller's [`WIRE_VERSION`]: a node refuses a caller of
/// another version with a clear status before reading any body (an upgrade goes node by node
/// only between versions that speak the same wire version).
const VERSION_HEADER: &str = "saker-wire-version";

/// Largest body either side accepts (tonic's default of 4 MiB is too small for `ChunkRefs`
/// replies and large inline objects).
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

/// The code generated from `proto/saker.proto`.
#[allow(clippy::all, missing_docs, unreachable_pub)]
mod pb {
    tonic::include_proto!("saker.v1");
}
