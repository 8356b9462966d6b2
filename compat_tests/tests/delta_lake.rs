//! A table format's commits on saker: delta-rs (PyPI `deltalake`) appends from four processes
//! at once to one Delta table, committing each log entry with `If-None-Match: *` (never an
//! unsafe rename). Every commit must land exactly once and the table read back every row.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

const WRITERS: usize = 4;
const APPENDS: usize = 10;

#[tokio::test]
async fn concurrent_delta_lake_appends_commit_each_exactly_once() {
    let have = Command::new("python3")
        .args(["-c", "import deltalake, pyarrow"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        have,
        "this test needs python3 with deltalake and pyarrow: pip install deltalake pyarrow"
    );
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "delta").await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("delta/append.py");
    let out = Command::new("python3")
        .arg(&script)
        .args([&srv.endpoint, ROOT_AK, ROOT_SK, &b])
        .args([WRITERS.to_string(), APPENDS.to_string()])
        .output()
        .expect("run the Delta Lake writers");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "writers failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON report");
    assert_eq!(report["errors"], serde_json::json!([]), "{report}");
    let commits = WRITERS * APPENDS;
    assert_eq!(report["rows"], commits, "{report}");
    assert_eq!(report["rows_match"], true, "{report}");
    assert_eq!(report["version"], commits, "{report}");

    // The log holds one entry per version, 0 (the table's creation) to the last append.
    let listed = c
        .list_objects_v2()
        .bucket(&b)
        .prefix("table/_delta_log/")
        .send()
        .await
        .expect("list the log");
    let mut entries: Vec<String> = listed
        .contents()
        .iter()
        .filter_map(|o| o.key())
        .filter(|k| k.ends_with(".json"))
        .map(str::to_string)
        .collect();
    entries.sort();
    let want: Vec<String> = (0..=commits)
        .map(|v| format!("table/_delta_log/{v:020}.json"))
        .collect();
    assert_eq!(entries, want);
}
