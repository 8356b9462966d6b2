//! `saker admin balance`: a balancing round now (`/admin/balance`), and what the groups'
//! work cost in their last window (`saker admin balance stats`, `/admin/balance/stats`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Subcommand;
use saker_coordinator::meta_opt::UnitCosts;
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, json_body, AdminState};

/// Names and directories a stats answer lists at most.
const STATS_TOP: u32 = 32;

#[derive(Subcommand)]
pub enum BalanceCommand {
    /// Each group's costs in its last closed window (requests served, forwards, remote
    /// lookups, change-log work, dirty marks), its completion time under the cost model, and
    /// the heaviest file names and directories, as JSON.
    Stats,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct BalanceRequest {
    epsilon: f64,
    max_entries: usize,
}

pub(crate) async fn run(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    let path = "/admin/balance";
    if !authorized(&st, &Method::POST, path, &headers, &body) {
        return deny();
    }
    let Some(ns) = st.namespace.get() else {
        return crate::admin::forward::to_coordinator(&st, &Method::POST, path, &headers, &body)
            .await;
    };
    let req: BalanceRequest = match json_body(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    if !(0.0..1.0).contains(&req.epsilon) {
        return (StatusCode::BAD_REQUEST, "epsilon must be in [0, 1)\n").into_response();
    }
    match ns.balance_once(req.epsilon, req.max_entries, 0).await {
        Ok(report) => axum::Json(report).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

pub(crate) async fn stats(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    let path = "/admin/balance/stats";
    if !authorized(&st, &Method::GET, path, &headers, b"") {
        return deny();
    }
    let Some(ns) = st.namespace.get() else {
        return crate::admin::forward::to_coordinator(&st, &Method::GET, path, &headers, b"").await;
    };
    match ns.load_windows(STATS_TOP).await {
        Ok(windows) => {
            let report = saker_coordinator::load_report::report(
                &windows,
                &UnitCosts::default(),
                STATS_TOP as usize,
            );
            axum::Json(report).into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// The client side of `saker admin balance …`.
pub(crate) async fn command(
    endpoint: &str,
    sub: Option<BalanceCommand>,
    epsilon: f64,
    max_entries: usize,
) -> anyhow::Result<()> {
    let text = match sub {
        Some(BalanceCommand::Stats) => {
            send(endpoint, Method::GET, "/admin/balance/stats", Vec::new()).await?
        }
        None => {
            let body = serde_json::to_vec(&BalanceRequest {
                epsilon,
                max_entries,
            })?;
            send(endpoint, Method::POST, "/admin/balance", body).await?
        }
    };
    println!("{}", text.trim());
    Ok(())
}
