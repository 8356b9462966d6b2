//! `saker bench notify`: what bucket notifications cost and how late they arrive (issue 64).
//!
//! It listens as a webhook target itself (`--listen`; define the target on the server first,
//! `saker admin notify target add NAME --webhook http://LISTEN/`), makes two buckets, one
//! plain and one whose `s3:ObjectCreated:*` events go to `--arn`, and runs 4 KiB PUT load on
//! them in alternating rounds of `--duration` each (odd rounds notified first; each round's
//! objects deleted after it). Then it waits (up to `--drain`) for every
//! acknowledged PUT's event and reports, side by side: PUT ops/s on both buckets and their
//! ratio, and per event the time from the PUT's acknowledgement to its arrival here (p50,
//! p99, max), with events missing and duplicated counted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use clap::Args;
use serde::{Deserialize, Serialize};

use super::s3::{EndpointArgs, Op, Pool, Target};
use crate::units::{parse_duration, parse_size};

#[derive(Args, Debug)]
pub struct NotifyBenchArgs {
    #[command(flatten)]
    conn: EndpointArgs,
    /// Receive the events here (HOST:PORT): the webhook target's address.
    #[arg(long, default_value = "127.0.0.1:19600")]
    listen: String,
    /// The target's ARN (`arn:saker:sqs::NAME:webhook`), printed by `notify target add`.
    #[arg(long)]
    arn: String,
    /// Buckets BUCKET-plain and BUCKET-notify (created if missing).
    #[arg(long, default_value = "saker-bench")]
    bucket: String,
    /// Object size.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    size: u64,
    /// Concurrent PUTs.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Length of each round on each bucket.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Rounds, each a plain then a notified one (alternating, so drift hits both alike).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// How long to wait after the last round for events still on their way.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    drain: Duration,
    /// The server's process id: its CPU time per PUT is reported for each bucket too (a
    /// measure other load on the machine does not move as it moves ops/s).
    #[arg(long)]
    server_pid: Option<u32>,
    /// A name for this run in the JSON.
    #[arg(long)]
    label: Option<String>,
    /// Write results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What the webhook received: the first arrival of each key's event, and repeats.
#[derive(Default)]
struct Inbox {
    first: Mutex<HashMap<String, Instant>>,
    records: AtomicU64,
    duplicates: AtomicU64,
}

#[derive(Serialize)]
struct Round {
    plain_ops_per_sec: f64,
    notified_ops_per_sec: f64,
    plain_errors: u64,
    notified_errors: u64,
    /// The server's CPU time per acknowledged PUT (with --server-pid).
    plain_cpu_us_per_put: Option<f64>,
    notified_cpu_us_per_put: Option<f64>,
}

#[derive(Serialize)]
struct Report<'a> {
    label: Option<&'a str>,
    endpoint: &'a str,
    size: u64,
    concurrency: usize,
    round_secs: f64,
    rounds: Vec<Round>,
    /// Medians over the rounds.
    plain_ops_per_sec: f64,
    notified_ops_per_sec: f64,
    /// notified / plain, of the medians.
    throughput_ratio: f64,
    /// Medians over the rounds of the server's CPU time per PUT, and notified / plain.
    plain_cpu_us_per_put: Option<f64>,
    notified_cpu_us_per_put: Option<f64>,
    cpu_ratio: Option<f64>,
    /// PUTs acknowledged on the notified bucket, and of them the events never received.
    acknowledged: u64,
    missing: u64,
    /// Records received more than once (at-least-once delivery), and all records.
    duplicates: u64,
    records: u64,
    /// From a PUT's acknowledgement to its event's arrival.
    notify_p50_ms: f64,
    notify_p99_ms: f64,
    notify_max_ms: f64,
}

