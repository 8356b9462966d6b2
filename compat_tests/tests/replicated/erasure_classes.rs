//! A bucket's storage classes by prefix (issue 63), on the all-in-one server on six chunk
//! directories: `saker admin bucket storage-class set` names a prefix to keep 4+2 (a layout
//! wider than the disks is refused clearly); objects under it are written as replicas, then
//! coded, current and noncurrent versions alike, by `saker admin ec run --free-now` (which
//! frees the replaced replicas at once) and by the lifecycle passes in the background.

use super::erasure::{chunk_files, six_disks};
use super::*;

fn out_text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

async fn class_of(c: &aws_sdk_s3::Client, b: &str, key: &str, version: Option<&str>) -> String {
    let head = c
        .head_object()
        .bucket(b)
        .key(key)
        .set_version_id(version.map(str::to_string))
        .send()
        .await
        .unwrap();
    head.storage_class()
        .map_or("STANDARD", |s| s.as_str())
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prefix_storage_class_codes_current_and_noncurrent_versions() {
    let (_disks, dirs, list) = six_disks();
    // A long grace: only `--free-now` frees the replaced replicas within this test.
    let opts = Opts::default()
        .arg("--chunk-dirs", &list)
        .arg("--gc-grace", "1h")
        .arg("--gc-interval", "200ms");
    let srv = Server::start(opts);
    let c = srv.client();
    let b = "lake";
    create_bucket(&c, b).await;
    c.put_bucket_versioning()
        .bucket(b)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();

    // A layout wider than six disks, a bad layout and a missing bucket are refused clearly.
    let o = srv.admin_cmd(&["bucket", "storage-class", "set", b, "--ec", "8+3"]);
    let (_, err) = out_text(&o);
    assert!(
        !o.status.success() && err.contains("8+3 cannot be kept here"),
        "{err}"
    );
    assert!(err.contains("11 shards need 11 chunkstores"), "{err}");
    let o = srv.admin_cmd(&["bucket", "storage-class", "set", b, "--ec", "4-2"]);
    assert!(!o.status.success(), "{:?}", out_text(&o));
    let o = srv.admin_cmd(&["bucket", "storage-class", "set", "nope", "--ec", "4+2"]);
    let (_, err) = out_text(&o);
    assert!(!o.status.success() && err.contains("NoSuchBucket"), "{err}");

    let o = srv.admin_cmd(&[
        "bucket",
        "storage-class",
        "set",
        b,
        "--prefix",
        "cold/",
        "--ec",
        "4+2",
    ]);
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{err}");
    assert!(text.contains("lake\tcold/\tEC_4_2"), "{text}");

    // Written as replicas (one 3 MiB chunk each, three copies): an old and a new version of
    // cold/a, and hot/b outside the prefix.
    let (old, new, hot) = (
        random_bytes(3 << 20),
        random_bytes(3 << 20),
        random_bytes(3 << 20),
    );
    let v1 = c
        .put_object()
        .bucket(b)
        .key("cold/a")
        .body(old.clone().into())
        .send()
        .await
        .unwrap()
        .version_id()
        .unwrap()
        .to_string();
    put(&c, b, "cold/a", &new).await;
    put(&c, b, "hot/b", &hot).await;
    assert_eq!(class_of(&c, b, "cold/a", None).await, "STANDARD");
    let files = || dirs.iter().map(|d| chunk_files(d)).sum::<usize>();
    assert_eq!(files(), 3 * 3);

    let o = srv.admin_cmd(&["ec", "run", b, "--free-now"]);
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{text}\n{err}");
    let job: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(job["state"], "done", "{text}");
    assert_eq!(job["summary"]["transitioned"], 2, "{text}");
    assert_eq!(job["freed"], 2, "{text}");
    // Right after: two coded versions' 6 shards each, and hot/b's 3 copies.
    assert_eq!(files(), 2 * 6 + 3, "{text}");
    // /metrics shows the coded capacity: 2 chunks of 3 MiB, their shards 1.5x that.
    let coded = |what: &'static str| {
        let name = format!("saker_ec_coded{{layout=\"4+2\",what=\"{what}\"}}");
        let admin = srv.admin.clone();
        async move { metric(&admin, &name).await }
    };
    assert_eq!(coded("chunks").await, 2.0);
    assert_eq!(coded("stored").await, (6 << 20) as f64);
    assert_eq!(coded("raw").await, (9 << 20) as f64);
    assert_eq!(class_of(&c, b, "cold/a", None).await, "EC_4_2");
    assert_eq!(class_of(&c, b, "cold/a", Some(&v1)).await, "EC_4_2");
    assert_eq!(class_of(&c, b, "hot/b", None).await, "STANDARD");
    assert!(get_bytes(&c, b, "cold/a").await == new);
    assert!(get_bytes(&c, b, "hot/b").await == hot);
    let got = c
        .get_object()
        .bucket(b)
        .key("cold/a")
        .version_id(&v1)
        .send()
        .await
        .unwrap();
    assert!(got.body.collect().await.unwrap().into_bytes() == old);

    // A second run finds nothing left to code.
    let o = srv.admin_cmd(&["ec", "run", b]);
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{err}");
    let job: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(job["summary"]["transitioned"], 0, "{text}");

    // The lifecycle passes code new objects under the prefix (no lifecycle configuration of
    // the bucket's own), and a client's lifecycle configuration does not show the rule.
    let later = random_bytes(2 << 20);
    put(&c, b, "cold/later", &later).await;
    let o = srv.admin_cmd(&["lifecycle", "run", b]);
    assert!(o.status.success(), "{:?}", out_text(&o));
    assert_eq!(class_of(&c, b, "cold/later", None).await, "EC_4_2");
    assert!(get_bytes(&c, b, "cold/later").await == later);
    let e = c
        .get_bucket_lifecycle_configuration()
        .bucket(b)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(e.meta().code(), Some("NoSuchLifecycleConfiguration"));

    // Cleared: shown as none; clearing again says there is no such rule.
    let o = srv.admin_cmd(&["bucket", "storage-class", "clear", b, "--prefix", "cold/"]);
    let (text, err) = out_text(&o);
    assert!(
        o.status.success() && text.contains("no storage classes"),
        "{text}{err}"
    );
    let o = srv.admin_cmd(&["bucket", "storage-class", "clear", b]);
    let (_, err) = out_text(&o);
    assert!(
        !o.status.success() && err.contains("no storage-class rule"),
        "{err}"
    );
    assert_eq!(class_of(&c, b, "cold/a", None).await, "EC_4_2");
}

