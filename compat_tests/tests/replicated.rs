//! A replicated cluster: three `saker server` nodes on loopback, each with a replica of every
//! MNode group (replication 3), a coordinator replica, a chunkstore (every chunk on all three)
//! and an S3 gateway.
//!
//! A writer PUTs through one gateway while the tests SIGKILL group leaders; a ledger of
//! acknowledged writes is then read back through other nodes. A node that was down catches up
//! by the log; a node whose disk was wiped is rebuilt from streamed snapshots, and then alone
//! holds the last writes.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::*;
use common::*;
use saker_rpc::{MetaRequest, RpcChannel};

#[path = "replicated/erasure.rs"]
mod erasure;
#[path = "replicated/erasure_classes.rs"]
mod erasure_classes;
#[path = "replicated/space.rs"]
mod space;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_leader_kills_and_a_wiped_node_is_rebuilt_from_a_snapshot() {
    let mut nodes = Nodes::start(&["--raft-snapshot-logs", "40"]);
    let bucket = "replicated";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;

    // Every group is created by one node and joined by the two others; leaders start spread
    // (group g is created by node g).
    nodes.wait_voters(&[]).await;
    let mut leaders = BTreeMap::new();
    for g in 1..=GROUPS {
        leaders.insert(g, nodes.leader(g).await);
    }

    // A writer through node 1's gateway; its acknowledgements are counted as they come.
    let acks: Progress = Arc::default();
    let writer = Writer::start(nodes.client(0, false), bucket, acks.clone());
    writes_resume(&nodes, &acks, 0, 30).await;

    // Round 1 and 2: SIGKILL a node leading some group (not node 1, which holds the
    // coordinator and the chunkstore), see writes resume on the survivors, restart it.
    let mut gaps = Vec::new();
    for round in 0..2 {
        let victim = if round == 0 { 1 } else { 2 };
        let led: Vec<u32> = leaders
            .iter()
            .filter(|(_, l)| **l == victim)
            .map(|(g, _)| *g)
            .collect();
        let before = acks.lock().unwrap().0;
        let killed_at = Instant::now();
        nodes.kill(victim);
        writes_resume(&nodes, &acks, before, 30).await;
        for &g in &led {
            let l = nodes.leader(g).await;
            assert_ne!(l, victim, "group {g} is led by a dead node");
            leaders.insert(g, l);
        }
        gaps.push((victim + 1, led, killed_at, Instant::now()));
        nodes.restart(victim);
        for g in 1..=GROUPS {
            leaders.insert(g, nodes.leader(g).await);
        }
        let before = acks.lock().unwrap().0;
        writes_resume(&nodes, &acks, before, 20).await;
    }

    // Node 2 loses its disk while more than a snapshot's worth of writes go in: back, empty,
    // it rejoins (it must not create its groups anew) and the leaders, having purged the
    // entries it lacks, stream it a snapshot.
    let before = acks.lock().unwrap().0;
    nodes.kill(1);
    nodes.wipe(1);
    writes_resume(&nodes, &acks, before, 200).await;
    nodes.restart(1);
    let caught_up = poll_until(Duration::from_secs(60), || async {
        nodes
            .metric(1, "saker_mnode_snapshots_total{kind=\"installed\"}")
            .await
            >= 1.0
    })
    .await;
    assert!(
        caught_up,
        "node 2 installed no snapshot; stderr:\n{}",
        nodes.stderr(1)
    );
    // It came back as raft id 2 + 64 and replaced id 2 in every group.
    for g in 1..=GROUPS {
        assert_eq!(nodes.replica(1, g).await.unwrap().node_id, 66, "group {g}");
    }
    nodes.wait_voters(&[2]).await;
    // Writes that node 2 must hold: node 3 goes down now, so each commit needs node 2.
    nodes.kill(2);
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 30).await;
    let (acked, attempts) = writer.finish().await;

    // Node 1 goes, node 3 comes back without the last writes: node 2 has to lead with
    // everything (its snapshot plus what it appended since) for the reads to pass.
    nodes.kill(0);
    nodes.restart(2);
    for g in 1..=GROUPS {
        let l = nodes.leader(g).await;
        assert_eq!(l, 1, "group {g}: only node 2 has every write");
    }
    verify(&nodes, 2, bucket, &acked).await;

    for (node, led, from, to) in gaps {
        eprintln!(
            "killed node {node} (leader of groups {led:?}): longest write gap {:?}",
            longest_gap(&attempts, from, to)
        );
    }
    eprintln!("{} writes acknowledged", acked.len());
}

