//! S3 lifecycle end to end, with a one-second lifecycle day (`--lifecycle-day-secs 1`): rules
//! put, read back and deleted; expiration by prefix and by tag (x-amz-expiration on HEAD);
//! noncurrent versions expired keeping the newest N; a delete marker left alone removed;
//! stale multipart uploads aborted; `saker admin lifecycle run BUCKET` prints its pass.

mod common;

use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, BucketVersioningStatus,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleAndOperator,
    LifecycleRuleFilter, NoncurrentVersionExpiration, Tag,
};
use aws_sdk_s3::Client;
use common::*;

fn rule(
    id: &str,
    filter: LifecycleRuleFilter,
) -> aws_sdk_s3::types::builders::LifecycleRuleBuilder {
    LifecycleRule::builder()
        .id(id)
        .status(ExpirationStatus::Enabled)
        .filter(filter)
}

fn prefix(p: &str) -> LifecycleRuleFilter {
    LifecycleRuleFilter::builder().prefix(p).build()
}

fn days(d: i32) -> LifecycleExpiration {
    LifecycleExpiration::builder().days(d).build()
}

async fn set_rules(c: &Client, b: &str, rules: Vec<LifecycleRule>) {
    c.put_bucket_lifecycle_configuration()
        .bucket(b)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(rules))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("put lifecycle configuration");
}

/// Every version of `b` as (key, version id, delete marker), in listing order.
async fn versions(c: &Client, b: &str) -> Vec<(String, String, bool)> {
    let r = c.list_object_versions().bucket(b).send().await.unwrap();
    let mut out: Vec<(String, String, bool)> = r
        .versions()
        .iter()
        .map(|v| {
            (
                v.key().unwrap().into(),
                v.version_id().unwrap().into(),
                false,
            )
        })
        .collect();
    out.extend(r.delete_markers().iter().map(|m| {
        (
            m.key().unwrap().into(),
            m.version_id().unwrap().into(),
            true,
        )
    }));
    out.sort();
    out
}