/// SIGKILL of the server again and again while `saker admin ec run` codes a bucket (each time
/// as soon as new shards appear on disk), until a run completes: every object of the ledger
/// reads back byte-exact and coded, and once the GC and the leak scrub have run, the disks
/// hold exactly the coded chunks' shards (no replica, no orphan shard left).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_during_coding_lose_and_leak_nothing() {
    let (disks, _, list) = six_disks();
    let opts = Opts::default()
        .arg("--chunk-dirs", &list)
        .arg("--gc-grace", "1s")
        .arg("--scrub-age", "2s")
        .arg("--gc-interval", "200ms");
    let mut srv = Server::start(opts);
    let b = "ledger";
    create_bucket(&srv.client(), b).await;
    // The ledger: 16 objects of one chunk, 4 of two (8 MiB chunks); every shard larger than
    // the small-chunk limit, so each is a file of its own that `chunk_files` counts.
    let mut ledger = std::collections::BTreeMap::new();
    for i in 0..20 {
        let size = if i % 5 == 0 {
            10 << 20
        } else {
            (1 << 20) + (i + 1) * 4096
        };
        let data = random_bytes(size);
        put(&srv.client(), b, &format!("k{i:02}"), &data).await;
        ledger.insert(format!("k{i:02}"), data);
    }
    let chunks = 16 + 4 * 2;
    let o = srv.admin_cmd(&["bucket", "storage-class", "set", b, "--ec", "4+2"]);
    assert!(o.status.success(), "{:?}", out_text(&o));

    let files = || chunk_files(disks.path());
    let mut kills = 0;
    loop {
        let before = files();
        let mut run = std::process::Command::new(saker_bin())
            .args(["admin", "ec", "run", b, "--admin-endpoint", &srv.admin])
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Coding under way (shards written since the run began), or the run over.
        let mut ended = None;
        let seen = poll_until(Duration::from_secs(60), || {
            let status = run.try_wait().unwrap();
            ended = status;
            let grew = files() > before;
            async move { grew || status.is_some() }
        })
        .await;
        assert!(
            seen,
            "ec run made no progress in 60 s\n{}",
            srv.stderr_tail()
        );
        if let Some(status) = ended {
            assert!(status.success(), "ec run failed\n{}", srv.stderr_tail());
            break;
        }
        srv.kill();
        let _ = run.wait();
        srv.restart();
        kills += 1;
        assert!(kills <= 40, "ec run never completed");
    }
    assert!(kills >= 1, "the server was never killed during coding");
    eprintln!("ec run completed after {kills} kills");

    // Settled (the replicas gone with the GC, orphan shards with the leak scrub), then read.
    let settled = poll_until(Duration::from_secs(60), || async { files() == chunks * 6 }).await;
    assert!(
        settled,
        "{} chunk files, {} expected, after {kills} kills\n{}",
        files(),
        chunks * 6,
        srv.stderr_tail()
    );
    let c = srv.client();
    for (key, data) in &ledger {
        let got = async {
            let out = c.get_object().bucket(b).key(key).send().await;
            let out = out.map_err(|e| format!("{:?}", e.into_service_error()))?;
            let body = out.body.collect().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(body.into_bytes())
        };
        match got.await {
            Ok(got) => assert!(got == data[..], "{key} differs after {kills} kills"),
            Err(e) => panic!("{key} after {kills} kills: {e}\n{}", srv.stderr_tail()),
        }
        assert_eq!(class_of(&c, b, key, None).await, "EC_4_2", "{key}");
    }
    assert_eq!(files(), chunks * 6, "after the reads");
}

