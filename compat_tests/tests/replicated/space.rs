//! Replicated nodes short of disk space: a follower whose disk fills lags and catches up;
//! a group with too few voters left with room refuses every write at once (507) instead of
//! hanging, and takes writes again once space is back.

use super::*;

/// The node whose replica of group `g` is its raft leader (a request to the group first: a
/// quiet group elects one when asked).
async fn raft_leader(nodes: &Nodes, g: u32) -> usize {
    nodes.leader(g).await;
    eventually(&format!("a raft leader of group {g}"), || async move {
        for i in 0..nodes.nodes.len() {
            if nodes.nodes[i].child.is_some()
                && nodes.replica(i, g).await.is_ok_and(|s| s.state == "leader")
            {
                return Ok(i);
            }
        }
        Err("none")
    })
    .await
}

/// Waits until node `i`'s `/health` says its disk is full.
async fn reports_full_disk(nodes: &Nodes, i: usize) {
    let admin = nodes.nodes[i].admin.clone();
    eventually(&format!("node {} reports its full disk", i + 1), || {
        let admin = admin.clone();
        async move {
            let r = reqwest::get(format!("{admin}/health"))
                .await
                .map_err(|e| e.to_string())?;
            let why = r.text().await.unwrap_or_default();
            if why.contains("disk full") {
                Ok(())
            } else {
                Err(why)
            }
        }
    })
    .await;
}

/// Fills the file system of `dir` to `left` free bytes with a file it returns.
fn fill(dir: &std::path::Path, left: u64) -> std::path::PathBuf {
    let filler = dir.join("filler");
    let take = free_bytes(dir) - left;
    std::fs::write(&filler, vec![0u8; take as usize]).unwrap();
    filler
}

/// A follower whose disk fills before its leaders' (its data directory on a small tmpfs,
/// filled by another file to below half of `--meta-reserve`) takes no raft entries, so it
/// never fails an append: writes go on through the two others, more than its disk had room
/// for, and once the space is freed it catches up by itself, without a restart, and serves
/// them all when another node is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_short_of_space_lags_instead_of_failing_and_catches_up() {
    let reserve: u64 = 24 << 20;
    let mut nodes = Nodes::start(&["--meta-reserve", "24MiB"]);
    nodes.wait_voters(&[]).await;
    let bucket = "spacious";
    let c = nodes.client(0, true);
    eventually("create the bucket", || {
        c.create_bucket().bucket(bucket).send()
    })
    .await;

    // Node 3's data moves to a 96 MiB tmpfs, its raft identity with it; the others lead
    // every group meanwhile.
    nodes.kill(2);
    for g in 1..=GROUPS {
        raft_leader(&nodes, g).await;
    }
    let dir = nodes.dir.path().join("node3");
    let moved = nodes.dir.path().join("node3.orig");
    std::fs::rename(&dir, &moved).unwrap();
    std::fs::create_dir(&dir).unwrap();
    let _tmpfs = Tmpfs::mount(&dir, "96m");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", moved.display()))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(copied.success());
    nodes.restart(2);
    for g in 1..=GROUPS {
        assert_ne!(
            raft_leader(&nodes, g).await,
            2,
            "node 3 came back as a follower"
        );
    }

    // 4 MiB left on it, and it knows (its /health says why).
    let filler = fill(&dir, 4 << 20);
    assert!(free_bytes(&dir) < reserve / 2);
    reports_full_disk(&nodes, 2).await;

    // 12 MiB of inline objects (16 KiB, kept in the raft log and the store): three times
    // what node 3 has room for.
    let mut acked = BTreeMap::new();
    for i in 0..768 {
        let key = format!("k{i:04}");
        let data = random_bytes(16 << 10);
        put(&c, bucket, &key, &data).await;
        acked.insert(key, data);
    }
    assert!(free_bytes(&dir) > 0, "node 3's disk filled up");

    // Space back: node 3 catches up on every group, by itself.
    std::fs::remove_file(&filler).unwrap();
    let nodes_ref = &nodes;
    for g in 1..=GROUPS {
        let leader = raft_leader(nodes_ref, g).await;
        let target = nodes_ref.replica(leader, g).await.unwrap().last_log;
        let what = format!("node 3 applies group {g} through {target}");
        eventually(&what, || async move {
            let s = nodes_ref.replica(2, g).await?;
            if s.applied >= target {
                Ok(())
            } else {
                Err(format!("applied {} of {target}", s.applied))
            }
        })
        .await;
    }
    // Node 2 lost: nodes 1 and 3 hold everything.
    nodes.kill(1);
    verify(&nodes, 2, bucket, &acked).await;
}

