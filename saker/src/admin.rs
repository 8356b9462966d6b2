//! The admin API (served on the admin listener beside /health and /metrics) and the
//! `saker admin` commands that call it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, Context};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;
use clap::Subcommand;
use saker_coordinator::AccessKeyStore;

use crate::admin_auth::{self, HEADER_DATE, HEADER_KEY, HEADER_NONCE, HEADER_SIGNATURE};
use crate::status;

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Manage access keys.
    Key {
        #[command(subcommand)]
        command: crate::admin_keys::KeyCommand,
    },
    /// Show or change the exception table (which MNode group owns a file name).
    Exception {
        #[command(subcommand)]
        command: crate::admin_exceptions::ExceptionCommand,
    },
    /// Every MNode group's replicas: state, term, log and applied index, and lag behind the
    /// leader.
    Status {
        /// Print the JSON the admin API answers instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create or export the cluster credential every RPC must carry.
    ClusterCredential {
        #[command(subcommand)]
        command: crate::cluster_credential::CredentialCommand,
    },
    /// Write a new SSE-S3 master key to FILE (mode 600) for `saker server --sse-key-file`;
    /// keep it outside the data directory, and keep a copy: objects stored with SSE-S3 cannot
    /// be read without it.
    MasterKey {
        /// Where to write the key (an existing file is never replaced).
        file: std::path::PathBuf,
    },
    /// Add a new random SSE-KMS key named ID to the keyring FILE (made with mode 600 when
    /// missing) for `saker server --sse-kms-keyring`.
    KmsKey {
        file: std::path::PathBuf,
        id: String,
    },
    /// SSE-S3 master key rotation: rotate, rewrap, retire-previous.
    Sse {
        #[command(subcommand)]
        command: crate::admin_sse::SseCommand,
    },
    /// Run one chunk scrub now (read every copy of every referenced chunk, checking its
    /// CRC32C, and rewrite bad copies from good ones) and print what it found and did.
    Scrub,
    /// Remote archive tiers: add, list, remove.
    Tier {
        #[command(subcommand)]
        command: crate::admin_tiers::TierCommand,
    },
    /// Lifecycle rules: run a pass now, or show the last one.
    Lifecycle {
        #[command(subcommand)]
        command: LifecycleCommand,
    },
    /// Run one chunk repair pass now (every referenced chunk to all its replicas) and print
    /// what it found and did; `--noted`: only the chunks writes noted as short of replicas.
    Repair {
        #[arg(long)]
        noted: bool,
    },
    /// Write a backup of the metadata (every MNode group and the coordinator's records) into
    /// DIR, for `saker server --restore DIR`. File data (chunks) is not in it.
    Backup { dir: std::path::PathBuf },
    /// Grow or shrink a replicated cluster: move group replicas onto a node or off it.
    Node {
        #[command(subcommand)]
        command: crate::admin_nodes::NodeCommand,
    },
    /// Move the metadata store of a stopped server to another engine.
    Store {
        #[command(subcommand)]
        command: crate::store_migrate::StoreCommand,
    },
    /// Run one balancing round now and print what it did (`balance stats`: what the groups'
    /// work cost).
    #[command(args_conflicts_with_subcommands = true)]
    Balance {
        #[command(subcommand)]
        command: Option<crate::admin_balance::BalanceCommand>,
        #[arg(long, default_value_t = 0.01)]
        epsilon: f64,
        #[arg(long, default_value_t = 16)]
        max_entries: usize,
    },
}

#[derive(Subcommand)]
pub enum LifecycleCommand {
    /// Run a pass now over every bucket with rules, or only BUCKET; waits for it to end and
    /// prints what it did as JSON.
    Run { bucket: Option<String> },
    /// The lifecycle day's length and what the last pass did.
    Status,
}

#[derive(Clone)]
pub struct AdminState {
    pub keys: Arc<AccessKeyStore>,
    pub chunks: Arc<dyn saker_chunkstore::ChunkStore>,
    /// The gateway's view of the cluster (for repair passes).
    pub cluster: Arc<saker_client::Cluster>,
    /// The coordinator, while it is active in this process (the exception table is its).
    pub namespace: crate::coordinator_host::Active,
    /// Every MNode group, for `/health` and `/admin/status`.
    pub groups: crate::status::Groups,
    /// Nonces of the signed requests taken (replays are refused).
    pub nonces: Arc<admin_auth::Nonces>,
    /// Node changes (a replicated cluster's).
    pub nodes: Option<Arc<crate::nodes::Nodes>>,
    /// This process's S3 gateway (lifecycle passes run through it).
    pub gateway: Option<saker_gateway::Gateway>,
    /// Requests for the coordinator handed between nodes ([`crate::admin_forward`]).
    pub forward: crate::admin_forward::Shared,
    /// The admin listener is plaintext on a non-loopback address: secrets are not sent
    /// ([`plain_public`]).
    pub plain_public: bool,
}

