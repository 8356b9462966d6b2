//! `/admin/cluster-credential/…`: export, reload and client signing of the cluster credential.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::admin::state::{authorized, deny, AdminState};

pub(super) async fn export_credential(
    State(st): State<AdminState>,
    Path(kind): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/admin/cluster-credential/{kind}");
    if !authorized(&st, &Method::GET, &path, &headers, b"") {
        return deny();
    }
    let answer = match kind.as_str() {
        "node" if st.plain_public => Err(
            "the node credential holds the cluster's CA key: it is not sent over a plaintext \
             admin listener on a non-loopback address (serve the admin API with --tls-cert, or \
             copy the file)"
                .to_string(),
        ),
        "node" => crate::cluster_credential::export_node(),
        "state" => Ok(crate::cluster_credential::state()),
        "client" => Err(
            "a client credential is made from a CSR: POST it (saker admin \
             cluster-credential export FILE --client)"
                .into(),
        ),
        other => Err(format!("no credential kind '{other}' (node or client)")),
    };
    match answer {
        Ok(text) => text.into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// Reads the node credential's file again (`cluster-credential reload`).
pub(super) async fn reload_credential(
    State(st): State<AdminState>,
    headers: HeaderMap,
) -> Response {
    let path = "/admin/cluster-credential/reload";
    if !authorized(&st, &Method::POST, path, &headers, b"") {
        return deny();
    }
    match crate::cluster_credential::reload() {
        Ok(text) => format!("{text}\n").into_response(),
        Err(e) => (StatusCode::CONFLICT, format!("{e}\n")).into_response(),
    }
}

/// Signs a client's CSR (`cluster-credential export --client`).
pub(super) async fn sign_client_credential(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = "/admin/cluster-credential/client";
    if !authorized(&st, &Method::POST, path, &headers, &body) {
        return deny();
    }
    let answer = serde_json::from_slice::<crate::cluster_credential::ClientRequest>(&body)
        .map_err(|e| format!("bad request: {e}"))
        .and_then(|r| crate::cluster_credential::sign_client(&r.csr, r.days));
    match answer {
        Ok(text) => text.into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}
