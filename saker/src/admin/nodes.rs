//! `saker admin node add|remove` and the placement `saker admin status` shows: the admin API
//! handlers (`/admin/nodes/add`, `/admin/nodes/remove`, `/admin/placement`) and the commands
//! that call them.

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, AdminState};
use crate::placement_status::Placement;

#[derive(Subcommand)]
pub enum NodeCommand {
    /// Give the node at RPC_ADDR (started with a `node` number beyond [cluster] nodes) its
    /// share of the group replicas, moved from the busiest nodes, then spread every group's
    /// voters over the zones (again for a node already added: after zones changed).
    Add {
        rpc_addr: String,
        /// The node's zone (failure domain); its own `zone` setting, if it has one, wins.
        #[arg(long)]
        zone: Option<String>,
    },
    /// Move every replica of NODE (its number, one raft id as `saker admin status` shows it,
    /// or its RPC address) to the other nodes, and every chunk off its chunkstore. The node
    /// can be stopped afterwards.
    Remove { node: String },
}

#[derive(Serialize, Deserialize)]
struct NodeRequest {
    addr: Option<String>,
    id: Option<u64>,
    #[serde(default)]
    zone: Option<String>,
}

pub async fn add_node(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    change_nodes(st, NodeChange::Add, headers, body).await
}

pub async fn remove_node(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    change_nodes(st, NodeChange::Remove, headers, body).await
}

#[derive(Clone, Copy)]
enum NodeChange {
    Add,
    Remove,
}

fn not_replicated() -> Response {
    (
        StatusCode::CONFLICT,
        "not a replicated cluster: its nodes do not change\n",
    )
        .into_response()
}

fn answer<T: Serialize>(result: Result<T, crate::nodes::NodeError>) -> Response {
    use crate::nodes::NodeError;
    match result {
        Ok(report) => axum::Json(report).into_response(),
        Err(NodeError::Refused(m)) => (StatusCode::CONFLICT, format!("{m}\n")).into_response(),
        Err(NodeError::Meta(e)) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
        }
    }
}

async fn change_nodes(
    st: AdminState,
    change: NodeChange,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use crate::nodes::Target;
    let path = match change {
        NodeChange::Add => "/admin/nodes/add",
        NodeChange::Remove => "/admin/nodes/remove",
    };
    if !authorized(&st, &Method::POST, path, &headers, &body) {
        return deny();
    }
    let Some(nodes) = &st.nodes else {
        return not_replicated();
    };
    let req: NodeRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    if let Some(z) = req
        .zone
        .as_deref()
        .filter(|z| !crate::chunk_members::valid_zone(z))
    {
        let why = format!("zone {z:?}: up to 64 letters, digits, '.', '_' or '-'\n");
        return (StatusCode::BAD_REQUEST, why).into_response();
    }
    let result = match (change, req.addr, req.id) {
        (NodeChange::Add, Some(addr), None) => nodes.add(&addr, req.zone.as_deref()).await,
        (NodeChange::Remove, None, Some(id)) => nodes.remove(Target::Id(id)).await,
        (NodeChange::Remove, Some(addr), None) => nodes.remove(Target::Addr(addr)).await,
        _ => {
            let want = match change {
                NodeChange::Add => "addr",
                NodeChange::Remove => "id or addr",
            };
            return (
                StatusCode::BAD_REQUEST,
                format!("the body needs {want} alone\n"),
            )
                .into_response();
        }
    };
    answer(result)
}

/// `/admin/placement`: where the groups' voters and the chunk copies go, by zone, and what
/// cannot spread.
pub async fn placement(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/placement", &headers, b"") {
        return deny();
    }
    let Some(nodes) = &st.nodes else {
        return not_replicated();
    };
    answer(nodes.placement().await)
}

/// Prints the placement after the group table of `saker admin status` (nothing for a
/// cluster that is not replicated).
pub async fn print_placement(endpoint: &str) -> anyhow::Result<()> {
    let text = match send(endpoint, Method::GET, "/admin/placement", Vec::new()).await {
        Ok(t) => t,
        Err(e) if e.to_string().contains("not a replicated cluster") => return Ok(()),
        Err(e) => return Err(e),
    };
    let placement: Placement = serde_json::from_str(&text).context("unexpected reply")?;
    print!("{}", placement.render());
    Ok(())
}

pub async fn run(endpoint: &str, command: NodeCommand) -> anyhow::Result<()> {
    let (path, req) = match command {
        NodeCommand::Add { rpc_addr, zone } => (
            "/admin/nodes/add",
            NodeRequest {
                addr: Some(rpc_addr),
                id: None,
                zone,
            },
        ),
        NodeCommand::Remove { node } => {
            let (addr, id) = match node.parse::<u64>() {
                Ok(id) => (None, Some(id)),
                Err(_) => (Some(node), None),
            };
            let req = NodeRequest {
                addr,
                id,
                zone: None,
            };
            ("/admin/nodes/remove", req)
        }
    };
    let text = send(endpoint, Method::POST, path, serde_json::to_vec(&req)?).await?;
    println!("{}", text.trim());
    Ok(())
}