/// Whether an admin listener on `addr`, over TLS or not, is plaintext where others can
/// listen (not on loopback).
pub fn plain_public(tls: bool, addr: Option<std::net::SocketAddr>) -> bool {
    !tls && !addr.is_some_and(|a| a.ip().is_loopback())
}

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
        .route("/metrics", get(metrics))
        .route("/admin/status", get(cluster_status))
        .route(
            "/admin/keys",
            get(crate::admin_keys::list).post(crate::admin_keys::create),
        )
        .route(
            "/admin/keys/{access_key}",
            delete(crate::admin_keys::delete),
        )
        .route(
            "/admin/keys/{access_key}/policy",
            put(crate::admin_keys::set_policy),
        )
        .route("/admin/exceptions", get(crate::admin_exceptions::list))
        .route(
            "/admin/exceptions/{name}",
            put(crate::admin_exceptions::set),
        )
        .route("/admin/balance", post(crate::admin_balance::run))
        .route("/admin/balance/stats", get(crate::admin_balance::stats))
        .route("/admin/repair", post(crate::admin_chunks::run_repair))
        .route(
            "/admin/repair/noted",
            post(crate::admin_chunks::run_repair_noted),
        )
        .route("/admin/chunk-passes", get(crate::admin_chunks::passes))
        .route("/admin/nodes/add", post(crate::admin_nodes::add_node))
        .route("/admin/placement", get(crate::admin_nodes::placement))
        .route(
            "/admin/backup/groups/{group}",
            get(crate::backup::group_backup),
        )
        .route(
            "/admin/backup/coordinator",
            get(crate::backup::coordinator_backup),
        )
        .route("/admin/nodes/remove", post(crate::admin_nodes::remove_node))
        .route("/admin/scrub", post(crate::admin_chunks::run_scrub))
        .route("/admin/sse/buckets", get(crate::admin_sse::buckets))
        .route("/admin/sse/rewrap/{bucket}", post(crate::admin_sse::rewrap))
        .route(
            "/admin/lifecycle",
            get(lifecycle_status).post(run_lifecycle_all),
        )
        .route("/admin/lifecycle/{bucket}", post(run_lifecycle_bucket))
        .route("/admin/cluster-credential/{kind}", get(export_credential))
        .route(
            "/admin/cluster-credential/client",
            axum::routing::post(sign_client_credential),
        )
        .route(
            "/admin/cluster-credential/reload",
            axum::routing::post(reload_credential),
        )
        .route(
            "/admin/tiers",
            get(crate::admin_tiers::list).post(crate::admin_tiers::add),
        )
        .route("/admin/tiers/{name}", delete(crate::admin_tiers::remove))
        .route(
            "/admin/archive",
            get(crate::admin_tiers::archive_jobs).post(crate::admin_tiers::start_archive),
        )
        .with_state(state)
}

