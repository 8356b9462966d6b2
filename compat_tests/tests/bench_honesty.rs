//! `saker bench s3` does not flatter: a GET counts only when its body is what was written, a
//! 404 is an error in every phase, and failed requests never count as operations.

mod common;

use common::*;

/// The size and concurrency of the small-object runs.
const SMALL: [&str; 4] = ["--sizes", "4KiB", "--concurrency", "4"];

/// Runs `saker bench s3` against `srv` with `args` for 1 s a phase; answers the JSON
/// report's results.
fn bench(srv: &Server, json: &std::path::Path, args: &[&str]) -> Vec<serde_json::Value> {
    let out = std::process::Command::new(saker_bin())
        .args([
            "bench",
            "s3",
            "--endpoint",
            &srv.endpoint,
            "--duration",
            "1s",
        ])
        .args(args)
        .arg("--json")
        .arg(json)
        .env("AWS_ACCESS_KEY_ID", ROOT_AK)
        .env("AWS_SECRET_ACCESS_KEY", ROOT_SK)
        .output()
        .unwrap();
    ok_stdout(out, "saker bench s3");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    report["results"].as_array().unwrap().clone()
}

fn field(r: &serde_json::Value, name: &str) -> u64 {
    r[name].as_u64().unwrap_or_else(|| panic!("{name} in {r}"))
}

#[test]
fn bench_s3_checks_what_it_reads_and_counts_every_failure() {
    let srv = Server::default_start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");

    // A healthy server: every phase, the mixed one included, runs without an error.
    let results = bench(
        &srv,
        &json,
        &[&SMALL[..], &["--phases", "put,get,mixed"]].concat(),
    );
    assert_eq!(results.len(), 3);
    for r in &results {
        assert!(field(r, "ops") > 0, "{r}");
        assert_eq!(field(r, "errors"), 0, "{r}");
        assert_eq!(field(r, "bad_bodies"), 0, "{r}");
    }

    // Objects that are not what the bench writes: other bytes of the same length, a shorter
    // body, and a key that does not exist. Every GET of them is an error, never an op.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s3 = srv.client();
    rt.block_on(async {
        for (key, len) in [("4096/t/same-length", 4096), ("4096/t/short", 100)] {
            put(&s3, "saker-bench", key, &vec![7u8; len]).await;
        }
    });
    let keys = dir.path().join("keys");
    std::fs::write(&keys, "4096/t/same-length\n4096/t/short\n4096/t/missing\n").unwrap();
    let keys = keys.to_str().unwrap();
    let args = [&SMALL[..], &["--phases", "get", "--keys", keys, "--keep"]].concat();
    let results = bench(&srv, &json, &args);
    let get = &results[0];
    assert_eq!(field(get, "ops"), 0, "{get}");
    let (errors, bad) = (field(get, "errors"), field(get, "bad_bodies"));
    assert!(bad > 0, "{get}");
    assert!(errors > bad, "the 404s are errors too: {get}");
}

/// With `--part-size`, a large object goes up as a multipart upload (its ETag names its
/// parts) and comes back as ranged GETs, each piece checked against what was written.
#[test]
fn bench_s3_moves_large_objects_in_parts() {
    let srv = Server::default_start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let keys = dir.path().join("keys");
    let keys_arg = keys.to_str().unwrap();
    let parts = [
        "--sizes",
        "12MiB",
        "--concurrency",
        "2",
        "--part-size",
        "5MiB",
        "--part-streams",
        "3",
    ];
    let mut args = parts.to_vec();
    args.extend(["--phases", "put", "--keep", "--keys", keys_arg]);
    let up = &bench(&srv, &json, &args)[0];
    assert!(field(up, "ops") > 0, "{up}");
    assert_eq!(field(up, "errors"), 0, "{up}");
    let written = std::fs::read_to_string(&keys).unwrap();
    let first = written.lines().next().unwrap().to_string();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let s3 = srv.client();
    let etag = rt.block_on(async {
        let h = s3
            .head_object()
            .bucket("saker-bench")
            .key(&first)
            .send()
            .await
            .unwrap();
        assert_eq!(h.content_length(), Some(12 << 20));
        h.e_tag().unwrap().to_string()
    });
    assert!(etag.ends_with("-3\""), "not a 3-part upload: {etag}");

    let mut args = parts.to_vec();
    args.extend(["--phases", "get", "--keep", "--keys", keys_arg]);
    let get = &bench(&srv, &json, &args)[0];
    assert!(field(get, "ops") > 0, "{get}");
    assert_eq!(
        (field(get, "errors"), field(get, "bad_bodies")),
        (0, 0),
        "{get}"
    );

    // Pieces that differ from what was written make the GET an error.
    rt.block_on(put(&s3, "saker-bench", &first, &vec![0u8; 12 << 20]));
    std::fs::write(&keys, format!("{first}\n")).unwrap();
    let get = &bench(&srv, &json, &args)[0];
    assert_eq!(field(get, "ops"), 0, "{get}");
    assert!(field(get, "bad_bodies") > 0, "{get}");
}
