//! Metadata backups: `saker admin backup DIR` and `saker server --restore DIR`.
//!
//! A backup is a directory: `group-G.snap` per MNode group (the group's state-machine tables
//! as its leader held them with no batch in flight, in the raft snapshot format, CRC-checked),
//! `coordinator.json` (the coordinator's records: exception table and journals; in a
//! replicated cluster they are in group 1's tables too) and `backup.json` (the groups). Each
//! group is consistent in itself; groups are taken one after another. File data (chunks) is
//! not in it: a restore expects the chunkstores as they were (keep them, or copy
//! `DATA_DIR/chunks`).
//!
//! A restore starts a cluster from a backup on empty data directories: each group is created
//! afresh around its backed-up tables (no raft history), by the node that creates the group;
//! the other replicas are sent snapshots as they join.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, ensure, Context};
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use saker_mnode::MetaStore;
use saker_rpc::{ClientTag, MetaRequest, MetaResponse, MetaService};
use serde::{Deserialize, Serialize};

use crate::admin::AdminState;

const MANIFEST: &str = "backup.json";
const COORDINATOR: &str = "coordinator.json";
/// Bytes asked for per piece.
const PIECE: u32 = 1 << 20;

#[derive(Serialize, Deserialize)]
struct Manifest {
    groups: Vec<u32>,
    /// When the backup was taken (Unix seconds).
    created: u64,
}

fn group_file(g: u32) -> String {
    format!("group-{g}.snap")
}

/// Reads piece `offset` of backup `id` of the group behind `set` (`id` 0 starts one).
async fn piece(
    set: &dyn MetaService,
    id: u64,
    offset: u64,
) -> Result<(u64, u64, Vec<u8>), saker_rpc::MetaError> {
    let tag = ClientTag { client: 0, seq: 0 };
    let req = MetaRequest::Backup {
        id,
        offset,
        len: PIECE,
    };
    match set.call(tag, req).await? {
        MetaResponse::BackupPiece { id, size, data } => Ok((id, size, data)),
        other => Err(saker_rpc::MetaError::Internal(format!(
            "unexpected answer to Backup: {other:?}"
        ))),
    }
}

/// `GET /admin/backup/groups/{g}`: the group's backup, streamed.
pub async fn group_backup(
    State(st): State<AdminState>,
    UrlPath(g): UrlPath<u32>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/admin/backup/groups/{g}");
    if !crate::admin::authorized(&st, &Method::GET, &path, &headers, b"") {
        return crate::admin::deny();
    }
    let Some(set) = st.groups.get(&g).cloned() else {
        return (StatusCode::NOT_FOUND, format!("no group {g}\n")).into_response();
    };
    let (id, size, first) = match piece(set.as_ref(), 0, 0).await {
        Ok(p) => p,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    };
    let rest = futures::stream::unfold(first.len() as u64, move |offset| {
        let set = set.clone();
        async move {
            if offset >= size {
                return None;
            }
            Some(match piece(set.as_ref(), id, offset).await {
                Ok((_, _, data)) if !data.is_empty() => {
                    let next = offset + data.len() as u64;
                    (Ok(bytes::Bytes::from(data)), next)
                }
                Ok(_) => (Err(std::io::Error::other("backup ended early")), size),
                Err(e) => (Err(std::io::Error::other(e.to_string())), size),
            })
        }
    });
    let first = futures::stream::once(async move { Ok(bytes::Bytes::from(first)) });
    let body = Body::from_stream(futures::StreamExt::chain(first, rest));
    ([("content-length", size.to_string())], body).into_response()
}

