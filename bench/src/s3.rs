//! `saker bench s3`: PUT, GET and mixed (45% GET, 30% HEAD, 15% PUT, 10% DELETE) load at
//! several object sizes and concurrencies, and `empty` (list and DeleteObjects what was
//! written, [`super::empty`]); ops/s, MiB/s and p50/p99 latency per phase.

use std::path::PathBuf;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_rustls::rustls;

pub(super) use self::parking_lot_free::Pool;
use anyhow::{bail, Context};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::multipart::Transfer;
use super::sigv4::{uri_encode, Signer};
use crate::units::{parse_duration, parse_size};

/// Where an S3 benchmark sends its requests, and as whom.
#[derive(Args, Debug)]
pub struct EndpointArgs {
    /// S3 endpoint, HOST:PORT, http://HOST:PORT or https://HOST:PORT.
    #[arg(long)]
    pub endpoint: String,
    /// The CA certificate (PEM) that signed an https endpoint's certificate (the only one
    /// trusted).
    #[arg(long, env = "SAKER_CA_CERT")]
    ca_cert: Option<PathBuf>,
    #[arg(long, env = "AWS_ACCESS_KEY_ID")]
    access_key: String,
    #[arg(long, env = "AWS_SECRET_ACCESS_KEY", hide_env_values = true)]
    secret_key: String,
    #[arg(long, default_value = "us-east-1")]
    region: String,
}

impl EndpointArgs {
    /// A client of the endpoint for `bucket`.
    pub(super) fn target(&self, bucket: &str) -> anyhow::Result<Target> {
        Target::connect(
            &self.endpoint,
            self.ca_cert.as_deref(),
            Signer {
                access_key: self.access_key.clone(),
                secret_key: self.secret_key.clone(),
                region: self.region.clone(),
            },
            bucket,
        )
    }
}

#[derive(Args, Debug)]
pub struct S3BenchArgs {
    #[command(flatten)]
    conn: EndpointArgs,
    /// Object sizes.
    #[arg(long, default_value = "4KiB,64KiB,1MiB", value_delimiter = ',', value_parser = parse_size)]
    sizes: Vec<u64>,
    /// Concurrent requests.
    #[arg(long, default_value = "16,64", value_delimiter = ',')]
    concurrency: Vec<usize>,
    /// Length of each phase.
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    duration: Duration,
    /// Phases to run, in order.
    #[arg(long, default_value = "put,get,mixed", value_delimiter = ',')]
    phases: Vec<String>,
    /// Bucket to use (created if missing).
    #[arg(long, default_value = "saker-bench")]
    bucket: String,
    /// A name for this run in the JSON (e.g. the system under test).
    #[arg(long)]
    label: Option<String>,
    /// Write results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Leave the objects written in the bucket (no cleanup): to fill a bucket.
    #[arg(long)]
    keep: bool,
    /// With --keep and a PUT phase, the keys written are added to this file; a later run
    /// without a PUT phase reads the keys of its size from it (objects written by an earlier
    /// run, e.g. moved to a tier since).
    #[arg(long)]
    keys: Option<PathBuf>,
    /// Objects larger than this are PUT as multipart uploads of parts this size and read as
    /// ranged GETs of pieces this size (as `aws s3 cp` moves large files); unset: one request.
    #[arg(long, value_parser = parse_size)]
    part_size: Option<u64>,
    /// With --part-size, the parts or pieces of one object in flight at once.
    #[arg(long, default_value_t = 16)]
    part_streams: usize,
}

/// The bytes every object of `size` holds: seeded by the size, so that whoever reads an
/// object (a later run, `bench sink`) knows them.
pub(super) fn payload(size: u64) -> Bytes {
    let mut payload = vec![0u8; size as usize];
    rand::rngs::StdRng::seed_from_u64(size).fill(&mut payload[..]);
    Bytes::from(payload)
}

