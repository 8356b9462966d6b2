//! Chunk repair and scrub on the admin API: `POST /admin/repair` and `POST /admin/scrub` run a
//! pass now and answer its report; `GET /admin/chunk-passes` shows where this cluster's passes
//! are (the one running, or the last one, with its rate), also in `/metrics`. All three run
//! where the coordinator is active, as the periodic passes do, so every node's admin API
//! shows the same passes.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use saker_chunkstore::progress::{PassView, REPAIR, SCRUB};
use serde::{Deserialize, Serialize};

use crate::admin::state::{authorized, deny, AdminState};

/// The repair and scrub passes of the process that answers.
#[derive(Serialize, Deserialize, Default)]
pub struct Passes {
    pub repair: Option<PassView>,
    pub scrub: Option<PassView>,
}

impl Passes {
    fn here() -> Passes {
        Passes {
            repair: REPAIR.view(),
            scrub: SCRUB.view(),
        }
    }

    /// Lines for `saker admin status` (none before the first pass).
    pub fn render(&self) -> String {
        [("repair", &self.repair), ("scrub", &self.scrub)]
            .into_iter()
            .filter_map(|(name, v)| v.as_ref().map(|v| v.render(name) + "\n"))
            .collect()
    }
}

/// Hands the request to the coordinator's node unless it is active here.
async fn elsewhere(
    st: &AdminState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Response> {
    if st.namespace.get().is_some() {
        return None;
    }
    Some(crate::admin::forward::to_coordinator(st, method, path, headers, body).await)
}

pub async fn passes(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    let path = "/admin/chunk-passes";
    if !authorized(&st, &Method::GET, path, &headers, b"") {
        return deny();
    }
    if let Some(r) = elsewhere(&st, &Method::GET, path, &headers, b"").await {
        return r;
    }
    axum::Json(Passes::here()).into_response()
}

pub async fn run_scrub(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    let path = "/admin/scrub";
    if !authorized(&st, &Method::POST, path, &headers, &body) {
        return deny();
    }
    if let Some(r) = elsewhere(&st, &Method::POST, path, &headers, &body).await {
        return r;
    }
    match saker_client::scrub_chunks(&st.cluster, 0).await {
        Ok(report) => axum::Json(report).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

pub async fn run_repair(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    repair(st, false, headers, body).await
}

/// A pass over the chunks writes noted as short only.
pub async fn run_repair_noted(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    repair(st, true, headers, body).await
}

async fn repair(st: AdminState, noted: bool, headers: HeaderMap, body: Bytes) -> Response {
    let path = if noted {
        "/admin/repair/noted"
    } else {
        "/admin/repair"
    };
    if !authorized(&st, &Method::POST, path, &headers, &body) {
        return deny();
    }
    if let Some(r) = elsewhere(&st, &Method::POST, path, &headers, &body).await {
        return r;
    }
    let report = if noted {
        saker_client::repair_noted_chunks(&st.cluster, 0).await
    } else {
        saker_client::repair_chunks(&st.cluster, 0).await
    };
    match report {
        Ok(report) => axum::Json(report).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// In a node's data directory from its return after a lost disk until a full repair pass ran.
pub const REPAIR_AFTER_LOSS: &str = "repair-after-disk-loss";

/// After this node came back from a lost disk: asks the coordinator for a full repair pass
/// until one completes with every chunk copied (retrying while a store or the coordinator
/// is not reachable yet), then drops the `marker` file.
pub async fn repair_after_loss(groups: crate::status::Groups, marker: std::path::PathBuf) {
    let call = saker_rpc::AdminCall {
        method: "POST".into(),
        path: "/admin/repair".into(),
        body: Vec::new(),
    };
    loop {
        match crate::admin::forward::call_coordinator(&groups, &call).await {
            Ok(r) if r.status == 200 => {
                match serde_json::from_slice::<saker_chunkstore::RepairReport>(&r.body) {
                    Ok(report) if report.failed + report.lost == 0 => {
                        tracing::info!(?report, "chunks repaired after a lost disk");
                        if let Err(e) = std::fs::remove_file(&marker) {
                            tracing::warn!(error = %e, "the repair marker stays");
                        }
                        return;
                    }
                    Ok(report) => tracing::info!(?report, "repair after a lost disk: again"),
                    Err(e) => tracing::warn!(error = %e, "a repair report that does not parse"),
                }
            }
            Ok(r) => tracing::debug!(status = r.status, "repair after a lost disk not run yet"),
            Err(_) => tracing::debug!("repair after a lost disk: no coordinator yet"),
        }
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
}

/// One gauge of [`metrics`]: its name's tail, help, and value.
type Series = (&'static str, &'static str, fn(&PassView) -> f64);

/// The passes of this process as Prometheus gauges, `saker_chunk_pass_*{pass="repair"}`.
pub fn metrics() -> String {
    let mut out = String::new();
    let passes = Passes::here();
    let views = [("repair", passes.repair), ("scrub", passes.scrub)];
    let series: [Series; 6] = [
        ("running", "1 while a pass runs", |v| {
            f64::from(u8::from(v.running))
        }),
        ("total", "Referenced chunks the pass looks at", |v| {
            v.total as f64
        }),
        ("scanned", "Chunks the pass has looked at", |v| {
            v.scanned as f64
        }),
        ("found", "Chunks short of a good copy", |v| v.found as f64),
        ("repaired", "Copies the pass made", |v| v.repaired as f64),
        (
            "bytes_per_second",
            "Bytes copied (repair) or checked (scrub) a second",
            |v| v.bytes_per_sec,
        ),
    ];
    for (name, help, value) in series {
        let name = format!("saker_chunk_pass_{name}");
        out.push_str(&format!(
            "# HELP {name} {help} (this process's last or current pass)\n"
        ));
        out.push_str(&format!("# TYPE {name} gauge\n"));
        for (pass, view) in &views {
            if let Some(v) = view {
                out.push_str(&format!("{name}{{pass=\"{pass}\"}} {}\n", value(v)));
            }
        }
    }
    out
}
