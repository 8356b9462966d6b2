//! Remote tiers on the admin API (`/admin/tiers`) and the `saker admin tier` commands (add,
//! list, remove), and archive jobs (`/admin/archive`) with the `saker archive` command that
//! starts one and follows its progress.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::{Args, Subcommand};
use parking_lot::Mutex;
use saker_gateway::archive::{Progress, Report};
use saker_gateway::Gateway;
use saker_tier::{TierConfig, TierError};
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, json_body, AdminState};

#[derive(Subcommand)]
pub enum TierCommand {
    /// Define a remote tier: an S3 bucket (and key prefix) objects can move to. NAME is the
    /// StorageClass lifecycle Transitions and HEAD use. A probe object is written and
    /// deleted first, so a wrong endpoint or key is refused at once.
    Add {
        name: String,
        #[arg(long)]
        endpoint: String,
        #[arg(long)]
        bucket: String,
        #[arg(long, default_value = "")]
        prefix: String,
        #[arg(long)]
        access_key: String,
        #[arg(long, env = "SAKER_TIER_SECRET_KEY", hide_env_values = true)]
        secret_key: String,
        #[arg(long, default_value = "us-east-1")]
        region: String,
    },
    /// List the tiers (secrets are not shown).
    List,
    /// Remove a tier's definition (refused while any version lives there).
    Remove { name: String },
}

/// A tier as `tier list` shows it.
#[derive(Serialize, Deserialize)]
struct TierInfo {
    name: String,
    endpoint: String,
    bucket: String,
    prefix: String,
    access_key: String,
    region: String,
}

fn tier_error(e: TierError) -> Response {
    let status = match &e {
        TierError::NoSuchTier(_) => StatusCode::NOT_FOUND,
        TierError::Exists(_) => StatusCode::CONFLICT,
        TierError::Invalid(_) | TierError::Remote { .. } | TierError::Corrupt { .. } => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, format!("{e}\n")).into_response()
}

fn gateway(st: &AdminState) -> Result<&Gateway, Box<Response>> {
    st.gateway.as_ref().ok_or_else(|| {
        Box::new(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "no S3 gateway in this process: ask a node that has one\n",
            )
                .into_response(),
        )
    })
}

