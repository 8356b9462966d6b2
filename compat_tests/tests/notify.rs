//! Bucket notifications end to end, their S3 side: a webhook target made with `saker admin
//! notify target add`, a bucket's NotificationConfiguration put and read back, and the events
//! an all-in-one server POSTs to a receiver the test runs: AWS's S3 event JSON (checked by
//! parsing it as `aws_lambda_events`' `S3Event`), filtered by event type, prefix and suffix,
//! versions, copies, tags and lifecycle expirations, and the feed's cap (drops counted and
//! reported). Delivery through failures is `notify_delivery.rs`'s.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, NotificationConfiguration};
use common::notify::*;
use common::webhook::{Received, Webhook};
use common::*;

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
    // Filter rules S3 refuses: two prefixes, a name that is neither prefix nor suffix.
    let rule = |name: &str, value: &str| {
        aws_sdk_s3::types::FilterRule::builder()
            .name(aws_sdk_s3::types::FilterRuleName::from(name))
            .value(value)
            .build()
    };
    for rules in [
        vec![rule("prefix", "a/"), rule("prefix", "b/")],
        vec![rule("middle", "x")],
    ] {
        let filter = aws_sdk_s3::types::NotificationConfigurationFilter::builder()
            .key(
                aws_sdk_s3::types::S3KeyFilter::builder()
                    .set_filter_rules(Some(rules))
                    .build(),
            )
            .build();
        let q = aws_sdk_s3::types::QueueConfiguration::builder()
            .queue_arn(&images)
            .events(aws_sdk_s3::types::Event::from("s3:ObjectCreated:*"))
            .filter(filter)
            .build()
            .unwrap();
        let r = c
            .put_bucket_notification_configuration()
            .bucket(&b)
            .notification_configuration(
                NotificationConfiguration::builder()
                    .queue_configurations(q)
                    .build(),
            )
            .send()
            .await;
        assert_fails(r, 400, "InvalidArgument");
    }
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
    let e = |n: &str, k: &str, v: &str| (n.to_string(), k.to_string(), Some(v.to_string()));
    let want = [
        e("ObjectCreated:Put", "k", &v1),
        e("ObjectCreated:Copy", "k2", &copy),
        e("ObjectTagging:Put", "k", &v1),
        e("ObjectRemoved:DeleteMarkerCreated", "k", &marker),
        e("ObjectRemoved:Delete", "k", &v1),
    ];
    // `k` and `k2` may live on different groups: compare per key, in order.
    for key in ["k", "k2"] {
        let mine: Vec<_> = seen.iter().filter(|s| s.1 == key).cloned().collect();
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