#[tokio::test]
async fn rules_expire_objects_versions_markers_and_uploads() {
    let srv = Server::start(Opts::default().arg("--lifecycle-day-secs", "1"));
    let c = srv.client();

    // Expiration by prefix and by tag; a far-off rule only announces itself.
    let b = new_bucket(&c, "lc").await;
    for k in ["old/a", "old/b", "keep/c", "tagged/d", "tagged/e"] {
        put(&c, &b, k, k.as_bytes()).await;
    }
    c.put_object_tagging()
        .bucket(&b)
        .key("tagged/d")
        .tagging(
            aws_sdk_s3::types::Tagging::builder()
                .tag_set(Tag::builder().key("tmp").value("yes").build().unwrap())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let by_tag = LifecycleRuleFilter::builder()
        .and(
            LifecycleRuleAndOperator::builder()
                .prefix("tagged/")
                .tags(Tag::builder().key("tmp").value("yes").build().unwrap())
                .build(),
        )
        .build();
    set_rules(
        &c,
        &b,
        vec![
            rule("old", prefix("old/"))
                .expiration(days(1))
                .build()
                .unwrap(),
            rule("tmp", by_tag).expiration(days(1)).build().unwrap(),
            rule("keep", prefix("keep/"))
                .expiration(days(100_000))
                .build()
                .unwrap(),
        ],
    )
    .await;
    let got = c
        .get_bucket_lifecycle_configuration()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_eq!(got.rules().len(), 3);
    assert_eq!(
        got.rules()[1].filter().unwrap().and().unwrap().prefix(),
        Some("tagged/")
    );
    let head = c
        .head_object()
        .bucket(&b)
        .key("keep/c")
        .send()
        .await
        .unwrap();
    let exp = head.expiration().expect("x-amz-expiration");
    assert!(exp.contains("rule-id=\"keep\""), "{exp}");
    let expired = poll_until(std::time::Duration::from_secs(30), || async {
        list_all(&c, &b, None).await == ["keep/c", "tagged/e"]
    })
    .await;
    assert!(expired, "left: {:?}", list_all(&c, &b, None).await);
    assert_eq!(get_bytes(&c, &b, "keep/c").await, b"keep/c");

    // Noncurrent versions: all but the newest noncurrent one go; a delete marker that is
    // the last version of its key goes too.
    let v = new_bucket(&c, "lcver").await;
    set_versioning(&c, &v, BucketVersioningStatus::Enabled).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let r = c
            .put_object()
            .bucket(&v)
            .key("k")
            .body(body(format!("v{i}").as_bytes()))
            .send()
            .await
            .unwrap();
        ids.push(r.version_id.unwrap());
    }
    put(&c, &v, "gone", b"x").await;
    c.delete_object()
        .bucket(&v)
        .key("gone")
        .send()
        .await
        .unwrap();
    let noncurrent = NoncurrentVersionExpiration::builder()
        .noncurrent_days(1)
        .newer_noncurrent_versions(1)
        .build();
    let markers = LifecycleExpiration::builder()
        .expired_object_delete_marker(true)
        .build();
    set_rules(
        &c,
        &v,
        vec![
            rule("noncurrent", prefix(""))
                .noncurrent_version_expiration(noncurrent)
                .build()
                .unwrap(),
            rule("markers", prefix(""))
                .expiration(markers)
                .build()
                .unwrap(),
        ],
    )
    .await;
    let want = {
        let mut w = vec![
            ("k".to_string(), ids[3].clone(), false),
            ("k".to_string(), ids[2].clone(), false),
        ];
        w.sort();
        w
    };
    let trimmed = poll_until(std::time::Duration::from_secs(30), || async {
        versions(&c, &v).await == want
    })
    .await;
    assert!(trimmed, "versions left: {:?}", versions(&c, &v).await);
    assert_eq!(get_bytes(&c, &v, "k").await, b"v3");

    // Stale multipart uploads are aborted.
    let u = new_bucket(&c, "lcup").await;
    let up = c
        .create_multipart_upload()
        .bucket(&u)
        .key("big")
        .send()
        .await
        .unwrap();
    let uid = up.upload_id().unwrap().to_string();
    c.upload_part()
        .bucket(&u)
        .key("big")
        .upload_id(&uid)
        .part_number(1)
        .body(body(&random_bytes(64 * 1024)))
        .send()
        .await
        .unwrap();
    let abort = AbortIncompleteMultipartUpload::builder()
        .days_after_initiation(1)
        .build();
    set_rules(
        &c,
        &u,
        vec![rule("uploads", prefix(""))
            .abort_incomplete_multipart_upload(abort)
            .build()
            .unwrap()],
    )
    .await;
    let aborted = poll_until(std::time::Duration::from_secs(30), || async {
        let r = c.list_multipart_uploads().bucket(&u).send().await.unwrap();
        r.uploads().is_empty()
    })
    .await;
    assert!(aborted, "the upload is still listed");
    assert_fails(
        c.list_parts()
            .bucket(&u)
            .key("big")
            .upload_id(&uid)
            .send()
            .await,
        404,
        "NoSuchUpload",
    );

    // The rules go; a bucket without them answers NoSuchLifecycleConfiguration.
    c.delete_bucket_lifecycle().bucket(&u).send().await.unwrap();
    assert_fails(
        c.get_bucket_lifecycle_configuration()
            .bucket(&u)
            .send()
            .await,
        404,
        "NoSuchLifecycleConfiguration",
    );
}

#[tokio::test]
async fn admin_runs_a_pass_and_bad_rules_are_refused() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "lcadmin").await;
    put(&c, &b, "a", b"a").await;
    set_rules(
        &c,
        &b,
        vec![rule("later", prefix(""))
            .expiration(days(30))
            .build()
            .unwrap()],
    )
    .await;
    let out = ok_stdout(srv.admin_cmd(&["lifecycle", "run", &b]), "lifecycle run");
    let sum: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(sum["buckets"], 1, "{out}");
    assert_eq!(sum["objects"], 1, "{out}");
    assert_eq!(sum["expired"], 0, "{out}");
    let status = ok_stdout(srv.admin_cmd(&["lifecycle", "status"]), "lifecycle status");
    let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
    assert_eq!(status["day_secs"], 86_400);
    assert_eq!(status["last_pass"]["summary"]["objects"], 1);

    // Two rules with one ID, and a rule that does nothing, are refused.
    let same = vec![
        rule("x", prefix("a")).expiration(days(1)).build().unwrap(),
        rule("x", prefix("b")).expiration(days(2)).build().unwrap(),
    ];
    let r = c
        .put_bucket_lifecycle_configuration()
        .bucket(&b)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(same))
                .build()
                .unwrap(),
        )
        .send()
        .await;
    assert_fails(r, 400, "InvalidArgument");
    let zero = vec![rule("z", prefix("")).expiration(days(0)).build().unwrap()];
    let r = c
        .put_bucket_lifecycle_configuration()
        .bucket(&b)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .set_rules(Some(zero))
                .build()
                .unwrap(),
        )
        .send()
        .await;
    assert_fails(r, 400, "InvalidArgument");
}