/// `GET /admin/backup/coordinator`: the active coordinator's records (404 where it is not
/// active).
pub async fn coordinator_backup(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    let path = "/admin/backup/coordinator";
    if !crate::admin::authorized(&st, &Method::GET, path, &headers, b"") {
        return crate::admin::deny();
    }
    let Some(ns) = st.namespace.get() else {
        return crate::admin_forward::to_coordinator(&st, &Method::GET, path, &headers, b"").await;
    };
    match ns.records().await {
        Ok(records) => axum::Json(records).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// `saker admin backup DIR`, against the admin endpoint `endpoint`.
pub async fn run_client(endpoint: &str, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    ensure!(
        !dir.join(MANIFEST).exists(),
        "{} holds a backup already",
        dir.display()
    );
    let status = crate::admin::send(endpoint, Method::GET, "/admin/status", Vec::new()).await?;
    let groups: Vec<crate::status::GroupStatus> =
        serde_json::from_str(&status).context("unexpected reply")?;
    let groups: Vec<u32> = groups.iter().map(|g| g.group).collect();
    for &g in &groups {
        let path = format!("/admin/backup/groups/{g}");
        let mut resp = crate::admin::request(endpoint, Method::GET, &path, Vec::new()).await?;
        let tmp = dir.join(format!("{}.tmp", group_file(g)));
        let mut out = std::fs::File::create(&tmp)?;
        let mut bytes = 0u64;
        while let Some(chunk) = resp.chunk().await.context("the backup stream broke")? {
            std::io::Write::write_all(&mut out, &chunk)?;
            bytes += chunk.len() as u64;
        }
        out.sync_all()?;
        std::fs::rename(&tmp, dir.join(group_file(g)))?;
        saker_durable::sync_dir(dir)?;
        println!("group {g}: {bytes} bytes");
    }
    match crate::admin::send(
        endpoint,
        Method::GET,
        "/admin/backup/coordinator",
        Vec::new(),
    )
    .await
    {
        Ok(text) => {
            std::fs::write(dir.join(COORDINATOR), text)?;
            println!("coordinator records saved");
        }
        Err(e) => println!(
            "coordinator records not saved ({e}); a replicated cluster keeps them in group 1"
        ),
    }
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let manifest = serde_json::to_vec_pretty(&Manifest { groups, created })?;
    std::fs::write(dir.join(MANIFEST), manifest)?;
    std::fs::File::open(dir)?.sync_all()?;
    println!("backup written to {}", dir.display());
    Ok(())
}

/// The groups of the backup in `dir`, and the path of each one's tables.
pub fn group_files(dir: &Path) -> anyhow::Result<Vec<(u32, std::path::PathBuf)>> {
    let manifest: Manifest = serde_json::from_slice(
        &std::fs::read(dir.join(MANIFEST))
            .with_context(|| format!("no backup in {} ({MANIFEST})", dir.display()))?,
    )
    .with_context(|| format!("cannot parse {}", dir.join(MANIFEST).display()))?;
    Ok(manifest
        .groups
        .iter()
        .map(|&g| (g, dir.join(group_file(g))))
        .collect())
}

/// Installs the backup in `dir` before the groups start: the tables of each group in
/// `install` (those this process creates) into `store`, and the coordinator's records into
/// `coordinator_dir` (a coordinator keeping its state in files). `groups` are the cluster's
/// groups, which must be the backup's.
pub async fn restore(
    dir: &Path,
    store: &Arc<dyn MetaStore>,
    groups: &[u32],
    install: &[u32],
    coordinator_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let files = group_files(dir)?;
    let backed_up: Vec<u32> = files.iter().map(|(g, _)| *g).collect();
    if backed_up != groups {
        bail!(
            "the backup has groups {backed_up:?}, this cluster {groups:?}: restore into a \
             cluster of the same shape"
        );
    }
    for &g in install {
        let path = dir.join(group_file(g));
        let mut file = std::fs::File::open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let keys = saker_mnode::keys::Keys::new(g);
        let pairs = saker_mnode::raft::snapshot::restore(store.as_ref(), keys, &mut file)
            .with_context(|| format!("cannot restore group {g} from {}", path.display()))?;
        println!("restored group {g}: {pairs} records");
    }
    let records = dir.join(COORDINATOR);
    if let (Some(state_dir), true) = (coordinator_dir, records.exists()) {
        let records: Vec<(String, Vec<u8>)> = serde_json::from_slice(&std::fs::read(&records)?)
            .with_context(|| format!("cannot parse {}", records.display()))?;
        let state = saker_coordinator::DirState::new(state_dir);
        for (k, v) in &records {
            saker_coordinator::StateStore::put(&state, k, Some(v.clone())).await?;
        }
        println!("restored {} coordinator records", records.len());
    }
    Ok(())
}

/// The groups the backup restores into this process: `hosted`, each by its creator (the
/// first of its voters in `placement`, or this process alone).
pub fn created_here(
    hosted: &[u32],
    placement: &BTreeMap<u32, Vec<(u64, crate::process_config::Addr)>>,
    node_id: u64,
) -> Vec<u32> {
    hosted
        .iter()
        .copied()
        .filter(|g| {
            placement
                .get(g)
                .and_then(|v| v.first())
                .is_none_or(|(id, _)| *id == node_id)
        })
        .collect()
}
