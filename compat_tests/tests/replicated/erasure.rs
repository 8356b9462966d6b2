//! Erasure-coded storage on the 3-node cluster (issue 63): its three chunkstores keep a 2+1
//! layout. An object PUT with `x-amz-storage-class: EC_2_1` is coded before the PUT answers,
//! one aged by a lifecycle transition to EC_2_1 is coded by the pass; HEAD and listings show
//! the class, and every object reads back byte-exact with a node (its chunkstore and shards)
//! killed. A class the cluster cannot keep (4+2 on three stores) is refused clearly. And the
//! all-in-one server on six chunk directories keeps 4+2, losing any two.

use super::*;
use aws_sdk_s3::types::StorageClass;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn coded_objects_read_back_with_a_node_killed() {
    let mut nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let c = nodes.client(0, true);
    let b = "cold";
    eventually("create the bucket", || c.create_bucket().bucket(b).send()).await;

    // Written coded: 3 MiB and a multi-chunk 20 MiB.
    let direct = random_bytes(3 << 20);
    let large = random_bytes(20 << 20);
    for (key, data) in [("direct", &direct), ("large", &large)] {
        put_class(&c, b, key, "EC_2_1", data).await.unwrap();
    }
    let head = c
        .head_object()
        .bucket(b)
        .key("direct")
        .send()
        .await
        .unwrap();
    assert_eq!(head.storage_class().map(|s| s.as_str()), Some("EC_2_1"));

    // A layout wider than the cluster is refused, and nothing is stored.
    let e = put_class(&c, b, "too-wide", "EC_4_2", &random_bytes(1 << 20))
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(e.meta().code(), Some("InvalidStorageClass"), "{e:?}");
    assert!(
        e.meta()
            .message()
            .unwrap_or_default()
            .contains("6 shards need 6 chunkstores"),
        "{e:?}"
    );

    // Aged by a lifecycle rule (Days 0: due now), coded by a pass; the inline one has no
    // chunks to code.
    let aged = random_bytes(1 << 20);
    put(&c, b, "logs/aged", &aged).await;
    put(&c, b, "logs/tiny", b"tiny").await;
    common::tier::transition_rule(&c, b, "EC_2_1", 0)
        .await
        .unwrap();
    let out = nodes.admin(0, &["lifecycle", "run", b]);
    assert!(out.contains("transitioned"), "{out}");
    let listed = c.list_objects_v2().bucket(b).send().await.unwrap();
    let classes: Vec<(String, String)> = listed
        .contents()
        .iter()
        .map(|o| {
            let class = o.storage_class().map_or("", |s| s.as_str()).to_string();
            (o.key().unwrap().to_string(), class)
        })
        .collect();
    assert_eq!(
        classes,
        [
            ("direct".to_string(), "EC_2_1".to_string()),
            ("large".to_string(), "EC_2_1".to_string()),
            ("logs/aged".to_string(), "EC_2_1".to_string()),
            ("logs/tiny".to_string(), "STANDARD".to_string()),
        ]
    );

    // Any one node killed: every byte reads back (through node 1, or node 2 when node 1 is
    // the one killed), ranges included.
    let want = [("direct", &direct), ("large", &large), ("logs/aged", &aged)];
    // (Each chunk's data shards are on two of the three nodes: killing each node in turn
    // makes reads that rebuild a chunk from its parity.)
    let mut degraded = 0.0;
    for killed in [2, 1, 0] {
        nodes.kill(killed);
        let via = if killed == 0 { 1 } else { 0 };
        let r = nodes.client(via, true);
        for (key, data) in want {
            let what = format!("read {key} with node {} killed", killed + 1);
            let got = eventually(&what, || read(&r, b, key)).await;
            assert!(
                got == **data,
                "{key} differs with node {} killed",
                killed + 1
            );
            let part = get_range(&r, b, key, "bytes=1000-300999").await;
            assert!(part[..] == data[1000..301_000], "{key} range");
        }
        degraded += nodes.metric(via, "saker_chunk_degraded_reads_total").await;
        nodes.restart(killed);
        nodes.wait_voters(&[]).await;
    }
    assert!(
        degraded > 0.0,
        "no read rebuilt a chunk from its parity:\n{}",
        nodes.logs()
    );
}

async fn read(c: &aws_sdk_s3::Client, b: &str, key: &str) -> Result<Vec<u8>, String> {
    let out = c
        .get_object()
        .bucket(b)
        .key(key)
        .send()
        .await
        .map_err(|e| format!("{:?}", e.into_service_error()))?;
    let body = out.body.collect().await.map_err(|e| e.to_string())?;
    Ok(body.into_bytes().to_vec())
}

/// Six chunk directories `d0`..`d5` in a new temporary directory, and their `--chunk-dirs` list.
pub(crate) fn six_disks() -> (tempfile::TempDir, Vec<std::path::PathBuf>, String) {
    let disks = tempfile::tempdir().unwrap();
    let dirs: Vec<std::path::PathBuf> =
        (0..6).map(|i| disks.path().join(format!("d{i}"))).collect();
    let list = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(",");
    (disks, dirs, list)
}

/// `*.chunk` files under `dir` (shards and copies of more than the small-chunk limit).
pub(crate) fn chunk_files(dir: &std::path::Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "chunk") {
                n += 1;
            }
        }
    }
    n
}

