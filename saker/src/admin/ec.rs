//! Erasure coding on the admin API: a bucket's storage classes by prefix
//! (`/admin/buckets/{bucket}/storage-class`, `saker admin bucket storage-class`), and coding
//! what they ask for now (`/admin/ec/run`, `saker admin ec run`, with a progress bar;
//! `--free-now` then frees the replaced replicas without their grace period).

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::Subcommand;
use parking_lot::Mutex;
use saker_gateway::bucket::lifecycle::Summary;
use saker_gateway::bucket::storage_class::{self, ClassRule};
use saker_gateway::Gateway;
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, json_body, no_coordinator, AdminState};

#[derive(Subcommand)]
pub enum BucketCommand {
    /// Which objects of a bucket are erasure-coded: set, show or clear a storage class by
    /// key prefix.
    StorageClass {
        #[command(subcommand)]
        command: StorageClassCommand,
    },
}

#[derive(Subcommand)]
pub enum StorageClassCommand {
    /// Keep the objects under PREFIX of BUCKET erasure-coded as K+M (4+2, 6+3, 8+3, ...):
    /// written as replicas, coded by the lifecycle passes (or `saker admin ec run` now).
    /// Refused when the cluster has fewer chunkstores than K+M.
    Set {
        bucket: String,
        #[arg(long, default_value = "")]
        prefix: String,
        /// The layout, K+M.
        #[arg(long)]
        ec: String,
    },
    /// The bucket's storage classes by prefix.
    Get { bucket: String },
    /// Drop the rule of PREFIX (all rules without --prefix); coded objects stay coded.
    Clear {
        bucket: String,
        #[arg(long)]
        prefix: Option<String>,
    },
}

#[derive(Subcommand)]
pub enum EcCommand {
    /// Code now what the storage classes of every bucket (or BUCKET) ask for and is not
    /// coded yet; returns when done, with a progress bar. `--free-now` then frees the
    /// replaced replicas at once (no GC grace), so capacity can be measured right after.
    Run {
        bucket: Option<String>,
        #[arg(long)]
        free_now: bool,
    },
}

#[derive(Serialize, Deserialize)]
struct SetRule {
    prefix: String,
    ec: String,
}

#[derive(Serialize, Deserialize)]
struct ClearRule {
    prefix: Option<String>,
}

fn gateway(st: &AdminState) -> Result<&Gateway, Box<Response>> {
    st.gateway
        .as_ref()
        .ok_or_else(|| Box::new(no_coordinator()))
}

fn s3_error(e: s3s::S3Error) -> Response {
    let status = e.status_code().unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = e.message().unwrap_or("").to_string();
    (status, format!("{}: {message}\n", e.code().as_str())).into_response()
}

fn rules_reply(r: s3s::S3Result<Vec<ClassRule>>) -> Response {
    match r {
        Ok(rules) => axum::Json(rules).into_response(),
        Err(e) => s3_error(e),
    }
}

/// `K+M` as (K, M).
fn parse_layout(text: &str) -> Result<(u8, u8), String> {
    let layout: saker_chunkstore::ec::Layout = text.parse().map_err(|e| format!("{e}"))?;
    Ok((layout.data() as u8, layout.parity() as u8))
}

pub(super) async fn get_classes(
    State(st): State<AdminState>,
    Path(bucket): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/admin/buckets/{bucket}/storage-class");
    if !authorized(&st, &Method::GET, &path, &headers, b"") {
        return deny();
    }
    match gateway(&st) {
        Ok(gw) => rules_reply(storage_class::get(gw, &bucket).await),
        Err(r) => *r,
    }
}

pub(super) async fn set_class(
    State(st): State<AdminState>,
    Path(bucket): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (gw, req) = match class_request::<SetRule>(&st, Method::PUT, &bucket, &headers, &body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let (k, m) = match parse_layout(&req.ec) {
        Ok(l) => l,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("--ec {}: {e}\n", req.ec)).into_response()
        }
    };
    rules_reply(storage_class::set(gw, &bucket, &req.prefix, k, m).await)
}

