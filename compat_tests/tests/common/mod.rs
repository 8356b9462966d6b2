//! Test harness: runs the real `saker server` binary on a fresh data directory and hands out
//! aws-sdk-s3 clients for it.
//!
//! The binary is `$SAKER_BIN` or `<target>/debug/saker` next to the test executable; build it
//! first with `cargo build --bins`.

#![allow(dead_code)]

pub mod certs;
pub mod cluster;
pub mod fuse;
pub mod kafka;
pub mod multiproc;
pub mod nats;
pub mod netns;
pub mod notify;
pub mod otlp_sink;
pub mod rabbit;
pub mod race;
pub mod sse;
pub mod tier;
pub mod tikv;
pub mod versions;
pub mod webhook;
pub mod worm;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, StalledStreamProtectionConfig};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use md5::{Digest, Md5};
use rand::RngCore;

/// The root key the server is started with.
pub const ROOT_AK: &str = "saker-test-root";
pub const ROOT_SK: &str = "saker-test-root-secret";

/// How long the server may take to print its addresses.
const READY_DEADLINE: Duration = Duration::from_secs(30);
/// stderr lines kept for diagnostics.
const STDERR_KEEP: usize = 200;

/// Extra command-line options for `saker server`.
#[derive(Clone, Debug, Default)]
pub struct Opts {
    pub args: Vec<String>,
    /// Extra environment variables (e.g. `SAKER_FAILPOINT`).
    pub env: Vec<(String, String)>,
    /// Keep every line the server writes to stderr, not only the last ones (for tests that
    /// read the whole log).
    pub whole_log: bool,
}

impl Opts {
    /// Garbage collection fast enough to observe in a test.
    pub fn fast_gc() -> Self {
        Self::default()
            .arg("--gc-grace", "1s")
            .arg("--scrub-age", "2s")
            .arg("--gc-interval", "200ms")
    }

    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push(name.to_string());
        self.args.push(value.to_string());
        self
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// Keeps the server's whole stderr ([`Server::stderr_tail`] returns all of it).
    pub fn whole_log(mut self) -> Self {
        self.whole_log = true;
        self
    }
}

/// A running `saker server` with its own data directory.
pub struct Server {
    child: Option<Child>,
    data: tempfile::TempDir,
    opts: Opts,
    stderr: Arc<Mutex<Vec<String>>>,
    /// `http://127.0.0.1:PORT` of the S3 listener.
    pub endpoint: String,
    /// `http://127.0.0.1:PORT` of the admin listener.
    pub admin: String,
    /// `127.0.0.1:PORT` of the RPC listener (for `saker_client::Cluster::connect`).
    pub rpc_addr: String,
}

/// The `saker` binary under test.
pub fn saker_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SAKER_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test executable has a path");
    // <target>/debug/deps/<test> -> <target>/debug/saker
    let debug = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable lives in <target>/debug/deps");
    let bin = debug.join(format!("saker{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        panic!(
            "{} does not exist: build it first: cargo build --bins",
            bin.display()
        );
    }
    bin
}

/// Runs `saker server` on `data_dir` with `args`, which must make it refuse to start; its
/// stderr.
pub fn server_refuses(data_dir: &Path, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(saker_bin())
        .args(["server", "--data-dir"])
        .arg(data_dir)
        .args(["--s3-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--rpc-addr", "127.0.0.1:0"])
        .args(args)
        .env("SAKER_ACCESS_KEY", ROOT_AK)
        .env("SAKER_SECRET_KEY", ROOT_SK)
        .output()
        .expect("run the saker binary");
    assert!(!out.status.success(), "the server started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn parse_addr(line: &str, label: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix(label)?.trim_start();
    let url = rest.split_whitespace().next()?;
    (url.starts_with("http://") || url.starts_with("https://")).then(|| url.to_string())
}

/// `host:port` after `label` (the RPC line has no scheme).
fn parse_host_port(line: &str, label: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix(label)?.trim_start();
    let addr = rest.split_whitespace().next()?;
    addr.parse::<std::net::SocketAddr>()
        .is_ok()
        .then(|| addr.to_string())
}

/// What follows a label on a line the server prints when it is ready.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    /// `http://host:port` or `https://host:port`
    Url,
    /// `host:port`
    HostPort,
    /// Anything non-empty (the rest of the line).
    Text,
}