/// The group that owns bucket `name` (the router of the served cluster map).
async fn owner(rpc: &str, name: &str) -> u32 {
    let map = saker_rpc::fetch_cluster_map(rpc).await.unwrap();
    match map.router().unwrap().route_name(name) {
        saker_namespace::Route::Group(g) => g,
        saker_namespace::Route::PathWalk => panic!("no exceptions in a fresh cluster"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quiet_groups_serve_reads_and_listings_and_delete_bucket_wait_out_a_leader_kill() {
    let mut nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let s3 = nodes.client(0, true);
    // A bucket whose owner group is led by node 2 or 3 (node 1 runs the coordinator).
    let mut bucket = None;
    for i in 0..64 {
        let name = format!("doomed-{i}");
        let g = owner(&nodes.rpc[0], &name).await;
        let leader = nodes.leader(g).await;
        if leader != 0 {
            bucket = Some((name, g, leader));
            break;
        }
    }
    let (bucket, group, leader) = bucket.expect("some bucket is owned away from node 1");
    eventually("create the bucket", || {
        s3.create_bucket().bucket(&bucket).send()
    })
    .await;
    let kept = "kept";
    s3.create_bucket().bucket(kept).send().await.unwrap();
    let mut keys = Vec::new();
    for i in 0..24 {
        let key = format!("d{}/obj-{i}", i % 6);
        put(&s3, &bucket, &key, b"soon gone").await;
        put(&s3, kept, &key, b"stays").await;
        keys.push(key);
    }
    for key in &keys {
        s3.delete_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .unwrap();
    }

    // Idle, every group goes quiet (its leader stops heartbeating; the nodes ping one
    // another instead); a read through another gateway renews the leader's lease first.
    let quiet = poll_until(Duration::from_secs(30), || async {
        let mut n = 0.0;
        for i in 0..3 {
            n += nodes.metric(i, "saker_mnode_quiet_groups").await;
        }
        n == GROUPS as f64
    })
    .await;
    assert!(quiet, "not every group went quiet:\n{}", nodes.logs());
    let read = nodes.client(1, false);
    let got = read.get_object().bucket(kept).key(&keys[0]).send().await;
    let got = got.expect("a read of a quiet group").body.collect().await;
    assert_eq!(got.unwrap().into_bytes().as_ref(), b"stays");

    // The owner's (quiet) leader dies; a listing visits every group and a DeleteBucket needs
    // the owner: both wait for the election instead of failing.
    nodes.kill(leader);
    let listed = list_all(&s3, kept, None).await;
    assert_eq!(listed.len(), keys.len(), "{listed:?}");
    s3.delete_bucket()
        .bucket(&bucket)
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "DeleteBucket across the kill of group {group}'s leader: {:?}\n{}",
                aws_sdk_s3::error::DisplayErrorContext(&e),
                nodes.logs()
            )
        });
    assert_status(s3.head_bucket().bucket(&bucket).send().await, 404);
    assert_ne!(nodes.leader(group).await, leader);

    // Back, the node agrees: the bucket is gone through its own gateway too.
    nodes.restart(leader);
    nodes.wait_voters(&[]).await;
    let c = nodes.client(leader, true);
    assert_status(c.head_bucket().bucket(&bucket).send().await, 404);
    assert_eq!(list_all(&c, kept, None).await.len(), keys.len());
}

