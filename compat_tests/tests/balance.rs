//! The benefit-driven balancer's inputs on a real server: the groups' cost accounting
//! (`saker admin balance stats`, `/metrics`) and the per-group capacity (`--group-ops-limit`).

mod common;

use std::time::Duration;

use common::*;

/// A counter's value summed over every label set (0 if absent).
fn sum_of(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_groups_account_for_their_work_and_keep_to_their_capacity() {
    let srv = Server::start(
        Opts::default()
            .arg("--load-window", "1s")
            .arg("--group-ops-limit", "100"),
    );
    let c = srv.client();
    let bucket = new_bucket(&c, "balance").await;
    let keys: Vec<String> = (0..10).map(|i| format!("train/d{i}/label.txt")).collect();
    for k in &keys {
        put(&c, &bucket, k, k.as_bytes()).await;
    }
    // Read the labels until a closed window shows them as the heaviest name, all on one
    // group (the ring owner of `label.txt`), with the group's reads counted.
    let seen = std::cell::RefCell::new(serde_json::Value::Null);
    let found = poll_until(Duration::from_secs(60), || {
        let (c, bucket, keys, srv, seen) = (&c, &bucket, &keys, &srv, &seen);
        async move {
            for k in keys {
                assert_eq!(get_bytes(c, bucket, k).await, k.as_bytes());
            }
            let out = ok_stdout(srv.admin_cmd(&["balance", "stats"]), "balance stats");
            let last: serde_json::Value = serde_json::from_str(&out).unwrap();
            *seen.borrow_mut() = last.clone();
            let names = last["names"].as_array().unwrap();
            let Some(top) = names.first() else {
                return false;
            };
            let groups = top["by_group"].as_object().unwrap();
            top["key"] == "label.txt"
                && top["costs"]["read"].as_u64().unwrap_or(0) >= 10
                && groups.len() == 1
                && last["groups"].as_array().unwrap().iter().any(|g| {
                    groups.contains_key(&g["group"].to_string())
                        && g["costs"]["read"].as_u64().unwrap_or(0) >= 10
                        && g["ops_per_sec"].as_f64().unwrap() > 0.0
                })
        }
    })
    .await;
    let last = seen.into_inner();
    assert!(found, "no window showed label.txt as the hot name: {last}");
    assert_eq!(last["groups"].as_array().unwrap().len(), 4, "{last}");
    // The directories are counted too: one of the label's.
    let dirs: Vec<&str> = last["dirs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert!(
        dirs.iter()
            .any(|d| d.starts_with(&format!("{bucket}/train/d"))),
        "{last}"
    );

    // /metrics counts the same events, by group and kind.
    let text = metrics_text(&srv.admin).await;
    assert!(
        sum_of(&text, "saker_mnode_cost_events_total", "kind=\"read\"") >= 10.0,
        "{text}"
    );
    assert!(sum_of(&text, "saker_mnode_cost_events_total", "kind=\"write\"") >= 10.0);

    // 200 reads of one name at 100 operations per second per group: the group makes them
    // wait (a second at least), and every one is answered right.
    let waited = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("saker_mnode_ops_limit_wait_seconds_total "))
            .map(|v| v.parse::<f64>().unwrap())
            .unwrap_or(0.0)
    };
    let before = waited(&text);
    let reads = (0..200).map(|i| {
        let (c, bucket, k) = (c.clone(), bucket.clone(), keys[i % keys.len()].clone());
        tokio::spawn(async move { get_bytes(&c, &bucket, &k).await == k.as_bytes() })
    });
    for r in futures::future::join_all(reads).await {
        assert!(r.unwrap(), "a read under the limit came back wrong");
    }
    let after = waited(&metrics_text(&srv.admin).await);
    assert!(after - before >= 1.0, "waited {before} then {after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_directory_name_is_refused_and_the_table_stays_as_it_was() {
    let srv = Server::default_start();
    let c = srv.client();
    let bucket = new_bucket(&c, "dirname").await;
    put(&c, &bucket, "hot/a.json", b"a").await;
    put(&c, &bucket, "b/hot", b"a file named hot").await;
    let refused = srv.admin_cmd(&["exception", "set", "hot", "pathwalk"]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("directories named hot"), "{why}");
    let table = ok_stdout(srv.admin_cmd(&["exception", "list"]), "exception list");
    assert!(!table.contains("hot"), "{table}");
    // Nothing moved: both still read back.
    assert_eq!(get_bytes(&c, &bucket, "hot/a.json").await, b"a");
    assert_eq!(get_bytes(&c, &bucket, "b/hot").await, b"a file named hot");
}