#[derive(Serialize, Debug, Clone)]
pub struct PhaseResult {
    pub phase: String,
    pub size: u64,
    pub concurrency: usize,
    pub seconds: f64,
    pub ops: u64,
    /// Failed requests (never counted in `ops`): error statuses, 404s included, transport
    /// errors and `bad_bodies`.
    pub errors: u64,
    /// GETs whose body (HEADs whose length) was not what the run wrote.
    pub bad_bodies: u64,
    pub ops_per_sec: f64,
    pub mib_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Serialize)]
struct Report<'a> {
    label: Option<&'a str>,
    endpoint: &'a str,
    duration_secs: f64,
    /// Part size and streams of objects moved in parts (--part-size).
    part_size: Option<u64>,
    part_streams: Option<usize>,
    results: &'a [PhaseResult],
}

type HttpClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

pub(super) struct Target {
    client: HttpClient,
    scheme: &'static str,
    host: String,
    signer: Signer,
    bucket: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Op {
    Put,
    Get,
    Head,
    Delete,
}

impl Target {
    /// Sends one request; returns the status, the number of body bytes received and whether
    /// a successful GET's body (or HEAD's length) is `written`, the bytes every PUT sends.
    pub(super) async fn send(
        &self,
        op: Op,
        key: &str,
        body: Bytes,
        written: &Bytes,
    ) -> anyhow::Result<(u16, u64, bool)> {
        let method = match op {
            Op::Put => "PUT",
            Op::Get => "GET",
            Op::Head => "HEAD",
            Op::Delete => "DELETE",
        };
        let path = self.object_path(key);
        let headers = self.signer.sign(
            method,
            &self.host,
            &path,
            "",
            time::OffsetDateTime::now_utc(),
        );
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}://{}{}", self.scheme, self.host, path));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let req = req
            .header("content-length", body.len())
            .body(Full::new(body))?;
        let resp = self.client.request(req).await?;
        let status = resp.status().as_u16();
        let ok = (200..300).contains(&status);
        let mut same = match op {
            Op::Head if ok => {
                let length = resp.headers().get(http::header::CONTENT_LENGTH);
                length.and_then(|v| v.to_str().ok()) == Some(&written.len().to_string())
            }
            _ => true,
        };
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                if op == Op::Get && ok {
                    let at = n as usize;
                    same &= written.get(at..at + data.len()) == Some(&data[..]);
                }
                n += data.len() as u64;
            }
        }
        if op == Op::Get && ok {
            same &= n == written.len() as u64;
        }
        Ok((status, n, same))
    }

    /// The URI-encoded path of object `key`.
    fn object_path(&self, key: &str) -> String {
        format!(
            "/{}/{}",
            uri_encode(&self.bucket, false),
            uri_encode(key, true)
        )
    }

    /// Sends one signed request for object `key` (`query`: canonical, sorted and encoded)
    /// with `extra` headers; answers the status, the ETag header and the body.
    pub(super) async fn object_request(
        &self,
        method: &str,
        key: &str,
        query: &str,
        extra: &[(&str, String)],
        body: Bytes,
    ) -> anyhow::Result<(u16, Option<String>, Bytes)> {
        let path = self.object_path(key);
        let (status, headers, body) = self.request(method, &path, query, extra, body).await?;
        let etag = headers
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Ok((status, etag, body))
    }

    /// One signed request for `path` (URI-encoded), its answer's body collected.
    async fn request(
        &self,
        method: &str,
        path: &str,
        query: &str,
        extra: &[(&str, String)],
        body: Bytes,
    ) -> anyhow::Result<(u16, http::HeaderMap, Bytes)> {
        let now = time::OffsetDateTime::now_utc();
        let headers = self.signer.sign(method, &self.host, path, query, now);
        let sep = if query.is_empty() { "" } else { "?" };
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}://{}{path}{sep}{query}", self.scheme, self.host));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        for (k, v) in extra {
            req = req.header(*k, v);
        }
        let req = req
            .header("content-length", body.len())
            .body(Full::new(body))?;
        let (parts, body) = self.client.request(req).await?.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok((parts.status.as_u16(), parts.headers, body))
    }

    /// Sends one signed request for the bucket (`query`: canonical, sorted and encoded) with
    /// `extra` headers; answers the status and the body.
    pub(super) async fn call(
        &self,
        method: &str,
        query: &str,
        extra: &[(&str, String)],
        body: Bytes,
    ) -> anyhow::Result<(u16, Bytes)> {
        let path = format!("/{}", uri_encode(&self.bucket, false));
        let (status, _, body) = self.request(method, &path, query, extra, body).await?;
        Ok((status, body))
    }

    pub(super) async fn create_bucket(&self) -> anyhow::Result<()> {
        let path = format!("/{}", uri_encode(&self.bucket, false));
        let headers = self.signer.sign(
            "PUT",
            &self.host,
            &path,
            "",
            time::OffsetDateTime::now_utc(),
        );
        let mut req = http::Request::builder()
            .method("PUT")
            .uri(format!("{}://{}{}", self.scheme, self.host, path));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = self
            .client
            .request(req.body(Full::new(Bytes::new()))?)
            .await?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await?.to_bytes();
        if status != 200 && status != 409 {
            bail!(
                "create bucket: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }
}

mod parking_lot_free {
    //! A tiny key pool shared by the workers of one phase.
    use std::sync::Mutex;

    #[derive(Default)]
    pub struct Pool(Mutex<Vec<String>>);

    impl Pool {
        pub fn push(&self, k: String) {
            self.0.lock().expect("pool lock").push(k);
        }
        pub fn pick(&self, r: usize) -> Option<String> {
            let v = self.0.lock().expect("pool lock");
            (!v.is_empty()).then(|| v[r % v.len()].clone())
        }
        pub fn take(&self, r: usize) -> Option<String> {
            let mut v = self.0.lock().expect("pool lock");
            (!v.is_empty()).then(|| {
                let i = r % v.len();
                v.swap_remove(i)
            })
        }
        pub fn drain(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().expect("pool lock"))
        }
        pub fn len(&self) -> usize {
            self.0.lock().expect("pool lock").len()
        }
    }
}

/// What a phase's workers counted: each request's latency, ops, errors and bytes.
#[derive(Default)]
pub(super) struct Recorder {
    pub lat_us: Vec<u32>,
    pub ops: u64,
    pub errors: u64,
    /// Of the errors: GET bodies (or HEAD lengths) other than what was written.
    pub bad_bodies: u64,
    pub bytes: u64,
}

impl PhaseResult {
    /// A phase's result from what was recorded over `seconds`.
    pub(super) fn of(
        phase: &str,
        size: u64,
        concurrency: usize,
        seconds: f64,
        mut rec: Recorder,
    ) -> Self {
        rec.lat_us.sort_unstable();
        PhaseResult {
            phase: phase.to_string(),
            size,
            concurrency,
            seconds,
            ops: rec.ops,
            errors: rec.errors,
            bad_bodies: rec.bad_bodies,
            ops_per_sec: rec.ops as f64 / seconds,
            mib_per_sec: rec.bytes as f64 / seconds / (1024.0 * 1024.0),
            p50_ms: super::percentile_ms(&rec.lat_us, 0.50),
            p99_ms: super::percentile_ms(&rec.lat_us, 0.99),
        }
    }
}

/// One cell of the run: objects of `size` from `concurrency` workers for `duration`.
struct Cell {
    size: u64,
    concurrency: usize,
    duration: Duration,
    /// How objects past its part size move (in parts).
    transfer: Option<Transfer>,
}

async fn run_phase(
    target: Arc<Target>,
    phase: &str,
    cell: &Cell,
    pool: Arc<Pool>,
    payload: Bytes,
) -> PhaseResult {
    let (size, concurrency, duration) = (cell.size, cell.concurrency, cell.duration);
    let transfer = cell.transfer.filter(|t| size > t.part_size);
    let counter = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let (target, pool, payload, counter) = (
            target.clone(),
            pool.clone(),
            payload.clone(),
            counter.clone(),
        );
        let phase = phase.to_string();
        tasks.push(tokio::spawn(async move {
            let mut rec = Recorder::default();
            let mut rng = rand::rngs::StdRng::from_entropy();
            // The mixed phase deletes only what it wrote itself: readers pick from the pool
            // the PUT phase filled, so every 404 is an error, never a race with a delete.
            let mut mine = Vec::new();
            while Instant::now() < deadline {
                let r: usize = rng.gen();
                let roll = rng.gen_range(0..100);
                let (op, key) = match phase.as_str() {
                    "put" => (Op::Put, None),
                    "get" => (Op::Get, pool.pick(r)),
                    _ if roll < 45 => (Op::Get, pool.pick(r)),
                    _ if roll < 75 => (Op::Head, pool.pick(r)),
                    _ if roll < 90 || mine.is_empty() => (Op::Put, None),
                    _ => (Op::Delete, Some(mine.swap_remove(r % mine.len()))),
                };
                let key = match (op, key) {
                    // Named by phase too: the mixed phase's PUTs never overwrite (and its
                    // DELETEs never remove) what the readers pick.
                    (Op::Put, _) => {
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        format!("{size}/{phase}/{w}-{n}")
                    }
                    (_, Some(k)) => k,
                    (_, None) => break, // nothing to read
                };
                let body = if op == Op::Put {
                    payload.clone()
                } else {
                    Bytes::new()
                };
                let t0 = Instant::now();
                let res = match (op, transfer) {
                    (Op::Put, Some(t)) => super::multipart::put(&target, &key, &payload, t).await,
                    (Op::Get, Some(t)) => super::multipart::get(&target, &key, &payload, t).await,
                    _ => target.send(op, &key, body, &payload).await,
                };
                let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
                match res {
                    Ok((status, n, true)) if (200..300).contains(&status) => {
                        rec.ops += 1;
                        rec.lat_us.push(us);
                        rec.bytes += if op == Op::Put { size } else { n };
                        match op {
                            Op::Put if phase == "mixed" => mine.push(key),
                            Op::Put => pool.push(key),
                            _ => {}
                        }
                    }
                    Ok((status, n, same)) => {
                        rec.errors += 1;
                        if !same {
                            rec.bad_bodies += 1;
                        }
                        if rec.errors <= 3 {
                            tracing::warn!(status, ?op, key, n, same, "request failed");
                        }
                    }
                    Err(e) => {
                        rec.errors += 1;
                        if rec.errors <= 3 {
                            tracing::warn!(error = %e, ?op, "request failed");
                        }
                    }
                }
            }
            // What the mixed phase wrote and kept is cleaned up with the rest.
            for k in mine {
                pool.push(k);
            }
            rec
        }));
    }
    let mut all = Recorder::default();
    for t in tasks {
        if let Ok(rec) = t.await {
            all.lat_us.extend(rec.lat_us);
            all.ops += rec.ops;
            all.errors += rec.errors;
            all.bad_bodies += rec.bad_bodies;
            all.bytes += rec.bytes;
        }
    }
    PhaseResult::of(phase, size, concurrency, start.elapsed().as_secs_f64(), all)
}

