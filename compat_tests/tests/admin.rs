//! The admin listener (/health, /metrics) and `saker admin key …`.

mod common;

use common::*;

#[tokio::test]
async fn access_key_lifecycle() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "keys").await;
    put(&root, &b, "obj", b"x").await;

    // Before it exists the key is refused.
    let user = srv.client_with("AKTESTUSER1", "sk-test-user-secret");
    assert_fails(user.list_buckets().send().await, 403, "InvalidAccessKeyId");

    let out = srv.admin_cmd(&[
        "key",
        "create",
        "--access-key",
        "AKTESTUSER1",
        "--secret-key",
        "sk-test-user-secret",
        "--policy",
        "admin",
    ]);
    ok_stdout(out, "key create");

    let names: Vec<_> = user
        .list_buckets()
        .send()
        .await
        .expect("the new key lists buckets")
        .buckets()
        .iter()
        .filter_map(|b| b.name.clone())
        .collect();
    assert_eq!(names, vec![b.clone()]);
    assert_eq!(get_bytes(&user, &b, "obj").await, b"x");
    // The key signs with its own secret only.
    let wrong = srv.client_with("AKTESTUSER1", "sk-wrong-secret-x");
    assert_fails(
        wrong.list_buckets().send().await,
        403,
        "SignatureDoesNotMatch",
    );

    let listed = ok_stdout(srv.admin_cmd(&["key", "list"]), "key list");
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().next() == Some("AKTESTUSER1")),
        "key list shows the new key:\n{listed}"
    );
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().next() == Some(ROOT_AK)),
        "key list shows the root key:\n{listed}"
    );
    assert!(
        !listed.contains("sk-test-user-secret"),
        "secrets are not shown"
    );

    // Creating it again is refused.
    let out = srv.admin_cmd(&[
        "key",
        "create",
        "--access-key",
        "AKTESTUSER1",
        "--secret-key",
        "another-secret-1",
    ]);
    assert!(!out.status.success(), "duplicate key create must fail");

    ok_stdout(
        srv.admin_cmd(&["key", "delete", "--access-key", "AKTESTUSER1"]),
        "key delete",
    );
    assert_fails(user.list_buckets().send().await, 403, "InvalidAccessKeyId");
    let listed = ok_stdout(srv.admin_cmd(&["key", "list"]), "key list");
    assert!(!listed.contains("AKTESTUSER1"), "{listed}");
    // The root key still works.
    root.list_buckets().send().await.expect("root still works");
}

#[tokio::test]
async fn keys_survive_a_restart() {
    let mut srv = Server::default_start();
    ok_stdout(
        srv.admin_cmd(&[
            "key",
            "create",
            "--access-key",
            "AKPERSIST",
            "--secret-key",
            "persisted-secret",
            "--policy",
            "admin",
        ]),
        "key create",
    );
    srv.restart();
    let user = srv.client_with("AKPERSIST", "persisted-secret");
    user.list_buckets()
        .send()
        .await
        .expect("a created key survives a restart");
}

