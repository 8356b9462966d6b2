//! Bucket notifications end to end: a webhook target made with `saker admin notify target
//! add`, a bucket's NotificationConfiguration put and read back, and the events an
//! all-in-one server POSTs to a receiver the test runs: AWS's S3 event JSON (checked by
//! parsing it as `aws_lambda_events`' `S3Event`), filtered by event type, prefix and suffix,
//! in order per key, none lost while the receiver is down (nor through a kill -9 of a server
//! on TiKV), the cap's drops counted and reported, and the mount's changes.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, Event, FilterRule, FilterRuleName,
    NotificationConfiguration, NotificationConfigurationFilter, QueueConfiguration, S3KeyFilter,
};
use aws_sdk_s3::Client;
use common::webhook::{Received, Webhook};
use common::*;

/// How long delivery may take in these tests.
const DELIVERY: Duration = Duration::from_secs(30);

/// Adds a webhook target; answers the ARN `target add` printed.
fn add_target(srv: &Server, name: &str, url: &str) -> String {
    let out = srv.admin_cmd(&["notify", "target", "add", name, "--webhook", url]);
    ok_stdout(out, "notify target add").trim().to_string()
}

fn queue(id: &str, arn: &str, events: &[&str], prefix: &str, suffix: &str) -> QueueConfiguration {
    let mut rules = Vec::new();
    for (name, value) in [
        (FilterRuleName::Prefix, prefix),
        (FilterRuleName::Suffix, suffix),
    ] {
        if !value.is_empty() {
            rules.push(FilterRule::builder().name(name).value(value).build());
        }
    }
    let mut q = QueueConfiguration::builder()
        .id(id)
        .queue_arn(arn)
        .set_events(Some(events.iter().map(|e| Event::from(*e)).collect()));
    if !rules.is_empty() {
        q = q.filter(
            NotificationConfigurationFilter::builder()
                .key(S3KeyFilter::builder().set_filter_rules(Some(rules)).build())
                .build(),
        );
    }
    q.build().unwrap()
}

async fn configure(c: &Client, b: &str, queues: Vec<QueueConfiguration>) {
    c.put_bucket_notification_configuration()
        .bucket(b)
        .notification_configuration(
            NotificationConfiguration::builder()
                .set_queue_configurations(Some(queues))
                .build(),
        )
        .send()
        .await
        .expect("put bucket notification configuration");
}

/// Waits until `hook` has received at least `n` records; answers them.
async fn wait_for(hook: &Webhook, n: usize) -> Vec<Received> {
    let got = poll_until(DELIVERY, || async { hook.received().len() >= n }).await;
    assert!(
        got,
        "{} of {n} records arrived: {:?}",
        hook.received().len(),
        hook.received()
            .iter()
            .map(|r| (r.event_name().to_string(), r.key().to_string()))
            .collect::<Vec<_>>()
    );
    assert!(hook.bad().is_empty(), "bad posts: {:?}", hook.bad());
    hook.received()
}

/// (event name, key) of each record, in the order received.
fn names(got: &[Received]) -> Vec<(String, String)> {
    got.iter()
        .map(|r| (r.event_name().to_string(), r.key().to_string()))
        .collect()
}