/// One machine with six disks (`--chunk-dirs`, the all-in-one server): a 4+2 object and a
/// replicated one read back with any two directories wiped; a repair rebuilds the wiped
/// shards, so two other directories can go next; a scrub then finds every shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_all_in_one_server_on_six_disks_loses_any_two() {
    let (_disks, dirs, list) = six_disks();
    let opts = Opts::default()
        .arg("--chunk-dirs", &list)
        .arg("--gc-grace", "1s")
        .arg("--gc-interval", "200ms");
    let mut srv = Server::start(opts);
    let c = srv.client();
    let b = "lake";
    create_bucket(&c, b).await;
    let coded = random_bytes(20 << 20);
    let plain = random_bytes(3 << 20);
    put_class(&c, b, "coded", "EC_4_2", &coded).await.unwrap();
    put(&c, b, "plain", &plain).await;
    let head = c.head_object().bucket(b).key("coded").send().await.unwrap();
    assert_eq!(head.storage_class().map(|s| s.as_str()), Some("EC_4_2"));
    // A wider layout than six disks is refused.
    let e = put_class(&c, b, "wide", "EC_8_3", &random_bytes(1 << 20))
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(e.meta().code(), Some("InvalidStorageClass"), "{e:?}");
    // Once the GC took the coded object's replicas: its 3 chunks' 6 shards, and 3 copies of
    // the replicated one.
    let settled = poll_until(Duration::from_secs(30), || async {
        dirs.iter().map(|d| chunk_files(d)).sum::<usize>() == 3 * 6 + 3
    })
    .await;
    let files: Vec<usize> = dirs.iter().map(|d| chunk_files(d)).collect();
    assert!(settled, "chunk files per disk: {files:?}");

    for pair in [(0, 1), (1, 4)] {
        srv.kill();
        for &i in &[pair.0, pair.1] {
            std::fs::remove_dir_all(&dirs[i]).unwrap();
            std::fs::create_dir_all(&dirs[i]).unwrap();
        }
        srv.restart();
        let c = srv.client();
        for (key, data) in [("coded", &coded), ("plain", &plain)] {
            let got = get_bytes(&c, b, key).await;
            assert!(got == *data, "{key} differs with disks {pair:?} wiped");
            let part = get_range(&c, b, key, "bytes=1000000-2000000").await;
            assert!(part[..] == data[1_000_000..2_000_001], "{key} range");
        }
        let out = srv.admin_cmd(&["repair"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The wiped disks hold again what they held: the coded object's shards (and the
        // replicated object's copies).
        for &i in &[pair.0, pair.1] {
            assert_eq!(chunk_files(&dirs[i]), files[i], "disk {i} after the repair");
        }
    }
    let out = srv.admin_cmd(&["scrub"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (report["missing"].as_u64(), report["corrupt"].as_u64()),
        (Some(0), Some(0)),
        "{text}"
    );
    assert!(report["verified"].as_u64().unwrap() >= 6, "{text}");
}

/// A crash at each step of coding a version (the all-in-one server on six directories, killed
/// by a fail point): after the shards are written but before the switch, the object stays
/// STANDARD and whole, and the leak scrub takes the orphan shards; after the switch, before the
/// replicas are freed, it is coded and whole, and the GC takes the replicas. Nothing leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_at_each_step_of_coding_loses_and_leaks_nothing() {
    let (disks, _, list) = six_disks();
    let base = || {
        Opts::default()
            .arg("--chunk-dirs", &list)
            .arg("--gc-grace", "1s")
            .arg("--scrub-age", "2s")
            .arg("--gc-interval", "200ms")
    };
    let files = || chunk_files(disks.path());
    let mut srv = Server::start(base());
    let b = "crashy";
    create_bucket(&srv.client(), b).await;
    let data = random_bytes(12 << 20); // two chunks
    for (point, class) in [
        ("encode-after-shards", "STANDARD"),
        ("encode-after-switch", "EC_4_2"),
    ] {
        srv.restart_with(base().env("SAKER_FAILPOINT", point));
        let key = format!("at-{point}");
        let r = put_class(&srv.client_no_retry(), b, &key, "EC_4_2", &data).await;
        assert!(r.is_err(), "the PUT outlived fail point {point}");
        srv.restart_with(base());
        let c = srv.client();
        assert!(
            get_bytes(&c, b, &key).await == data,
            "{key} after the crash"
        );
        let head = c.head_object().bucket(b).key(&key).send().await.unwrap();
        let shown = head.storage_class().map_or("STANDARD", |s| s.as_str());
        assert_eq!(shown, class, "{key}");
    }
    // Settled: the first object's 2 chunks in 3 copies, the second's in 6 shards; the orphan
    // shards (leak scrub) and the replicas (GC) gone.
    let settled = poll_until(Duration::from_secs(60), || async {
        files() == 2 * 3 + 2 * 6
    })
    .await;
    assert!(settled, "{} chunk files\n{}", files(), srv.stderr_tail());
}

/// PUTs `data` as `key` with storage class `class`.
async fn put_class(
    c: &aws_sdk_s3::Client,
    b: &str,
    key: &str,
    class: &str,
    data: &[u8],
) -> Result<
    aws_sdk_s3::operation::put_object::PutObjectOutput,
    aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::put_object::PutObjectError>,
> {
    c.put_object()
        .bucket(b)
        .key(key)
        .storage_class(StorageClass::from(class))
        .body(data.to_vec().into())
        .send()
        .await
}
