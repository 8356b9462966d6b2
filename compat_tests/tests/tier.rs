//! Remote archive tiers end to end: a second `saker server` on loopback is the tier. A
//! lifecycle Transition moves objects (inline, chunked, multipart-sized) there: their bytes
//! leave the local chunkstore, and GET, ranged GET, HEAD (StorageClass), listings and the
//! mounts (in-process, and a library mount whose node reads through for it) read them back; RestoreObject brings a local copy back; deletes and overwrites
//! remove the remote copy after the grace period; a tier with objects cannot be removed.
//! `saker archive` moves a prefix, survives a kill -9 of the server mid-way, resumes and
//! verifies; the tier scrub deletes a remote orphan.

mod common;

use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, LifecycleRule, LifecycleRuleFilter,
    RestoreRequest, Transition, TransitionStorageClass,
};
use aws_sdk_s3::Client;
use common::fuse::{LibraryMount, Mounted};
use common::tier::{add_tier, archive_cmd, remote_keys, restore, transition_rule};
use common::*;

/// (key, storage class) of every object of `b`.
async fn classes(c: &Client, b: &str) -> Vec<(String, String)> {
    let r = c.list_objects_v2().bucket(b).send().await.unwrap();
    r.contents()
        .iter()
        .map(|o| {
            let class = o.storage_class().map(|s| s.as_str().to_string());
            (o.key().unwrap().to_string(), class.unwrap_or_default())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lifecycle_moves_objects_to_a_tier_and_reads_come_back() {
    let cold = Server::default_start();
    let cc = cold.client();
    create_bucket(&cc, "archive").await;
    let opts = Opts::fast_gc()
        .arg("--lifecycle-day-secs", "1")
        .arg("--tier-cache-size", "1MiB");
    let mounted = tokio::task::spawn_blocking(move || Mounted::start(opts))
        .await
        .unwrap();
    let hot = &mounted.srv;
    let c = hot.client();

    // A tier whose key is wrong is refused at once; a good one is listed without its secret.
    let bad = add_tier(hot, &cold, "COLD", "archive", "wrong-secret");
    assert!(!bad.status.success(), "a tier with a bad key was added");
    ok_stdout(add_tier(hot, &cold, "COLD", "archive", ROOT_SK), "tier add");
    let listed = ok_stdout(hot.admin_cmd(&["tier", "list"]), "tier list");
    assert!(listed.starts_with("COLD\t"), "{listed}");
    assert!(!listed.contains(ROOT_SK), "the secret is shown: {listed}");

    let b = new_bucket(&c, "hot").await;
    let inline = random_bytes(10 * 1024);
    let mid = random_bytes(200 * 1024);
    let big = random_bytes(20 << 20);
    let kept = random_bytes(100 * 1024);
    put(&c, &b, "logs/inline", &inline).await;
    put(&c, &b, "logs/mid", &mid).await;
    put(&c, &b, "logs/big", &big).await;
    put(&c, &b, "keep/x", &kept).await;
    let chunks_before = hot.stored_chunks();
    assert_eq!(chunks_before, 5, "mid 1 + big 3 + kept 1");

    // A Transition must name a tier.
    let e = transition_rule(&c, &b, "GLACIER", 1).await.unwrap_err();
    assert!(e.contains("InvalidStorageClass"), "{e}");
    transition_rule(&c, &b, "COLD", 1).await.unwrap();
    let got = c
        .get_bucket_lifecycle_configuration()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let t = &got.rules()[0].transitions()[0];
    assert_eq!(
        (t.days(), t.storage_class().map(|s| s.as_str())),
        (Some(1), Some("COLD"))
    );

    // The background passes move logs/ (a day is a second here); keep/ stays.
    let want = vec![
        ("keep/x".to_string(), "STANDARD".to_string()),
        ("logs/big".to_string(), "COLD".to_string()),
        ("logs/inline".to_string(), "COLD".to_string()),
        ("logs/mid".to_string(), "COLD".to_string()),
    ];
    let moved = poll_until(std::time::Duration::from_secs(60), || async {
        classes(&c, &b).await == want
    })
    .await;
    assert!(
        moved,
        "classes: {:?}\n{}",
        classes(&c, &b).await,
        hot.stderr_tail()
    );
    let mut remote = remote_keys(&cc, "archive").await;
    remote.sort_by_key(|(_, n)| *n);
    let sizes: Vec<i64> = remote.iter().map(|(_, n)| *n).collect();
    assert_eq!(sizes, [10 * 1024, 200 * 1024, 20 << 20]);
    assert!(
        remote.iter().all(|(k, _)| k.starts_with("lake/")),
        "{remote:?}"
    );

    // The local bytes go after the grace period: only keep/x's chunk stays.
    let freed = poll_until(std::time::Duration::from_secs(30), || async {
        hot.stored_chunks() == 1
    })
    .await;
    assert!(freed, "{} chunks stored", hot.stored_chunks());

    // Reads go through: whole, ranged (cached small objects, streamed big ones), HEAD.
    assert_eq!(get_bytes(&c, &b, "logs/inline").await, inline);
    assert_eq!(get_bytes(&c, &b, "logs/mid").await, mid);
    assert_eq!(get_bytes(&c, &b, "logs/mid").await, mid, "from the cache");
    assert_eq!(get_bytes(&c, &b, "logs/big").await, big);
    let at = 9 << 20;
    assert_eq!(
        get_range(&c, &b, "logs/big", &format!("bytes={at}-{}", at + 99)).await,
        big[at..at + 100]
    );
    assert_eq!(
        get_range(&c, &b, "logs/mid", "bytes=100-199").await,
        mid[100..200]
    );
    let head = c
        .head_object()
        .bucket(&b)
        .key("logs/mid")
        .send()
        .await
        .unwrap();
    assert_eq!(head.storage_class().map(|s| s.as_str()), Some("COLD"));
    assert_eq!(head.content_length(), Some(200 * 1024));
    let kept_head = c
        .head_object()
        .bucket(&b)
        .key("keep/x")
        .send()
        .await
        .unwrap();
    assert_eq!(kept_head.storage_class(), None);

    // Through the mount too.
    let file = mounted.root.join(&b).join("logs/mid");
    let through_mount = tokio::task::spawn_blocking(move || std::fs::read(file).unwrap())
        .await
        .unwrap();
    assert_eq!(through_mount, mid);
    // And through a library mount, whose client credential may not read the tiers' keys:
    // the node it mounted through reads for it (a small object, a big one in 4 MiB calls,
    // and a range of it).
    let lib = tokio::task::block_in_place(|| LibraryMount::start(hot));
    let (lib_mid, lib_big, lib_range) = tokio::task::block_in_place(|| {
        use std::os::unix::fs::FileExt;
        let dir = lib.root.join(&b).join("logs");
        let mut at = vec![0u8; 1000];
        std::fs::File::open(dir.join("big"))
            .unwrap()
            .read_exact_at(&mut at, (13 << 20) + 7)
            .unwrap();
        (
            std::fs::read(dir.join("mid")).unwrap(),
            std::fs::read(dir.join("big")).unwrap(),
            at,
        )
    });
    assert_eq!(lib_mid, mid);
    assert!(
        lib_big == big,
        "the big object read through a library mount differs"
    );
    assert_eq!(lib_range, big[(13 << 20) + 7..(13 << 20) + 1007]);
    drop(lib);
    // Such a client reads a copy in the tier only with a grant for it.
    tier_reads_stay_in_this_cluster(hot, &b, "big").await;

    // RestoreObject: 202 for a new copy (its chunk is local again), 200 after; x-amz-restore.
    let restore = |days: i32| restore(&c, &b, "logs/mid", days);
    restore(30).await.unwrap();
    assert_eq!(hot.stored_chunks(), 2, "the restored copy's chunk");
    restore(40).await.unwrap();
    let head = c
        .head_object()
        .bucket(&b)
        .key("logs/mid")
        .send()
        .await
        .unwrap();
    let shown = head.restore().unwrap_or_default().to_string();
    assert!(shown.contains("ongoing-request=\"false\""), "{shown}");
    assert_eq!(get_bytes(&c, &b, "logs/mid").await, mid);
    let e = c
        .restore_object()
        .bucket(&b)
        .key("keep/x")
        .restore_request(RestoreRequest::builder().days(1).build())
        .send()
        .await;
    assert_eq!(failure(e).code.as_deref(), Some("InvalidObjectState"));

    // A tier that objects live in stays.
    let refused = hot.admin_cmd(&["tier", "remove", "COLD"]);
    assert!(!refused.status.success(), "a tier in use was removed");

    // Deleting and overwriting remove the remote copies (after the grace period).
    c.delete_object()
        .bucket(&b)
        .key("logs/mid")
        .send()
        .await
        .unwrap();
    put(&c, &b, "logs/inline", b"new").await;
    // The new logs/inline may itself move to the tier meanwhile (a day is a second), so
    // the old copies are looked for by name rather than counted.
    let old: Vec<String> = remote[..2].iter().map(|(k, _)| k.clone()).collect();
    let big_key = remote[2].0.clone();
    let gone = poll_until(std::time::Duration::from_secs(30), || async {
        let now = remote_keys(&cc, "archive").await;
        !now.iter().any(|(k, _)| old.contains(k)) && now.iter().any(|(k, _)| *k == big_key)
    })
    .await;
    assert!(
        gone,
        "old copies {old:?}, remote: {:?}",
        remote_keys(&cc, "archive").await
    );
    assert_eq!(get_bytes(&c, &b, "logs/inline").await, b"new");
    assert_eq!(get_bytes(&c, &b, "logs/big").await, big);
}

/// A client credential's tier reads: with the grant an MNode gave it for the object at
/// `bucket/key` (its read permission checked), it reads that copy; any other key of the tier
/// bucket (another cluster's copies, say), and the same copy without a grant, are refused.
async fn tier_reads_stay_in_this_cluster(hot: &Server, bucket: &str, key: &str) {
    use saker_rpc::auth::{install, Credential};
    install(
        Credential::load(&hot.credential_path())
            .unwrap()
            .client()
            .unwrap(),
    );
    let ch = saker_rpc::RpcChannel::connect(&hot.rpc_addr).await.unwrap();
    let lib = saker_client::Cluster::connect_all(&hot.rpc_addr, Default::default())
        .await
        .unwrap();
    let path = vec![bucket.to_string(), "logs".into(), key.to_string()];
    let access = |mask: u32| saker_rpc::MetaRequest::Access {
        path: path.clone(),
        mask,
        cred: saker_rpc::Cred::ROOT,
        want: saker_rpc::Want::ATTR,
    };
    // Attributes alone come without a grant: the copy's key does not open it.
    let view = match lib.call(&path, access(0)).await.unwrap() {
        saker_rpc::MetaResponse::Object(v) => v,
        other => panic!("{other:?}"),
    };
    assert!(view.grants.is_empty());
    let ours = view.attr.layout.tiered().expect("a tiered object").clone();
    let e = ch.tier_read(&ours, 0, 100).await.unwrap_err();
    assert!(e.to_string().contains("grant"), "{e}");
    let view = match lib
        .call(&path, access(saker_rpc::access::READ))
        .await
        .unwrap()
    {
        saker_rpc::MetaResponse::Object(v) => v,
        other => panic!("{other:?}"),
    };
    saker_rpc::capability::hold(&view.grants);
    let got = ch.tier_read(&ours, 0, 100).await.unwrap();
    assert_eq!(got.len(), 100);
    let cluster = ours
        .key
        .strip_prefix("lake/")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    for other in [
        ours.key.replacen(cluster, "another-cluster", 1),
        "lake/x".to_string(),
        format!("lake/{cluster}/../x/1/2.0"),
    ] {
        let theirs = saker_rpc::TierRef {
            key: other.clone(),
            ..ours.clone()
        };
        let e = ch.tier_read(&theirs, 0, 100).await.unwrap_err();
        assert!(e.to_string().contains("grant"), "{other}: {e}");
    }
    let e = ch.tier_read(&ours, 0, 64 << 20).await.unwrap_err();
    assert!(e.to_string().contains("at most"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn archive_moves_a_prefix_resumes_after_a_kill_and_verifies() {
    let cold = Server::default_start();
    let cc = cold.client();
    create_bucket(&cc, "archive").await;
    let mut hot = Server::start(Opts::fast_gc());
    ok_stdout(
        add_tier(&hot, &cold, "COLD", "archive", ROOT_SK),
        "tier add",
    );
    let c = hot.client();
    let b = new_bucket(&c, "arc").await;
    let mut data = Vec::new();
    for i in 0..60 {
        let bytes = random_bytes(64 * 1024 + i);
        put(&c, &b, &format!("data/{i:03}"), &bytes).await;
        data.push(bytes);
    }
    put(&c, &b, "other/x", b"stays").await;

    let dry = archive_cmd(&hot, &format!("{b}/data/"), &["--dry-run"])
        .output()
        .unwrap();
    let dry = ok_stdout(dry, "archive --dry-run");
    assert_eq!(dry.lines().count(), 61, "{dry}");
    assert!(dry.ends_with("would move 60 objects, 3.8 MiB\n"), "{dry}");
    assert!(
        remote_keys(&cc, "archive").await.is_empty(),
        "a dry run moved something"
    );

    // kill -9 of the server once some objects moved.
    let mut first = archive_cmd(&hot, &format!("{b}/data/"), &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = poll_until(std::time::Duration::from_secs(60), || async {
        remote_keys(&cc, "archive").await.len() >= 10
    })
    .await;
    assert!(started, "the archive moved nothing");
    hot.kill();
    let status = first.wait().unwrap();
    assert!(
        !status.success(),
        "the archive succeeded without its server"
    );

    // A rerun resumes, moves the rest and verifies every remote copy.
    hot.restart();
    let c = hot.client();
    let out = ok_stdout(
        archive_cmd(&hot, &format!("{b}/data/"), &[])
            .output()
            .unwrap(),
        "archive",
    );
    let job: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(job["state"], "done", "{job}");
    assert_eq!(job["report"]["verified"], 60, "{job}");
    assert_eq!(job["report"]["mismatched"], 0, "{job}");
    let moved =
        job["report"]["moved"].as_u64().unwrap() + job["report"]["already"].as_u64().unwrap();
    assert_eq!(moved, 60, "{job}");
    // What the first run committed before the kill counts as already there.
    assert!(job["report"]["already"].as_u64().unwrap() >= 1, "{job}");
    for (i, bytes) in data.iter().enumerate() {
        assert_eq!(
            &get_bytes(&c, &b, &format!("data/{i:03}")).await,
            bytes,
            "data/{i:03}"
        );
    }
    let cls = classes(&c, &b).await;
    assert!(
        cls.iter()
            .filter(|(k, _)| k.starts_with("data/"))
            .all(|(_, s)| s == "COLD"),
        "{cls:?}"
    );
    assert_eq!(
        cls.last().unwrap(),
        &("other/x".to_string(), "STANDARD".to_string())
    );

    // The tier scrub deletes a remote orphan of this cluster (older than --scrub-age).
    let some = remote_keys(&cc, "archive").await[0].0.clone();
    let cluster_prefix = some.rsplitn(3, '/').nth(2).unwrap().to_string();
    let orphan = format!("{cluster_prefix}/999999/1");
    put(&cc, "archive", &orphan, b"orphan").await;
    let scrubbed = poll_until(std::time::Duration::from_secs(30), || async {
        !remote_keys(&cc, "archive")
            .await
            .iter()
            .any(|(k, _)| *k == orphan)
    })
    .await;
    assert!(scrubbed, "the orphan stays");
    assert_eq!(remote_keys(&cc, "archive").await.len(), 60);
}

/// (version id, storage class, latest) of every version of `key`.
async fn version_classes(c: &Client, b: &str) -> Vec<(String, String, bool)> {
    let r = c.list_object_versions().bucket(b).send().await.unwrap();
    r.versions()
        .iter()
        .map(|v| {
            let class = v.storage_class().map(|s| s.as_str().to_string());
            (
                v.version_id().unwrap().to_string(),
                class.unwrap_or_default(),
                v.is_latest().unwrap_or(false),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn versions_move_between_tiers_and_noncurrent_ones_move_too() {
    use aws_sdk_s3::types::{BucketVersioningStatus, NoncurrentVersionTransition};
    let cold = Server::default_start();
    let cc = cold.client();
    create_bucket(&cc, "warm").await;
    create_bucket(&cc, "frozen").await;
    let hot = Server::start(Opts::fast_gc().arg("--lifecycle-day-secs", "1"));
    ok_stdout(add_tier(&hot, &cold, "WARM", "warm", ROOT_SK), "tier add");
    ok_stdout(
        add_tier(&hot, &cold, "FROZEN", "frozen", ROOT_SK),
        "tier add",
    );
    let c = hot.client();
    let b = new_bucket(&c, "ver").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let bodies: Vec<Vec<u8>> = (0..3).map(|i| random_bytes(30_000 + i)).collect();
    let mut ids = Vec::new();
    for body in &bodies {
        let r = c
            .put_object()
            .bucket(&b)
            .key("k")
            .body(body.clone().into())
            .send()
            .await
            .unwrap();
        ids.push(r.version_id().unwrap().to_string());
    }
    let tr = |days: i32, class: &str| {
        Transition::builder()
            .days(days)
            .storage_class(TransitionStorageClass::from(class))
            .build()
    };
    let rule = LifecycleRule::builder()
        .id("tiers")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .transitions(tr(1, "WARM"))
        .transitions(tr(3, "FROZEN"))
        .noncurrent_version_transitions(
            NoncurrentVersionTransition::builder()
                .noncurrent_days(1)
                .storage_class(TransitionStorageClass::from("WARM"))
                .build(),
        )
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
    let got = c
        .get_bucket_lifecycle_configuration()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_eq!(got.rules()[0].transitions().len(), 2);
    assert_eq!(got.rules()[0].noncurrent_version_transitions().len(), 1);

    // The current version goes to WARM, then on to FROZEN; the noncurrent ones to WARM.
    let want = vec![
        (ids[2].clone(), "FROZEN".to_string(), true),
        (ids[1].clone(), "WARM".to_string(), false),
        (ids[0].clone(), "WARM".to_string(), false),
    ];
    let moved = poll_until(std::time::Duration::from_secs(60), || async {
        version_classes(&c, &b).await == want
    })
    .await;
    assert!(
        moved,
        "{:?}\n{}",
        version_classes(&c, &b).await,
        hot.stderr_tail()
    );
    // The current version's WARM copy went when it moved on (after the grace period).
    let settled = poll_until(std::time::Duration::from_secs(30), || async {
        remote_keys(&cc, "warm").await.len() == 2 && remote_keys(&cc, "frozen").await.len() == 1
    })
    .await;
    assert!(
        settled,
        "warm {:?} frozen {:?}",
        remote_keys(&cc, "warm").await,
        remote_keys(&cc, "frozen").await
    );
    for (id, body) in ids.iter().zip(&bodies) {
        let o = c
            .get_object()
            .bucket(&b)
            .key("k")
            .version_id(id)
            .send()
            .await
            .unwrap();
        assert_eq!(
            &o.body.collect().await.unwrap().into_bytes().to_vec(),
            body,
            "{id}"
        );
    }
    assert_eq!(hot.stored_chunks(), 0, "every version's bytes left");

    // A noncurrent version is restored by its id: a local copy, shown by HEAD, read from.
    c.restore_object()
        .bucket(&b)
        .key("k")
        .version_id(&ids[1])
        .restore_request(RestoreRequest::builder().days(1).build())
        .send()
        .await
        .unwrap();
    assert!(hot.stored_chunks() > 0, "the restored copy is local");
    let head = c
        .head_object()
        .bucket(&b)
        .key("k")
        .version_id(&ids[1])
        .send()
        .await
        .unwrap();
    assert!(
        head.restore()
            .is_some_and(|r| r.contains("ongoing-request=\"false\"")),
        "{:?}",
        head.restore()
    );
    let o = c
        .get_object()
        .bucket(&b)
        .key("k")
        .version_id(&ids[1])
        .send()
        .await
        .unwrap();
    assert_eq!(
        o.body.collect().await.unwrap().into_bytes().to_vec(),
        bodies[1]
    );

    // Deleting a noncurrent version deletes its remote copy.
    c.delete_object()
        .bucket(&b)
        .key("k")
        .version_id(&ids[0])
        .send()
        .await
        .unwrap();
    let gone = poll_until(std::time::Duration::from_secs(30), || async {
        remote_keys(&cc, "warm").await.len() == 1
    })
    .await;
    assert!(gone, "warm {:?}", remote_keys(&cc, "warm").await);
}

/// PutObject and CopyObject with a tier's name as `x-amz-storage-class` store the object in
/// that tier before they answer (a copy onto itself moves it there, or back with STANDARD);
/// a class that names no tier is refused and stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_with_a_tier_class_land_in_the_tier() {
    use aws_sdk_s3::types::StorageClass;
    let cold = Server::default_start();
    let cc = cold.client();
    create_bucket(&cc, "archive").await;
    let hot = Server::start(Opts::default());
    let c = hot.client();
    ok_stdout(
        add_tier(&hot, &cold, "COLD", "archive", ROOT_SK),
        "tier add",
    );
    let b = new_bucket(&c, "direct").await;
    let data = random_bytes(300 * 1024);
    c.put_object()
        .bucket(&b)
        .key("put")
        .storage_class(StorageClass::from("COLD"))
        .body(body(&data))
        .send()
        .await
        .unwrap();
    put(&c, &b, "copied", &data).await;
    let copy = |class: &str| {
        c.copy_object()
            .bucket(&b)
            .key("copied")
            .copy_source(format!("{b}/copied"))
            .storage_class(StorageClass::from(class))
            .send()
    };
    copy("COLD").await.unwrap();
    assert_eq!(
        classes(&c, &b).await,
        [
            ("copied".to_string(), "COLD".to_string()),
            ("put".to_string(), "COLD".to_string())
        ]
    );
    assert_eq!(remote_keys(&cc, "archive").await.len(), 2);
    assert_eq!(get_bytes(&c, &b, "put").await, data);
    assert_eq!(get_bytes(&c, &b, "copied").await, data);
    let head = c.head_object().bucket(&b).key("put").send().await.unwrap();
    assert_eq!(head.storage_class().map(|s| s.as_str()), Some("COLD"));
    // Back to STANDARD by a copy onto itself.
    copy("STANDARD").await.unwrap();
    let head = c
        .head_object()
        .bucket(&b)
        .key("copied")
        .send()
        .await
        .unwrap();
    assert_eq!(head.storage_class(), None);
    assert_eq!(get_bytes(&c, &b, "copied").await, data);
    // No tier of that name: refused, nothing stored.
    let r = c
        .put_object()
        .bucket(&b)
        .key("nowhere")
        .storage_class(StorageClass::from("WARM"))
        .body(body(b"x"))
        .send()
        .await;
    assert_fails(r, 400, "InvalidStorageClass");
    assert_status(c.head_object().bucket(&b).key("nowhere").send().await, 404);
}