pub async fn run(args: NotifyBenchArgs) -> anyhow::Result<()> {
    let base = args.conn.target(&format!("{}-plain", args.bucket))?;
    let notified = Arc::new(base.for_bucket(&format!("{}-notify", args.bucket)));
    let plain = Arc::new(base);
    plain
        .create_bucket()
        .await
        .context("cannot create the plain bucket")?;
    notified
        .create_bucket()
        .await
        .context("cannot create the notified bucket")?;
    let config = format!(
        "<NotificationConfiguration><QueueConfiguration><Id>bench</Id><Queue>{}</Queue>\
         <Event>s3:ObjectCreated:*</Event></QueueConfiguration></NotificationConfiguration>",
        args.arn
    );
    let (status, body) = notified
        .call("PUT", "notification=", &[], Bytes::from(config))
        .await?;
    if status != 200 {
        bail!(
            "PutBucketNotificationConfiguration: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }

    let inbox = Arc::new(Inbox::default());
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let app = axum::Router::new()
        .fallback(receive)
        .with_state(inbox.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    // One event through before the clock starts: the target is wired and the feed warm.
    let payload = super::s3::payload(args.size);
    let probe = "probe/0";
    let acked = put(&notified, probe, &payload).await?;
    wait_for(
        &inbox,
        &[(probe.to_string(), acked)],
        Duration::from_secs(60),
    )
    .await
    .context("the probe PUT's event never arrived: is the target's URL this --listen?")?;

    let mut rounds = Vec::new();
    let mut acks: Vec<(String, Instant)> = Vec::new();
    println!(
        "{:>5} {:>12} {:>12} {:>7} {:>10} {:>10}",
        "round", "plain ops/s", "notify ops/s", "errors", "plain µs", "notify µs"
    );
    for r in 0..args.rounds {
        // Odd rounds go notified first: what the server's state does over a run (more
        // records, compactions) falls on both alike.
        let tag = format!("r{r}");
        let (n, p) = if r % 2 == 1 {
            let n = measure(&notified, Some(&inbox), &args, &payload, &tag).await;
            (n, measure(&plain, None, &args, &payload, &tag).await)
        } else {
            let p = measure(&plain, None, &args, &payload, &tag).await;
            (
                measure(&notified, Some(&inbox), &args, &payload, &tag).await,
                p,
            )
        };
        let ((p_ops, p_err, _, p_cpu), (n_ops, n_err, n_keys, n_cpu)) = (p, n);
        println!(
            "{r:>5} {p_ops:>12.0} {n_ops:>12.0} {:>7} {:>10} {:>10}",
            p_err + n_err,
            p_cpu.map_or("-".into(), |c| format!("{c:.0}")),
            n_cpu.map_or("-".into(), |c| format!("{c:.0}"))
        );
        acks.extend(n_keys);
        rounds.push(Round {
            plain_ops_per_sec: p_ops,
            notified_ops_per_sec: n_ops,
            plain_errors: p_err,
            notified_errors: n_err,
            plain_cpu_us_per_put: p_cpu,
            notified_cpu_us_per_put: n_cpu,
        });
    }
    let _ = wait_for(&inbox, &acks, args.drain).await;
    server.abort();

    let first = inbox.first.lock().expect("inbox lock").clone();
    let mut late_us: Vec<u32> = Vec::with_capacity(acks.len());
    let mut missing = 0u64;
    for (key, at) in &acks {
        match first.get(key) {
            // An event may beat the PUT's answer to the client: that is no delay.
            Some(arrived) => late_us.push(
                arrived
                    .saturating_duration_since(*at)
                    .as_micros()
                    .min(u32::MAX as u128) as u32,
            ),
            None => missing += 1,
        }
    }
    late_us.sort_unstable();
    let median = |f: fn(&Round) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let plain_ops = median(|r| r.plain_ops_per_sec);
    let cpu = args.server_pid.map(|_| {
        (
            median(|r| r.plain_cpu_us_per_put.unwrap_or(0.0)),
            median(|r| r.notified_cpu_us_per_put.unwrap_or(0.0)),
        )
    });
    let notified_ops = median(|r| r.notified_ops_per_sec);
    let report = Report {
        label: args.label.as_deref(),
        endpoint: &args.conn.endpoint,
        size: args.size,
        concurrency: args.concurrency,
        round_secs: args.duration.as_secs_f64(),
        plain_ops_per_sec: plain_ops,
        notified_ops_per_sec: notified_ops,
        throughput_ratio: if plain_ops > 0.0 {
            notified_ops / plain_ops
        } else {
            0.0
        },
        plain_cpu_us_per_put: cpu.map(|c| c.0),
        notified_cpu_us_per_put: cpu.map(|c| c.1),
        cpu_ratio: cpu.filter(|c| c.0 > 0.0).map(|c| c.1 / c.0),
        rounds,
        acknowledged: acks.len() as u64,
        missing,
        duplicates: inbox.duplicates.load(Ordering::Relaxed),
        records: inbox.records.load(Ordering::Relaxed),
        notify_p50_ms: super::percentile_ms(&late_us, 0.50),
        notify_p99_ms: super::percentile_ms(&late_us, 0.99),
        notify_max_ms: super::percentile_ms(&late_us, 1.0),
    };
    println!(
        "PUT ops/s plain {:.0}, notified {:.0} ({:.3}x); events: {} acknowledged, {} missing, \
         {} duplicates; acknowledgement to event p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        report.plain_ops_per_sec,
        report.notified_ops_per_sec,
        report.throughput_ratio,
        report.acknowledged,
        report.missing,
        report.duplicates,
        report.notify_p50_ms,
        report.notify_p99_ms,
        report.notify_max_ms
    );
    cleanup(
        &notified,
        acks.into_iter().map(|(k, _)| k),
        args.concurrency,
    )
    .await;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// What one bucket's round gave: ops/s, errors, the keys acknowledged (and when) and the
/// server's CPU time per PUT.
type Measured = (f64, u64, Vec<(String, Instant)>, Option<f64>);

/// One round of PUTs on `target`, started on a quiet server; with `inbox` (the notified
/// bucket), up to when every acknowledged PUT's event arrived. The server's CPU time per PUT
/// runs until it is quiet again, so it includes delivering the events and the flushes and
/// compactions of what the round wrote. The objects are deleted after (not timed).
async fn measure(
    target: &Arc<Target>,
    inbox: Option<&Inbox>,
    args: &NotifyBenchArgs,
    payload: &Bytes,
    round: &str,
) -> Measured {
    // Each phase starts on a quiet server (the last one's compactions and feed records
    // done) and is charged what it leaves behind, up to the server's quiet again.
    settle(args.server_pid).await;
    let cpu0 = args.server_pid.and_then(crate::process_cpu_us);
    let (ops, errors, keys) = load(target, args, payload, round).await;
    if let Some(inbox) = inbox {
        let _ = wait_for(inbox, &keys, args.drain).await;
    }
    settle(args.server_pid).await;
    let cpu1 = args.server_pid.and_then(crate::process_cpu_us);
    let cpu = cpu0
        .zip(cpu1)
        .map(|(a, b)| b.saturating_sub(a) as f64 / keys.len().max(1) as f64);
    cleanup(
        target,
        keys.iter().map(|(k, _)| k.clone()),
        args.concurrency,
    )
    .await;
    (ops, errors, keys, cpu)
}

/// Waits (at most a minute) until server `pid` uses under a tenth of a core over half a
/// second: what an earlier phase set going (flushes, compactions, a feed's records) is done.
async fn settle(pid: Option<u32>) {
    const WINDOW: Duration = Duration::from_millis(500);
    let Some(pid) = pid else {
        return;
    };
    let until = Instant::now() + Duration::from_secs(60);
    let mut last = crate::process_cpu_us(pid);
    while Instant::now() < until {
        tokio::time::sleep(WINDOW).await;
        let now = crate::process_cpu_us(pid);
        let used = now.zip(last).map(|(n, l)| n.saturating_sub(l));
        if used.is_none_or(|us| us < WINDOW.as_micros() as u64 / 10) {
            return;
        }
        last = now;
    }
}

/// One PUT; the instant its success was seen.
async fn put(target: &Target, key: &str, payload: &Bytes) -> anyhow::Result<Instant> {
    let (status, _, _) = target.send(Op::Put, key, payload.clone(), payload).await?;
    if !(200..300).contains(&status) {
        bail!("PUT {key}: HTTP {status}");
    }
    Ok(Instant::now())
}

/// PUTs from `--concurrency` workers for `--duration`: ops/s, errors and each acknowledged
/// key with the instant of its acknowledgement. Keys use only characters S3 events leave
/// unencoded, so the webhook's keys compare as they are.
async fn load(
    target: &Arc<Target>,
    args: &NotifyBenchArgs,
    payload: &Bytes,
    round: &str,
) -> (f64, u64, Vec<(String, Instant)>) {
    let start = Instant::now();
    let deadline = start + args.duration;
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for w in 0..args.concurrency {
        let (target, payload, errors) = (target.clone(), payload.clone(), errors.clone());
        let round = round.to_string();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let key = format!("{round}/{w}-{n}");
                n += 1;
                match put(&target, &key, &payload).await {
                    Ok(at) => acked.push((key, at)),
                    Err(e) => {
                        if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                            tracing::warn!(error = %e, "PUT failed");
                        }
                    }
                }
            }
            acked
        }));
    }
    let mut keys = Vec::new();
    for t in tasks {
        if let Ok(acked) = t.await {
            keys.extend(acked);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    (
        keys.len() as f64 / secs,
        errors.load(Ordering::Relaxed),
        keys,
    )
}

/// Waits until every key in `keys` has its event, or `limit` passes.
async fn wait_for(
    inbox: &Inbox,
    keys: &[(String, Instant)],
    limit: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        let missing = {
            let first = inbox.first.lock().expect("inbox lock");
            keys.iter().filter(|(k, _)| !first.contains_key(k)).count()
        };
        if missing == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{missing} events did not arrive within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await; // polling a counter
    }
}