#[tokio::test]
async fn puts_uploads_and_deletes_reach_the_webhook_as_s3_events() {
    let srv = Server::default_start();
    let c = srv.client();
    let hook = Webhook::start().await;
    let arn = add_target(&srv, "lake", &hook.url("all"));
    assert_eq!(arn, "arn:saker:sqs::lake:webhook");
    let listed = ok_stdout(srv.admin_cmd(&["notify", "target", "list"]), "target list");
    assert!(listed.contains(&arn), "{listed}");

    let b = new_bucket(&c, "notify").await;
    // A target that does not exist is refused as S3 refuses destinations it cannot validate.
    let missing = queue(
        "x",
        "arn:saker:sqs::nope:webhook",
        &["s3:ObjectCreated:*"],
        "",
        "",
    );
    let r = c
        .put_bucket_notification_configuration()
        .bucket(&b)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(missing)
                .build(),
        )
        .send()
        .await;
    assert_fails(r, 400, "InvalidArgument");
    let bad_event = queue("x", &arn, &["s3:ObjectCreated:Pot"], "", "");
    let r = c
        .put_bucket_notification_configuration()
        .bucket(&b)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(bad_event)
                .build(),
        )
        .send()
        .await;
    assert_fails(r, 400, "InvalidArgument");

    let events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"];
    configure(&c, &b, vec![queue("everything", &arn, &events, "", "")]).await;
    let got = c
        .get_bucket_notification_configuration()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let q = &got.queue_configurations()[0];
    assert_eq!((q.id(), q.queue_arn()), (Some("everything"), arn.as_str()));
    assert_eq!(q.events().len(), 2);

    let etag = put(&c, &b, "photos/red flower.jpg", b"0123456789").await;
    put(&c, &b, "a+b", b"x").await;
    let up = c
        .create_multipart_upload()
        .bucket(&b)
        .key("big")
        .send()
        .await
        .unwrap();
    let part = c
        .upload_part()
        .bucket(&b)
        .key("big")
        .upload_id(up.upload_id().unwrap())
        .part_number(1)
        .body(body(b"part one"))
        .send()
        .await
        .unwrap();
    c.complete_multipart_upload()
        .bucket(&b)
        .key("big")
        .upload_id(up.upload_id().unwrap())
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(
                    CompletedPart::builder()
                        .part_number(1)
                        .e_tag(part.e_tag().unwrap())
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    c.delete_object()
        .bucket(&b)
        .key("a+b")
        .send()
        .await
        .unwrap();

    let got = wait_for(&hook, 4).await;
    let mut seen: Vec<(String, String)> = names(&got).into_iter().collect();
    seen.dedup();
    let want: BTreeSet<(String, String)> = [
        ("ObjectCreated:Put", "photos/red+flower.jpg"),
        ("ObjectCreated:Put", "a%2Bb"),
        ("ObjectCreated:CompleteMultipartUpload", "big"),
        ("ObjectRemoved:Delete", "a%2Bb"),
    ]
    .into_iter()
    .map(|(n, k)| (n.to_string(), k.to_string()))
    .collect();
    assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), want);
    let photo = got
        .iter()
        .find(|r| r.key() == "photos/red+flower.jpg")
        .unwrap();
    let r = &photo.record;
    assert_eq!(r.event_version.as_deref(), Some("2.1"));
    assert_eq!(r.event_source.as_deref(), Some("saker:s3"));
    assert_eq!(r.s3.bucket.name.as_deref(), Some(b.as_str()));
    assert_eq!(r.s3.bucket.arn, Some(format!("arn:aws:s3:::{b}")));
    assert_eq!(r.s3.configuration_id.as_deref(), Some("everything"));
    assert_eq!(r.s3.object.size, Some(10));
    assert_eq!(r.s3.object.e_tag.as_deref(), Some(etag.trim_matches('"')));
    assert_eq!(r.s3.object.version_id, None, "the bucket keeps no versions");
    assert_eq!(photo.sequencer().len(), 16);
    let since = r.event_time.timestamp() - chrono_now();
    assert!(since.abs() < 600, "eventTime is now: {}", r.event_time);
    // The two changes of `a+b` come in order.
    let ab: Vec<&Received> = got.iter().filter(|r| r.key() == "a%2Bb").collect();
    assert_eq!(ab[0].event_name(), "ObjectCreated:Put");
    assert!(ab[0].sequencer() < ab.last().unwrap().sequencer());

    // Turned off, the bucket's changes go nowhere; the target may then go.
    c.put_bucket_notification_configuration()
        .bucket(&b)
        .notification_configuration(NotificationConfiguration::builder().build())
        .send()
        .await
        .unwrap();
    let out = srv.admin_cmd(&["notify", "target", "remove", "lake"]);
    ok_stdout(out, "notify target remove");
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn filters_choose_events_by_type_prefix_and_suffix() {
    let srv = Server::default_start();
    let c = srv.client();
    let hook = Webhook::start().await;
    let images = add_target(&srv, "images", &hook.url("images"));
    let removals = add_target(&srv, "removals", &hook.url("removals"));
    let b = new_bucket(&c, "filters").await;
    configure(
        &c,
        &b,
        vec![
            queue("jpg", &images, &["s3:ObjectCreated:Put"], "images/", ".jpg"),
            queue("gone", &removals, &["s3:ObjectRemoved:*"], "", ""),
        ],
    )
    .await;
    // A target a bucket names stays.
    let out = srv.admin_cmd(&["notify", "target", "remove", "images"]);
    assert!(!out.status.success(), "a target in use was removed");

    for k in [
        "images/a.jpg",
        "images/b.png",
        "docs/c.jpg",
        "images/sub/d.jpg",
    ] {
        put(&c, &b, k, b"data").await;
    }
    c.delete_object()
        .bucket(&b)
        .key("docs/c.jpg")
        .send()
        .await
        .unwrap();
    // The last change: once it is in, every earlier one of its group is too.
    put(&c, &b, "images/z.jpg", b"data").await;
    let got = wait_for(&hook, 4).await;
    let mut by_path: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for r in &got {
        by_path
            .entry(r.path.clone())
            .or_default()
            .insert((r.event_name().to_string(), r.key().to_string()));
    }
    let set = |v: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        by_path["images"],
        set(&[
            ("ObjectCreated:Put", "images/a.jpg"),
            ("ObjectCreated:Put", "images/sub/d.jpg"),
            ("ObjectCreated:Put", "images/z.jpg"),
        ])
    );
    assert_eq!(
        by_path["removals"],
        set(&[("ObjectRemoved:Delete", "docs/c.jpg")])
    );
    // Nothing else arrives: the feeds are empty once every change was delivered or matched
    // nothing.
    let drained = poll_until(DELIVERY, || async {
        let out = srv.admin_cmd(&["notify", "status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["targets"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["queue_depth"] == 0))
    })
    .await;
    assert!(drained, "the feeds did not drain");
    assert_eq!(hook.received().len(), got.len());
}

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
    let write = |round: usize| {
        let c = c.clone();
        let b = b.clone();
        let keys = keys.clone();
        async move {
            let mut done = Vec::new();
            for k in &keys {
                put(&c, &b, k, format!("{round}").as_bytes()).await;
                done.push((k.clone(), "ObjectCreated:Put"));
                if round % 2 == 1 {
                    c.delete_object().bucket(&b).key(k).send().await.unwrap();
                    done.push((k.clone(), "ObjectRemoved:Delete"));
                }
            }
            done
        }
    };
    for (k, e) in write(0).await {
        ledger.entry(k).or_default().push(e);
    }
    hook.down().await;
    for round in 1..4 {
        for (k, e) in write(round).await {
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
    let all_in = poll_until(DELIVERY, || async {
        let got = hook.received();
        ledger.iter().all(|(k, want)| {
            let mine = got.iter().filter(|r| r.key() == k).count();
            mine >= want.len()
        })
    })
    .await;
    let got = hook.received();
    assert!(all_in, "{} of {total} events arrived", got.len());
    // Per key: the events, each first delivery in sequencer order, are the ledger's.
    for (k, want) in &ledger {
        let mut first: Vec<(&str, &str)> = Vec::new();
        for r in got.iter().filter(|r| r.key() == k) {
            if !first.iter().any(|(s, _)| *s == r.sequencer()) {
                first.push((r.sequencer(), r.event_name()));
            }
        }
        assert!(
            first.windows(2).all(|w| w[0].0 < w[1].0),
            "{k}: events out of order: {first:?}"
        );
        let names: Vec<&str> = first.iter().map(|(_, n)| *n).collect();
        assert_eq!(&names, want, "{k}");
    }
    assert!(metric(&srv.admin, "saker_notify_delivered_total").await >= total as f64);
    let duplicates = got.len() - total;
    eprintln!("{total} events, {duplicates} delivered twice");
}

#[tokio::test]
async fn versioned_buckets_name_versions_markers_copies_and_tags() {
    let srv = Server::default_start();
    let c = srv.client();
    let hook = Webhook::start().await;
    let arn = add_target(&srv, "versions", &hook.url("v"));
    let b = new_bucket(&c, "vers").await;
    set_versioning(&c, &b, aws_sdk_s3::types::BucketVersioningStatus::Enabled).await;
    let events = [
        "s3:ObjectCreated:*",
        "s3:ObjectRemoved:*",
        "s3:ObjectTagging:*",
    ];
    configure(&c, &b, vec![queue("all", &arn, &events, "", "")]).await;

    let v1 = c
        .put_object()
        .bucket(&b)
        .key("k")
        .body(body(b"one"))
        .send()
        .await
        .unwrap()
        .version_id
        .unwrap();
    let copy = c
        .copy_object()
        .bucket(&b)
        .key("k2")
        .copy_source(format!("{b}/k"))
        .send()
        .await
        .unwrap()
        .version_id
        .unwrap();
    let tagging = aws_sdk_s3::types::Tagging::builder()
        .tag_set(
            aws_sdk_s3::types::Tag::builder()
                .key("stage")
                .value("raw")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    c.put_object_tagging()
        .bucket(&b)
        .key("k")
        .tagging(tagging)
        .send()
        .await
        .unwrap();
    let marker = c
        .delete_object()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .unwrap()
        .version_id
        .unwrap();
    c.delete_object()
        .bucket(&b)
        .key("k")
        .version_id(&v1)
        .send()
        .await
        .unwrap();

    let got = wait_for(&hook, 5).await;
    let mut seen: Vec<(String, String, Option<String>)> = Vec::new();
    for r in &got {
        let e = (
            r.event_name().to_string(),
            r.key().to_string(),
            r.record.s3.object.version_id.clone(),
        );
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    // (The tagging event's version is not checked: saker sends none for a tagging of the
    // current version yet.)
    let e = |n: &str, k: &str, v: Option<&str>| (n.to_string(), k.to_string(), v.map(String::from));
    let want = [
        e("ObjectCreated:Put", "k", Some(&v1)),
        e("ObjectCreated:Copy", "k2", Some(&copy)),
        e("ObjectTagging:Put", "k", None),
        e("ObjectRemoved:DeleteMarkerCreated", "k", Some(&marker)),
        e("ObjectRemoved:Delete", "k", Some(&v1)),
    ];
    // `k` and `k2` may live on different groups: compare per key, in order.
    for key in ["k", "k2"] {
        let mine: Vec<_> = seen
            .iter()
            .filter(|s| s.1 == key)
            .map(|s| match s.0.as_str() {
                "ObjectTagging:Put" => (s.0.clone(), s.1.clone(), None),
                _ => s.clone(),
            })
            .collect();
        let wanted: Vec<_> = want.iter().filter(|s| s.1 == key).cloned().collect();
        assert_eq!(mine, wanted, "{key}");
    }
}

#[tokio::test]
async fn a_full_feed_drops_its_oldest_records_counted_and_reported() {
    let srv = Server::default_start();
    let c = srv.client();
    let mut hook = Webhook::start().await;
    let arn = add_target(&srv, "small", &hook.url("cap"));
    let b = new_bucket(&c, "cap").await;
    configure(
        &c,
        &b,
        vec![queue("all", &arn, &["s3:ObjectCreated:*"], "", "")],
    )
    .await;
    ok_stdout(srv.admin_cmd(&["notify", "cap", &b, "5"]), "notify cap");
    let no_config = new_bucket(&c, "nocfg").await;
    let out = srv.admin_cmd(&["notify", "cap", &no_config, "5"]);
    assert!(
        !out.status.success(),
        "a bucket without notifications has no feed"
    );

    hook.down().await;
    // One key: one group's feed, so the cap applies to all twelve writes.
    for i in 1..=12 {
        put(&c, &b, "one", &vec![b'x'; i]).await;
    }
    let counted = poll_until(DELIVERY, || async {
        let out = srv.admin_cmd(&["notify", "status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["dropped"][&b] == 7
    })
    .await;
    assert!(counted, "status does not count 7 drops");
    let reported = poll_until(DELIVERY, || async {
        let health = reqwest::get(format!("{}/health", srv.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        health.contains(&format!("bucket {b}: 7 notifications dropped"))
    })
    .await;
    assert!(reported, "/health does not report the drops");
    let series = format!("saker_notify_feed_dropped_records{{bucket=\"{b}\"}}");
    assert_eq!(metric(&srv.admin, &series).await, 7.0);
    assert!(
        srv.stderr_tail().contains("change feed full"),
        "no log line"
    );

    hook.up().await;
    let got = wait_for(&hook, 5).await;
    let mut sizes: Vec<i64> = got.iter().filter_map(|r| r.record.s3.object.size).collect();
    sizes.dedup();
    assert_eq!(sizes, vec![8, 9, 10, 11, 12], "the newest five, in order");
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
async fn a_lifecycle_expiration_is_its_own_event_not_a_removal() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
        LifecycleRuleFilter,
    };
    let srv = Server::start(Opts::default().arg("--lifecycle-day-secs", "1"));
    let c = srv.client();
    let hook = Webhook::start().await;
    let expiry = add_target(&srv, "expiry", &hook.url("lc"));
    let removals = add_target(&srv, "removals", &hook.url("rm"));
    let b = new_bucket(&c, "lcfeed").await;
    configure(
        &c,
        &b,
        vec![
            queue("lc", &expiry, &["s3:LifecycleExpiration:*"], "", ""),
            queue("rm", &removals, &["s3:ObjectRemoved:*"], "", ""),
        ],
    )
    .await;
    put(&c, &b, "old/a", b"a").await;
    let rule = LifecycleRule::builder()
        .id("old")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("old/").build())
        .expiration(LifecycleExpiration::builder().days(1).build())
        .build()
        .unwrap();
    c.put_bucket_lifecycle_configuration()
        .bucket(&b)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(rule)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    // Passes until the object is a day (a second) old and expires.
    let expired = poll_until(DELIVERY, || async {
        ok_stdout(srv.admin_cmd(&["lifecycle", "run", &b]), "lifecycle run");
        list_all(&c, &b, None).await.is_empty()
    })
    .await;
    assert!(expired, "old/a did not expire");
    let got = wait_for(&hook, 1).await;
    assert_eq!(
        (got[0].path.as_str(), got[0].event_name(), got[0].key()),
        ("lc", "LifecycleExpiration:Delete", "old/a")
    );
    // A DELETE after it is a removal; the expiration never was one.
    put(&c, &b, "z", b"z").await;
    c.delete_object().bucket(&b).key("z").send().await.unwrap();
    let removed = poll_until(DELIVERY, || async {
        hook.received()
            .iter()
            .any(|r| r.path == "rm" && r.key() == "z")
    })
    .await;
    assert!(removed, "the DELETE of z was not notified");
    let rm: Vec<_> = names(
        &hook
            .received()
            .into_iter()
            .filter(|r| r.path == "rm")
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        rm,
        vec![("ObjectRemoved:Delete".to_string(), "z".to_string())]
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
