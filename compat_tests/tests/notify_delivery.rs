//! Bucket notifications end to end, their delivery: nothing lost and each key in order
//! while the receiver is down, through a kill -9 of a server on TiKV, in a backup restored
//! elsewhere, while the balancer moves a name between groups, and for the mount's changes
//! (whose directory renames are EXDEV where a bucket notifies). The kill of a replicated
//! cluster's consumer node is `notify_cluster.rs`'s.

mod common;

use std::collections::BTreeMap;

use common::notify::*;
use common::webhook::Webhook;
use common::*;

#[tokio::test]
async fn a_receiver_down_for_a_while_loses_nothing_and_keeps_each_key_in_order() {
    let srv = Server::default_start();
    let c = srv.client();
    let mut hook = Webhook::start().await;
    let arn = add_target(&srv, "flaky", &hook.url("in"));
    let b = new_bucket(&c, "ledger").await;
    let events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"];
    configure(&c, &b, vec![queue("all", &arn, &events, "", "")]).await;

    // The ledger: every acknowledged write, in the order it was made, per key.
    let mut ledger: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let keys: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
    for (k, e) in write_round(&c, &b, &keys, 0).await {
        ledger.entry(k).or_default().push(e);
    }
    hook.down().await;
    for round in 1..4 {
        for (k, e) in write_round(&c, &b, &keys, round).await {
            ledger.entry(k).or_default().push(e);
        }
    }
    // The consumer retries while the receiver is down, and says so.
    let failing = poll_until(DELIVERY, || async {
        let out = srv.admin_cmd(&["notify", "status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let t = &v["targets"][0];
        t["failed"].as_u64().unwrap_or(0) > 0 && t["queue_depth"].as_u64().unwrap_or(0) > 0
    })
    .await;
    assert!(failing, "status did not show the failing target");
    assert!(metric(&srv.admin, "saker_notify_failed_total").await > 0.0);
    hook.up().await;
    let total: usize = ledger.values().map(Vec::len).sum();
    let all_in = poll_until(DELIVERY, || async { ledger_in(&hook.received(), &ledger) }).await;
    let got = hook.received();
    assert!(all_in, "{} of {total} events arrived", got.len());
    // Per key: the events, each first delivery in sequencer order, are the ledger's.
    check_ledger(&got, &ledger);
    assert!(metric(&srv.admin, "saker_notify_delivered_total").await >= total as f64);
    let duplicates = got.len() - total;
    eprintln!("{total} events, {duplicates} delivered twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mount_s_writes_notify_and_its_directory_renames_are_exdev() {
    let mounted = tokio::task::spawn_blocking(|| common::fuse::Mounted::start(Opts::default()))
        .await
        .unwrap();
    let srv = &mounted.srv;
    let c = srv.client();
    let hook = Webhook::start().await;
    let arn = add_target(srv, "mnt", &hook.url("m"));
    let b = new_bucket(&c, "mntfeed").await;
    let events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"];
    configure(&c, &b, vec![queue("all", &arn, &events, "", "")]).await;
    let dir = mounted.root.join(&b);
    // A directory's files would change keys with no event each: EXDEV (mv(1) copies and
    // deletes). A file's write, rename and unlink are events.
    let (moved, file_moved) = tokio::task::spawn_blocking(move || {
        std::fs::create_dir(dir.join("d")).unwrap();
        std::fs::write(dir.join("d/x"), b"xyz").unwrap();
        let moved = common::fuse::errno(std::fs::rename(dir.join("d"), dir.join("e")));
        let file = std::fs::rename(dir.join("d/x"), dir.join("y")).is_ok();
        std::fs::remove_file(dir.join("y")).unwrap();
        (moved, file)
    })
    .await
    .unwrap();
    assert_eq!(moved, libc::EXDEV);
    assert!(file_moved);
    let got = wait_for(&hook, 4).await;
    let mut seen = names(&got);
    seen.dedup();
    let want = [
        ("ObjectCreated:Put", "d/x"),
        ("ObjectRemoved:Delete", "d/x"),
        ("ObjectCreated:Put", "y"),
        ("ObjectRemoved:Delete", "y"),
    ];
    // Per key in order (`d/x` and `y` may be two groups' feeds).
    for key in ["d/x", "y"] {
        let mine: Vec<&str> = seen
            .iter()
            .filter(|(_, k)| k == key)
            .map(|(n, _)| n.as_str())
            .collect();
        let wanted: Vec<&str> = want
            .iter()
            .filter(|(_, k)| *k == key)
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(mine, wanted, "{key}");
    }
    let put = got
        .iter()
        .find(|r| r.key() == "d/x" && r.event_name() == "ObjectCreated:Put")
        .unwrap();
    assert_eq!(put.record.s3.object.size, Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tikv_every_acknowledged_write_s_event_survives_kill_9() {
    let sim = common::tikv::Sim::start();
    let mut srv = Server::start(sim.opts("feed"));
    let c = srv.client();
    let mut hook = Webhook::start().await;
    let arn = add_target(&srv, "tikv", &hook.url("t"));
    let b = new_bucket(&c, "tikvfeed").await;
    let events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"];
    configure(&c, &b, vec![queue("all", &arn, &events, "", "")]).await;
    // Acknowledged while the receiver is down: the events wait in the feed, which is in the
    // same TiKV transactions as the writes.
    hook.down().await;
    let mut ledger = Vec::new();
    for i in 0..30 {
        let k = format!("k{i:02}");
        put(&c, &b, &k, b"v").await;
        ledger.push(("ObjectCreated:Put", k.clone()));
        if i % 3 == 0 {
            c.delete_object().bucket(&b).key(&k).send().await.unwrap();
            ledger.push(("ObjectRemoved:Delete", k));
        }
    }
    srv.kill();
    srv.restart();
    hook.up().await;
    let all_in = poll_until(DELIVERY, || async {
        let got = names(&hook.received());
        ledger
            .iter()
            .all(|(n, k)| got.iter().any(|(gn, gk)| gn == n && gk == k))
    })
    .await;
    let got = names(&hook.received());
    let missing: Vec<_> = ledger
        .iter()
        .filter(|(n, k)| !got.iter().any(|(gn, gk)| gn == n && gk == k))
        .collect();
    assert!(all_in, "events missing after kill -9: {missing:?}");
    assert!(hook.bad().is_empty(), "bad posts: {:?}", hook.bad());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undelivered_events_travel_in_a_backup() {
    let mut src = Server::default_start();
    let c = src.client();
    let mut hook = Webhook::start().await;
    let arn = add_target(&src, "kept", &hook.url("b"));
    let b = new_bucket(&c, "feedbackup").await;
    configure(
        &c,
        &b,
        vec![queue("all", &arn, &["s3:ObjectCreated:*"], "", "")],
    )
    .await;
    hook.down().await;
    let keys: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
    for k in &keys {
        put(&c, &b, k, b"small").await;
    }
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b");
    ok_stdout(
        src.admin_cmd(&["backup", backup.to_str().unwrap()]),
        "backup",
    );
    src.kill();
    // The restored server has the target, the configuration and the feeds: it delivers.
    let dst = Server::start(Opts::default().arg("--restore", backup.to_str().unwrap()));
    hook.up().await;
    let delivered = poll_until(DELIVERY, || async {
        let got = hook.received();
        keys.iter().all(|k| got.iter().any(|r| r.key() == k))
    })
    .await;
    assert!(
        delivered,
        "{} of {} events after the restore\n{}",
        hook.received().len(),
        keys.len(),
        dst.stderr_tail()
    );
}

#[tokio::test]
async fn a_name_moves_to_other_groups_only_once_its_events_are_delivered() {
    let srv = Server::default_start();
    let c = srv.client();
    let mut hook = Webhook::start().await;
    let arn = add_target(&srv, "moves", &hook.url("mv"));
    let b = new_bucket(&c, "feedmove").await;
    configure(
        &c,
        &b,
        vec![queue("all", &arn, &["s3:ObjectCreated:*"], "", "")],
    )
    .await;
    hook.down().await;
    let keys: Vec<String> = (0..8).map(|i| format!("d{i}/label.txt")).collect();
    for k in &keys {
        put(&c, &b, k, b"one").await;
    }
    // Its new groups' events could overtake these: refused while they wait.
    let refused = srv.admin_cmd(&["exception", "set", "label.txt", "pathwalk"]);
    assert!(
        !refused.status.success(),
        "the name moved with events waiting"
    );
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("change-feed records not delivered"), "{why}");
    hook.up().await;
    wait_for(&hook, keys.len()).await;
    let moved = poll_until(DELIVERY, || async {
        srv.admin_cmd(&["exception", "set", "label.txt", "pathwalk"])
            .status
            .success()
    })
    .await;
    assert!(
        moved,
        "the name did not move once its events were delivered"
    );
    for k in &keys {
        put(&c, &b, k, b"two").await;
    }
    let got = wait_for(&hook, 2 * keys.len()).await;
    for k in &keys {
        let mut mine: Vec<(&str, Option<i64>)> = got
            .iter()
            .filter(|r| r.key() == k)
            .map(|r| (r.sequencer(), r.record.s3.object.size))
            .collect();
        mine.dedup();
        assert_eq!(mine.len(), 2, "{k}: {mine:?}");
        assert!(mine[0].0 < mine[1].0, "{k}: out of order {mine:?}");
    }
}
