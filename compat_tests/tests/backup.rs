//! Metadata backups: `saker admin backup DIR` from a running server, then `saker server
//! --restore DIR` on an empty data directory (with the chunks copied over) serves the same
//! objects, listings and directories; a restore onto a data directory that holds state is
//! refused.

mod common;

use std::process::{Command, Stdio};

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restores_onto_an_empty_data_directory() {
    let src = Server::default_start();
    let c = src.client();
    let bucket = new_bucket(&c, "backup").await;
    let mut objects = Vec::new();
    for i in 0..40 {
        // Inline objects and chunked ones (above the 16 KiB inline threshold), in directories.
        let size = if i % 10 == 0 { 300_000 } else { 100 + i * 37 };
        let key = format!("d{}/sub{}/obj-{i}", i % 3, i % 2);
        let data = random_bytes(size);
        put(&c, &bucket, &key, &data).await;
        objects.push((key, data));
    }
    let out = src.admin_cmd(&["backup", "/proc/no-such-dir/backup"]);
    assert!(!out.status.success(), "a bad backup path fails");

    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b1");
    let out = src.admin_cmd(&["backup", backup.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "backup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(backup.join("backup.json").exists());
    // A second backup into the same directory is refused (it would mix two).
    let again = src.admin_cmd(&["backup", backup.to_str().unwrap()]);
    assert!(!again.status.success());

    // A new server from the backup; its chunks copied from the old one's data directory.
    let restore = Opts::default().arg("--restore", backup.to_str().unwrap());
    let mut dst = Server::start(restore);
    dst.kill();
    let chunks = dst.data_dir().join("chunks");
    std::fs::remove_dir_all(&chunks).unwrap();
    let copied = Command::new("cp")
        .arg("-a")
        .arg(src.data_dir().join("chunks"))
        .arg(&chunks)
        .status()
        .unwrap();
    assert!(copied.success());
    dst.restart_with(Opts::default());
    let d = dst.client();
    for (key, data) in &objects {
        assert_eq!(&get_bytes(&d, &bucket, key).await, data, "{key}");
    }
    let mut keys: Vec<String> = objects.iter().map(|(k, _)| k.clone()).collect();
    keys.sort();
    assert_eq!(list_all(&d, &bucket, None).await, keys);
    assert_eq!(
        list_all(&d, &bucket, Some("d1/sub0/")).await,
        keys.iter()
            .filter(|k| k.starts_with("d1/sub0/"))
            .cloned()
            .collect::<Vec<_>>()
    );
    // It takes new writes next to the restored ones.
    put(&d, &bucket, "d0/new", b"after the restore").await;
    assert_eq!(get_bytes(&d, &bucket, "d0/new").await, b"after the restore");

    // Restoring onto a data directory that holds state is refused, and changes nothing.
    dst.kill();
    let refused = Command::new(saker_bin())
        .args(["server", "--data-dir"])
        .arg(dst.data_dir())
        .args(["--s3-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--rpc-addr", "127.0.0.1:0", "--restore"])
        .arg(&backup)
        .env("SAKER_ACCESS_KEY", ROOT_AK)
        .env("SAKER_SECRET_KEY", ROOT_SK)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("state here already"), "{err}");
    dst.restart_with(Opts::default());
    let d = dst.client();
    assert_eq!(get_bytes(&d, &bucket, "d0/new").await, b"after the restore");
}

/// A replicated cluster's backup starts a new replicated cluster: each node restores the
/// groups it creates, the others get them by raft snapshots as they join.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_cluster_restores_from_its_backup() {
    use common::cluster::Nodes;
    let src = Nodes::start(&[]);
    src.wait_voters(&[]).await;
    let c = src.client(0, true);
    let bucket = "replicated-backup";
    eventually("create the bucket", || {
        c.create_bucket().bucket(bucket).send()
    })
    .await;
    let mut objects = Vec::new();
    for i in 0..30 {
        let key = format!("d{}/obj-{i}", i % 4);
        let data = random_bytes(50 + i * 11);
        put(&c, bucket, &key, &data).await;
        objects.push((key, data));
    }
    let dir = tempfile::tempdir().unwrap();
    let backup = dir.path().join("b");
    src.admin(1, &["backup", backup.to_str().unwrap()]);
    drop(src);

    let dst = Nodes::start(&["--restore", backup.to_str().unwrap()]);
    dst.wait_voters(&[]).await;
    for i in [1, 2] {
        let d = dst.client(i, true);
        for (key, data) in &objects {
            assert_eq!(
                &get_bytes(&d, bucket, key).await,
                data,
                "{key} via node {}",
                i + 1
            );
        }
        assert_eq!(list_all(&d, bucket, None).await.len(), objects.len());
    }
}
