//! The admin API (served on the admin listener beside /health and /metrics), one module per
//! resource, and the `saker admin` commands that call it ([`cli`]).

pub mod auth;
pub mod backup;
pub mod balance;
pub mod chunks;
pub mod cli;
pub mod credential;
pub mod ec;
pub mod exceptions;
pub mod forward;
pub mod keys;
pub mod lifecycle;
pub mod metrics;
pub mod nodes;
pub mod notify;
pub mod request;
pub mod sse;
pub mod state;
pub mod tiers;

pub use cli::{run_client, AdminCommand};
pub use request::trust;
pub use state::{plain_public, AdminState};

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;

use crate::status;
use state::{authorized, deny};

/// The admin listener's routes: `/health`, `/metrics`, `/admin/status`, `/admin/keys`,
/// `/admin/exceptions`, `/admin/balance`, `/admin/balance/stats`.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route(
            "/health",
            get(|State(st): State<AdminState>| async move {
                status::health(&st.groups, Some(st.chunks.as_ref())).await
            }),
        )
        .route("/metrics", get(metrics::metrics))
        .route("/admin/status", get(cluster_status))
        .route("/admin/keys", get(keys::list).post(keys::create))
        .route("/admin/keys/{access_key}", delete(keys::delete))
        .route("/admin/keys/{access_key}/policy", put(keys::set_policy))
        .route("/admin/exceptions", get(exceptions::list))
        .route("/admin/exceptions/{name}", put(exceptions::set))
        .route("/admin/balance", post(balance::run))
        .route("/admin/balance/stats", get(balance::stats))
        .route("/admin/repair", post(chunks::run_repair))
        .route("/admin/repair/noted", post(chunks::run_repair_noted))
        .route("/admin/chunk-passes", get(chunks::passes))
        .route("/admin/nodes/add", post(nodes::add_node))
        .route("/admin/placement", get(nodes::placement))
        .route("/admin/backup/groups/{group}", get(backup::group_backup))
        .route("/admin/backup/coordinator", get(backup::coordinator_backup))
        .route("/admin/nodes/remove", post(nodes::remove_node))
        .route("/admin/scrub", post(chunks::run_scrub))
        .route("/admin/sse/buckets", get(sse::buckets))
        .route("/admin/sse/rewrap/{bucket}", post(sse::rewrap))
        .route(
            "/admin/lifecycle",
            get(lifecycle::lifecycle_status).post(lifecycle::run_lifecycle_all),
        )
        .route(
            "/admin/lifecycle/{bucket}",
            post(lifecycle::run_lifecycle_bucket),
        )
        .route(
            "/admin/cluster-credential/{kind}",
            get(credential::export_credential),
        )
        .route(
            "/admin/cluster-credential/client",
            axum::routing::post(credential::sign_client_credential),
        )
        .route(
            "/admin/cluster-credential/reload",
            axum::routing::post(credential::reload_credential),
        )
        .route("/admin/notify/targets", get(notify::list).post(notify::add))
        .route("/admin/notify/targets/{name}", delete(notify::remove))
        .route("/admin/notify/status", get(notify::status))
        .route("/admin/notify/cap/{bucket}", put(notify::set_cap))
        .route("/admin/tiers", get(tiers::list).post(tiers::add))
        .route("/admin/tiers/{name}", delete(tiers::remove))
        .route(
            "/admin/archive",
            get(tiers::archive_jobs).post(tiers::start_archive),
        )
        .route(
            "/admin/buckets/{bucket}/storage-class",
            get(ec::get_classes)
                .put(ec::set_class)
                .delete(ec::clear_class),
        )
        .route("/admin/ec/run", get(ec::run_status).post(ec::start_run))
        .with_state(state)
}

async fn cluster_status(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/status", &headers, b"") {
        return deny();
    }
    axum::Json(status::collect(&st.groups).await).into_response()
}

/// `/health` and `/metrics` alone, for a process without a gateway (and so without access
/// keys); `chunks` is its chunkstore, if it runs one.
pub fn health_router(
    chunks: Option<Arc<dyn saker_chunkstore::ChunkStore>>,
    groups: status::Groups,
) -> Router {
    Router::new()
        .route(
            "/health",
            get({
                let chunks = chunks.clone();
                move || {
                    let (groups, chunks) = (groups.clone(), chunks.clone());
                    async move { status::health(&groups, chunks.as_deref()).await }
                }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let chunks = chunks.clone();
                async move { metrics::render_metrics(chunks.as_deref()) }
            }),
        )
}
