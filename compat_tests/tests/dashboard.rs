//! The Grafana dashboard (`deploy/grafana/saker.json`) queries only what a node exports: after
//! S3, FUSE and RPC traffic against a real `saker server --mount`, every `saker_*` series its
//! queries name appears in the node's `/metrics`.
//! Needs /dev/fuse and root (as CI has); fails loudly without.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::fuse::Mounted;
use common::*;

/// Every `saker_*` series name in the dashboard's queries.
fn dashboard_series() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/grafana/saker.json");
    let text = std::fs::read_to_string(path).expect("read the dashboard");
    let json: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    collect_exprs(&json, &mut exprs);
    assert!(exprs.len() >= 20, "only {} queries found", exprs.len());
    exprs
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
}