async fn export_credential(
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
async fn reload_credential(State(st): State<AdminState>, headers: HeaderMap) -> Response {
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
async fn sign_client_credential(
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

async fn run_lifecycle_all(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run_lifecycle(st, None, headers, body).await
}

async fn run_lifecycle_bucket(
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
async fn lifecycle_status(State(st): State<AdminState>, headers: HeaderMap) -> Response {
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

pub(crate) fn no_coordinator() -> Response {
    (
        StatusCode::NOT_FOUND,
        "the coordinator is not active in this process (in a replicated cluster: ask the \
         node that leads group 1)\n",
    )
        .into_response()
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
                async move { render_metrics(chunks.as_deref()) }
            }),
        )
}

async fn metrics(State(st): State<AdminState>) -> String {
    render_metrics(Some(&*st.chunks))
}

/// Prometheus text: everything registered, plus the chunkstore's counters.
fn render_metrics(chunks: Option<&dyn saker_chunkstore::ChunkStore>) -> String {
    let mut out = saker_gateway::metrics::render();
    out.push_str(&crate::admin_chunks::metrics());
    let name = "saker_sse_tag_failures_total";
    let failures = saker_client::sealed::packages::TAG_FAILURES.load(Ordering::Relaxed);
    out.push_str(&format!(
        "# HELP {name} Encrypted packages read whose authentication tag did not match\n\
         # TYPE {name} counter\n{name} {failures}\n"
    ));
    let Some(chunks) = chunks else {
        return out;
    };
    let c = chunks.stats();
    for (name, kind, help, value) in [
        (
            "saker_chunkstore_written_bytes_total",
            "counter",
            "Chunk bytes written",
            c.bytes_written,
        ),
        (
            "saker_chunkstore_read_bytes_total",
            "counter",
            "Chunk bytes read",
            c.bytes_read,
        ),
        (
            "saker_chunkstore_crc_failures_total",
            "counter",
            "Chunk reads that failed their CRC32C check",
            c.crc_failures,
        ),
        (
            "saker_chunkstore_chunks_put_total",
            "counter",
            "Chunks written",
            c.chunks_put,
        ),
        (
            "saker_chunkstore_chunks_deleted_total",
            "counter",
            "Chunks deleted",
            c.chunks_deleted,
        ),
        (
            "saker_chunkstore_volume_syncs_total",
            "counter",
            "fdatasyncs of chunk volumes (each makes a group of small-chunk puts durable)",
            c.volume_syncs,
        ),
        (
            "saker_chunkstore_volume_compactions_total",
            "counter",
            "Chunk volumes removed by compaction",
            c.volume_compactions,
        ),
        (
            "saker_chunkstore_volume_bytes",
            "gauge",
            "Bytes in chunk volume files",
            c.volume_bytes,
        ),
        (
            "saker_chunkstore_volume_live_bytes",
            "gauge",
            "Bytes of chunk volume files that live chunks use",
            c.volume_live_bytes,
        ),
        (
            "saker_chunk_degraded_writes_total",
            "counter",
            "Chunk replicas a write could not make (repair fills them in)",
            c.degraded_writes,
        ),
        (
            "saker_chunk_read_repairs_total",
            "counter",
            "Chunk replicas rewritten by reads that found them missing or corrupt",
            c.read_repairs,
        ),
        (
            "saker_chunk_repaired_total",
            "counter",
            "Chunk replicas re-created by repair passes",
            c.repaired,
        ),
        (
            "saker_chunk_under_replicated",
            "gauge",
            "Referenced chunks the last repair pass left short of replicas",
            c.under_replicated,
        ),
        (
            "saker_chunkstore_full",
            "gauge",
            "1 while the chunkstore refuses writes because its disk is full",
            u64::from(chunks.full().is_some()),
        ),
    ] {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        ));
    }
    out
}

pub(crate) fn authorized(
    state: &AdminState,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> bool {
    // Another node checked the signature and handed the request here.
    if state.forward.forwarded(headers) {
        return true;
    }
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let (Some(ak), Some(date), Some(nonce), Some(sig), Some(host)) = (
        h(HEADER_KEY),
        h(HEADER_DATE),
        h(HEADER_NONCE),
        h(HEADER_SIGNATURE),
        h("host"),
    ) else {
        return false;
    };
    let Ok(date) = date.parse::<i64>() else {
        return false;
    };
    let root = state.keys.root();
    let signed = admin_auth::Signed {
        method: method.as_str(),
        host,
        path,
        date,
        nonce,
        body,
    };
    // A valid signature is taken once: a replayed request is refused.
    ak == root.access_key
        && signed.verify(&root.secret_key, sig)
        && state.nonces.first_use(nonce, date)
}

/// An admin request's JSON body, or the 400 that says why it is not one.
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| {
        Box::new((StatusCode::BAD_REQUEST, format!("bad request body: {e}\n")).into_response())
    })
}

pub(crate) fn deny() -> Response {
    (
        StatusCode::FORBIDDEN,
        "admin requests must be signed with the root key\n",
    )
        .into_response()
}

fn root_from_env() -> anyhow::Result<(String, String)> {
    let ak = std::env::var("SAKER_ACCESS_KEY")
        .context("set SAKER_ACCESS_KEY to the server's root access key")?;
    let sk = std::env::var("SAKER_SECRET_KEY")
        .context("set SAKER_SECRET_KEY to the server's root secret key")?;
    Ok((ak, sk))
}

/// The CA certificate `--ca-cert` names, trusted by admin requests besides the system's.
static CA_CERT: std::sync::OnceLock<reqwest::Certificate> = std::sync::OnceLock::new();

/// Trusts the CA certificate in PEM file `path` for admin requests.
pub fn trust(path: &std::path::Path) -> anyhow::Result<()> {
    let pem = std::fs::read(path)
        .with_context(|| format!("cannot read the CA certificate {}", path.display()))?;
    let cert = reqwest::Certificate::from_pem(&pem)
        .with_context(|| format!("{} is not a PEM certificate", path.display()))?;
    let _ = CA_CERT.set(cert);
    Ok(())
}