/// `saker bench rebalance` on a small hot-name job: under the benefit policy the hot name is
/// spread while the job runs, and every operation succeeds. (How much faster is the
/// benchmark's to say, not this test's.)
#[test]
fn the_benefit_policy_spreads_a_hot_name_during_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rebalance.json");
    let run = std::process::Command::new(saker_bin())
        .args([
            "bench",
            "rebalance",
            "--workload",
            "hotname",
            "--policy",
            "benefit",
        ])
        .args([
            "--scale",
            "0.1",
            "--ops-limit",
            "100",
            "--threads",
            "8",
            "--json",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["errors"], 0, "{report}");
    assert_eq!(report["ops"], 1600, "{report}");
    let moved = report["exceptions"].as_array().unwrap();
    assert!(
        moved.iter().any(|e| e[0] == "label.txt"),
        "label.txt was not moved: {report}"
    );
    assert!(
        report["migrated_inodes"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(
        report["balancer_plan_secs"].as_f64().unwrap() > 0.0,
        "{report}"
    );
}

/// The benefit policy on a replicated cluster (three nodes, every group on all three): a file
/// name read through every class directory is moved off its group while the reads run, no read
/// fails, every object reads back from every node, and the move outlives the coordinator's
/// node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_benefit_policy_moves_a_hot_name_in_a_replicated_cluster() {
    let mut nodes = common::cluster::Nodes::start(&[
        "--balance-policy",
        "benefit",
        "--group-ops-limit",
        "60",
        // Long enough that moving the name's inodes pays off within a window.
        "--load-window",
        "2s",
    ]);
    nodes.wait_voters(&[]).await;
    let s3 = nodes.client(0, true);
    let b = "classes";
    create_bucket(&s3, b).await;
    let classes = 20;
    let key = |c: usize, name: &str| format!("c{c:02}/{name}");
    for c in 0..classes {
        put(
            &s3,
            b,
            &key(c, "label.txt"),
            format!("label {c}").as_bytes(),
        )
        .await;
        put(&s3, b, &key(c, "img.jpg"), format!("image {c}").as_bytes()).await;
    }

    // Readers of every class's label.txt, until the balancer has moved the name.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..8)
        .map(|r| {
            let (s3, stop) = (nodes.client(r % 3, true), stop.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u64, Vec::new());
                let mut c = r;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = format!("c{:02}/label.txt", c % classes);
                    match s3.head_object().bucket(b).key(&k).send().await {
                        Ok(_) => ok += 1,
                        Err(e) => failed.push(format!("{k}: {e:?}")),
                    }
                    c += 7;
                }
                (ok, failed)
            })
        })
        .collect();
    let moved = poll_until(Duration::from_secs(60), || async {
        nodes.admin(1, &["exception", "list"]).contains("label.txt")
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        let (ok, failed) = r.await.unwrap();
        assert!(failed.is_empty(), "failed reads: {failed:?}");
        reads += ok;
    }
    assert!(
        moved,
        "label.txt not moved after {reads} reads; logs:\n{}",
        nodes.logs()
    );
    let home = nodes.leader(1).await;
    assert!(
        nodes
            .metric(
                home,
                "saker_balance_round_seconds_total{policy=\"benefit\"}"
            )
            .await
            > 0.0
    );

    nodes.kill(home);
    let next = nodes.leader(1).await;
    assert_ne!(next, home);
    assert!(nodes
        .admin(next, &["exception", "list"])
        .contains("label.txt"));
    for i in [(home + 1) % 3, (home + 2) % 3] {
        let s3 = nodes.client(i, true);
        for c in 0..classes {
            let label = get_bytes(&s3, b, &key(c, "label.txt")).await;
            assert_eq!(label, format!("label {c}").as_bytes(), "node {}", i + 1);
            let image = get_bytes(&s3, b, &key(c, "img.jpg")).await;
            assert_eq!(image, format!("image {c}").as_bytes(), "node {}", i + 1);
        }
    }
}
