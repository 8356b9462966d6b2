//! The multi-process shape: a coordinator, three MNode processes (one group each), a chunkstore
//! and a gateway, each a `saker server --config FILE` process on loopback. S3 works through the
//! gateway, a library client dials every process the cluster map names, and an MNode process
//! killed with SIGKILL fails only its own names until it restarts, losing nothing it
//! acknowledged.

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use common::multiproc::LocalCluster;
use common::*;
use futures::StreamExt;
use saker_client::ReadRange;
use saker_namespace::Route;
use saker_rpc::{fetch_cluster_map, MetaError, MetaRequest, MetaResponse, Want as MetaWant};

/// The group that owns a key's last component (the router of the served cluster map).
async fn owners(rpc: &str, keys: &[String]) -> Vec<u32> {
    let map = fetch_cluster_map(rpc).await.unwrap();
    let router = map.router().unwrap();
    keys.iter()
        .map(|k| match router.route_name(k.rsplit('/').next().unwrap()) {
            Route::Group(g) => g,
            Route::PathWalk => panic!("no exceptions in a fresh cluster"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn six_processes_serve_s3_and_survive_an_mnode_kill() {
    let mut cluster = LocalCluster::start();
    let s3 = cluster.client(true);
    let bucket = "multiproc";
    eventually("create the bucket", || {
        s3.create_bucket().bucket(bucket).send()
    })
    .await;

    // Small objects (inline at their MNode) and chunked ones (on the chunkstore process).
    let mut objects: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for i in 0..48 {
        let size = if i % 8 == 0 { 100 * 1024 } else { 300 + i };
        let key = format!("train/d{}/sample-{i:03}.bin", i % 4);
        let data = random_bytes(size);
        let etag = put(&s3, bucket, &key, &data).await;
        assert_eq!(etag, quoted_md5(&data), "{key}");
        objects.insert(key, data);
    }
    let keys: Vec<String> = objects.keys().cloned().collect();
    assert_eq!(list_all(&s3, bucket, None).await, keys);
    for (key, data) in &objects {
        assert_eq!(&get_bytes(&s3, bucket, key).await, data, "{key}");
    }
    let owner = owners(&cluster.rpc["coordinator"], &keys).await;
    for g in 1..=3 {
        assert!(
            owner.contains(&g),
            "every group owns some of the keys: {owner:?}"
        );
    }

    // A library client gets the map from any process and dials each group's own process.
    let map = fetch_cluster_map(&cluster.rpc["mnode3"]).await.unwrap();
    assert_eq!(map.groups, vec![1, 2, 3]);
    assert_eq!(map.endpoints.mnode(2, ""), [cluster.rpc["mnode2"].as_str()]);
    let lib = saker_client::Cluster::connect_all(&cluster.rpc["mnode3"], Default::default())
        .await
        .unwrap();
    let big = keys.iter().find(|k| objects[*k].len() > 64 * 1024).unwrap();
    let path: Vec<String> = std::iter::once(bucket.to_string())
        .chain(big.split('/').map(str::to_string))
        .collect();
    let view = lib.lookup(&path, MetaWant::OBJECT).await.unwrap();
    let mut stream = lib.read_data(
        &view.attr.layout,
        view.data,
        ReadRange {
            start: 0,
            end: view.attr.size,
        },
    );
    let mut read = Vec::new();
    while let Some(piece) = stream.next().await {
        read.extend_from_slice(&piece.unwrap());
    }
    assert_eq!(read, objects[big], "{big} read from the chunkstore process");

    // Kill MNode group 2's process: its names fail fast with 503, the other groups' still work.
    cluster.kill("mnode2");
    let no_retry = cluster.client(false);
    let (on2, elsewhere): (Vec<_>, Vec<_>) = keys.iter().zip(&owner).partition(|(_, g)| **g == 2);
    let (down_key, _) = on2[0];
    let f = failure(
        no_retry
            .get_object()
            .bucket(bucket)
            .key(down_key)
            .send()
            .await,
    );
    assert_eq!(
        (f.status, f.code.as_deref()),
        (503, Some("ServiceUnavailable")),
        "{down_key} on the killed group"
    );
    for (key, _) in &elsewhere {
        assert_eq!(&get_bytes(&s3, bucket, key).await, &objects[*key], "{key}");
    }
    // chmod of a directory on a live group needs every group to drop its replica entry
    // first: with group 2 down it fails, and changes nothing.
    let dirs: Vec<Vec<String>> = std::iter::once(vec![bucket.to_string()])
        .chain((0..4).map(|i| vec![bucket.into(), "train".into(), format!("d{i}")]))
        .collect();
    let live_dir = dirs
        .into_iter()
        .find(|d| (1..=d.len()).all(|n| lib.owner(&d[..n]) != 2))
        .expect("a directory resolved without group 2");
    let chmod = |mode| MetaRequest::chmod(live_dir.clone(), mode, saker_rpc::Cred::ROOT);
    let mode_before = mode_of(&lib, &live_dir).await;
    assert!(matches!(
        lib.call(&live_dir, chmod(0o700)).await,
        Err(MetaError::Unavailable(_))
    ));
    let mode_now = mode_of(&lib, &live_dir).await;
    assert_eq!(
        mode_now, mode_before,
        "{live_dir:?} changed without group 2"
    );

    // Restarted on its data directory, the group has every object it acknowledged.
    cluster.spawn("mnode2");
    for (key, data) in &objects {
        let got = eventually(&format!("get {key} after the restart"), || async {
            let out = s3.get_object().bucket(bucket).key(key).send().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                out.body.collect().await?.into_bytes().to_vec(),
            )
        })
        .await;
        assert_eq!(&got, data, "{key} after the restart");
    }
    assert_eq!(list_all(&s3, bucket, None).await, keys);
    let changed = eventually("chmod once group 2 is back", || {
        lib.call(&live_dir, chmod(0o700))
    })
    .await;
    assert!(matches!(changed, MetaResponse::Attr(a) if a.mode & 0o7777 == 0o700));

    // The coordinator's protocols span the processes: emptying the bucket reaps the implicit
    // directories on every group, and DeleteBucket removes it.
    for key in &keys {
        s3.delete_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("delete {key}: {e:?}"));
    }
    assert!(list_all(&s3, bucket, None).await.is_empty());
    s3.delete_bucket()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|e| panic!("delete bucket: {e:?}\n{}", cluster.stderr("coordinator")));
    let f = failure(no_retry.head_bucket().bucket(bucket).send().await);
    assert_eq!(f.status, 404);
}

/// An inconsistent config file is refused at start with the reason, before anything listens.
#[test]
fn a_bad_config_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "roles = [\"mnode\"]\ndata_dir = \"/tmp/x\"\nrpc_addr = \"127.0.0.1:1\"\ngroup = 5\n\
         [cluster]\ncredential = \"/nonexistent\"\ncoordinator = \"127.0.0.1:2\"\n\
         mnodes = [\"127.0.0.1:1\"]\n\
         chunkstores = [\"127.0.0.1:3\"]\n",
    )
    .unwrap();
    let out = Command::new(saker_bin())
        .args(["server", "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("group 5"), "{err}");
}

/// The mode bits of `path`, read through a library client.
async fn mode_of(lib: &saker_client::Cluster, path: &[String]) -> u32 {
    lib.lookup(path, MetaWant::ATTR).await.unwrap().attr.mode
}

/// A cluster whose coordinator runs with `SAKER_FAILPOINT=failpoint`, and `bucket` holding
/// object `a` = "first".
async fn with_coordinator_failpoint(failpoint: &str, bucket: &str) -> LocalCluster {
    let mut cluster = LocalCluster::start();
    cluster.kill("coordinator");
    cluster.spawn_env("coordinator", &[("SAKER_FAILPOINT", failpoint)]);
    let s3 = cluster.client(true);
    eventually("create the bucket", || {
        s3.create_bucket().bucket(bucket).send()
    })
    .await;
    put(&s3, bucket, "a", b"first").await;
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_coordinator_killed_inside_an_rmdir_leaves_no_frozen_directory() {
    // This run of the coordinator dies right after it froze the directory it removes.
    let bucket = "held";
    let mut cluster = with_coordinator_failpoint("rmdir_frozen", bucket).await;

    let once = cluster.client(false);
    let cut = once.delete_bucket().bucket(bucket).send().await;
    assert!(cut.is_err(), "the rmdir died with its coordinator: {cut:?}");
    let status = cluster.wait_exit("coordinator");
    assert!(!status.success(), "the failpoint aborted it: {status}");
    assert!(
        cluster
            .stderr("coordinator")
            .contains("failpoint rmdir_frozen"),
        "{}",
        cluster.stderr("coordinator")
    );

    // The bucket's owner still holds the freeze; the restarted coordinator releases it before
    // it takes calls, so a write into the bucket goes through (it would wait out the 30 s
    // freeze limit and fail otherwise), with a client that does not retry.
    cluster.spawn("coordinator");
    let etag = put(&once, bucket, "b", b"second").await;
    assert_eq!(etag, quoted_md5(b"second"));
    assert_eq!(get_bytes(&once, bucket, "a").await, b"first");

    // The rmdir protocol works again: refused while objects remain, done once they are gone.
    let full = once.delete_bucket().bucket(bucket).send().await;
    let err = full.expect_err("the bucket is not empty");
    assert_eq!(
        err.into_service_error().meta().code(),
        Some("BucketNotEmpty")
    );
    for key in ["a", "b"] {
        once.delete_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .unwrap();
    }
    once.delete_bucket().bucket(bucket).send().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_coordinator_killed_inside_a_directory_chmod_leaves_it_unchanged_and_unfrozen() {
    let bucket = "chmodded";
    let mut cluster = with_coordinator_failpoint("setattr_frozen", bucket).await;
    let lib = saker_client::Cluster::connect_all(&cluster.rpc["mnode1"], Default::default())
        .await
        .unwrap();
    let dir = vec![bucket.to_string()];
    let mode_before = mode_of(&lib, &dir).await;
    let chmod = MetaRequest::chmod(dir.clone(), 0o700, saker_rpc::Cred::ROOT);
    let cut = lib.call(&dir, chmod.clone()).await;
    assert!(cut.is_err(), "the chmod died with its coordinator: {cut:?}");
    assert!(!cluster.wait_exit("coordinator").success());
    assert!(cluster
        .stderr("coordinator")
        .contains("failpoint setattr_frozen"));
    let mode_now = mode_of(&lib, &dir).await;
    assert_eq!(mode_now, mode_before, "the cut chmod changed nothing");

    // The restarted coordinator releases the freeze before it takes calls: a write below the
    // directory goes through with a client that does not retry, and the chmod can be redone.
    cluster.spawn("coordinator");
    let once = cluster.client(false);
    assert_eq!(
        put(&once, bucket, "b", b"second").await,
        quoted_md5(b"second")
    );
    let done = eventually("chmod after the restart", || lib.call(&dir, chmod.clone())).await;
    assert!(matches!(done, MetaResponse::Attr(a) if a.mode & 0o7777 == 0o700));
    assert_eq!(get_bytes(&once, bucket, "a").await, b"first");
}

/// A cluster whose coordinator died at `failpoint` of the link of `bucket/a` to a name another
/// MNode process owns; answers the cluster, a library client and that name.
async fn link_cut_by_coordinator(
    failpoint: &str,
    bucket: &str,
) -> (LocalCluster, saker_client::Cluster, String) {
    let mut cluster = with_coordinator_failpoint(failpoint, bucket).await;
    let lib = saker_client::Cluster::connect_all(&cluster.rpc["mnode1"], Default::default())
        .await
        .unwrap();
    let at = |name: &str| vec![bucket.to_string(), name.to_string()];
    let to = name_owned_elsewhere(&lib, bucket, "a", "b", "");
    let link = MetaRequest::CoordinatedLink {
        from: at("a"),
        to: at(&to),
        expect: None,
        cred: saker_rpc::Cred::ROOT,
    };
    let cut = lib.call(&at(&to), link).await;
    assert!(cut.is_err(), "the link died with its coordinator: {cut:?}");
    assert!(!cluster.wait_exit("coordinator").success());
    assert!(cluster
        .stderr("coordinator")
        .contains(&format!("failpoint {failpoint}")));
    (cluster, lib, to)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hard_link_across_mnode_processes_survives_a_coordinator_and_an_mnode_kill() {
    // This run of the coordinator dies right after the file's home counted the new name and
    // before it logged that: its restart must finish the link counting it once.
    let bucket = "linked";
    let (mut cluster, lib, to) = link_cut_by_coordinator("link_counted_unlogged", bucket).await;
    let at = |name: &str| vec![bucket.to_string(), name.to_string()];
    cluster.spawn("coordinator");
    let nlink = |name: String| {
        let lib = &lib;
        let path = at(&name);
        async move {
            lib.lookup(&path, MetaWant::ATTR)
                .await
                .map(|v| v.attr.nlink)
        }
    };
    let linked = eventually("the link finished", || nlink(to.clone())).await;
    assert_eq!(linked, 2);
    assert_eq!(nlink("a".into()).await.unwrap(), 2);
    let s3 = cluster.client(true);
    assert_eq!(get_bytes(&s3, bucket, &to).await, b"first");

    // The process holding the new name dies and comes back: the name and the count stay.
    let group = lib.owner(&at(&to));
    let mnode = format!("mnode{group}");
    cluster.kill(&mnode);
    cluster.spawn(&mnode);
    assert_eq!(
        eventually("the name is back", || nlink(to.clone())).await,
        2
    );

    // The first name goes: the file stays under the other one, with one name.
    s3.delete_object()
        .bucket(bucket)
        .key("a")
        .send()
        .await
        .unwrap();
    assert_eq!(nlink(to.clone()).await.unwrap(), 1);
    assert_eq!(get_bytes(&s3, bucket, &to).await, b"first");
    assert!(matches!(
        lib.lookup(&at("a"), MetaWant::ATTR).await,
        Err(MetaError::NotFound)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_replayed_after_its_new_name_was_removed_does_not_bring_it_back() {
    // The coordinator dies right after the new name was stored; before it is back, the name
    // is deleted through S3 (the MNodes take that without the coordinator). The replay must
    // settle the link as stored, not store the name again (which would leave two names on a
    // count of one) nor take the count back (which would free a file that still has a name).
    let bucket = "relinked";
    let (mut cluster, lib, to) = link_cut_by_coordinator("link_stored", bucket).await;
    let at = |name: &str| vec![bucket.to_string(), name.to_string()];
    let s3 = cluster.client(true);
    assert_eq!(get_bytes(&s3, bucket, &to).await, b"first");
    s3.delete_object()
        .bucket(bucket)
        .key(&to)
        .send()
        .await
        .unwrap();

    cluster.spawn("coordinator");
    // The restarted coordinator finishes the link before it takes calls: once an rmdir (a
    // protocol call) is answered, the replay is done.
    let once = cluster.client(false);
    let refused = once.delete_bucket().bucket(bucket).send().await;
    let err = refused.expect_err("the bucket still holds a");
    assert_eq!(
        err.into_service_error().meta().code(),
        Some("BucketNotEmpty")
    );
    assert!(matches!(
        lib.lookup(&at(&to), MetaWant::ATTR).await,
        Err(MetaError::NotFound)
    ));
    let left = lib.lookup(&at("a"), MetaWant::ATTR).await.unwrap();
    assert_eq!(left.attr.nlink, 1);
    // Its last name goes: so does the file.
    s3.delete_object()
        .bucket(bucket)
        .key("a")
        .send()
        .await
        .unwrap();
    once.delete_bucket().bucket(bucket).send().await.unwrap();
}
