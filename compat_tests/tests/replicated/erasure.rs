//! Erasure-coded storage on the 3-node cluster (issue 63): its three chunkstores keep a 2+1
//! layout. An object PUT with `x-amz-storage-class: EC_2_1` is coded before the PUT answers,
//! one aged by a lifecycle transition to EC_2_1 is coded by the pass; HEAD and listings show
//! the class, and every object reads back byte-exact with a node (its chunkstore and shards)
//! killed. A class the cluster cannot keep (4+2 on three stores) is refused clearly.

use super::*;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, LifecycleRule, LifecycleRuleFilter,
    StorageClass, Transition, TransitionStorageClass,
};

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
        c.put_object()
            .bucket(b)
            .key(key)
            .storage_class(StorageClass::from("EC_2_1"))
            .body(data.clone().into())
            .send()
            .await
            .unwrap();
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
    let e = c
        .put_object()
        .bucket(b)
        .key("too-wide")
        .storage_class(StorageClass::from("EC_4_2"))
        .body(random_bytes(1 << 20).into())
        .send()
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
    let rule = LifecycleRule::builder()
        .id("to-ec")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("logs/").build())
        .transitions(
            Transition::builder()
                .days(0)
                .storage_class(TransitionStorageClass::from("EC_2_1"))
                .build(),
        )
        .build()
        .unwrap();
    c.put_bucket_lifecycle_configuration()
        .bucket(b)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(rule)
                .build()
                .unwrap(),
        )
        .send()
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