pub(super) async fn cleanup(target: Arc<Target>, pool: Arc<Pool>, concurrency: usize) {
    let keys = Arc::new(Pool::default());
    for k in pool.drain() {
        keys.push(k);
    }
    let mut tasks = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (target, keys) = (target.clone(), keys.clone());
        tasks.push(tokio::spawn(async move {
            while let Some(k) = keys.take(0) {
                let _ = target
                    .send(Op::Delete, &k, Bytes::new(), &Bytes::new())
                    .await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// The TLS client setup for an https endpoint: it trusts `ca` only (none: nothing, and
/// only http endpoints work).
fn tls_config(ca: Option<&std::path::Path>) -> anyhow::Result<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(path) = ca {
        for cert in CertificateDer::pem_file_iter(path)
            .with_context(|| format!("cannot read the CA certificate {}", path.display()))?
        {
            let cert = cert.with_context(|| format!("bad PEM in {}", path.display()))?;
            roots
                .add(cert)
                .context("the CA certificate is not usable")?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl Target {
    /// A client of `endpoint` (HOST:PORT, http:// or https://, whose certificate `ca`
    /// signed) for `bucket`, signing with the given key.
    pub(super) fn connect(
        endpoint: &str,
        ca: Option<&std::path::Path>,
        signer: Signer,
        bucket: &str,
    ) -> anyhow::Result<Self> {
        let https = endpoint.starts_with("https://");
        if https && ca.is_none() {
            bail!("an https endpoint needs --ca-cert, the CA that signed its certificate");
        }
        let host = endpoint
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(ca)?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(256)
            .build(connector);
        Ok(Target {
            client,
            scheme: if https { "https" } else { "http" },
            host,
            signer,
            bucket: bucket.to_string(),
        })
    }

    /// The same endpoint and key for another bucket (sharing the connection pool).
    pub(super) fn for_bucket(&self, bucket: &str) -> Self {
        Target {
            client: self.client.clone(),
            scheme: self.scheme,
            host: self.host.clone(),
            signer: self.signer.clone(),
            bucket: bucket.to_string(),
        }
    }
}

pub async fn run(args: S3BenchArgs) -> anyhow::Result<()> {
    let target = Arc::new(args.conn.target(&args.bucket)?);
    target
        .create_bucket()
        .await
        .context("cannot create the benchmark bucket")?;
    let mut results = Vec::new();
    println!(
        "{:<6} {:>8} {:>5} {:>10} {:>9} {:>9} {:>9} {:>7}",
        "phase", "size", "conc", "ops/s", "MiB/s", "p50 ms", "p99 ms", "errors"
    );
    for &size in &args.sizes {
        // Seeded by the size: a later run reading an earlier run's objects (--keys) knows
        // their bytes, and checks every GET against them.
        let payload = payload(size);
        for &conc in &args.concurrency {
            let pool = Arc::new(Pool::default());
            let writes = args.phases.iter().any(|p| p == "put");
            if let Some(f) = args.keys.as_ref().filter(|f| !writes && f.exists()) {
                let text = std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read {}", f.display()))?;
                let mine = format!("{size}/");
                for k in text.lines().filter(|k| k.starts_with(&mine)) {
                    pool.push(k.to_string());
                }
            }
            for phase in &args.phases {
                let r = match phase.as_str() {
                    // Emptying what the phases before wrote: the recursive listing and
                    // DeleteObjects of 1,000 keys at a time, as `aws s3 rm --recursive` and
                    // `rclone purge` do.
                    "empty" => {
                        pool.drain();
                        super::empty::run(&target, size, conc).await
                    }
                    _ => {
                        let cell = Cell {
                            size,
                            concurrency: conc,
                            duration: args.duration,
                            transfer: args.part_size.map(|part_size| Transfer {
                                part_size,
                                streams: args.part_streams,
                            }),
                        };
                        run_phase(target.clone(), phase, &cell, pool.clone(), payload.clone()).await
                    }
                };
                println!(
                    "{:<6} {:>8} {:>5} {:>10.0} {:>9.1} {:>9.2} {:>9.2} {:>7}",
                    r.phase,
                    r.size,
                    r.concurrency,
                    r.ops_per_sec,
                    r.mib_per_sec,
                    r.p50_ms,
                    r.p99_ms,
                    r.errors
                );
                results.push(r);
            }
            if let Some(f) = args.keys.as_ref().filter(|_| args.keep && writes) {
                let keys = pool.drain();
                let mut text = keys.join("\n");
                text.push('\n');
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(f)
                    .and_then(|mut file| file.write_all(text.as_bytes()))
                    .with_context(|| format!("cannot write {}", f.display()))?;
            }
            if !args.keep {
                let n = pool.len();
                cleanup(target.clone(), pool, conc).await;
                tracing::debug!(deleted = n, "cleaned up");
            }
        }
    }
    if let Some(path) = &args.json {
        let report = Report {
            label: args.label.as_deref(),
            endpoint: &args.conn.endpoint,
            duration_secs: args.duration.as_secs_f64(),
            part_size: args.part_size,
            part_streams: args.part_size.map(|_| args.part_streams),
            results: &results,
        };
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