/// A key file written before keys were denied by default (version 1): its keys without a
/// policy could do everything, and still can, as `admin`.
#[tokio::test]
async fn keys_from_before_deny_by_default_are_admin() {
    let mut srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "oldkeys").await;
    put(&root, &b, "obj", b"x").await;
    srv.kill();
    let old = format!(
        r#"{{"version":1,"keys":[
          {{"access_key":"{ROOT_AK}","secret_key":"{ROOT_SK}","uid":0,"gid":0,"root":true}},
          {{"access_key":"AKOLDKEY","secret_key":"old-key-secret-1","uid":0,"gid":0,
            "root":false}}]}}"#
    );
    std::fs::write(srv.data_dir().join("access-keys.json"), old).unwrap();
    srv.restart();
    let line = key_list_line(&srv, "AKOLDKEY");
    assert!(line.contains("policy=admin"), "{line}");
    let user = srv.client_with("AKOLDKEY", "old-key-secret-1");
    assert_eq!(get_bytes(&user, &b, "obj").await, b"x");
    let mine = new_bucket(&user, "oldmine").await;
    put(&user, &mine, "k", b"y").await;
    // Written back in the current version, it stays admin across restarts.
    let file = std::fs::read_to_string(srv.data_dir().join("access-keys.json")).unwrap();
    assert!(file.contains(r#""version": 2"#), "{file}");
    srv.restart();
    let user = srv.client_with("AKOLDKEY", "old-key-secret-1");
    assert_eq!(get_bytes(&user, &mine, "k").await, b"y");
}

#[tokio::test]
async fn admin_api_needs_the_root_signature() {
    let srv = Server::default_start();
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("{}/admin/keys", srv.admin))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 403, "unsigned admin request");
    let resp = http
        .post(format!("{}/admin/keys", srv.admin))
        .body(r#"{"access_key":"EVIL","secret_key":"evil-secret","uid":0,"gid":0}"#)
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status().as_u16(), 403, "unsigned key creation");
    let evil = srv.client_with("EVIL", "evil-secret");
    assert_fails(evil.list_buckets().send().await, 403, "InvalidAccessKeyId");

    // The CLI with a wrong root secret fails too.
    let out = std::process::Command::new(saker_bin())
        .args(["admin", "key", "list", "--admin-endpoint", &srv.admin])
        .env("SAKER_ACCESS_KEY", ROOT_AK)
        .env("SAKER_SECRET_KEY", "not-the-root-secret")
        .output()
        .expect("run saker admin");
    assert!(!out.status.success());
}