/// A pass cut short by kill -9 resumes where it saved its place: the next pass looks at
/// fewer objects than the bucket held, and still leaves none that were due.
#[tokio::test]
async fn a_pass_cut_short_resumes_where_it_stopped() {
    const N: usize = 1200;
    let opts = Opts::default()
        .arg("--lifecycle-day-secs", "1")
        .arg("--lifecycle-every", "0s")
        .arg("--lifecycle-rate", "300");
    let mut srv = Server::start(opts);
    let c = srv.client();
    let b = new_bucket(&c, "lcresume").await;
    let puts = (0..N).map(|i| {
        let (c, b) = (c.clone(), b.clone());
        async move { put(&c, &b, &format!("obj-{i:05}"), b"x").await }
    });
    futures::future::join_all(puts).await;
    set_rules(
        &c,
        &b,
        vec![rule("all", prefix("")).expiration(days(1)).build().unwrap()],
    )
    .await;
    // The rule's one-second day has to pass for the objects to be due: the clock is the
    // input here, not a stand-in for an event.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let mut first = std::process::Command::new(saker_bin())
        .args(["admin", "lifecycle", "run", "--admin-endpoint", &srv.admin])
        .env("SAKER_ACCESS_KEY", ROOT_AK)
        .env("SAKER_SECRET_KEY", ROOT_SK)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let saved = poll_until(std::time::Duration::from_secs(30), || async {
        let out = srv.admin_cmd(&["lifecycle", "status"]);
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        v["cursor"]["key"].as_str().is_some_and(|k| !k.is_empty())
    })
    .await;
    assert!(saved, "the pass never saved its place");
    srv.kill();
    let _ = first.wait();
    srv.restart();
    let out = ok_stdout(srv.admin_cmd(&["lifecycle", "run"]), "lifecycle run");
    let sum: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let looked = sum["objects"].as_u64().unwrap();
    assert!(
        looked > 0 && looked < N as u64,
        "resumed pass looked at {looked}: {out}"
    );
    let c = srv.client();
    assert_eq!(list_all(&c, &b, None).await, Vec::<String>::new());
    let status = ok_stdout(srv.admin_cmd(&["lifecycle", "status"]), "lifecycle status");
    let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
    assert!(status["cursor"].is_null(), "{status}");
}

/// Lifecycle against Object Lock: a locked current version that expires is hidden behind a
/// delete marker, as AWS does, and stays; a locked noncurrent version that expires is not
/// removed (the pass counts the refusal as an error and the next pass tries again).
#[tokio::test]
async fn expiry_hides_locked_versions_and_never_removes_them() {
    use common::versions::get_v;
    use common::worm::{a_day_of_governance, locked_bucket};
    let opts = Opts::default()
        .arg("--lifecycle-day-secs", "1")
        .arg("--lifecycle-every", "0s");
    let srv = Server::start(opts);
    let c = srv.client();
    let b = bucket_name("lclocked");
    locked_bucket(&c, &b, a_day_of_governance()).await;
    let mut ids = Vec::new();
    for data in [&b"first"[..], b"second"] {
        let r = c
            .put_object()
            .bucket(&b)
            .key("k")
            .body(body(data))
            .send()
            .await
            .unwrap();
        ids.push(r.version_id.unwrap());
    }
    let noncurrent = NoncurrentVersionExpiration::builder()
        .noncurrent_days(1)
        .build();
    set_rules(
        &c,
        &b,
        vec![rule("all", prefix(""))
            .expiration(days(1))
            .noncurrent_version_expiration(noncurrent)
            .build()
            .unwrap()],
    )
    .await;
    // The rules' one-second day has to pass for the versions to be due: the clock is the
    // input here, not a stand-in for an event.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let run = |what| {
        let out = ok_stdout(srv.admin_cmd(&["lifecycle", "run", &b]), what);
        serde_json::from_str::<serde_json::Value>(out.trim()).unwrap()
    };
    let first = run("first pass");
    assert_eq!(first["expired"], 1, "{first}");
    assert_eq!(first["noncurrent_expired"], 0, "{first}");
    assert!(first["errors"].as_u64().unwrap() >= 1, "{first}");
    let listed = versions(&c, &b).await;
    let markers: Vec<_> = listed.iter().filter(|v| v.2).collect();
    assert_eq!(markers.len(), 1, "{listed:?}");
    assert_fails(
        c.get_object().bucket(&b).key("k").send().await,
        404,
        "NoSuchKey",
    );

    // The second pass finds the noncurrent versions due again (they are older still) and
    // removes neither.
    let second = run("second pass");
    assert_eq!(second["noncurrent_expired"], 0, "{second}");
    for (id, data) in ids.iter().zip([&b"first"[..], b"second"]) {
        assert_eq!(get_v(&c, &b, "k", id).await, data);
    }
    assert_eq!(versions(&c, &b).await, listed);
}
