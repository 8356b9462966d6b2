//! The mount on a bucket that keeps versions: a close makes a version, the fsyncs of one
//! open replace that open's version, truncate and unlink keep what they drop (unlink behind a
//! delete marker), rename(2) makes a version at the new name and a delete marker at the old,
//! link(2) is refused, and every version reads back through S3 by its id, in S3's order.

mod common;

use std::io::Write;
use std::os::unix::fs::FileExt;

use aws_sdk_s3::types::BucketVersioningStatus;
use common::fuse::{errno, Mounted};
use common::versions::{all_versions, get_v, put_v};
use common::*;

/// (version id, latest, delete marker) of `key`'s versions, newest first, one per page (so
/// the version-id markers of mount-made versions are walked too).
async fn versions_of(c: &aws_sdk_s3::Client, b: &str, key: &str) -> Vec<(String, bool, bool)> {
    all_versions(c, b, 1)
        .await
        .into_iter()
        .filter(|(k, ..)| k == key)
        .map(|(_, v, latest, marker)| (v, latest, marker))
        .collect()
}

fn ids(v: &[(String, bool, bool)]) -> Vec<String> {
    v.iter().map(|(id, ..)| id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mount_writes_keep_versions() {
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let c = mounted.srv.client();
    let b = new_bucket(&c, "fusever").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let dir = mounted.root.join(&b);

    // A create, a write and a close: one version.
    let d = dir.clone();
    tokio::task::spawn_blocking(move || std::fs::write(d.join("f"), b"one").unwrap())
        .await
        .unwrap();
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(v.len(), 1, "{v:?}");
    let v1 = v[0].0.clone();
    assert!(v[0].1 && !v[0].2 && v1 != "null");
    let head = c.head_object().bucket(&b).key("f").send().await.unwrap();
    assert_eq!(head.version_id(), Some(v1.as_str()));

    // A rewrite (O_TRUNC): a second version; the first reads back by its id.
    let d = dir.clone();
    tokio::task::spawn_blocking(move || std::fs::write(d.join("f"), b"two").unwrap())
        .await
        .unwrap();
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(v.len(), 2, "{v:?}");
    let v2 = v[0].0.clone();
    assert_eq!(v[1].0, v1);
    assert!(v[0].1 && !v[1].1);
    assert_eq!(get_bytes(&c, &b, "f").await, b"two");
    assert_eq!(get_v(&c, &b, "f", &v1).await, b"one");
    assert_eq!(get_v(&c, &b, "f", &v2).await, b"two");

    // 100 fsyncs within one open: one more version, holding the last bytes.
    let d = dir.clone();
    tokio::task::spawn_blocking(move || {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("f"))
            .unwrap();
        for i in 0..100u32 {
            f.write_all_at(format!("{i:03}").as_bytes(), 0).unwrap();
            f.sync_all().unwrap();
        }
    })
    .await
    .unwrap();
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(v.len(), 3, "100 fsyncs of one open make one version: {v:?}");
    let v3 = v[0].0.clone();
    assert_eq!(ids(&v[1..]), [v2.clone(), v1.clone()]);
    assert_eq!(get_v(&c, &b, "f", &v3).await, b"099");
    assert_eq!(get_v(&c, &b, "f", &v2).await, b"two");

    // An S3 PUT over the mount's version, then the mount again: the order holds.
    let v4 = put_v(&c, &b, "f", b"s3 put").await.expect("a version id");
    let d = dir.clone();
    tokio::task::spawn_blocking(move || {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.join("f"))
            .unwrap();
        f.write_all(b" appended").unwrap();
    })
    .await
    .unwrap();
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(v.len(), 5, "{v:?}");
    let v5 = v[0].0.clone();
    assert_eq!(
        ids(&v[1..]),
        [v4.clone(), v3.clone(), v2.clone(), v1.clone()]
    );
    assert_eq!(get_v(&c, &b, "f", &v5).await, b"s3 put appended");
    assert_eq!(get_v(&c, &b, "f", &v4).await, b"s3 put");
    assert_eq!(get_v(&c, &b, "f", &v3).await, b"099");

    // truncate(2) by path keeps what it drops.
    let d = dir.clone();
    let len = tokio::task::spawn_blocking(move || {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.join("f"))
            .unwrap();
        f.set_len(0).unwrap();
        drop(f);
        std::fs::metadata(d.join("f")).unwrap().len()
    })
    .await
    .unwrap();
    assert_eq!(len, 0);
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(v.len(), 6, "{v:?}");
    assert_eq!(v[1].0, v5);
    assert_eq!(get_bytes(&c, &b, "f").await, b"");
    assert_eq!(get_v(&c, &b, "f", &v5).await, b"s3 put appended");

    // link(2) is refused where versions are kept.
    let d = dir.clone();
    let linked = tokio::task::spawn_blocking(move || {
        errno(std::fs::hard_link(d.join("f"), d.join("second name")))
    })
    .await
    .unwrap();
    assert_eq!(linked, libc::EPERM);

    // unlink: a delete marker; the file is gone from the mount and from S3; its versions
    // stay and read back.
    let d = dir.clone();
    let (gone, listed) = tokio::task::spawn_blocking(move || {
        std::fs::remove_file(d.join("f")).unwrap();
        let listed: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        (d.join("f").exists(), listed)
    })
    .await
    .unwrap();
    assert!(!gone);
    assert!(listed.is_empty(), "{listed:?}");
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(v.len(), 7, "{v:?}");
    assert!(v[0].1 && v[0].2, "the newest is a delete marker: {v:?}");
    assert_status(c.get_object().bucket(&b).key("f").send().await, 404);
    assert_eq!(get_v(&c, &b, "f", &v5).await, b"s3 put appended");
    assert_eq!(get_v(&c, &b, "f", &v1).await, b"one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suspended_buckets_rewrite_the_null_version_through_the_mount() {
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let c = mounted.srv.client();
    let b = new_bucket(&c, "fusenull").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let kept = put_v(&c, &b, "f", b"kept").await.expect("a version id");
    set_versioning(&c, &b, BucketVersioningStatus::Suspended).await;
    let dir = mounted.root.join(&b);
    let d = dir.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::write(d.join("f"), b"null one").unwrap();
        std::fs::write(d.join("f"), b"null two").unwrap();
    })
    .await
    .unwrap();
    let v = versions_of(&c, &b, "f").await;
    assert_eq!(ids(&v), ["null".to_string(), kept.clone()], "{v:?}");
    assert_eq!(get_v(&c, &b, "f", "null").await, b"null two");
    assert_eq!(get_v(&c, &b, "f", &kept).await, b"kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renames_make_a_version_at_the_new_name_and_a_marker_at_the_old() {
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let c = mounted.srv.client();
    let b = new_bucket(&c, "fusemv").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    mounted.srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&mounted.srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let at = |name: &str| vec![b.clone(), name.to_string()];
    // One rename within a group, one between groups (the coordinator's).
    let near = (0..)
        .map(|i| format!("near{i}"))
        .find(|n| lib.owner(&at(n)) == lib.owner(&at("a")))
        .unwrap();
    let far = name_owned_elsewhere(&lib, &b, "b", "far", "");
    for (from, to) in [("a".to_string(), near), ("b".to_string(), far)] {
        let replaced = put_v(&c, &b, &to, b"replaced").await.unwrap();
        let first = put_v(&c, &b, &from, b"first").await.unwrap();
        put_v(&c, &b, &from, b"second").await.unwrap();
        let dir = mounted.root.join(&b);
        let (f, t) = (from.clone(), to.clone());
        tokio::task::spawn_blocking(move || std::fs::rename(dir.join(f), dir.join(t)).unwrap())
            .await
            .unwrap();
        let new = versions_of(&c, &b, &to).await;
        assert_eq!(new.len(), 2, "{to}: {new:?}");
        assert!(new[0].1 && !new[0].2 && new[0].0 != replaced, "{new:?}");
        assert_eq!(new[1].0, replaced);
        assert_eq!(get_bytes(&c, &b, &to).await, b"second");
        assert_eq!(get_v(&c, &b, &to, &new[0].0).await, b"second");
        assert_eq!(get_v(&c, &b, &to, &replaced).await, b"replaced");
        let old = versions_of(&c, &b, &from).await;
        assert_eq!(old.len(), 2, "{from}: {old:?}");
        assert!(old[0].1 && old[0].2, "a delete marker at {from}: {old:?}");
        assert_eq!(old[1].0, first);
        assert_status(c.get_object().bucket(&b).key(&from).send().await, 404);
        assert_eq!(get_v(&c, &b, &from, &first).await, b"first");
    }
    // A directory's files would change keys without versions: EXDEV (mv copies instead).
    let dir = mounted.root.join(&b);
    let moved = tokio::task::spawn_blocking(move || {
        std::fs::create_dir(dir.join("d")).unwrap();
        std::fs::write(dir.join("d/x"), b"x").unwrap();
        errno(std::fs::rename(dir.join("d"), dir.join("e")))
    })
    .await
    .unwrap();
    assert_eq!(moved, libc::EXDEV);
    assert_eq!(get_bytes(&c, &b, "d/x").await, b"x");

    // Versions below a directory keep it: rmdir is ENOTEMPTY until they are deleted.
    let dir = mounted.root.join(&b);
    let kept = tokio::task::spawn_blocking(move || {
        std::fs::remove_file(dir.join("d/x")).unwrap();
        errno(std::fs::remove_dir(dir.join("d")))
    })
    .await
    .unwrap();
    assert_eq!(kept, libc::ENOTEMPTY);
    for (v, ..) in versions_of(&c, &b, "d/x").await {
        c.delete_object()
            .bucket(&b)
            .key("d/x")
            .version_id(v)
            .send()
            .await
            .unwrap();
    }
    let dir = mounted.root.join(&b);
    tokio::task::spawn_blocking(move || std::fs::remove_dir(dir.join("d")).unwrap())
        .await
        .unwrap();
}