#[tokio::test]
async fn health_and_metrics() {
    let srv = Server::default_start();
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("{}/health", srv.admin))
        .send()
        .await
        .expect("GET /health");
    assert_eq!(resp.status().as_u16(), 200);

    // Traffic first, so the counters have samples.
    let c = srv.client();
    let b = new_bucket(&c, "metrics").await;
    put(&c, &b, "k", b"x").await;
    // 100 KiB is above the inline threshold: one chunk of that many bytes is written.
    put(&c, &b, "chunked", &random_bytes(100 * 1024)).await;
    let _ = c.get_object().bucket(&b).key("missing").send().await;

    let resp = http
        .get(format!("{}/metrics", srv.admin))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(resp.status().as_u16(), 200);
    let text = resp.text().await.expect("metrics text");
    assert!(text.contains("saker_gateway_requests_total"), "{text}");
    let sample = |name: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no sample {name}:\n{text}"))
    };
    assert_eq!(sample("saker_chunkstore_chunks_put_total"), 1.0);
    assert_eq!(
        sample("saker_chunkstore_written_bytes_total"),
        100.0 * 1024.0
    );
    assert_eq!(sample("saker_chunkstore_crc_failures_total"), 0.0);
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("saker_gateway_requests_total")
                && l.contains("PutObject")
                && l.contains("ok")
        })
        .unwrap_or_else(|| panic!("a PutObject ok sample:\n{text}"));
    let n: f64 = line
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("sample value");
    assert!(n >= 1.0, "{line}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("saker_gateway_requests_total")
                && l.contains("GetObject")
                && l.contains("NoSuchKey")),
        "the failed GET is counted by outcome:\n{text}"
    );
    // Hops: every client op above sent at least one MNode request, and the deep key made
    // its parents first (more than one request for one op).
    assert!(sample("saker_client_mnode_requests_per_op_count") >= 3.0);
    put(&c, &b, "deep/er/key", b"x").await;
    let text = http
        .get(format!("{}/metrics", srv.admin))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    let le1 = text
        .lines()
        .find(|l| l.starts_with("saker_client_mnode_requests_per_op_bucket{le=\"1\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .expect("the le=1 bucket");
    let count = text
        .lines()
        .find(|l| l.starts_with("saker_client_mnode_requests_per_op_count"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .expect("the count");
    assert!(count > le1, "an op with several hops is counted:\n{text}");
    // Inodes per group, one gauge per group.
    let groups = text
        .lines()
        .filter(|l| l.starts_with("saker_mnode_inodes{"))
        .count();
    assert_eq!(groups, 4, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redirected_name_keeps_its_objects_across_a_restart() {
    let mut srv = Server::default_start();
    let c = srv.client();
    let bucket = new_bucket(&c, "redirect").await;
    let keys: Vec<String> = (0..40).map(|i| format!("src/m{i}/Makefile")).collect();
    for k in &keys {
        put(&c, &bucket, k, k.as_bytes()).await;
    }
    put(&c, &bucket, "big/Makefile", &random_bytes(200 * 1024)).await;
    // A name some key of a versioned bucket has is not redirected: its version records
    // would not move with it. Once its versions are gone, it is.
    let kept = new_bucket(&c, "kept").await;
    set_versioning(
        &c,
        &kept,
        aws_sdk_s3::types::BucketVersioningStatus::Enabled,
    )
    .await;
    let v = c
        .put_object()
        .bucket(&kept)
        .key("a/Makefile")
        .body(body(b"kept"))
        .send()
        .await
        .unwrap()
        .version_id
        .unwrap();
    let refused = srv.admin_cmd(&["exception", "set", "Makefile", "3"]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned()
        + &String::from_utf8_lossy(&refused.stdout);
    assert!(said.contains("keep versions"), "{said}");
    assert_eq!(get_bytes(&c, &kept, "a/Makefile").await, b"kept");
    c.delete_object()
        .bucket(&kept)
        .key("a/Makefile")
        .version_id(v)
        .send()
        .await
        .unwrap();

    // Redirect the name to group 3, then to path-walk: every object stays readable.
    for route in ["3", "pathwalk"] {
        let out = ok_stdout(
            srv.admin_cmd(&["exception", "set", "Makefile", route]),
            "exception set",
        );
        assert!(out.contains("Makefile"), "{out}");
        for k in &keys {
            assert_eq!(
                get_bytes(&c, &bucket, k).await,
                k.as_bytes(),
                "{route}: {k}"
            );
        }
        let listed = list_all(&c, &bucket, Some("src/")).await;
        assert_eq!(listed.len(), keys.len(), "{route}");
    }
    // A bad route is refused with the reason.
    let bad = srv.admin_cmd(&["exception", "set", "Makefile", "nowhere"]);
    assert!(!bad.status.success());
    let moved = metric(&srv.admin, "saker_mnode_migrated_inodes_total ").await;
    assert!(moved > 0.0, "inodes were moved: {moved}");

    // The table and the placement survive a restart; new writes of the name work.
    srv.restart();
    let c = srv.client();
    let out = ok_stdout(srv.admin_cmd(&["exception", "list"]), "exception list");
    assert!(out.contains("Makefile\tpathwalk"), "{out}");
    for k in &keys {
        assert_eq!(
            get_bytes(&c, &bucket, k).await,
            k.as_bytes(),
            "after restart: {k}"
        );
    }
    put(&c, &bucket, "src/new/Makefile", b"new").await;
    assert_eq!(get_bytes(&c, &bucket, "src/new/Makefile").await, b"new");
    // Back to the ring.
    ok_stdout(
        srv.admin_cmd(&["exception", "set", "Makefile", "ring"]),
        "exception set ring",
    );
    // A balancing round on demand reports the groups' shares against the bound.
    let report = ok_stdout(srv.admin_cmd(&["balance", "--epsilon", "0.5"]), "balance");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert!(
        report["max_share_before"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert_eq!(report["bound"].as_f64().unwrap(), 0.25 + 0.5, "{report}");
    for k in keys.iter().chain(["src/new/Makefile".to_string()].iter()) {
        assert!(!get_bytes(&c, &bucket, k).await.is_empty(), "{k}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_with_a_stale_exception_table_is_forwarded_once_then_refreshes() {
    let srv = Server::default_start();
    let c = srv.client();
    let bucket = new_bucket(&c, "stale-map").await;
    put(&c, &bucket, "a/b/Makefile", b"contents").await;
    srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .expect("a library client connects");
    let path: Vec<String> = [bucket.as_str(), "a", "b", "Makefile"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let before = lib.router().exceptions_version();
    let owner = lib.owner(&path);
    lib.lookup(&path, saker_rpc::Want::ATTR)
        .await
        .expect("found where the ring puts it");

    // The name moves to another group behind the client's back.
    let target = if owner == 1 { 2 } else { 1 };
    ok_stdout(
        srv.admin_cmd(&["exception", "set", "Makefile", &target.to_string()]),
        "exception set",
    );
    let misdirected = metric(&srv.admin, "saker_mnode_misdirected_total ").await;

    // The first request goes to the old owner, which forwards it; its reply carries the new
    // table's version, so the client fetches the table.
    let view = lib
        .lookup(&path, saker_rpc::Want::ATTR)
        .await
        .expect("found through the old owner");
    assert_eq!(view.attr.size, 8);
    assert_eq!(
        metric(&srv.admin, "saker_mnode_misdirected_total ").await,
        misdirected + 1.0,
        "the stale request was forwarded once"
    );
    assert!(lib.router().exceptions_version() > before);
    assert_eq!(
        lib.owner(&path),
        target,
        "the client routes by the new table"
    );

    // Later requests go straight to the new owner: nothing more is forwarded.
    for _ in 0..5 {
        lib.lookup(&path, saker_rpc::Want::ATTR).await.unwrap();
    }
    assert_eq!(
        metric(&srv.admin, "saker_mnode_misdirected_total ").await,
        misdirected + 1.0,
        "no request after the refresh was forwarded"
    );
}

/// `--access-log FILE`: one JSON line per S3 request, with the key, operation, bucket, key,
/// status, bytes, remote address and the request id the client got; no secret in it.
#[tokio::test]
async fn the_access_log_has_a_line_per_request_and_no_secret() {
    use aws_sdk_s3::operation::RequestId;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let srv = Server::start(Opts::default().arg("--access-log", path.to_str().unwrap()));
    let c = srv.client_no_retry();
    let bucket = new_bucket(&c, "alog").await;
    let data = random_bytes(1234);
    let put = c
        .put_object()
        .bucket(&bucket)
        .key("dir/a b.txt")
        .body(body(&data))
        .send()
        .await
        .unwrap();
    let put_id = put.request_id().unwrap().to_string();
    let got = get_bytes(&c, &bucket, "dir/a b.txt").await;
    assert_eq!(got, data);
    let missing = c.get_object().bucket(&bucket).key("nope").send().await;
    assert!(missing.is_err());

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains(ROOT_SK),
        "the secret key is in the access log"
    );
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let of = |op: &str, key: &str| -> Vec<&serde_json::Value> {
        lines
            .iter()
            .filter(|l| l["operation"] == op && l["key"] == key)
            .collect()
    };
    let puts = of("REST.PUT.OBJECT", "dir/a b.txt");
    assert_eq!(puts.len(), 1, "{text}");
    let p = puts[0];
    assert_eq!(p["access_key"], ROOT_AK);
    assert_eq!(p["bucket"], bucket.as_str());
    assert_eq!(p["status"], 200);
    assert_eq!(p["bytes_in"], 1234);
    assert_eq!(p["request_id"], put_id.as_str());
    assert!(p["remote"].as_str().unwrap().starts_with("127.0.0.1:"));
    let gets = of("REST.GET.OBJECT", "dir/a b.txt");
    assert_eq!(gets.len(), 1, "{text}");
    assert_eq!(gets[0]["bytes_out"], 1234);
    let misses = of("REST.GET.OBJECT", "nope");
    assert_eq!(misses.len(), 1, "{text}");
    assert_eq!(misses[0]["status"], 404);
    assert!(!of("REST.PUT.BUCKET", "").is_empty(), "{text}");
}

#[tokio::test]
async fn a_clean_sigterm_logs_no_error() {
    let mut srv = Server::start(Opts::default().whole_log());
    let c = srv.client();
    let b = new_bucket(&c, "sigterm").await;
    put(&c, &b, "k", b"v").await;
    assert!(srv.terminate().success(), "{}", srv.stderr_tail());
    let log = srv.stderr_tail();
    assert!(
        log.contains("raft stopped"),
        "the groups' stop is logged: {log}"
    );
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "a clean stop logged errors: {errors:#?}");
}