/// Of a webhook body, what the receiver reads: each record's object key (serde skips the
/// rest without building it, so the receiver takes little of the cores the server shares).
#[derive(Deserialize)]
struct Received {
    #[serde(rename = "Records")]
    records: Vec<ReceivedRecord>,
}

#[derive(Deserialize)]
struct ReceivedRecord {
    s3: ReceivedS3,
}

#[derive(Deserialize)]
struct ReceivedS3 {
    object: ReceivedObject,
}

#[derive(Deserialize)]
struct ReceivedObject {
    key: String,
}

/// The webhook: notes each record's key (bucket-qualified keys are unique per run).
async fn receive(State(inbox): State<Arc<Inbox>>, body: Bytes) -> StatusCode {
    let now = Instant::now();
    let Ok(doc) = serde_json::from_slice::<Received>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut first = inbox.first.lock().expect("inbox lock");
    for r in doc.records {
        inbox.records.fetch_add(1, Ordering::Relaxed);
        match first.entry(r.s3.object.key) {
            std::collections::hash_map::Entry::Occupied(_) => {
                inbox.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(now);
            }
        }
    }
    StatusCode::OK
}

/// Deletes what a round wrote.
async fn cleanup(target: &Arc<Target>, keys: impl Iterator<Item = String>, concurrency: usize) {
    let pool = Arc::new(Pool::default());
    for k in keys {
        pool.push(k);
    }
    super::s3::cleanup(target.clone(), pool, concurrency).await;
}