/// Sends a signed admin request; the response, if it succeeded.
pub(crate) async fn request(
    endpoint: &str,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<reqwest::Response> {
    let (ak, sk) = root_from_env()?;
    let url = format!("{}{}", endpoint.trim_end_matches('/'), path);
    let parsed =
        reqwest::Url::parse(&url).with_context(|| format!("bad admin endpoint {endpoint}"))?;
    // The Host header as the client sends it: host, and the port unless it is the default.
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => bail!("no host in the admin endpoint {endpoint}"),
    };
    let date = admin_auth::now_secs();
    let nonce = admin_auth::nonce();
    let sig = admin_auth::Signed {
        method: method.as_str(),
        host: &host,
        path,
        date,
        nonce: &nonce,
        body: &body,
    }
    .sign(&sk);
    let mut client = reqwest::Client::builder();
    if let Some(ca) = CA_CERT.get() {
        client = client.add_root_certificate(ca.clone());
    }
    let resp = client
        .build()
        .context("cannot set up the HTTP client")?
        .request(method, parsed)
        .header(HEADER_KEY, ak)
        .header(HEADER_DATE, date.to_string())
        .header(HEADER_NONCE, nonce)
        .header(HEADER_SIGNATURE, sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the admin endpoint {endpoint}"))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        bail!("{}: {}", status, text.trim());
    }
    Ok(resp)
}

/// Sends a signed admin request; the response's text, if it succeeded.
pub(crate) async fn send(
    endpoint: &str,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<String> {
    let resp = request(endpoint, method, path, body).await?;
    Ok(resp.text().await.unwrap_or_default())
}

pub async fn run_client(endpoint: &str, cmd: AdminCommand) -> anyhow::Result<()> {
    let command = match cmd {
        AdminCommand::Key { command } => command,
        AdminCommand::Exception { command } => {
            return crate::admin_exceptions::run(endpoint, command).await
        }
        AdminCommand::Tier { command } => return crate::admin_tiers::run(endpoint, command).await,
        AdminCommand::Store { command } => return crate::store_migrate::run(command).await,
        AdminCommand::Status { json } => {
            let text = send(endpoint, Method::GET, "/admin/status", Vec::new()).await?;
            if json {
                println!("{}", text.trim());
            } else {
                let groups: Vec<status::GroupStatus> =
                    serde_json::from_str(&text).context("unexpected reply")?;
                print!("{}", status::render(&groups));
                crate::admin_nodes::print_placement(endpoint).await?;
                let path = "/admin/chunk-passes";
                let text = send(endpoint, Method::GET, path, Vec::new()).await?;
                let passes: crate::admin_chunks::Passes =
                    serde_json::from_str(&text).context("unexpected reply")?;
                print!("{}", passes.render());
            }
            return Ok(());
        }
        AdminCommand::ClusterCredential { command } => {
            let call = |method: Method, path: String, body: Vec<u8>| async move {
                send(endpoint, method, &path, body).await
            };
            return crate::cluster_credential::run(command, call).await;
        }
        AdminCommand::MasterKey { file } => {
            saker_client::sealed::WrappingKey::create(&file)
                .with_context(|| format!("cannot create {}", file.display()))?;
            println!("wrote a new master key to {}", file.display());
            return Ok(());
        }
        AdminCommand::Sse { command } => return crate::admin_sse::run(endpoint, command).await,
        AdminCommand::KmsKey { file, id } => {
            saker_client::sealed::Keyring::add(&file, &id)
                .with_context(|| format!("cannot add key {id} to {}", file.display()))?;
            println!("added the key {id} to {}", file.display());
            return Ok(());
        }
        AdminCommand::Repair { .. } | AdminCommand::Scrub => {
            let path = match cmd {
                AdminCommand::Repair { noted: false } => "/admin/repair",
                AdminCommand::Repair { noted: true } => "/admin/repair/noted",
                _ => "/admin/scrub",
            };
            let text = send(endpoint, Method::POST, path, Vec::new()).await?;
            println!("{}", text.trim());
            return Ok(());
        }
        AdminCommand::Backup { dir } => return crate::backup::run_client(endpoint, &dir).await,
        AdminCommand::Lifecycle { command } => {
            let text = match command {
                LifecycleCommand::Run { bucket } => {
                    let path = match bucket {
                        Some(b) => format!("/admin/lifecycle/{b}"),
                        None => "/admin/lifecycle".to_string(),
                    };
                    send(endpoint, Method::POST, &path, Vec::new()).await?
                }
                LifecycleCommand::Status => {
                    send(endpoint, Method::GET, "/admin/lifecycle", Vec::new()).await?
                }
            };
            println!("{}", text.trim());
            return Ok(());
        }
        AdminCommand::Node { command } => return crate::admin_nodes::run(endpoint, command).await,
        AdminCommand::Balance {
            command,
            epsilon,
            max_entries,
        } => return crate::admin_balance::command(endpoint, command, epsilon, max_entries).await,
    };
    crate::admin_keys::run(endpoint, command).await
}
