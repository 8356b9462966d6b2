//! Metadata on TiKV (`saker server --store tikv`), against the in-repo test server
//! (`saker-tikv-sim`: the real kvproto gRPC, Percolator in memory, splitting regions and
//! injected region errors): S3 on it, a kill -9 that loses no acknowledged write, keyspaces
//! that share one TiKV, and a takeover of every group by another process without a split
//! brain, a replicated cluster whose killed node's groups move to the others, a node cut off
//! from TiKV that stops serving, and a migration of an embedded namespace into TiKV. With `SAKER_TIKV_PD=HOST:PORT`
//! the same tests run against a real TiKV cluster instead.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::{verify, writes_resume, Nodes, Progress, Writer, GROUPS};
use common::netns::Netns;
use common::tikv::{serving, Sim};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_on_tikv_keeps_every_acknowledged_write_through_kill_9() {
    let sim = Sim::start();
    let mut s = Server::start(sim.opts("crash"));
    let c = s.client();
    let bucket = new_bucket(&c, "tikv").await;
    // Small (inline) and chunked objects, a listing, an overwrite and a delete.
    let big = random_bytes(3 << 20);
    put(&c, &bucket, "big/one", &big).await;
    for i in 0..40 {
        put(
            &c,
            &bucket,
            &format!("dir/{i:03}"),
            format!("v{i}").as_bytes(),
        )
        .await;
    }
    put(&c, &bucket, "dir/007", b"overwritten").await;
    c.delete_object()
        .bucket(&bucket)
        .key("dir/008")
        .send()
        .await
        .unwrap();
    let listed = list_all(&c, &bucket, Some("dir/")).await;
    assert_eq!(listed.len(), 39);
    assert_eq!(get_bytes(&c, &bucket, "dir/007").await, b"overwritten");

    // Writers run until the kill; what was acknowledged must be there after it.
    let acked = Arc::new(Mutex::new(Vec::<(String, Vec<u8>)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (c, bucket, acked, stop) = (c.clone(), bucket.clone(), acked.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("load/{w}/{i}");
                let data = format!("{key} payload").into_bytes();
                let r = c
                    .put_object()
                    .bucket(&bucket)
                    .key(&key)
                    .body(body(&data))
                    .send()
                    .await;
                if r.is_ok() {
                    acked.lock().unwrap().push((key, data));
                }
                i += 1;
            }
        }));
    }
    let enough = poll_until(Duration::from_secs(60), || {
        let acked = acked.clone();
        async move { acked.lock().unwrap().len() >= 60 }
    })
    .await;
    assert!(enough, "writers made progress before the kill");
    s.kill();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();

    s.restart();
    serving(&s, &bucket).await;
    let c = s.client();
    for (key, data) in &acked {
        assert_eq!(&get_bytes(&c, &bucket, key).await, data, "{key} lost");
    }
    assert_eq!(get_bytes(&c, &bucket, "big/one").await, big);
    assert_eq!(list_all(&c, &bucket, Some("dir/")).await.len(), 39);
    assert!(
        list_all(&c, &bucket, Some("load/")).await.len() >= acked.len(),
        "every acknowledged load object is listed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspaces_share_one_tikv_without_seeing_each_other() {
    let sim = Sim::start();
    let a = Server::start(sim.opts("lake-a"));
    let b = Server::start(sim.opts("lake-b"));
    let (ca, cb) = (a.client(), b.client());
    // Each serves all its groups, and says so.
    for s in [&a, &b] {
        let health = reqwest::get(format!("{}/health", s.admin)).await.unwrap();
        assert_eq!(health.status(), 200, "{}", health.text().await.unwrap());
    }
    create_bucket(&ca, "shared-name").await;
    put(&ca, "shared-name", "k", b"from a").await;
    // The same bucket name is free in the other namespace.
    create_bucket(&cb, "shared-name").await;
    assert!(list_all(&cb, "shared-name", None).await.is_empty());
    put(&cb, "shared-name", "k", b"from b").await;
    assert_eq!(get_bytes(&ca, "shared-name", "k").await, b"from a");
    assert_eq!(get_bytes(&cb, "shared-name", "k").await, b"from b");
    // The keyspace is fixed at creation.
    let mut a = a;
    a.kill();
    let other = sim.keyspace("other");
    let args = [
        "--store",
        "tikv",
        "--pd",
        &sim.pd,
        "--tikv-keyspace",
        &other,
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    let err = server_refuses(a.data_dir(), &args);
    let wanted = format!("--tikv-keyspace {}", sim.keyspace("lake-a"));
    assert!(err.contains(&wanted), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_takes_the_groups_over_without_a_split_brain() {
    let sim = Sim::start();
    let mut a = Server::start(sim.opts("takeover"));
    let ca = a.client();
    let bucket = new_bucket(&ca, "takeover").await;
    for i in 0..20 {
        put(&ca, &bucket, &format!("a/{i}"), b"written through a").await;
    }
    // A second process on the same namespace: a holds every group's lease, so b serves none.
    let mut b = Server::start(sim.opts("takeover"));
    let cb = b.client_no_retry();
    let refused = cb
        .put_object()
        .bucket(&bucket)
        .key("b/early")
        .body(body(b"x"))
        .send()
        .await;
    assert!(
        refused.is_err(),
        "b must not write while a holds the groups"
    );
    assert_eq!(get_bytes(&ca, &bucket, "a/0").await, b"written through a");

    // a dies: b takes every group over once the leases lapse, with everything a acknowledged.
    a.kill();
    serving(&b, &bucket).await;
    let cb = b.client();
    for i in 0..20 {
        assert_eq!(
            get_bytes(&cb, &bucket, &format!("a/{i}")).await,
            b"written through a"
        );
    }
    put(&cb, &bucket, "b/after", b"written through b").await;
    assert_eq!(
        list_all(&cb, &bucket, None).await.len(),
        21,
        "b's early write was refused, not half done"
    );

    // a comes back: b holds the groups now, so a serves none of them.
    a.restart();
    let ca = a.client_no_retry();
    let refused = ca
        .put_object()
        .bucket(&bucket)
        .key("a/late")
        .body(body(b"x"))
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a must not write while b holds the groups"
    );
    put(&cb, &bucket, "b/still", b"b still serves").await;
    assert_eq!(get_bytes(&cb, &bucket, "b/still").await, b"b still serves");
    b.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_namespace_spills_over_into_tikv() {
    let sim = Sim::start();
    let mut s = Server::start(Opts::default().arg("--mnodes", "3"));
    let c = s.client();
    let bucket = new_bucket(&c, "spill").await;
    let big = random_bytes(2 << 20);
    put(&c, &bucket, "big", &big).await;
    for i in 0..50 {
        put(
            &c,
            &bucket,
            &format!("d{}/k{i:02}", i % 4),
            format!("v{i}").as_bytes(),
        )
        .await;
    }
    c.delete_object()
        .bucket(&bucket)
        .key("d0/k00")
        .send()
        .await
        .unwrap();
    // Killed, not stopped: the migration replays what only the raft logs hold.
    s.kill();

    let migrate = |keyspace: &str| {
        Command::new(saker_bin())
            .args(["admin", "store", "migrate", "--to", "tikv", "--pd", &sim.pd])
            .arg("--data-dir")
            .arg(s.data_dir())
            .args(["--tikv-keyspace", &sim.keyspace(keyspace)])
            .output()
            .unwrap()
    };
    let out = migrate("spilled");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches(", verified").count(), 3, "{stdout}");
    // Once moved, the directory is on TiKV: a second migration is refused.
    let again = migrate("other");
    assert!(!again.status.success());

    s.restart_with(
        Opts::default()
            .arg("--mnodes", "3")
            .arg("--store", "tikv")
            .arg("--pd", &sim.pd)
            .arg("--tikv-keyspace", &sim.keyspace("spilled")),
    );
    serving(&s, &bucket).await;
    let c = s.client();
    assert_eq!(get_bytes(&c, &bucket, "big").await, big);
    let keys = list_all(&c, &bucket, Some("d")).await;
    assert_eq!(keys.len(), 49, "{keys:?}");
    assert_eq!(get_bytes(&c, &bucket, "d1/k01").await, b"v1");
    // And it keeps working: new writes land in TiKV.
    put(&c, &bucket, "after/move", b"new").await;
    assert_eq!(get_bytes(&c, &bucket, "after/move").await, b"new");
}

/// The node serving the most groups (each is served by whichever node won its lease in TiKV),
/// and those groups.
async fn busiest(nodes: &Nodes) -> (usize, Vec<u32>) {
    let mut served: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for g in 1..=GROUPS {
        served.entry(nodes.leader(g).await).or_default().push(g);
    }
    served
        .into_iter()
        .max_by_key(|(_, groups)| groups.len())
        .expect("some node serves each group")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_cluster_on_tikv_moves_a_killed_nodes_groups_to_the_others() {
    let sim = Sim::start();
    let args = sim.node_args("cluster");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut nodes = Nodes::start(&args);
    let bucket = "lake";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    // The node serving the most groups dies; the writer goes through another one's gateway.
    let (victim, lost) = busiest(&nodes).await;
    let gateway = (victim + 1) % 3;
    let acks: Progress = Arc::default();
    let writer = Writer::start(nodes.client(gateway, false), bucket, acks.clone());
    writes_resume(&nodes, &acks, 0, 30).await;

    let before = acks.lock().unwrap().0;
    nodes.kill(victim);
    // Its leases lapse and the survivors take its groups over (and the coordinator with
    // group 1, if it served that): writes go on.
    writes_resume(&nodes, &acks, before, 30).await;
    for g in &lost {
        let now = nodes.leader(*g).await;
        assert_ne!(now, victim, "group {g}");
    }
    // Back, it serves none of the groups it lost until their new holders let go, and reads
    // through it see every write the others acknowledged meanwhile.
    nodes.restart(victim);
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 20).await;
    let (acked, _) = writer.finish().await;
    verify(&nodes, victim, bucket, &acked).await;
    eprintln!(
        "node {} served groups {lost:?}; {} writes acknowledged",
        victim + 1,
        acked.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_cut_off_from_tikv_stops_serving_and_its_groups_move() {
    // Declared first, dropped last: the servers and the simulator go before the namespaces.
    let net = Netns::new(3);
    // On the bridge's service address, which one node is cut off from below while this
    // process still reaches that node.
    let sim = Sim::spawn(&format!("{}:0", net.service_ip()));
    let args = sim.node_args("cut");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let nodes = Nodes::start_in(&net, &args);
    let bucket = "cut";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    let (victim, lost) = busiest(&nodes).await;
    let major = (victim + 1) % 3;
    let through_major = nodes.client(major, true);
    put(&through_major, bucket, "probe", b"before the cut").await;
    let acks: Progress = Arc::default();
    let writer = Writer::start(nodes.client(major, false), bucket, acks.clone());
    writes_resume(&nodes, &acks, 0, 30).await;

    // The victim still reaches its peers, not TiKV: it cannot renew its leases, stops
    // serving its groups, and the others take them over.
    net.cut_from_service(victim);
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 30).await;
    for g in &lost {
        let now = nodes.leader(*g).await;
        assert_ne!(now, victim, "group {g} still served by the cut-off node");
    }
    put(&through_major, bucket, "probe", b"after the cut").await;
    // Through the cut-off node's gateway a read is the new value or an error, never the old.
    let through_victim = nodes.client(victim, false);
    if let Ok(r) = through_victim
        .get_object()
        .bucket(bucket)
        .key("probe")
        .send()
        .await
    {
        let got = r.body.collect().await.unwrap().into_bytes();
        assert_eq!(
            &got[..],
            b"after the cut",
            "a stale read through the cut-off node"
        );
    }

    net.heal();
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 20).await;
    let (acked, _) = writer.finish().await;
    verify(&nodes, victim, bucket, &acked).await;
    assert_eq!(
        get_bytes(&nodes.client(victim, true), bucket, "probe").await,
        b"after the cut"
    );
    eprintln!(
        "node {} served groups {lost:?}; {} writes acknowledged",
        victim + 1,
        acked.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_cluster_moves_into_tikv_through_a_backup() {
    let sim = Sim::start();
    let nodes = Nodes::start(&[]);
    let bucket = "spill";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    // Objects of at most 900 bytes: inline in the metadata, so the new nodes need no chunks.
    let acks: Progress = Arc::default();
    let writer = Writer::start(nodes.client(0, false), bucket, acks.clone());
    writes_resume(&nodes, &acks, 0, 40).await;
    let (acked, _) = writer.finish().await;
    let backups = tempfile::tempdir().unwrap();
    let backup = backups.path().join("before-tikv");
    nodes.admin(0, &["backup", backup.to_str().unwrap()]);
    drop(nodes);

    let migrate = || {
        Command::new(saker_bin())
            .args(["admin", "store", "migrate", "--to", "tikv", "--pd", &sim.pd])
            .arg("--from-backup")
            .arg(&backup)
            .args(["--tikv-keyspace", &sim.keyspace("spilled")])
            .output()
            .unwrap()
    };
    let out = migrate();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.matches(", verified").count(),
        GROUPS as usize,
        "{stdout}"
    );
    // The keyspace holds a namespace now: a second restore into it is refused.
    assert!(!migrate().status.success());

    // A new cluster on TiKV serves every acknowledged write, and takes new ones.
    let args = sim.node_args("spilled");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let nodes = Nodes::start(&args);
    verify(&nodes, 1, bucket, &acked).await;
    let c = nodes.client(2, true);
    put(&c, bucket, "after/the-move", b"on tikv").await;
    assert_eq!(get_bytes(&c, bucket, "after/the-move").await, b"on tikv");
    eprintln!("{} writes moved into TiKV", acked.len());
}
