//! `saker admin exception`: the exception table (which MNode group owns a file name), shown
//! and changed through the coordinator (`/admin/exceptions`).

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Subcommand;
use saker_namespace::Exception;
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, AdminState};

#[derive(Subcommand)]
pub enum ExceptionCommand {
    /// The table and its version.
    List,
    /// Route a file name: `pathwalk` (spread by parent), a group number, or `ring` (remove
    /// the exception). The name's inodes move to their new groups before this returns.
    Set { name: String, route: String },
}

/// One entry of the exception table as the admin API shows it.
#[derive(Serialize, Deserialize)]
struct ExceptionInfo {
    name: String,
    /// `pathwalk` or `group:N`.
    route: String,
}

#[derive(Serialize, Deserialize)]
struct ExceptionTableInfo {
    version: u64,
    entries: Vec<ExceptionInfo>,
}

fn parse_route(route: &str) -> Result<Option<Exception>, String> {
    match route {
        "ring" => Ok(None),
        "pathwalk" => Ok(Some(Exception::PathWalk)),
        other => other
            .trim_start_matches("group:")
            .parse::<u32>()
            .map(|g| Some(Exception::Override(g)))
            .map_err(|_| format!("route must be pathwalk, ring or a group number, not {other}")),
    }
}

fn table_info(table: &saker_namespace::ExceptionTable) -> ExceptionTableInfo {
    ExceptionTableInfo {
        version: table.version(),
        entries: table
            .iter()
            .map(|(name, e)| ExceptionInfo {
                name: name.to_string(),
                route: match e {
                    Exception::PathWalk => "pathwalk".to_string(),
                    Exception::Override(g) => format!("group:{g}"),
                },
            })
            .collect(),
    }
}

pub(crate) async fn list(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/exceptions", &headers, b"") {
        return deny();
    }
    let Some(ns) = st.namespace.get() else {
        let path = "/admin/exceptions";
        return crate::admin::forward::to_coordinator(&st, &Method::GET, path, &headers, b"").await;
    };
    axum::Json(table_info(&ns.exceptions())).into_response()
}

pub(crate) async fn set(
    State(st): State<AdminState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/admin/exceptions/{name}");
    if !authorized(&st, &Method::PUT, &path, &headers, &body) {
        return deny();
    }
    let Some(ns) = st.namespace.get() else {
        return crate::admin::forward::to_coordinator(&st, &Method::PUT, &path, &headers, &body)
            .await;
    };
    let route = match std::str::from_utf8(&body).map(str::trim).map(parse_route) {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
        Err(_) => return (StatusCode::BAD_REQUEST, "route is not UTF-8\n").into_response(),
    };
    match ns.set_exception(&name, route).await {
        Ok(table) => axum::Json(table_info(&table)).into_response(),
        Err(saker_rpc::MetaError::Invalid(m)) => {
            (StatusCode::BAD_REQUEST, format!("{m}\n")).into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

pub async fn run(endpoint: &str, command: ExceptionCommand) -> anyhow::Result<()> {
    let text = match command {
        ExceptionCommand::List => {
            send(endpoint, Method::GET, "/admin/exceptions", Vec::new()).await?
        }
        ExceptionCommand::Set { name, route } => {
            parse_route(&route).map_err(anyhow::Error::msg)?;
            let path = format!("/admin/exceptions/{name}");
            send(endpoint, Method::PUT, &path, route.into_bytes()).await?
        }
    };
    let table: ExceptionTableInfo = serde_json::from_str(&text).context("unexpected reply")?;
    println!("version {}", table.version);
    for e in table.entries {
        println!("{}\t{}", e.name, e.route);
    }
    Ok(())
}