pub(super) async fn clear_class(
    State(st): State<AdminState>,
    Path(bucket): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match class_request::<ClearRule>(&st, Method::DELETE, &bucket, &headers, &body) {
        Ok((gw, req)) => {
            rules_reply(storage_class::clear(gw, &bucket, req.prefix.as_deref()).await)
        }
        Err(r) => *r,
    }
}

/// A signed change to `bucket`'s storage classes: the gateway and the request's body.
fn class_request<'a, T: serde::de::DeserializeOwned>(
    st: &'a AdminState,
    method: Method,
    bucket: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(&'a Gateway, T), Box<Response>> {
    let path = format!("/admin/buckets/{bucket}/storage-class");
    if !authorized(st, &method, &path, headers, body) {
        return Err(Box::new(deny()));
    }
    Ok((gateway(st)?, json_body(body)?))
}

#[derive(Serialize, Deserialize)]
struct RunRequest {
    bucket: Option<String>,
    free_now: bool,
}

/// An `ec run` as `/admin/ec/run` shows it.
#[derive(Clone, Default, Serialize, Deserialize)]
struct JobInfo {
    bucket: Option<String>,
    /// `counting`, `coding`, `freeing`, `done`, `incomplete` (some version was not coded; a
    /// rerun tries it again) or `failed: …`.
    state: String,
    elapsed_ms: u64,
    /// Current objects the pass looks at, and what it did so far (`transitioned`: versions
    /// coded; `objects`: current objects looked at).
    total_objects: u64,
    summary: Summary,
    /// Replaced replicas freed (`--free-now`).
    freed: Option<u64>,
}

struct Job {
    started: Instant,
    info: Arc<Mutex<JobInfo>>,
    live: Arc<Mutex<Summary>>,
}

/// Whether a job in `state` has not ended.
fn running(state: &str) -> bool {
    matches!(state, "counting" | "coding" | "freeing")
}

/// This process's last `ec run` (one at a time).
static JOB: LazyLock<Mutex<Option<Job>>> = LazyLock::new(Mutex::default);

fn job_info(j: &Job) -> JobInfo {
    let mut info = j.info.lock().clone();
    if info.state == "coding" {
        info.summary = j.live.lock().clone();
    }
    info.elapsed_ms = j.started.elapsed().as_millis() as u64;
    info
}

/// Starts an `ec run` (or answers the one that runs).
pub(super) async fn start_run(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&st, &Method::POST, "/admin/ec/run", &headers, &body) {
        return deny();
    }
    let gw = match gateway(&st) {
        Ok(g) => g.clone(),
        Err(r) => return *r,
    };
    let req: RunRequest = match json_body(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let mut job = JOB.lock();
    let running = job.as_ref().is_some_and(|j| {
        let state = &j.info.lock().state;
        running(state)
    });
    if !running {
        let info = Arc::new(Mutex::new(JobInfo {
            bucket: req.bucket.clone(),
            state: "counting".into(),
            ..JobInfo::default()
        }));
        let live = Arc::new(Mutex::new(Summary::default()));
        let (i, l, cluster) = (info.clone(), live.clone(), st.cluster.clone());
        tokio::spawn(async move {
            let end = run_job(&gw, &cluster, req, &i, l).await;
            tracing::info!(result = %end, "ec run ended");
            i.lock().state = end;
        });
        *job = Some(Job {
            started: Instant::now(),
            info,
            live,
        });
    }
    let info = job.as_ref().map(job_info).unwrap_or_default();
    (StatusCode::ACCEPTED, axum::Json(info)).into_response()
}

/// The job's steps; answers its end state.
async fn run_job(
    gw: &Gateway,
    cluster: &saker_client::Cluster,
    req: RunRequest,
    info: &Mutex<JobInfo>,
    live: Arc<Mutex<Summary>>,
) -> String {
    let bucket = req.bucket.as_deref();
    match gw.coding_objects(bucket).await {
        Ok(n) => {
            let mut i = info.lock();
            i.total_objects = n;
            i.state = "coding".into();
        }
        Err(e) => return format!("failed: {e}"),
    }
    let sum = match gw.ec_pass(bucket, live).await {
        Ok(s) => s,
        Err(e) => return format!("failed: {e}"),
    };
    let complete = sum.errors == 0;
    info.lock().summary = sum;
    // (Brings the coded capacity in /metrics up to date.)
    if let Err(e) = saker_client::coded_chunks(cluster).await {
        tracing::warn!(error = %e, "coded chunks not counted after an ec run");
    }
    if req.free_now {
        info.lock().state = "freeing".into();
        match saker_client::release_now(cluster).await {
            Ok(n) => info.lock().freed = Some(n),
            Err(e) => return format!("failed: freeing the replaced replicas: {e}"),
        }
    }
    match complete {
        true => "done".into(),
        false => "incomplete".into(),
    }
}

