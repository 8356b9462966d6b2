//! What the admin handlers share: the server's state they act on and the check that a
//! request is signed with the root key.

use std::sync::Arc;

use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use saker_coordinator::AccessKeyStore;

use crate::admin::auth::{self, HEADER_DATE, HEADER_KEY, HEADER_NONCE, HEADER_SIGNATURE};

#[derive(Clone)]
pub struct AdminState {
    pub keys: Arc<AccessKeyStore>,
    pub chunks: Arc<dyn saker_chunkstore::ChunkStore>,
    /// The gateway's view of the cluster (for repair passes).
    pub cluster: Arc<saker_client::Cluster>,
    /// The coordinator, while it is active in this process (the exception table is its).
    pub namespace: crate::server::loops::Active,
    /// Every MNode group, for `/health` and `/admin/status`.
    pub groups: crate::status::Groups,
    /// Nonces of the signed requests taken (replays are refused).
    pub nonces: Arc<auth::Nonces>,
    /// Node changes (a replicated cluster's).
    pub nodes: Option<Arc<crate::nodes::Nodes>>,
    /// This process's S3 gateway (lifecycle passes run through it).
    pub gateway: Option<saker_gateway::Gateway>,
    /// Requests for the coordinator handed between nodes ([`crate::admin::forward`]).
    pub forward: crate::admin::forward::Shared,
    /// The admin listener is plaintext on a non-loopback address: secrets are not sent
    /// ([`plain_public`]).
    pub plain_public: bool,
}

/// Whether an admin listener on `addr`, over TLS or not, is plaintext where others can
/// listen (not on loopback).
pub fn plain_public(tls: bool, addr: Option<std::net::SocketAddr>) -> bool {
    !tls && !addr.is_some_and(|a| a.ip().is_loopback())
}

pub(crate) fn no_coordinator() -> Response {
    (
        StatusCode::NOT_FOUND,
        "the coordinator is not active in this process (in a replicated cluster: ask the \
         node that leads group 1)\n",
    )
        .into_response()
}

pub(crate) fn authorized(
    state: &AdminState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> bool {
    // Another node checked the signature and handed the request here.
    if state.forward.forwarded(headers) {
        return true;
    }
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let (Some(ak), Some(date), Some(nonce), Some(sig), Some(host)) = (
        h(HEADER_KEY),
        h(HEADER_DATE),
        h(HEADER_NONCE),
        h(HEADER_SIGNATURE),
        h("host"),
    ) else {
        return false;
    };
    let Ok(date) = date.parse::<i64>() else {
        return false;
    };
    let root = state.keys.root();
    let signed = auth::Signed {
        method: method.as_str(),
        host,
        path,
        date,
        nonce,
        body,
    };
    // A valid signature is taken once: a replayed request is refused.
    ak == root.access_key
        && signed.verify(&root.secret_key, sig)
        && state.nonces.first_use(nonce, date)
}

/// An admin request's JSON body, or the 400 that says why it is not one.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new((StatusCode::BAD_REQUEST, format!("bad request body: {e}\n")).into_response())
    })
}

pub(crate) fn deny() -> Response {
    (
        StatusCode::FORBIDDEN,
        "admin requests must be signed with the root key\n",
    )
        .into_response()
}
