//! `/admin/backup/…` and `saker admin backup DIR`: a metadata backup taken from a running
//! server (the format and the restore: [`crate::backup`]).

use std::path::Path;

use anyhow::{ensure, Context};
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use saker_rpc::{ClientTag, MetaRequest, MetaResponse, MetaService};

use crate::admin::state::AdminState;
use crate::backup::{group_file, Manifest, COORDINATOR, MANIFEST};

/// Bytes asked for per piece.
const PIECE: u32 = 1 << 20;

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
    if !crate::admin::state::authorized(&st, &Method::GET, &path, &headers, b"") {
        return crate::admin::state::deny();
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
    if !crate::admin::state::authorized(&st, &Method::GET, path, &headers, b"") {
        return crate::admin::state::deny();
    }
    let Some(ns) = st.namespace.get() else {
        return crate::admin::forward::to_coordinator(&st, &Method::GET, path, &headers, b"").await;
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
    let status =
        crate::admin::request::send(endpoint, Method::GET, "/admin/status", Vec::new()).await?;
    let groups: Vec<crate::status::GroupStatus> =
        serde_json::from_str(&status).context("unexpected reply")?;
    let groups: Vec<u32> = groups.iter().map(|g| g.group).collect();
    for &g in &groups {
        let path = format!("/admin/backup/groups/{g}");
        let mut resp =
            crate::admin::request::request(endpoint, Method::GET, &path, Vec::new()).await?;
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
    match crate::admin::request::send(
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