/// Drains `child`'s stdout and stderr for its whole life (so it never blocks on a full pipe;
/// the last stderr lines are kept in `stderr`) and waits until it has printed a line for each
/// label; returns the values in the order asked. Kills the child and panics with its stderr if
/// it exits or takes longer than the deadline.
pub fn wait_ready(
    child: &mut Child,
    stderr: &Arc<Mutex<Vec<String>>>,
    wanted: &[(&str, Want)],
) -> Vec<String> {
    wait_ready_keeping(child, stderr, wanted, STDERR_KEEP)
}

/// [`wait_ready`], keeping the last `keep` lines of stderr.
pub fn wait_ready_keeping(
    child: &mut Child,
    stderr: &Arc<Mutex<Vec<String>>>,
    wanted: &[(&str, Want)],
    keep_lines: usize,
) -> Vec<String> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let err_pipe = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut tx = Some(tx);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line).trim_end().to_string();
                    // Once the reader is gone, keep draining.
                    if tx.as_ref().is_some_and(|t| t.send(text).is_err()) {
                        tx = None;
                    }
                }
            }
        }
    });
    let keep = stderr.clone();
    keep.lock().unwrap().clear();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(err_pipe);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let mut k = keep.lock().unwrap();
                    if k.len() == keep_lines {
                        k.remove(0);
                    }
                    k.push(String::from_utf8_lossy(&line).trim_end().to_string());
                }
            }
        }
    });

    let deadline = Instant::now() + READY_DEADLINE;
    let mut found: Vec<Option<String>> = vec![None; wanted.len()];
    while found.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                for (slot, (label, want)) in found.iter_mut().zip(wanted) {
                    if slot.is_none() {
                        *slot = match want {
                            Want::Url => parse_addr(&line, label),
                            Want::HostPort => parse_host_port(&line, label),
                            Want::Text => line
                                .trim_start()
                                .strip_prefix(label)
                                .map(str::trim)
                                .filter(|v| !v.is_empty())
                                .map(str::to_string),
                        };
                    }
                }
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "saker did not become ready ({e:?}); stderr:\n{}",
                    stderr.lock().unwrap().join("\n")
                );
            }
        }
    }
    found
        .into_iter()
        .map(|v| v.expect("loop ends with all"))
        .collect()
}

impl Server {
    /// Starts a server on a fresh data directory.
    pub fn start(opts: Opts) -> Server {
        let data = tempfile::Builder::new()
            .prefix("saker-compat-")
            .tempdir()
            .expect("create a temp dir");
        let mut s = Server {
            child: None,
            data,
            opts,
            stderr: Arc::new(Mutex::new(Vec::new())),
            endpoint: String::new(),
            admin: String::new(),
            rpc_addr: String::new(),
        };
        s.spawn();
        s
    }