/// A coordinated rename (as the FUSE client sends it) through a library client of the cluster
/// behind `rpc`.
async fn coordinated_rename(rpc: &str, from: &[&str], to: &[&str]) -> Result<(), String> {
    let lib = saker_client::Cluster::connect_all(rpc, Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let to: Vec<String> = to.iter().map(|s| s.to_string()).collect();
    let req = MetaRequest::CoordinatedRename {
        from: from.iter().map(|s| s.to_string()).collect(),
        to: to.clone(),
        noreplace: false,
        cred: saker_rpc::Cred::ROOT,
        versioning: Default::default(),
    };
    lib.call(&to, req)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_coordinator_and_the_access_keys_survive_the_loss_of_its_node() {
    let mut nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;

    // A key created through node 2's admin API works at node 3's gateway at once.
    nodes.admin(
        1,
        &[
            "key",
            "create",
            "--access-key",
            "AKREPLICATED",
            "--secret-key",
            "sk-replicated-secret",
            "--policy",
            "admin",
        ],
    );
    let user = nodes.client_as(2, true, "AKREPLICATED", "sk-replicated-secret");
    let bucket = "moves";
    eventually("create a bucket as the new key", || {
        user.create_bucket().bucket(bucket).send()
    })
    .await;
    let doomed = "doomed";
    user.create_bucket().bucket(doomed).send().await.unwrap();
    let mut keys = Vec::new();
    for i in 0..12 {
        let key = format!("d1/sub{}/obj-{i}", i % 3);
        put(&user, bucket, &key, format!("v{i}").as_bytes()).await;
        keys.push(key);
    }

    // The coordinator is active on group 1's leader: that node dies while a directory rename
    // and a DeleteBucket across groups are under way, sent through the other nodes.
    let home = nodes.leader(1).await;
    let survivor = (home + 1) % 3;
    let rpc = nodes.rpc[survivor].clone();
    let rename =
        tokio::spawn(
            async move { coordinated_rename(&rpc, &[bucket, "d1"], &[bucket, "d2"]).await },
        );
    let s3 = nodes.client(survivor, true);
    let delete = tokio::spawn({
        let s3 = s3.clone();
        async move { s3.delete_bucket().bucket(doomed).send().await }
    });
    nodes.kill(home);
    let renamed = rename.await.unwrap();
    let deleted = delete.await.unwrap();
    eprintln!(
        "across the kill: rename {renamed:?}, delete bucket ok: {}",
        deleted.is_ok()
    );

    // Whatever the calls answered, the new coordinator finished them: every object is under
    // exactly one of the names, and a rename sent now completes.
    let logs = nodes.logs();
    let count = keys.len();
    let after = eventually("the rename settled by the new coordinator", || {
        let s3 = s3.clone();
        async move {
            let listed = list_all(&s3, bucket, None).await;
            if listed.len() == count {
                Ok(listed)
            } else {
                Err(format!("{} objects", listed.len()))
            }
        }
    })
    .await;
    let under = |p: &str| after.iter().filter(|k| k.starts_with(p)).count();
    assert!(
        under("d1/") == keys.len() || under("d2/") == keys.len(),
        "a half-done rename: {after:?}\n{logs}"
    );
    let (from, to) = if under("d1/") > 0 {
        ("d1", "d2")
    } else {
        ("d2", "d3")
    };
    coordinated_rename(&nodes.rpc[survivor], &[bucket, from], &[bucket, to])
        .await
        .unwrap_or_else(|e| panic!("rename after the failover: {e}\n{}", nodes.logs()));
    let moved = list_all(&s3, bucket, None).await;
    assert!(
        moved.iter().all(|k| k.starts_with(&format!("{to}/"))),
        "{moved:?}"
    );
    for (i, key) in keys.iter().enumerate() {
        let now = key.replacen("d1/", &format!("{to}/"), 1);
        assert_eq!(
            get_bytes(&s3, bucket, &now).await,
            format!("v{i}").as_bytes()
        );
    }
    if deleted.is_err() {
        s3.delete_bucket().bucket(doomed).send().await.unwrap();
    }
    assert_status(s3.head_bucket().bucket(doomed).send().await, 404);

    // The key still works at every survivor, and a key deleted at one stops working at the
    // other (each node refreshes its copy).
    let other = 3 - home - survivor;
    for i in [survivor, other] {
        let c = nodes.client_as(i, true, "AKREPLICATED", "sk-replicated-secret");
        assert_eq!(list_all(&c, bucket, None).await.len(), keys.len());
    }
    nodes.admin(survivor, &["key", "delete", "--access-key", "AKREPLICATED"]);
    let gone = nodes.client_as(other, false, "AKREPLICATED", "sk-replicated-secret");
    eventually("the deleted key refused at the other node", || {
        let gone = gone.clone();
        async move {
            let r = gone.list_buckets().send().await;
            let refused = r.is_err() && failure(r).code.as_deref() == Some("InvalidAccessKeyId");
            if refused {
                Ok(())
            } else {
                Err("the key still works")
            }
        }
    })
    .await;

    // The lost node comes back and takes the coordinator's calls again if it leads.
    nodes.restart(home);
    nodes.wait_voters(&[]).await;
    let c = nodes.client(home, true);
    c.create_bucket().bucket("after").send().await.unwrap();
    c.delete_bucket().bucket("after").send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_objects_survive_a_node_loss_and_a_wiped_chunkstore_is_repaired() {
    let mut nodes = Nodes::start(&["--repair-every", "0s"]);
    nodes.wait_voters(&[]).await;
    let s3 = nodes.client(0, true);
    let bucket = "large";
    eventually("create the bucket", || {
        s3.create_bucket().bucket(bucket).send()
    })
    .await;
    let mut objects = BTreeMap::new();
    for i in 0..12 {
        let data = random_bytes(100_000 + i * 7919);
        put(&s3, bucket, &format!("big-{i}"), &data).await;
        objects.insert(format!("big-{i}"), data);
    }

    // Node 2 dies: large PUTs and GETs go on through the others (two of three copies).
    nodes.kill(1);
    let s3c = nodes.client(2, true);
    for i in 12..18 {
        let data = random_bytes(150_000 + i * 7919);
        put(&s3c, bucket, &format!("big-{i}"), &data).await;
        objects.insert(format!("big-{i}"), data);
    }
    for c in [&s3, &s3c] {
        for (key, data) in &objects {
            assert_eq!(&get_bytes(c, bucket, key).await, data, "{key}");
        }
    }
    assert!(nodes.metric(2, "saker_chunk_degraded_writes_total").await >= 6.0);

    // Each of those writes noted its chunk as short before it was acknowledged. Node 2 back,
    // a pass over the notes (no listing of every store) copies just those six to it.
    nodes.restart(1);
    nodes.wait_voters(&[]).await;
    let noted: serde_json::Value =
        serde_json::from_str(&nodes.admin(0, &["repair", "--noted"])).expect("a repair report");
    assert_eq!(
        (noted["scanned"].as_u64(), noted["repaired"].as_u64()),
        (Some(6), Some(6)),
        "{noted}"
    );
    assert_eq!(noted["failed"], 0, "{noted}");
    let again: serde_json::Value =
        serde_json::from_str(&nodes.admin(2, &["repair", "--noted"])).unwrap();
    assert_eq!(again["scanned"], 0, "the notes were dropped: {again}");
    let chunks = referenced_chunks(&nodes.rpc[0]).await;
    assert_eq!(chunks.len(), objects.len(), "one chunk per object");
    assert_eq!(
        chunks_held(&nodes.rpc[1]).await.len(),
        chunks.len(),
        "node 2 has every chunk"
    );

    // Its disk is lost; back under a new raft id, it has the coordinator run a full pass,
    // which copies every chunk onto it again. The pass shows in every node's status (it ran
    // where the coordinator is) and in the coordinator node's /metrics.
    nodes.kill(1);
    nodes.wipe(1);
    nodes.restart(1);
    nodes.wait_voters(&[2]).await;
    let n = chunks.len();
    let line = format!("chunk repair (last): {n}/{n} chunks scanned, {n} short, {n} copies made");
    let status = eventually("the full pass after the lost disk", || {
        let status = nodes.admin(2, &["status"]);
        let line = line.clone();
        async move {
            if status.contains(&line) {
                Ok(status)
            } else {
                Err(status)
            }
        }
    })
    .await;
    assert!(status.contains(&line), "{status}");
    let marker = nodes.dir.path().join("node2/repair-after-disk-loss");
    eventually("the repair marker is gone", || {
        let gone = !marker.exists();
        async move {
            if gone {
                Ok(())
            } else {
                Err("still there".to_string())
            }
        }
    })
    .await;
    let coordinator = nodes.leader(1).await;
    let made = nodes
        .metric(coordinator, "saker_chunk_pass_repaired{pass=\"repair\"}")
        .await;
    assert_eq!(made, n as f64);
    let node2 =
        saker_chunkstore::RemoteChunkStore::new(RpcChannel::connect(&nodes.rpc[1]).await.unwrap());
    for id in &chunks {
        saker_chunkstore::ChunkStore::get(&node2, saker_chunkstore::ChunkId(*id), 0, u64::MAX)
            .await
            .unwrap_or_else(|e| panic!("chunk {id:032x} on the repaired node: {e}"));
    }
    let again: serde_json::Value = serde_json::from_str(&nodes.admin(2, &["repair"])).unwrap();
    assert_eq!(again["under_replicated"], 0, "{again}");

    // A copy damaged on node 3's disk (a chunk above the small-chunk limit: a file of its own)
    // is found by a scrub and rewritten from another node's.
    let damaged = random_bytes(400_000);
    put(&s3, bucket, "damaged", &damaged).await;
    objects.insert("damaged".to_string(), damaged);
    let before: std::collections::HashSet<u128> = chunks.iter().copied().collect();
    let id = referenced_chunks(&nodes.rpc[0])
        .await
        .into_iter()
        .find(|c| !before.contains(c))
        .expect("the new object's chunk");
    let name = format!("{id:032x}");
    let file = nodes
        .dir
        .path()
        .join("node3/chunks")
        .join(&name[..2])
        .join(format!("{name}.chunk"));
    let mut bad = eventually("the chunk's copy on node 3", || {
        let file = file.clone();
        async move { std::fs::read(&file).map_err(|e| e.to_string()) }
    })
    .await;
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    std::fs::write(&file, &bad).unwrap();
    let scrub: serde_json::Value =
        serde_json::from_str(&nodes.admin(1, &["scrub"])).expect("a scrub report");
    assert_eq!(scrub["corrupt"], 1, "{scrub}");
    assert_eq!(scrub["repaired"], 1, "{scrub}");
    let node3 =
        saker_chunkstore::RemoteChunkStore::new(RpcChannel::connect(&nodes.rpc[2]).await.unwrap());
    let copy =
        saker_chunkstore::ChunkStore::get(&node3, saker_chunkstore::ChunkId(id), 0, u64::MAX)
            .await
            .expect("node 3's copy rewritten from a good one");
    assert_eq!(&copy[..], &objects["damaged"][..]);

    // Another node dies: everything still reads back, byte for byte, through the others.
    nodes.kill(0);
    let s3b = nodes.client(1, true);
    for (key, data) in &objects {
        assert_eq!(&get_bytes(&s3b, bucket, key).await, data, "{key}");
    }
}

/// Lifecycle passes run where the coordinator is active (once per cluster) and move with it
/// when its node dies: objects a rule expires go before and after the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lifecycle_passes_follow_the_coordinator() {
    use aws_sdk_s3::types::{
        BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
        LifecycleRuleFilter,
    };
    let mut nodes = Nodes::start(&["--lifecycle-day-secs", "1"]);
    nodes.wait_voters(&[]).await;
    let s3 = nodes.client(0, true);
    let b = "aging";
    eventually("create the bucket", || s3.create_bucket().bucket(b).send()).await;
    let rule = LifecycleRule::builder()
        .id("tmp")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("tmp/").build())
        .expiration(LifecycleExpiration::builder().days(1).build())
        .build()
        .unwrap();
    s3.put_bucket_lifecycle_configuration()
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
    let expires = |s3: aws_sdk_s3::Client, round: usize| async move {
        for i in 0..5 {
            put(&s3, b, &format!("tmp/{round}-{i}"), b"x").await;
        }
        put(&s3, b, &format!("keep/{round}"), b"k").await;
        poll_until(Duration::from_secs(60), || async {
            list_all(&s3, b, Some("tmp/")).await.is_empty()
        })
        .await
    };
    assert!(expires(s3.clone(), 0).await, "tmp/ objects not expired");
    let home = nodes.leader(1).await;
    let passes = |i| nodes.metric(i, "saker_lifecycle_actions_total{kind=\"pass\"}");
    assert!(passes(home).await > 0.0, "no pass where the coordinator is");

    nodes.kill(home);
    let survivor = nodes.client((home + 1) % 3, true);
    assert!(
        expires(survivor.clone(), 1).await,
        "tmp/ objects not expired after the coordinator's node died"
    );
    let next = nodes.leader(1).await;
    assert_ne!(next, home);
    assert!(
        nodes
            .metric(next, "saker_lifecycle_actions_total{kind=\"pass\"}")
            .await
            > 0.0
    );
    assert_eq!(
        list_all(&survivor, b, Some("keep/")).await,
        ["keep/0", "keep/1"]
    );
}

/// Every node's admin API serves what the coordinator answers, wherever the coordinator is
/// active: a node hands the signed request to the node leading group 1 over RPC. The token
/// that marks a handed-on request cannot be guessed from outside.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_nodes_admin_api_reaches_the_coordinator() {
    let nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let home = nodes.leader(1).await;
    let other = (home + 1) % 3;
    nodes.admin(other, &["exception", "set", "Makefile", "pathwalk"]);
    for i in 0..3 {
        let listed = nodes.admin(i, &["exception", "list"]);
        assert!(listed.contains("Makefile"), "node {}: {listed}", i + 1);
    }
    nodes.admin(other, &["balance"]);
    // Unsigned, with a made-up forwarding token: refused, not run.
    let url = format!("{}/admin/exceptions", nodes.nodes[other].admin);
    let r = reqwest::Client::new()
        .get(&url)
        .header("saker-admin-forwarded", "0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}