pub async fn list(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/tiers", &headers, b"") {
        return deny();
    }
    let gw = match gateway(&st) {
        Ok(g) => g,
        Err(r) => return *r,
    };
    match saker_tier::config::list(gw.tiers().state()).await {
        Ok(tiers) => axum::Json(
            tiers
                .into_iter()
                .map(|t| TierInfo {
                    name: t.name,
                    endpoint: t.endpoint,
                    bucket: t.bucket,
                    prefix: t.prefix,
                    access_key: t.access_key,
                    region: t.region,
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => tier_error(e),
    }
}

pub async fn add(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&st, &Method::POST, "/admin/tiers", &headers, &body) {
        return deny();
    }
    let gw = match gateway(&st) {
        Ok(g) => g,
        Err(r) => return *r,
    };
    let tier: TierConfig = match json_body(&body) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    if let Err(e) = tier.validate() {
        return tier_error(e);
    }
    if let Err(e) = probe(gw, &tier).await {
        return tier_error(e);
    }
    match saker_tier::config::add(gw.tiers().state(), &tier).await {
        Ok(()) => {
            tracing::info!(tier = ?tier, "tier added");
            (StatusCode::CREATED, "created\n").into_response()
        }
        Err(e) => tier_error(e),
    }
}

/// Writes, reads back and deletes a small object in the tier: its endpoint, bucket and key
/// work before anything relies on them.
async fn probe(gw: &Gateway, tier: &TierConfig) -> Result<(), TierError> {
    let remote = saker_tier::Remote::new(tier);
    let cid = gw.tiers().cluster_id().await?;
    let key = format!(
        "{}probe-{}",
        tier.cluster_prefix(cid),
        rand::random::<u64>()
    );
    let body = Bytes::from_static(b"saker tier probe");
    remote
        .put(&key, body.clone(), crc32c::crc32c(&body))
        .await?;
    let size = remote.head(&key).await?;
    remote.delete(&key).await?;
    if size != Some(body.len() as u64) {
        return Err(TierError::Invalid(format!(
            "the probe object read back as {size:?} bytes"
        )));
    }
    Ok(())
}

pub async fn remove(
    State(st): State<AdminState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/admin/tiers/{name}");
    if !authorized(&st, &Method::DELETE, &path, &headers, b"") {
        return deny();
    }
    let gw = match gateway(&st) {
        Ok(g) => g,
        Err(r) => return *r,
    };
    match saker_tier::gc::referenced(&st.cluster, &name).await {
        Ok(keys) if !keys.is_empty() => {
            let msg = format!(
                "{} objects (or copies awaiting deletion) live in tier {name}; it stays\n",
                keys.len()
            );
            return (StatusCode::CONFLICT, msg).into_response();
        }
        Ok(_) => {}
        Err(e) => return tier_error(e),
    }
    match saker_tier::config::remove(gw.tiers().state(), &name).await {
        Ok(()) => {
            gw.tiers().forget(&name);
            (StatusCode::OK, "removed\n").into_response()
        }
        Err(e) => tier_error(e),
    }
}

/// An archive request: what to move where, or (`dry_run`) only what would move.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
struct ArchiveRequest {
    bucket: String,
    prefix: String,
    tier: String,
    #[serde(default)]
    dry_run: bool,
}

/// A job as `/admin/archive` shows it.
#[derive(Clone, Serialize, Deserialize)]
struct JobInfo {
    bucket: String,
    prefix: String,
    tier: String,
    /// `running`, `done` (everything moved and verified), `incomplete` (some object did not
    /// move or verify; a rerun tries them again) or `failed: …`.
    state: String,
    elapsed_ms: u64,
    report: Report,
}

struct Job {
    progress: Arc<Progress>,
    started: Instant,
    state: Arc<Mutex<Option<Result<bool, String>>>>,
}

/// This process's archive jobs, by what they archive (a finished one stays until the next
/// job of the same prefix).
static JOBS: LazyLock<Mutex<HashMap<JobKey, Job>>> = LazyLock::new(Mutex::default);

/// (bucket, prefix, tier).
type JobKey = (String, String, String);

fn job_info(key: &JobKey, j: &Job) -> JobInfo {
    let state = match &*j.state.lock() {
        None => "running".to_string(),
        Some(Ok(true)) => "done".to_string(),
        Some(Ok(false)) => "incomplete".to_string(),
        Some(Err(e)) => format!("failed: {e}"),
    };
    JobInfo {
        bucket: key.0.clone(),
        prefix: key.1.clone(),
        tier: key.2.clone(),
        state,
        elapsed_ms: j.started.elapsed().as_millis() as u64,
        report: j.progress.report(),
    }
}

/// Starts an archive job (or answers the one of the same prefix and tier that runs), or
/// answers what a dry run would move.
pub async fn start_archive(
    State(st): State<AdminState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&st, &Method::POST, "/admin/archive", &headers, &body) {
        return deny();
    }
    let gw = match gateway(&st) {
        Ok(g) => g.clone(),
        Err(r) => return *r,
    };
    let req: ArchiveRequest = match json_body(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    if let Err(e) = saker_tier::config::get(gw.tiers().state(), &req.tier).await {
        return tier_error(e);
    }
    if req.dry_run {
        return match gw.archive_candidates(&req.bucket, &req.prefix).await {
            Ok(c) => axum::Json(c).into_response(),
            Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
        };
    }
    let key = (req.bucket.clone(), req.prefix.clone(), req.tier.clone());
    let mut jobs = JOBS.lock();
    let running = jobs.get(&key).is_some_and(|j| j.state.lock().is_none());
    if !running {
        let progress = Arc::new(Progress::default());
        let state = Arc::new(Mutex::new(None));
        let (p, s) = (progress.clone(), state.clone());
        tokio::spawn(async move {
            let r = gw.archive(&req.bucket, &req.prefix, &req.tier, p).await;
            tracing::info!(bucket = %req.bucket, prefix = %req.prefix, tier = %req.tier, result = ?r, "archive job ended");
            *s.lock() = Some(r);
        });
        jobs.insert(
            key.clone(),
            Job {
                progress,
                started: Instant::now(),
                state,
            },
        );
    }
    let info = job_info(&key, &jobs[&key]);
    (StatusCode::ACCEPTED, axum::Json(info)).into_response()
}

/// This process's archive jobs.
pub async fn archive_jobs(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/archive", &headers, b"") {
        return deny();
    }
    let jobs = JOBS.lock();
    let list: Vec<JobInfo> = jobs.iter().map(|(k, j)| job_info(k, j)).collect();
    axum::Json(list).into_response()
}