    /// Starts with default options.
    pub fn default_start() -> Server {
        Self::start(Opts::default())
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        let mut child = Command::new(saker_bin())
            .arg("server")
            .arg("--data-dir")
            .arg(self.data.path())
            .args(["--s3-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
            .args(["--rpc-addr", "127.0.0.1:0"])
            .args(&self.opts.args)
            .envs(self.opts.env.iter().map(|(k, v)| (k, v)))
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the saker binary");
        let wanted = [
            ("S3 endpoint:", Want::Url),
            ("admin:", Want::Url),
            ("RPC (library clients):", Want::HostPort),
        ];
        let keep = match self.opts.whole_log {
            true => usize::MAX,
            false => STDERR_KEEP,
        };
        let found = wait_ready_keeping(&mut child, &self.stderr, &wanted, keep);
        let [s3, admin, rpc] = [0, 1, 2].map(|i| found[i].clone());
        self.endpoint = s3;
        self.admin = admin;
        self.rpc_addr = rpc;
        self.child = Some(child);
    }

    /// Makes the server's cluster credential this test process's (for library clients).
    pub fn use_credential(&self) {
        install_credential(&self.credential_path());
    }

    /// The cluster credential the server made in its data directory.
    pub fn credential_path(&self) -> PathBuf {
        self.data.path().join("cluster-credential.json")
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then waits (at most 30 s) until the process has shut down.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("the server is running");
        // SAFETY: kill(2) on our own child's pid, with a valid signal number.
        assert_eq!(unsafe { libc::kill(c.id() as i32, libc::SIGTERM) }, 0);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = c.try_wait().expect("wait for the server") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop within 30 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts again on the same data directory (new ports: refetch clients).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Starts again on the same data directory with other options.
    pub fn restart_with(&mut self, opts: Opts) {
        self.kill();
        self.opts = opts;
        self.spawn();
    }

    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// The last lines the server wrote to stderr (all of them with [`Opts::whole_log`]).
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// A client with the root key.
    pub fn client(&self) -> Client {
        self.client_with(ROOT_AK, ROOT_SK)
    }

    pub fn client_with(&self, ak: &str, sk: &str) -> Client {
        Client::from_conf(self.config_with(ak, sk).build())
    }

    /// A root client that never retries (for requests that must fail fast).
    pub fn client_no_retry(&self) -> Client {
        Client::from_conf(
            self.config_with(ROOT_AK, ROOT_SK)
                .retry_config(RetryConfig::disabled())
                .build(),
        )
    }

    pub fn config_with(&self, ak: &str, sk: &str) -> aws_sdk_s3::config::Builder {
        aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(ak, sk, None, None, "saker-compat"))
            .endpoint_url(&self.endpoint)
            .force_path_style(true)
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
    }

    /// Runs `saker admin … --admin-endpoint <admin>` with the root key in the environment.
    pub fn admin_cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new(saker_bin())
            .arg("admin")
            .args(args)
            .args(["--admin-endpoint", &self.admin])
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .stdin(Stdio::null())
            .output()
            .expect("run saker admin")
    }

    /// Chunks stored under DATA_DIR/chunks: `*.chunk` files and live records in the volumes.
    pub fn stored_chunks(&self) -> usize {
        fn walk(p: &Path, n: &mut usize) {
            let Ok(rd) = std::fs::read_dir(p) else { return };
            for e in rd.flatten() {
                let path = e.path();
                if path.is_dir() {
                    walk(&path, n);
                } else if path.extension().is_some_and(|x| x == "chunk") {
                    *n += 1;
                }
            }
        }
        let chunks = self.data.path().join("chunks");
        let mut n = 0;
        walk(&chunks, &mut n);
        let volumes = chunks.join("volumes");
        if volumes.exists() {
            n += saker_chunkstore::volume::scan(&volumes)
                .expect("scan the chunk volumes")
                .len();
        }
        n
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------------------------------------
// Small helpers shared by the test files.

pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut v);
    v
}

pub fn md5_hex(data: &[u8]) -> String {
    hex::encode(Md5::digest(data))
}

pub fn md5_raw(data: &[u8]) -> Vec<u8> {
    Md5::digest(data).to_vec()
}

/// `"<hex md5>"`, as S3 returns a single-part ETag.
pub fn quoted_md5(data: &[u8]) -> String {
    format!("\"{}\"", md5_hex(data))
}

pub fn body(data: &[u8]) -> ByteStream {
    ByteStream::from(data.to_vec())
}

/// A fresh bucket name, unique within a server.
pub fn bucket_name(tag: &str) -> String {
    format!("{tag}-{:08x}", rand::random::<u32>())
}

pub async fn create_bucket(c: &Client, name: &str) {
    c.create_bucket()
        .bucket(name)
        .send()
        .await
        .unwrap_or_else(|e| panic!("create bucket {name}: {e:?}"));
}

/// Turns a bucket's versioning on (Enabled) or off (Suspended).
pub async fn set_versioning(
    c: &Client,
    b: &str,
    status: aws_sdk_s3::types::BucketVersioningStatus,
) {
    let conf = aws_sdk_s3::types::VersioningConfiguration::builder()
        .status(status)
        .build();
    c.put_bucket_versioning()
        .bucket(b)
        .versioning_configuration(conf)
        .send()
        .await
        .expect("put bucket versioning");
}

/// Creates a bucket and returns its name.
pub async fn new_bucket(c: &Client, tag: &str) -> String {
    let b = bucket_name(tag);
    create_bucket(c, &b).await;
    b
}

/// The first name `<prefix><i><suffix>` in `bucket` that an MNode group other than the owner
/// of `key` owns (for moves and links between groups).
pub fn name_owned_elsewhere(
    lib: &saker_client::Cluster,
    bucket: &str,
    key: &str,
    prefix: &str,
    suffix: &str,
) -> String {
    let at = |name: &str| vec![bucket.to_string(), name.to_string()];
    (0..)
        .map(|i| format!("{prefix}{i}{suffix}"))
        .find(|n| lib.owner(&at(n)) != lib.owner(&at(key)))
        .expect("some name lives on another group")
}

pub async fn put(c: &Client, bucket: &str, key: &str, data: &[u8]) -> String {
    c.put_object()
        .bucket(bucket)
        .key(key)
        .body(body(data))
        .send()
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e:?}"))
        .e_tag
        .unwrap_or_default()
}

