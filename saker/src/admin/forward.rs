//! Admin requests for the coordinator, taken by a node where it is not active: the node
//! checks the request's signature, then hands it over RPC (node credential) to the node whose
//! replica of group 1 leads, where the coordinator runs, and answers with what that node's
//! admin API answered. So every node's admin API serves the exception table, balancing and
//! the coordinator backup, wherever the coordinator is.
//!
//! The receiving node runs the request through its own admin routes with a header holding a
//! random token of that process (never sent anywhere else), which stands for the signature
//! the first node checked. A request that arrives forwarded and finds no coordinator either
//! (it moved meanwhile) is answered 503, never handed on again.

use std::sync::{Arc, OnceLock};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use saker_rpc::{AdminCall, AdminReply, AdminService, RpcChannel};
use tower::ServiceExt;

use crate::admin::state::AdminState;

/// The header a forwarded request carries its receiver's token in.
const FORWARDED: &str = "saker-admin-forwarded";

/// The largest answer handed back (a coordinator backup is the largest).
const MAX_REPLY: usize = 256 * 1024 * 1024;

/// This process's admin routes as other nodes reach them ([`AdminService`]), and the token
/// that marks requests they authorized.
pub struct Forwarding {
    router: OnceLock<Router>,
    token: String,
}

impl Default for Forwarding {
    fn default() -> Self {
        Self {
            router: OnceLock::new(),
            token: hex::encode(rand::random::<[u8; 32]>()),
        }
    }
}

impl Forwarding {
    /// The routes forwarded requests run through (set once the admin API is built).
    pub fn serve(&self, router: Router) {
        let _ = self.router.set(router);
    }

    /// Whether `headers` mark a request another node authorized and handed here.
    pub fn forwarded(&self, headers: &HeaderMap) -> bool {
        headers
            .get(FORWARDED)
            .is_some_and(|v| constant_time_eq(v.as_bytes(), self.token.as_bytes()))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[async_trait::async_trait]
impl AdminService for Forwarding {
    async fn admin(&self, call: AdminCall) -> AdminReply {
        let reply = |status: StatusCode, body: &str| AdminReply {
            status: status.as_u16(),
            body: body.as_bytes().to_vec(),
        };
        let Some(router) = self.router.get().cloned() else {
            return reply(
                StatusCode::SERVICE_UNAVAILABLE,
                "the admin API is starting\n",
            );
        };
        let Ok(method) = Method::from_bytes(call.method.as_bytes()) else {
            return reply(StatusCode::BAD_REQUEST, "bad method\n");
        };
        let request = Request::builder()
            .method(method)
            .uri(&call.path)
            .header(FORWARDED, &self.token)
            .body(Body::from(call.body));
        let Ok(request) = request else {
            return reply(StatusCode::BAD_REQUEST, "bad path\n");
        };
        let response = match router.oneshot(request).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let status = response.status().as_u16();
        match axum::body::to_bytes(response.into_body(), MAX_REPLY).await {
            Ok(body) => AdminReply {
                status,
                body: body.to_vec(),
            },
            Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
        }
    }
}

/// Answers an authorized request that needs the coordinator, which is not active here: with
/// what the node where it is active answers.
pub async fn to_coordinator(
    st: &AdminState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let unavailable = |why: String| (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    if st.forward.forwarded(headers) {
        return unavailable(
            "the coordinator moved while the request was handed on: try again\n".into(),
        );
    }
    let call = AdminCall {
        method: method.to_string(),
        path: path.to_string(),
        body: body.to_vec(),
    };
    match call_coordinator(&st.groups, &call).await {
        Ok(r) => (
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY),
            Bytes::from(r.body),
        )
            .into_response(),
        Err(CoordinatorCall::NoGroup) => crate::admin::state::no_coordinator(),
        Err(CoordinatorCall::Unavailable(why)) => unavailable(why),
    }
}

/// Why [`call_coordinator`] got no answer.
pub enum CoordinatorCall {
    /// This process knows no group 1.
    NoGroup,
    Unavailable(String),
}

/// Runs `call` through the admin API of the node where the coordinator is active (group 1's
/// leader), as a request this node authorized.
pub async fn call_coordinator(
    groups: &crate::status::Groups,
    call: &AdminCall,
) -> Result<AdminReply, CoordinatorCall> {
    let Some(home) = groups.get(&1) else {
        return Err(CoordinatorCall::NoGroup);
    };
    let Some(leader) = crate::status::leader_status(home).await else {
        return Err(CoordinatorCall::Unavailable(
            "group 1 has no leader, so no coordinator runs: try again\n".into(),
        ));
    };
    let Some(addr) = leader
        .voters
        .iter()
        .find(|(id, _)| *id == leader.node_id)
        .map(|(_, a)| a.clone())
    else {
        return Err(CoordinatorCall::Unavailable(
            "group 1's leader has no address\n".into(),
        ));
    };
    let answer = match RpcChannel::connect(&addr).await {
        Ok(ch) => ch.admin(call).await,
        Err(e) => Err(e),
    };
    answer
        .map_err(|e| CoordinatorCall::Unavailable(format!("the coordinator's node {addr}: {e}\n")))
}

/// Shared by the admin routes and the RPC server of one process.
pub type Shared = Arc<Forwarding>;