/// This process's last `ec run`.
pub(super) async fn run_status(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/ec/run", &headers, b"") {
        return deny();
    }
    match JOB.lock().as_ref() {
        Some(j) => axum::Json(job_info(j)).into_response(),
        None => (StatusCode::NOT_FOUND, "no ec run in this process\n").into_response(),
    }
}

pub async fn bucket_command(endpoint: &str, command: BucketCommand) -> anyhow::Result<()> {
    let BucketCommand::StorageClass { command } = command;
    let (method, bucket, body) = match command {
        StorageClassCommand::Set { bucket, prefix, ec } => {
            parse_layout(&ec).map_err(|e| anyhow::anyhow!("--ec {ec}: {e}"))?;
            let body = serde_json::to_vec(&SetRule { prefix, ec })?;
            (Method::PUT, bucket, body)
        }
        StorageClassCommand::Get { bucket } => (Method::GET, bucket, Vec::new()),
        StorageClassCommand::Clear { bucket, prefix } => {
            let body = serde_json::to_vec(&ClearRule { prefix })?;
            (Method::DELETE, bucket, body)
        }
    };
    let path = format!("/admin/buckets/{bucket}/storage-class");
    let text = send(endpoint, method, &path, body).await?;
    let rules: Vec<ClassRule> = serde_json::from_str(&text).context("unexpected reply")?;
    if rules.is_empty() {
        println!("{bucket}: no storage classes (every object STANDARD, as written)");
    }
    for r in rules {
        let prefix = if r.prefix.is_empty() {
            "(all)"
        } else {
            &r.prefix
        };
        println!("{bucket}\t{prefix}\t{}", r.class);
    }
    Ok(())
}

/// `saker admin ec run`: starts (or rejoins) the run and draws its progress until it ends;
/// fails unless everything due was coded.
pub async fn ec_command(endpoint: &str, command: EcCommand) -> anyhow::Result<()> {
    let EcCommand::Run { bucket, free_now } = command;
    let body = serde_json::to_vec(&RunRequest { bucket, free_now })?;
    send(endpoint, Method::POST, "/admin/ec/run", body).await?;
    let mut tick = tokio::time::interval(Duration::from_millis(300));
    loop {
        tick.tick().await;
        let text = send(endpoint, Method::GET, "/admin/ec/run", Vec::new()).await?;
        let job: JobInfo = serde_json::from_str(&text).context("unexpected reply")?;
        eprint!("\r{}", progress_line(&job));
        if !running(&job.state) {
            eprintln!();
            println!("{}", serde_json::to_string(&job)?);
            anyhow::ensure!(job.state == "done", "ec run ended {}", job.state);
            return Ok(());
        }
    }
}

/// `[#####     ] 120/500 objects  37 coded  4 skipped  0 errors  (coding)`.
fn progress_line(j: &JobInfo) -> String {
    let s = &j.summary;
    let frac = match j.total_objects {
        // Nothing to look at: empty until the coding is over.
        0 if matches!(j.state.as_str(), "counting" | "coding") => 0.0,
        0 => 1.0,
        n => s.objects.min(n) as f64 / n as f64,
    };
    let width = 30;
    let filled = ((frac * width as f64) as usize).min(width);
    format!(
        "[{}{}] {}/{} objects  {} coded  {} skipped  {} errors  ({})   ",
        "#".repeat(filled),
        " ".repeat(width - filled),
        s.objects,
        j.total_objects,
        s.transitioned,
        s.skipped,
        s.errors,
        j.state
    )
}