pub async fn get_bytes(c: &Client, bucket: &str, key: &str) -> Vec<u8> {
    let out = c
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("get {key}: {e:?}"));
    out.body
        .collect()
        .await
        .expect("read the body")
        .into_bytes()
        .to_vec()
}

/// Every key of a bucket (ListObjectsV2, all pages).
pub async fn list_all(c: &Client, bucket: &str, prefix: Option<&str>) -> Vec<String> {
    let mut keys = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = c
            .list_objects_v2()
            .bucket(bucket)
            .set_prefix(prefix.map(str::to_string))
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("list {bucket}: {e:?}"));
        keys.extend(out.contents().iter().filter_map(|o| o.key.clone()));
        if out.is_truncated == Some(true) {
            token = out.next_continuation_token.clone();
            assert!(token.is_some(), "truncated listing without a token");
        } else {
            return keys;
        }
    }
}

/// What a failed request looked like on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: u16,
    pub code: Option<String>,
    pub message: Option<String>,
}

/// The HTTP status and S3 error code of a request that must fail.
pub fn failure<T: std::fmt::Debug, E>(r: Result<T, SdkError<E, HttpResponse>>) -> Failure
where
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    match r {
        Ok(v) => panic!("the request succeeded but must fail: {v:?}"),
        Err(e) => {
            let status = e
                .raw_response()
                .map(|r| r.status().as_u16())
                .unwrap_or_else(|| panic!("no HTTP response: {e:?}"));
            Failure {
                status,
                code: e.code().map(str::to_string),
                message: e.message().map(str::to_string),
            }
        }
    }
}

/// The stdout of a command that must have succeeded (`what` names it in the failure).
#[track_caller]
pub fn ok_stdout(out: std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The line `saker admin key list` shows for key `ak` (`AK\tuid=…\tgid=…\tpolicy=…`).
#[track_caller]
pub fn key_list_line(srv: &Server, ak: &str) -> String {
    let listed = ok_stdout(srv.admin_cmd(&["key", "list"]), "key list");
    let line = listed.lines().find(|l| l.split('\t').next() == Some(ak));
    let line = line.unwrap_or_else(|| panic!("key list does not show {ak}:\n{listed}"));
    line.to_string()
}

/// The canonical user id and display name of the account key `ak` belongs to, as `saker
/// admin key list --json` shows them (what S3 shows as its owner).
#[track_caller]
pub fn canonical_user(srv: &Server, ak: &str) -> (String, String) {
    let listed = ok_stdout(srv.admin_cmd(&["key", "list", "--json"]), "key list --json");
    let keys: Vec<serde_json::Value> = serde_json::from_str(&listed).expect("key list --json");
    let key = keys
        .iter()
        .find(|k| k["access_key"] == ak)
        .unwrap_or_else(|| panic!("key list does not show {ak}:\n{listed}"));
    let field = |name: &str| {
        key[name]
            .as_str()
            .unwrap_or_else(|| panic!("{ak} has no {name}:\n{listed}"))
            .to_string()
    };
    (field("canonical_id"), field("display_name"))
}

/// Asserts a request failed with `status` and S3 error `code`.
#[track_caller]
pub fn assert_fails<T: std::fmt::Debug, E>(
    r: Result<T, SdkError<E, HttpResponse>>,
    status: u16,
    code: &str,
) -> Failure
where
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    let f = failure(r);
    assert_eq!(
        (f.status, f.code.as_deref()),
        (status, Some(code)),
        "unexpected failure: {f:?}"
    );
    f
}

