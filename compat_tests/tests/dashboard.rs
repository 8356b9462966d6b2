//! The Grafana dashboard (`deploy/grafana/saker.json`) queries only what a node exports: after
//! S3, FUSE and RPC traffic against a real `saker server --mount`, every `saker_*` series its
//! queries name appears in the node's `/metrics`. And a real Prometheus (the Debian package)
//! takes `deploy/prometheus/prometheus.yml`, scrapes a node and evaluates every query of the
//! dashboard without an error, the S3 ones with data.
//! Needs /dev/fuse, root and `prometheus`/`promtool` (as CI has); fails loudly without.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::fuse::Mounted;
use common::*;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");

/// The dashboard's queries.
fn dashboard_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(format!("{DEPLOY}/grafana/saker.json"))
        .expect("read the dashboard");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    collect_exprs(&json, &mut exprs);
    assert!(exprs.len() >= 20, "only {} queries found", exprs.len());
    exprs
}

/// Every `saker_*` series name in the dashboard's queries.
fn dashboard_series() -> BTreeSet<String> {
    dashboard_exprs()
        .iter()
        .flat_map(|e| e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')))
        .filter(|t| t.starts_with("saker_"))
        .map(str::to_string)
        .collect()
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// The series names in a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_metric_the_dashboard_queries_is_exported() {
    let wanted = dashboard_series();
    assert!(wanted.len() >= 15, "{wanted:?}");

    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let srv = &mounted.srv;
    // S3: nested and chunked objects, reads, a listing and an error.
    let s3 = srv.client();
    create_bucket(&s3, "dash").await;
    put(&s3, "dash", "a/b/small.txt", b"small").await;
    let big = random_bytes(100 * 1024);
    put(&s3, "dash", "a/big.bin", &big).await;
    assert_eq!(get_bytes(&s3, "dash", "a/big.bin").await, big);
    assert_eq!(list_all(&s3, "dash", None).await.len(), 2);
    assert!(s3
        .get_object()
        .bucket("dash")
        .key("missing")
        .send()
        .await
        .is_err());
    // FUSE: reads, a write and an error.
    let root = mounted.root.clone();
    tokio::task::spawn_blocking(move || {
        assert_eq!(
            std::fs::read(root.join("dash/a/b/small.txt")).unwrap(),
            b"small"
        );
        std::fs::write(root.join("dash/a/through-fuse.txt"), b"fuse").unwrap();
        assert!(std::fs::metadata(root.join("dash/nope")).is_err());
    })
    .await
    .unwrap();
    // RPC: a library client's call.
    srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    lib.lookup(&["dash".to_string()], saker_rpc::Want::ATTR)
        .await
        .unwrap();

    // Metrics set by background work (change-log pushes) may trail the requests.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let have = exported(&metrics_text(&srv.admin).await);
        let missing: Vec<&String> = wanted.difference(&have).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard queries series /metrics does not have: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The writes changed directories of other groups; once their records are pushed, no
    // group holds any (the gauge follows the pushes, never counts pushed records).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = metrics_text(&srv.admin).await;
        let held: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("saker_mnode_change_log_records{"))
            .filter(|l| !l.ends_with(" 0"))
            .collect();
        if held.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "records never pushed: {held:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A `prometheus` server on a free port, stopped when dropped.
struct Prometheus {
    child: std::process::Child,
    api: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Scrapes `target` (`host:port` of an admin listener) every 500 ms, with the job and
    /// relabelling of `deploy/prometheus/prometheus.yml`.
    fn start(target: &str) -> Prometheus {
        common::fuse::require_tool("prometheus");
        let dir = tempfile::tempdir().unwrap();
        let shipped = std::fs::read_to_string(format!("{DEPLOY}/prometheus/prometheus.yml"))
            .expect("read the scrape config");
        // The shipped file with its targets replaced by this test's node.
        let start = shipped.find("    static_configs:").expect("static_configs");
        let config = format!(
            "{}    static_configs:\n      - targets: [\"{target}\"]\n        labels: {{ node: test }}\n",
            shipped[..start]
                .replace("scrape_interval: 10s", "scrape_interval: 500ms")
                .replace("evaluation_interval: 10s", "evaluation_interval: 500ms")
        );
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let port = free_ports(1)[0];
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            api: format!("http://127.0.0.1:{port}/api/v1"),
            _dir: dir,
        }
    }

    /// An instant query: its status and the number of series in its result (an error
    /// message for a refused query).
    async fn query(&self, expr: &str) -> Result<usize, String> {
        let r = reqwest::Client::new()
            .get(format!("{}/query", self.api))
            .query(&[("query", expr)])
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
        if v["status"] != "success" {
            return Err(v.to_string());
        }
        Ok(v["data"]["result"].as_array().map_or(0, Vec::len))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_a_node_and_evaluates_every_dashboard_query() {
    common::fuse::require_tool("promtool");
    let check = std::process::Command::new("promtool")
        .args(["check", "config"])
        .arg(format!("{DEPLOY}/prometheus/prometheus.yml"))
        .output()
        .expect("run promtool");
    assert!(check.status.success(), "{check:?}");

    let srv = Server::default_start();
    let s3 = srv.client();
    create_bucket(&s3, "scraped").await;
    let prom = Prometheus::start(srv.admin.trim_start_matches("http://"));
    // Grafana's window, as it would pick it for a 500 ms scrape interval.
    let exprs: Vec<String> = dashboard_exprs()
        .iter()
        .map(|e| e.replace("$__rate_interval", "5s"))
        .collect();
    let s3_panels: Vec<&String> = exprs
        .iter()
        .filter(|e| e.contains("saker_gateway_"))
        .collect();
    // Requests (and a failure, NoSuchKey) across scrapes until every S3 panel has data.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    loop {
        put(
            &s3,
            "scraped",
            &format!("d{}/k{i}", i % 3),
            &random_bytes(20 * 1024),
        )
        .await;
        get_bytes(&s3, "scraped", &format!("d{}/k{i}", i % 3)).await;
        let missing = s3.get_object().bucket("scraped").key("missing").send();
        assert!(missing.await.is_err());
        i += 1;
        let up = prom.query("up{job=\"saker\", node=\"test\"} == 1").await;
        let mut empty = Vec::new();
        for e in &s3_panels {
            if !matches!(prom.query(e).await, Ok(n) if n > 0) {
                empty.push(e.as_str());
            }
        }
        if up == Ok(1) && empty.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "prometheus did not scrape the node: up {up:?}, S3 panels without data {empty:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for expr in &exprs {
        let series = prom.query(expr).await;
        assert!(series.is_ok(), "{expr}: {series:?}");
    }
}
