//! `/admin/lifecycle`: lifecycle passes on request and their status.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::admin::state::{authorized, deny, no_coordinator, AdminState};

pub(super) async fn run_lifecycle_all(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run_lifecycle(st, None, headers, body).await
}

pub(super) async fn run_lifecycle_bucket(
    State(st): State<AdminState>,
    Path(bucket): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run_lifecycle(st, Some(bucket), headers, body).await
}

/// One lifecycle pass now (of `bucket` only, if given); blocks until it ends and answers
/// its summary as JSON.
async fn run_lifecycle(
    st: AdminState,
    bucket: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = match &bucket {
        Some(b) => format!("/admin/lifecycle/{b}"),
        None => "/admin/lifecycle".to_string(),
    };
    if !authorized(&st, &Method::POST, &path, &headers, &body) {
        return deny();
    }
    if let Some(b) = &bucket {
        if let Err(e) = saker_namespace::validate_bucket_name(b) {
            return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
        }
    }
    let Some(gw) = &st.gateway else {
        return no_coordinator();
    };
    match gw.lifecycle_pass(bucket.as_deref()).await {
        Ok(sum) => axum::Json(sum).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// The day length, the last lifecycle pass of this process, and where a pass is (one
/// running, or one cut short).
pub(super) async fn lifecycle_status(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/lifecycle", &headers, b"") {
        return deny();
    }
    let Some(gw) = &st.gateway else {
        return no_coordinator();
    };
    let last = gw.lifecycle_status().map(|(started_ns, summary)| {
        serde_json::json!({ "started_unix_ms": started_ns / 1_000_000, "summary": summary })
    });
    // A pass cut short (or running now) shows where it is.
    let cursor = gw.lifecycle_cursor().await;
    axum::Json(serde_json::json!({
        "day_secs": gw.lifecycle_day().as_secs(),
        "last_pass": last,
        "cursor": cursor,
    }))
    .into_response()
}
