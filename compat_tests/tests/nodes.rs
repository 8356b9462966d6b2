//! Growing and shrinking a replicated cluster under write load: a fourth node joins and takes
//! its share of the group replicas and of the chunks (`saker admin node add`), then every
//! replica of node 1 moves away and its chunks are copied off it (`saker admin node remove
//! 1`), and node 1 is stopped and its disk lost. No acknowledged write is lost, writes go on
//! throughout, every chunk keeps its three copies, and the moved replicas survive a restart of
//! their node.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use saker_rpc::RpcChannel;

use common::cluster::*;
use common::*;

/// The `moves` of a `saker admin node add|remove` report: (group, from raft id, to address).
fn moves(report: &str) -> Vec<(u64, u64, String)> {
    let v: serde_json::Value = serde_json::from_str(report.trim()).expect("a JSON report");
    v["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .map(|m| {
            (
                m["group"].as_u64().unwrap(),
                m["from_id"].as_u64().unwrap(),
                m["to"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every group's voters (raft id, address), as its leader reports them.
async fn voters(nodes: &Nodes) -> Vec<Vec<(u64, String)>> {
    let mut all = Vec::new();
    for g in 1..=GROUPS {
        let what = format!("group {g}'s membership");
        let s = eventually(&what, || async move {
            let leader = nodes.leader(g).await;
            nodes.replica(leader, g).await
        })
        .await;
        all.push(s.voters);
    }
    all
}

/// Which of the chunkstores at `rpc` (by index) hold each of `chunks`.
async fn copies(rpc: &[String], chunks: &[u128]) -> BTreeMap<u128, BTreeSet<usize>> {
    let mut held = Vec::new();
    for addr in rpc {
        held.push(chunks_held(addr).await);
    }
    chunks
        .iter()
        .map(|id| {
            let on = (0..rpc.len()).filter(|&i| held[i].contains(id)).collect();
            (*id, on)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fourth_node_takes_replicas_and_node_one_is_removed_under_load() {
    let mut nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let bucket = "grow";
    let setup = nodes.client(1, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    // Large objects: a chunk each, on all three nodes' chunkstores.
    let mut large = BTreeMap::new();
    for i in 0..16 {
        let data = random_bytes(100_000 + i * 7919);
        put(&setup, bucket, &format!("large-{i}"), &data).await;
        large.insert(format!("large-{i}"), data);
    }
    let chunks = referenced_chunks(&nodes.rpc[0]).await;
    assert_eq!(chunks.len(), large.len(), "one chunk per large object");
    let acks: Progress = Arc::new(Mutex::new((0, String::new())));
    let writer = Writer::start(nodes.client(1, false), bucket, acks.clone());
    writes_resume(&nodes, &acks, 0, 20).await;

    // Node 4 joins: 9 replicas over 4 nodes, so it takes 2, from nodes that had 3.
    nodes.start_fourth();
    let node4 = nodes.rpc[3].clone();
    let report = nodes.admin(1, &["node", "add", &node4]);
    let added = moves(&report);
    assert_eq!(added.len(), 2, "moves {added:?}");
    assert!(added.iter().all(|(_, _, to)| *to == node4), "{added:?}");
    let groups = voters(&nodes).await;
    for (g, v) in groups.iter().enumerate() {
        assert_eq!(v.len(), 3, "group {}: {v:?}", g + 1);
    }
    let on4 = groups
        .iter()
        .filter(|v| v.iter().any(|(_, a)| *a == node4))
        .count();
    assert_eq!(on4, 2, "node 4 votes in two groups: {groups:?}");
    // Its chunkstore joined, and a rebalance moved it its share of the chunks: each chunk
    // on 3 of the 4, node 4's copies made and as many dropped elsewhere.
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let members = &report["chunks"]["members"];
    assert_eq!(members.as_array().map(Vec::len), Some(4), "{report}");
    let pass = &report["chunks"]["passes"][0];
    assert_eq!(
        (pass["failed"].as_u64(), pass["lost"].as_u64()),
        (Some(0), Some(0)),
        "{report}"
    );
    assert_eq!(pass["repaired"], pass["dropped"], "{report}");
    let held = copies(&nodes.rpc, &chunks).await;
    let on4 = held.values().filter(|on| on.contains(&3)).count();
    assert!(
        on4 >= 4,
        "node 4 took {on4} of {} chunks: {held:?}",
        chunks.len()
    );
    assert_eq!(pass["repaired"], on4 as u64, "{report}");
    for (id, on) in &held {
        assert_eq!(on.len(), 3, "chunk {id:032x} on {on:?}");
    }
    let since = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, since, 20).await;

    // Node 1 leaves: each of its replicas moves to the node that lacks that group.
    let hosted1 = groups
        .iter()
        .filter(|v| v.iter().any(|(id, _)| *id == 1))
        .count();
    let report = nodes.admin(1, &["node", "remove", "1"]);
    let removed = moves(&report);
    assert_eq!(removed.len(), hosted1, "moves {removed:?}");
    assert!(removed.iter().all(|(_, from, _)| *from == 1), "{removed:?}");
    let groups = voters(&nodes).await;
    for (g, v) in groups.iter().enumerate() {
        let ids: BTreeSet<u64> = v.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids.len(), 3, "group {}: {v:?}", g + 1);
        assert!(!ids.contains(&1), "group {} still has node 1: {v:?}", g + 1);
    }
    // A client that starts now is sent where the groups are: every node's cluster map lists
    // each group's members as they are, not the configured three.
    for (i, rpc) in nodes.rpc.iter().enumerate().skip(1) {
        let channel = RpcChannel::connect(rpc).await.unwrap();
        let map = channel.cluster_map().await.unwrap();
        for (g, v) in groups.iter().enumerate() {
            let listed: BTreeSet<&str> = map.endpoints.mnodes[&(g as u32 + 1)]
                .iter()
                .map(String::as_str)
                .collect();
            let members: BTreeSet<&str> = v.iter().map(|(_, a)| a.as_str()).collect();
            assert_eq!(listed, members, "node {}'s map of group {}", i + 1, g + 1);
        }
    }
    // Node 1 gave its replicas up: it hosts none, and answers for none.
    let recorded = std::fs::read_to_string(nodes.dir.path().join("node1/groups.json")).unwrap();
    let recorded: serde_json::Value = serde_json::from_str(&recorded).unwrap();
    assert_eq!(recorded, serde_json::json!({}), "node 1's groups.json");
    for g in 1..=GROUPS {
        let s = nodes.replica(0, g).await;
        assert!(
            s.is_err(),
            "node 1 still reports a replica of group {g}: {s:?}"
        );
    }
    // Its chunks were copied away before it left: it holds none of them, and each is on all
    // three of nodes 2, 3 and 4.
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let members: Vec<&str> = report["chunks"]["members"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"))
        .iter()
        .map(|m| m["addr"].as_str().unwrap())
        .collect();
    assert_eq!(members.len(), 3, "{report}");
    assert!(!members.contains(&nodes.rpc[0].as_str()), "{report}");
    for (id, on) in copies(&nodes.rpc, &chunks).await {
        assert_eq!(on, BTreeSet::from([1, 2, 3]), "chunk {id:032x}");
    }
    // Then its disk is lost: nothing was only there.
    nodes.kill(0);
    nodes.wipe(0);
    let since = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, since, 20).await;
    for i in [1, 3] {
        let c = nodes.client(i, true);
        for (key, data) in &large {
            assert_eq!(
                &get_bytes(&c, bucket, key).await,
                data,
                "{key} through node {}",
                i + 1
            );
        }
    }

    // Node 4 restarts with the replicas it took.
    nodes.kill(3);
    nodes.restart(3);
    for g in 1..=GROUPS {
        let on4 = groups[g as usize - 1].iter().any(|(_, a)| *a == node4);
        if !on4 {
            continue;
        }
        let what = format!("node 4's replica of group {g} votes again");
        let nodes = &nodes;
        eventually(&what, || async move {
            let s = nodes.replica(3, g).await?;
            let leader = nodes.leader(g).await;
            let l = nodes.replica(leader, g).await?;
            let caught_up = l
                .matched
                .iter()
                .any(|(id, m)| *id == s.node_id && *m >= l.applied);
            if caught_up {
                Ok(())
            } else {
                Err(format!("leader {l:?}, node 4 {s:?}"))
            }
        })
        .await;
    }
    let since = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, since, 20).await;
    let (acked, _) = writer.finish().await;
    assert!(acked.len() >= 80, "{} writes acknowledged", acked.len());
    for i in [1, 2, 3] {
        verify(&nodes, i, bucket, &acked).await;
    }
}