/// A key of `bucket` (top level) whose name group `g` owns.
async fn key_in_group(rpc: &str, g: u32, prefix: &str) -> String {
    for i in 0.. {
        let key = format!("{prefix}-{i}");
        if owner(rpc, &key).await == g {
            return key;
        }
    }
    unreachable!()
}

/// Two of three nodes short of space (their data directories on small disks filled below
/// half of `--meta-reserve`): no group can commit, as no majority takes entries. Every
/// write is answered 507 InsufficientStorage at once, with nothing changed, instead of
/// waiting for space: through a group led by a node short of space itself, and through one
/// led by node 1, which has room and learns of its peers' disks from their pings. Reads and
/// listings go on; once the space is freed, writes resume without a restart, and everything
/// acknowledged before reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_without_a_majority_with_space_refuses_writes_and_recovers() {
    let nodes = Nodes::start_on_small_disks(&[1, 2], "96m", &["--meta-reserve", "24MiB"]);
    nodes.wait_voters(&[]).await;
    let (bucket, spare) = ("crowded", "spare");
    let c = nodes.client(0, true);
    for b in [bucket, spare] {
        eventually("create a bucket", || c.create_bucket().bucket(b).send()).await;
    }
    // An object in every group, and which node leads each group (group 1, created by
    // node 1, is led by it).
    let mut acked = BTreeMap::new();
    let mut leaders = BTreeMap::new();
    for g in 1..=GROUPS {
        let key = key_in_group(&nodes.rpc[0], g, "before").await;
        let data = random_bytes(1000);
        put(&c, bucket, &key, &data).await;
        acked.insert(key, data);
        leaders.insert(g, raft_leader(&nodes, g).await);
    }
    assert!(
        leaders.values().any(|&l| l == 0),
        "node 1 leads no group: {leaders:?}"
    );

    let fillers: Vec<_> = [1, 2]
        .iter()
        .map(|&i| fill(&nodes.dir.path().join(format!("node{}", i + 1)), 4 << 20))
        .collect();
    reports_full_disk(&nodes, 1).await;
    reports_full_disk(&nodes, 2).await;
    // Every node has heard which of its peers are short of space: a leader that has not yet
    // would count a full peer as one with room, and (rightly) commit a delete with it.
    let n = &nodes;
    for (i, full_peers) in [(0, 2.0), (1, 1.0), (2, 1.0)] {
        eventually(
            &format!(
                "node {} hears that {full_peers} peers are short of space",
                i + 1
            ),
            || async move {
                let peers = n.metric(i, "saker_mnode_peers_out_of_space").await;
                if peers == full_peers {
                    Ok(())
                } else {
                    Err(peers)
                }
            },
        )
        .await;
    }

    // Every write fails at once, whoever leads its group; a hang fails the test.
    let hasty = nodes.client_timeout(0, Duration::from_secs(20));
    for (g, leader) in &leaders {
        let key = key_in_group(&nodes.rpc[0], *g, "during").await;
        let f = assert_fails(
            hasty
                .put_object()
                .bucket(bucket)
                .key(&key)
                .body(random_bytes(1000).into())
                .send()
                .await,
            507,
            "InsufficientStorage",
        );
        let why = f.message.unwrap_or_default();
        assert!(
            why.contains("disk full"),
            "group {g} (led by node {}): {why}",
            leader + 1
        );
    }
    for key in acked.keys() {
        assert_fails(
            hasty.delete_object().bucket(bucket).key(key).send().await,
            507,
            "InsufficientStorage",
        );
    }
    assert_fails(
        hasty.delete_bucket().bucket(spare).send().await,
        507,
        "InsufficientStorage",
    );
    // Reads and listings go on, through every node.
    for i in 0..3 {
        verify(&nodes, i, bucket, &acked).await;
    }

    // Space back: writes resume by themselves, and what was refused now passes.
    for f in fillers {
        std::fs::remove_file(f).unwrap();
    }
    for g in 1..=GROUPS {
        let key = key_in_group(&nodes.rpc[0], g, "after").await;
        let data = random_bytes(1000);
        eventually(&format!("a write to group {g}"), || {
            c.put_object()
                .bucket(bucket)
                .key(&key)
                .body(data.clone().into())
                .send()
        })
        .await;
        acked.insert(key, data);
    }
    let first = acked.keys().next().unwrap().clone();
    c.delete_object()
        .bucket(bucket)
        .key(&first)
        .send()
        .await
        .unwrap();
    acked.remove(&first);
    c.delete_bucket().bucket(spare).send().await.unwrap();
    verify(&nodes, 2, bucket, &acked).await;
}