pub async fn run(endpoint: &str, command: TierCommand) -> anyhow::Result<()> {
    match command {
        TierCommand::Add {
            name,
            endpoint: tier_endpoint,
            bucket,
            prefix,
            access_key,
            secret_key,
            region,
        } => {
            let tier = TierConfig {
                name: name.clone(),
                endpoint: tier_endpoint,
                bucket,
                prefix,
                access_key,
                secret_key,
                region,
            };
            tier.validate()?;
            let body = serde_json::to_vec(&tier)?;
            send(endpoint, Method::POST, "/admin/tiers", body).await?;
            println!("added tier {name}");
        }
        TierCommand::List => {
            let text = send(endpoint, Method::GET, "/admin/tiers", Vec::new()).await?;
            let tiers: Vec<TierInfo> = serde_json::from_str(&text).context("unexpected reply")?;
            for t in tiers {
                println!(
                    "{}\t{}\tbucket={}\tprefix={}\taccess_key={}\tregion={}",
                    t.name, t.endpoint, t.bucket, t.prefix, t.access_key, t.region
                );
            }
        }
        TierCommand::Remove { name } => {
            send(
                endpoint,
                Method::DELETE,
                &format!("/admin/tiers/{name}"),
                Vec::new(),
            )
            .await?;
            println!("removed tier {name}");
        }
    }
    Ok(())
}

/// `saker archive`.
#[derive(Args)]
pub struct ArchiveArgs {
    /// BUCKET/PREFIX (a plain S3 prefix; BUCKET alone archives the whole bucket).
    target: String,
    #[arg(long)]
    tier: String,
    /// List what would move, and move nothing.
    #[arg(long)]
    dry_run: bool,
    /// Admin endpoint of a node with a gateway.
    #[arg(long, default_value = "http://127.0.0.1:9901")]
    admin_endpoint: String,
}

/// Starts (or rejoins) the archive job and draws its progress until it ends; exits 0 only
/// when everything moved and verified. Ctrl-C leaves the job running on the server.
pub async fn archive(args: ArchiveArgs) -> anyhow::Result<bool> {
    let (bucket, prefix) = match args.target.split_once('/') {
        Some((b, p)) => (b.to_string(), p.to_string()),
        None => (args.target.clone(), String::new()),
    };
    anyhow::ensure!(!bucket.is_empty(), "no bucket in {:?}", args.target);
    let req = ArchiveRequest {
        bucket,
        prefix,
        tier: args.tier,
        dry_run: args.dry_run,
    };
    let ep = &args.admin_endpoint;
    let text = send(
        ep,
        Method::POST,
        "/admin/archive",
        serde_json::to_vec(&req)?,
    )
    .await?;
    if req.dry_run {
        let c: Vec<(String, u64)> = serde_json::from_str(&text).context("unexpected reply")?;
        let bytes: u64 = c.iter().map(|(_, n)| n).sum();
        for (key, size) in &c {
            println!("{size}\t{key}");
        }
        println!("would move {} objects, {}", c.len(), human(bytes as f64));
        return Ok(true);
    }
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => {
                eprintln!("\ndetached: the archive goes on on the server; run the same command to follow it");
                std::process::exit(130);
            }
            _ = tick.tick() => {}
        }
        let text = send(ep, Method::GET, "/admin/archive", Vec::new()).await?;
        let jobs: Vec<JobInfo> = serde_json::from_str(&text).context("unexpected reply")?;
        let job = jobs
            .into_iter()
            .find(|j| j.bucket == req.bucket && j.prefix == req.prefix && j.tier == req.tier)
            .context("the server lost the job (restarted?): run the command again")?;
        eprint!("\r{}", progress_line(&job));
        if job.state != "running" {
            eprintln!();
            println!("{}", serde_json::to_string(&job)?);
            return Ok(job.state == "done");
        }
    }
}

fn human(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

/// `[#####     ] 120/500 objects  1.2 GiB/4.0 GiB  35.2 MiB/s  ETA 1m20s`.
fn progress_line(j: &JobInfo) -> String {
    let r = &j.report;
    let frac = if r.total_bytes > 0 {
        r.done_bytes as f64 / r.total_bytes as f64
    } else if r.total_objects > 0 {
        r.done_objects as f64 / r.total_objects as f64
    } else {
        0.0
    };
    let width = 30;
    let filled = ((frac * width as f64) as usize).min(width);
    let secs = (j.elapsed_ms as f64 / 1000.0).max(0.001);
    let rate = r.moved_bytes as f64 / secs;
    let left = r.total_bytes.saturating_sub(r.done_bytes) as f64;
    let eta = if rate > 0.0 {
        format!("{:.0}s", left / rate)
    } else {
        "-".into()
    };
    let phase = if r.total_objects > 0 && r.done_objects == r.total_objects {
        format!(
            " verifying {}/{}",
            r.verified + r.mismatched,
            r.total_objects
        )
    } else {
        String::new()
    };
    format!(
        "[{}{}] {}/{} objects  {}/{}  {}/s  ETA {eta}  errors {}{phase}   ",
        "#".repeat(filled),
        " ".repeat(width - filled),
        r.done_objects,
        r.total_objects,
        human(r.done_bytes as f64),
        human(r.total_bytes as f64),
        human(rate),
        r.errors
    )
}
