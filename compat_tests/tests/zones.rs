//! Zones and stable node ids on real `saker` processes: a six-node cluster in three zones
//! loses a whole zone (both its nodes SIGKILLed at once) under S3 writes and loses nothing it
//! acknowledged, because every group has a voter and every chunk a copy in each zone; a node
//! added in a new zone takes a voter of each group and a copy of each chunk from the zone
//! that had two; and a node restarted at another RPC address is found there by the nodes that
//! kept running.

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use common::cluster::*;
use common::*;

/// Group `g`'s voters (raft id, address), as its leader reports them.
async fn voters(nodes: &Nodes, g: u32) -> Vec<(u64, String)> {
    let what = format!("group {g}'s membership");
    eventually(&what, || async move {
        let leader = nodes.leader(g).await;
        nodes.replica(leader, g).await
    })
    .await
    .voters
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_a_zone_loses_no_acknowledged_write() {
    let zones = ["a", "a", "b", "b", "c", "c"];
    let mut nodes = Nodes::start_zoned(&zones, &[]);
    nodes.wait_voters(&[]).await;
    // Every group votes in the three zones.
    for g in 1..=GROUPS {
        let vs = voters(&nodes, g).await;
        let spanned: BTreeSet<&str> = vs
            .iter()
            .map(|(_, a)| zones[nodes.rpc.iter().position(|r| r == a).unwrap()])
            .collect();
        assert_eq!(spanned.len(), 3, "group {g}: {vs:?}");
    }
    // `saker admin status` shows the zones, and nothing to warn about.
    let status = nodes.admin(0, &["status"]);
    for (i, z) in zones.iter().enumerate() {
        let line = format!("{}\t{z}\t", nodes.rpc[i]);
        assert!(status.contains(&line), "{line:?} in\n{status}");
    }
    assert!(!status.contains("warning"), "{status}");

    let bucket = "zoned";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    // Through nodes of zones a and c: small objects (inline) and large ones (a chunk each,
    // a copy in each zone).
    let small_acks: Progress = Arc::new(Mutex::new((0, String::new())));
    let large_acks: Progress = Arc::new(Mutex::new((0, String::new())));
    let small = Writer::start_under(nodes.client(0, false), bucket, "s", small_acks.clone());
    let large = Writer::start_sized(
        nodes.client(4, false),
        bucket,
        "l",
        large_acks.clone(),
        (20_000, 30_000),
    );
    writes_resume(&nodes, &small_acks, 0, 10).await;
    writes_resume(&nodes, &large_acks, 0, 10).await;

    // Zone b goes at once.
    nodes.kill(2);
    nodes.kill(3);
    let since = (small_acks.lock().unwrap().0, large_acks.lock().unwrap().0);
    writes_resume(&nodes, &small_acks, since.0, 20).await;
    writes_resume(&nodes, &large_acks, since.1, 20).await;
    let (small, _) = small.finish().await;
    let (large, _) = large.finish().await;
    for i in [0, 5] {
        verify(&nodes, i, bucket, &small).await;
        verify(&nodes, i, bucket, &large).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_back_at_a_new_address_is_used_without_restarting_the_others() {
    let mut nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let bucket = "moved";
    let c = nodes.client(0, true);
    eventually("create the bucket", || {
        c.create_bucket().bucket(bucket).send()
    })
    .await;
    let before = random_bytes(50_000);
    put(&c, bucket, "before", &before).await;

    // Node 2 stops and comes back at another RPC address, its [cluster] table unchanged.
    nodes.kill(1);
    let old = nodes.rpc[1].clone();
    let new = format!("127.0.0.1:{}", free_ports(1)[0]);
    let text = std::fs::read_to_string(nodes.config(1)).unwrap();
    let text = text.replace(
        &format!("rpc_addr = \"{old}\""),
        &format!("rpc_addr = \"{new}\""),
    );
    std::fs::write(nodes.config(1), text).unwrap();
    nodes.rpc[1] = new.clone();
    nodes.restart(1);

    // Every group records it at the new address, under its raft id.
    for g in 1..=GROUPS {
        let what = format!("group {g} has node 2 at {new}; logs:\n{}", nodes.logs());
        eventually(&what, || {
            let (nodes, new) = (&nodes, &new);
            async move {
                let vs = voters(nodes, g).await;
                match vs.iter().any(|(id, a)| *id == 2 && a == new) {
                    true => Ok(()),
                    false => Err(format!("voters {vs:?}")),
                }
            }
        })
        .await;
    }
    // The chunkstore record lists it there, under the id it had (its first address).
    eventually("the chunkstore record has the new address", || {
        let status = nodes.admin(0, &["status"]);
        let line = format!("{new}\t-\t{old}\tplacing");
        async move {
            match status.contains(&line) {
                true => Ok(()),
                false => Err(format!("{line:?} not in\n{status}")),
            }
        }
    })
    .await;

    // With node 3 gone, every group's majority and every chunk's write quorum need node 2 at
    // its new address: node 1's gateway, never restarted, writes and reads through it.
    nodes.kill(2);
    let after = random_bytes(60_000);
    eventually("a PUT through node 1", || {
        c.put_object()
            .bucket(bucket)
            .key("after")
            .body(body(&after))
            .send()
    })
    .await;
    assert_eq!(get_bytes(&c, bucket, "after").await, after);
    assert_eq!(get_bytes(&c, bucket, "before").await, before);
    // Its copy of the new object's chunk is at the new address.
    let held = chunks_held(&new).await;
    let referenced = referenced_chunks(&nodes.rpc[0]).await;
    assert_eq!(referenced.len(), 2, "{referenced:?}");
    assert!(
        referenced.iter().all(|id| held.contains(id)),
        "node 2 holds {held:?} of {referenced:?}"
    );
    // A library client that starts now is sent there too (the cluster map of node 1).
    let map = saker_rpc::RpcChannel::connect(&nodes.rpc[0])
        .await
        .unwrap()
        .cluster_map()
        .await
        .unwrap();
    for g in 1..=GROUPS {
        let listed = &map.endpoints.mnodes[&g];
        assert!(
            listed.contains(&new) && !listed.contains(&old),
            "group {g}: {listed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_in_a_new_zone_takes_a_voter_of_each_group_and_a_copy_of_each_chunk() {
    // Three voters and copies over two zones: a group or chunk keeps two in zone a.
    let mut nodes = Nodes::start_zoned(&["a", "a", "b"], &[]);
    nodes.wait_voters(&[]).await;
    let status = nodes.admin(0, &["status"]);
    assert!(
        status.contains("warning: 3 copies per chunk but 2 zones"),
        "{status}"
    );
    let bucket = "spread";
    let c = nodes.client(0, true);
    eventually("create the bucket", || {
        c.create_bucket().bucket(bucket).send()
    })
    .await;
    let large: Vec<Vec<u8>> = (0..8).map(|i| random_bytes(30_000 + i)).collect();
    for (i, data) in large.iter().enumerate() {
        put(&c, bucket, &format!("large-{i}"), data).await;
    }
    let chunks = referenced_chunks(&nodes.rpc[0]).await;
    assert_eq!(chunks.len(), 8);

    nodes.start_fourth();
    let node4 = nodes.rpc[3].clone();
    nodes.admin(0, &["node", "add", &node4, "--zone", "c"]);
    // Every group votes in the three zones now, one of its two zone-a voters gone.
    let zone = |a: &str| match nodes.rpc.iter().position(|r| r == a) {
        Some(0 | 1) => "a",
        Some(2) => "b",
        _ => "c",
    };
    for g in 1..=GROUPS {
        let vs = voters(&nodes, g).await;
        let spanned: BTreeSet<&str> = vs.iter().map(|(_, a)| zone(a)).collect();
        assert_eq!((vs.len(), spanned.len()), (3, 3), "group {g}: {vs:?}");
    }
    // Every chunk has a copy in each zone: on node 3 (b), node 4 (c) and one of a's.
    let mut held = Vec::new();
    for rpc in &nodes.rpc {
        held.push(chunks_held(rpc).await);
    }
    for id in &chunks {
        let on: Vec<usize> = (0..4).filter(|&i| held[i].contains(id)).collect();
        assert!(
            on.len() == 3 && on.contains(&2) && on.contains(&3),
            "chunk {id:032x} on nodes {on:?} (0-based)"
        );
    }
    let status = nodes.admin(0, &["status"]);
    assert!(!status.contains("warning"), "{status}");
    assert!(
        status.contains(&format!("{node4}\tc\t{node4}\tplacing")),
        "{status}"
    );
    // Read through the new node, which holds a copy of each.
    let c4 = nodes.client(3, true);
    for (i, data) in large.iter().enumerate() {
        assert_eq!(&get_bytes(&c4, bucket, &format!("large-{i}")).await, data);
    }
}

/// Erasure coding on six nodes in three zones (issue 63): a 4+2 object's shards go two to
/// each zone, so with a whole zone gone (both its nodes SIGKILLed) every object still reads
/// back byte-exact, ranges included. One of those nodes then comes back with its disk wiped:
/// a repair rebuilds its shards from the others, and a scrub then finds none missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_coded_bucket_loses_a_zone_and_a_wiped_node_gets_its_shards_back() {
    let zones = ["a", "a", "b", "b", "c", "c"];
    let mut nodes = Nodes::start_zoned(&zones, &[]);
    nodes.wait_voters(&[]).await;
    let bucket = "coded";
    let c = nodes.client(0, true);
    eventually("create the bucket", || {
        c.create_bucket().bucket(bucket).send()
    })
    .await;
    // One chunk, two chunks and a small one (inline: nothing to code).
    let objects = [
        ("one", random_bytes(3 << 20)),
        ("two", random_bytes(12 << 20)),
        ("tiny", random_bytes(1000)),
    ];
    for (key, data) in &objects {
        c.put_object()
            .bucket(bucket)
            .key(*key)
            .storage_class(aws_sdk_s3::types::StorageClass::from("EC_4_2"))
            .body(data.clone().into())
            .send()
            .await
            .unwrap();
    }
    reads_back(&nodes.client(1, true), bucket, &objects).await;

    // Zone c goes at once: two of each chunk's six shards.
    nodes.kill(4);
    nodes.kill(5);
    reads_back(&nodes.client(0, true), bucket, &objects).await;
    let degraded = nodes.metric(0, "saker_chunk_degraded_reads_total").await;
    assert!(degraded > 0.0, "no read rebuilt a chunk:\n{}", nodes.logs());

    // Node 5 comes back from a lost disk, node 6 as it was; a repair rebuilds node 5's shards.
    nodes.wipe(4);
    nodes.restart(4);
    nodes.restart(5);
    nodes.wait_voters(&[]).await;
    let report = eventually("a repair that rebuilds every shard", || async {
        let out = nodes.admin_output(0, &["repair"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let r: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        match (
            r["failed"].as_u64(),
            r["lost"].as_u64(),
            r["unreachable"].as_u64(),
        ) {
            (Some(0), Some(0), Some(0)) => Ok(r),
            _ => Err(text),
        }
    })
    .await;
    // (The node, back from a lost disk, may have started that repair itself.) It holds a
    // shard of each of the three coded chunks again.
    let held = chunks_held(&nodes.rpc[4]).await;
    assert!(held.len() >= 3, "node 5 holds {held:?} after {report}");
    let out = nodes.admin(0, &["scrub"]);
    let scrub: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (scrub["missing"].as_u64(), scrub["corrupt"].as_u64()),
        (Some(0), Some(0)),
        "{out}"
    );
    // Two coded objects: 1 + 2 chunks of 6 shards each, all verified.
    assert!(scrub["verified"].as_u64().unwrap() >= 18, "{out}");
    reads_back(&nodes.client(4, true), bucket, &objects).await;
}

/// Every object of `objects` reads back whole (and a range of the large ones) through `c`.
async fn reads_back(c: &aws_sdk_s3::Client, bucket: &str, objects: &[(&str, Vec<u8>)]) {
    for (key, data) in objects {
        let got = eventually(&format!("read {key}"), || async {
            let out = c.get_object().bucket(bucket).key(*key).send().await;
            let out = out.map_err(|e| format!("{:?}", e.into_service_error()))?;
            let body = out.body.collect().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(body.into_bytes())
        })
        .await;
        assert!(got == data[..], "{key} differs");
        if data.len() > 2_000_000 {
            let part = get_range(c, bucket, key, "bytes=1000000-2000000").await;
            assert!(part[..] == data[1_000_000..2_000_001], "{key} range");
        }
    }
}
