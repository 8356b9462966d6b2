//! `saker admin sse`: rotation of the SSE-S3 master key.
//!
//! 1. `saker admin sse rotate FILE` puts a new current key at the head of the key file,
//!    keeping the old ones as previous keys (copy the file to every node and restart them,
//!    or roll them one by one: a node opens data keys under any key its file holds).
//! 2. `saker admin sse rewrap` has a node wrap every stored SSE-S3 data key anew under its
//!    current key, bucket by bucket with progress, through metadata writes only (no object
//!    bytes are rewritten); run again after an interruption, it skips what is done.
//! 3. Once it reports nothing left under a previous key, `saker admin sse retire-previous
//!    FILE` drops the old keys from the file (on every node).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Subcommand;
use saker_client::master_keys::MasterKeys;

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, AdminState};
use crate::sse_rewrap::Rewrapped;

#[derive(Subcommand)]
pub enum SseCommand {
    /// Put a new current master key at the head of FILE (the `--sse-key-file` of the nodes),
    /// keeping the others as previous keys; then give every node the new file and restart it.
    Rotate { file: std::path::PathBuf },
    /// Wrap every stored SSE-S3 data key under the current master key of the node the admin
    /// endpoint names (metadata writes only; safe to run again).
    Rewrap {
        /// Only this bucket (default: every bucket).
        bucket: Option<String>,
    },
    /// Drop the previous keys from FILE, after a rewrap left nothing under them.
    RetirePrevious { file: std::path::PathBuf },
}

/// Runs `saker admin sse …` against the admin endpoint `endpoint`.
pub async fn run(endpoint: &str, command: SseCommand) -> anyhow::Result<()> {
    match command {
        SseCommand::Rotate { file } => {
            MasterKeys::rotate(&file)
                .map_err(|e| anyhow::anyhow!("cannot rotate {}: {e}", file.display()))?;
            println!(
                "{}: a new current master key; the previous ones stay until `saker admin sse \
                 retire-previous`. Give every node this file and restart it, then run `saker \
                 admin sse rewrap`.",
                file.display()
            );
        }
        SseCommand::RetirePrevious { file } => {
            let dropped = MasterKeys::retire_previous(&file)
                .map_err(|e| anyhow::anyhow!("cannot rewrite {}: {e}", file.display()))?;
            println!("{}: dropped {dropped} previous key(s)", file.display());
        }
        SseCommand::Rewrap { bucket } => {
            let buckets = match bucket {
                Some(b) => vec![b],
                None => {
                    let text =
                        send(endpoint, Method::GET, "/admin/sse/buckets", Vec::new()).await?;
                    serde_json::from_str(&text)
                        .map_err(|e| anyhow::anyhow!("unexpected reply {text:?}: {e}"))?
                }
            };
            let (mut left, n) = (0u64, buckets.len());
            for (i, b) in buckets.iter().enumerate() {
                let path = format!("/admin/sse/rewrap/{b}");
                let text = send(endpoint, Method::POST, &path, Vec::new()).await?;
                let r: Rewrapped = serde_json::from_str(&text)
                    .map_err(|e| anyhow::anyhow!("unexpected reply {text:?}: {e}"))?;
                println!(
                    "[{}/{n}] {}: {} SSE-S3 versions, {} rewrapped now; {} uploads in \
                     progress, {} rewrapped now; {} changed meanwhile",
                    i + 1,
                    r.bucket,
                    r.sealed,
                    r.rewrapped,
                    r.uploads,
                    r.uploads_rewrapped,
                    r.changed
                );
                left += r.changed;
            }
            if left == 0 {
                println!("done: every SSE-S3 data key is under the current master key");
            } else {
                anyhow::bail!(
                    "{left} records changed while the rewrap ran and may still be under a \
                     previous key: run it again before retiring that key"
                );
            }
        }
    }
    Ok(())
}

/// The buckets, for a rewrap's walk (`GET /admin/sse/buckets`).
pub(crate) async fn buckets(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/sse/buckets", &headers, b"") {
        return deny();
    }
    match saker_client::buckets(&st.cluster).await {
        Ok(all) => {
            let names: Vec<String> = all.into_iter().map(|e| e.name).collect();
            axum::Json(names).into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// Rewraps one bucket's data keys (`POST /admin/sse/rewrap/{bucket}`), answering what it did.
pub(crate) async fn rewrap(
    State(st): State<AdminState>,
    Path(bucket): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/admin/sse/rewrap/{bucket}");
    if !authorized(&st, &Method::POST, &path, &headers, &body) {
        return deny();
    }
    if let Err(e) = saker_namespace::validate_bucket_name(&bucket) {
        return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
    }
    let Some(keys) = st.cluster.config().master_key.clone() else {
        return (
            StatusCode::CONFLICT,
            "this node holds no SSE-S3 master key (--sse-key-file)\n",
        )
            .into_response();
    };
    match crate::sse_rewrap::bucket(&st.cluster, &keys, &bucket).await {
        Ok(r) => axum::Json(r).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}
