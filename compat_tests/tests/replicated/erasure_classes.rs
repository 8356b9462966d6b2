//! A bucket's storage classes by prefix (issue 63), on the all-in-one server on six chunk
//! directories: `saker admin bucket storage-class set` names a prefix to keep 4+2 (a layout
//! wider than the disks is refused clearly); objects under it are written as replicas, then
//! coded, current and noncurrent versions alike, by `saker admin ec run --free-now` (which
//! frees the replaced replicas at once) and by the lifecycle passes in the background.

use super::erasure::chunk_files;
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
    let disks = tempfile::tempdir().unwrap();
    let dirs: Vec<std::path::PathBuf> =
        (0..6).map(|i| disks.path().join(format!("d{i}"))).collect();
    let list = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
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