/// Every file under `dir` holds `needle` somewhere (read whole: test-sized disks).
fn disks_hold(dir: &std::path::Path, needle: &[u8]) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    return true;
                }
            }
        }
    }
    false
}

/// A lifecycle transition to EC_4_2 (current objects and noncurrent versions, Days 0) in a
/// bucket with Object Lock: a version under COMPLIANCE retention is coded and stays locked
/// (no delete, the same retention); an SSE-S3 object is coded and its bytes stay encrypted
/// at rest (its plaintext is on no disk, where a plain object's is), and every version reads
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transition_codes_locked_and_encrypted_versions_as_they_are() {
    use aws_sdk_s3::types::{
        ExpirationStatus, LifecycleRule, LifecycleRuleFilter, NoncurrentVersionTransition,
        ObjectLockMode, ServerSideEncryption, Transition, TransitionStorageClass,
    };
    let (disks, _, list) = six_disks();
    let (_keys, key) = common::sse::master_key();
    let opts = Opts::default()
        .arg("--chunk-dirs", &list)
        .arg("--sse-key-file", key.to_str().unwrap())
        .arg("--gc-grace", "1s")
        .arg("--gc-interval", "200ms");
    let srv = Server::start(opts);
    let c = srv.client();
    let b = "locked";
    c.create_bucket()
        .bucket(b)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();

    let pattern =
        |marker: &str, n: usize| marker.as_bytes().repeat(n / marker.len() + 1)[..n].to_vec();
    let (plain_marker, sealed_marker) = (
        "plain-marker-7f3a9c1e-stays-readable|",
        "sealed-marker-2b8d-never-on-disk|",
    );
    let until = aws_sdk_s3::primitives::DateTime::from_secs(
        (std::time::SystemTime::now() + Duration::from_secs(86_400))
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64,
    );
    let locked = random_bytes(3 << 20);
    let v1 = c
        .put_object()
        .bucket(b)
        .key("doc")
        .object_lock_mode(ObjectLockMode::Compliance)
        .object_lock_retain_until_date(until)
        .body(locked.clone().into())
        .send()
        .await
        .unwrap()
        .version_id()
        .unwrap()
        .to_string();
    let newer = random_bytes(2 << 20);
    put(&c, b, "doc", &newer).await;
    let plain = pattern(plain_marker, 2 << 20);
    put(&c, b, "plain", &plain).await;
    let sealed = pattern(sealed_marker, 2 << 20);
    common::sse::put_sealed(&c, b, "sealed", ServerSideEncryption::Aes256, &sealed)
        .await
        .unwrap();

    let rule = LifecycleRule::builder()
        .id("code-all")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .transitions(
            Transition::builder()
                .days(0)
                .storage_class(TransitionStorageClass::from("EC_4_2"))
                .build(),
        )
        .noncurrent_version_transitions(
            NoncurrentVersionTransition::builder()
                .noncurrent_days(0)
                .storage_class(TransitionStorageClass::from("EC_4_2"))
                .build(),
        )
        .build()
        .unwrap();
    common::tier::put_rule(&c, b, rule).await.unwrap();
    let o = srv.admin_cmd(&["lifecycle", "run", b]);
    let (text, err) = out_text(&o);
    assert!(o.status.success(), "{err}");
    let sum: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(sum["transitioned"], 4, "{text}");

    for (key, version) in [
        ("doc", Some(v1.as_str())),
        ("doc", None),
        ("plain", None),
        ("sealed", None),
    ] {
        assert_eq!(
            class_of(&c, b, key, version).await,
            "EC_4_2",
            "{key} {version:?}"
        );
    }
    // Still locked: no delete of the version, its retention as it was.
    let e = c
        .delete_object()
        .bucket(b)
        .key("doc")
        .version_id(&v1)
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(e.meta().code(), Some("AccessDenied"), "{e:?}");
    let r = c
        .get_object_retention()
        .bucket(b)
        .key("doc")
        .version_id(&v1)
        .send()
        .await
        .unwrap();
    let r = r.retention().unwrap();
    assert_eq!(
        r.mode(),
        Some(&aws_sdk_s3::types::ObjectLockRetentionMode::Compliance)
    );
    assert_eq!(r.retain_until_date().map(|d| d.secs()), Some(until.secs()));
    // Every version reads back; the sealed one still says it is encrypted.
    let got = c
        .get_object()
        .bucket(b)
        .key("doc")
        .version_id(&v1)
        .send()
        .await
        .unwrap();
    assert!(got.body.collect().await.unwrap().into_bytes() == locked);
    assert!(get_bytes(&c, b, "doc").await == newer);
    assert!(get_bytes(&c, b, "plain").await == plain);
    let got = c.get_object().bucket(b).key("sealed").send().await.unwrap();
    assert_eq!(
        got.server_side_encryption(),
        Some(&ServerSideEncryption::Aes256)
    );
    assert!(got.body.collect().await.unwrap().into_bytes() == sealed);

    // Once the replicas are gone (four versions, one chunk each, six shards each): the plain
    // object's bytes are in its data shards, the sealed object's are on no disk.
    let settled = poll_until(Duration::from_secs(30), || async {
        chunk_files(disks.path()) == 4 * 6
    })
    .await;
    assert!(settled, "{} chunk files", chunk_files(disks.path()));
    assert!(
        disks_hold(disks.path(), plain_marker.as_bytes()),
        "the control marker is not found"
    );
    assert!(
        !disks_hold(disks.path(), sealed_marker.as_bytes()),
        "SSE plaintext on disk"
    );
}