/// Asserts only the HTTP status (HEAD errors carry no body, hence no code).
#[track_caller]
pub fn assert_status<T: std::fmt::Debug, E>(r: Result<T, SdkError<E, HttpResponse>>, status: u16)
where
    E: ProvideErrorMetadata + std::fmt::Debug,
{
    let f = failure(r);
    assert_eq!(f.status, status, "unexpected failure: {f:?}");
}

/// Polls `f` until it returns true or `deadline` passes; returns whether it did.
pub async fn poll_until<F, Fut>(deadline: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + deadline;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Free loopback ports (bound together, then released for the processes to take).
/// Makes the credential at `path` this test process's, for its RPC clients.
pub fn install_credential(path: &Path) {
    let credential = saker_rpc::auth::Credential::load(path).expect("a cluster credential");
    saker_rpc::auth::install(credential);
}

/// A new cluster credential at `path`, made by the binary as an operator would.
pub fn create_credential(path: &Path) {
    let out = Command::new(saker_bin())
        .args(["admin", "cluster-credential", "create"])
        .arg(path)
        .output()
        .expect("run saker admin cluster-credential create");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `n` ports for servers a test starts, each free when chosen and reserved for this test process.
///
/// They come from below the kernel's ephemeral range (32768 and up here), so no outgoing
/// connection of any process can take one before the server binds it; binding `127.0.0.1:0` and
/// passing the port on could (it once failed CI with "Address already in use"). Each is reserved
/// across the test processes nextest runs side by side by a lock on a file named after it, held
/// until this process exits.
pub fn free_ports(n: usize) -> Vec<u16> {
    static HELD: Mutex<Vec<std::fs::File>> = Mutex::new(Vec::new());
    const FIRST: u16 = 20_000;
    const SPAN: u16 = 12_000;
    let dir = std::env::temp_dir().join("saker-test-ports");
    std::fs::create_dir_all(&dir).expect("create the port lock directory");
    let mut held = HELD.lock().unwrap();
    let mut ports = Vec::with_capacity(n);
    let mut next = FIRST + (rand::random::<u16>() % SPAN);
    for _ in 0..SPAN {
        if ports.len() == n {
            break;
        }
        let port = next;
        next = FIRST + (next - FIRST + 1) % SPAN;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(port.to_string()))
            .expect("open a port lock file");
        if lock.try_lock().is_err() {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        held.push(lock);
        ports.push(port);
    }
    assert_eq!(
        ports.len(),
        n,
        "no {n} free ports in {FIRST}..{}",
        FIRST + SPAN
    );
    ports
}

/// Retries `f` until it succeeds (processes that just started may not have dialled each other
/// yet), with a deadline; panics with the last error.
pub async fn eventually<T, E: std::fmt::Debug, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e:?}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The bytes of a GET of `k` with `range` (`bytes=A-B`).
pub async fn get_range(c: &Client, b: &str, k: &str, range: &str) -> Vec<u8> {
    let out = c
        .get_object()
        .bucket(b)
        .key(k)
        .range(range)
        .send()
        .await
        .unwrap();
    out.body.collect().await.unwrap().into_bytes().to_vec()
}

/// The Prometheus text a server's admin listener (`http://host:port`) exports.
pub async fn metrics_text(admin: &str) -> String {
    reqwest::get(format!("{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The sum of the samples of `name_and_labels` (a prefix of their lines) that the server's
/// admin listener exports.
pub async fn metric(admin: &str, name_and_labels: &str) -> f64 {
    metrics_text(admin)
        .await
        .lines()
        .filter(|l| l.starts_with(name_and_labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Bytes available on the file system of `dir`.
pub fn free_bytes(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path and a zeroed, writable statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    st.f_bavail as u64 * st.f_frsize as u64
}

/// A small tmpfs this test mounted (a disk that fills up), unmounted when dropped, even when
/// the test fails. Mounting needs root: without it the test fails saying so.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a tmpfs on {} failed: this test needs root",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A bucket policy denying every request to `bucket` that does not come over TLS.
pub fn insecure_denied(bucket: &str) -> String {
    format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Sid":"TlsOnly","Effect":"Deny",
          "Principal":"*","Action":"s3:*",
          "Resource":["arn:aws:s3:::{bucket}","arn:aws:s3:::{bucket}/*"],
          "Condition":{{"Bool":{{"aws:SecureTransport":"false"}}}}}}]}}"#
    )
}
