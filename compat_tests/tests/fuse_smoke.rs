//! The FUSE front door against the real server (`saker server --mount`), with S3 on the other
//! side of the same namespace: a bucket made by mkdir, files written through the mount read
//! through S3 (bytes and ETag = MD5) and the reverse, errors as errnos.
//! Needs /dev/fuse and root (as CI has); fails loudly without.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;

/// Waits until `dir` is a mount point (its device differs from its parent's).
fn wait_mounted(dir: &Path) {
    let parent = dir.parent().expect("a parent").metadata().unwrap().dev();
    let deadline = Instant::now() + Duration::from_secs(20);
    while dir.metadata().map(|m| m.dev()).unwrap_or(parent) == parent {
        assert!(
            Instant::now() < deadline,
            "{} was never mounted",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn files_cross_between_the_mount_and_s3() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "this test needs /dev/fuse (a FUSE-capable kernel)"
    );
    let mnt = tempfile::Builder::new()
        .prefix("saker-fuse-")
        .tempdir()
        .unwrap();
    let mnt_path: PathBuf = mnt.path().join("mnt");
    std::fs::create_dir(&mnt_path).unwrap();
    let mut srv = Server::start(
        Opts::default()
            .arg("--mount", mnt_path.to_str().unwrap())
            .arg("--attr-ttl", "0s")
            .arg("--entry-ttl", "0s"),
    );
    let root = mnt_path.clone();
    tokio::task::spawn_blocking(move || wait_mounted(&root))
        .await
        .unwrap();
    let s3 = srv.client();

    // Through the mount: a bucket, nested directories, a small and a chunked file.
    let small = b"hello from fuse\n".to_vec();
    let big = random_bytes(300 * 1024);
    let (m, s, b) = (mnt_path.clone(), small.clone(), big.clone());
    let errs = tokio::task::spawn_blocking(move || {
        std::fs::create_dir(m.join("fusebkt")).unwrap();
        std::fs::create_dir_all(m.join("fusebkt/a/b")).unwrap();
        std::fs::write(m.join("fusebkt/a/b/small.txt"), &s).unwrap();
        std::fs::write(m.join("fusebkt/big.bin"), &b).unwrap();
        // Errors are errnos.
        let bad_bucket = std::fs::create_dir(m.join("x")).unwrap_err();
        let not_empty = std::fs::remove_dir(m.join("fusebkt/a")).unwrap_err();
        let missing = std::fs::read(m.join("fusebkt/nope")).unwrap_err();
        let exists = std::fs::create_dir(m.join("fusebkt/a")).unwrap_err();
        [bad_bucket, not_empty, missing, exists].map(|e| e.raw_os_error())
    })
    .await
    .unwrap();
    assert_eq!(
        errs,
        [Some(EINVAL), Some(ENOTEMPTY), Some(ENOENT), Some(EEXIST)]
    );
    assert_eq!(get_bytes(&s3, "fusebkt", "a/b/small.txt").await, small);
    assert_eq!(get_bytes(&s3, "fusebkt", "big.bin").await, big);
    let head = s3
        .head_object()
        .bucket("fusebkt")
        .key("big.bin")
        .send()
        .await
        .unwrap();
    assert_eq!(head.e_tag.unwrap(), quoted_md5(&big));

    // Through S3, read through the mount; deletes show on the other side.
    put(&s3, "fusebkt", "from-s3/obj", b"written by s3").await;
    let m = mnt_path.clone();
    let seen = tokio::task::spawn_blocking(move || {
        let data = std::fs::read(m.join("fusebkt/from-s3/obj")).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(m.join("fusebkt"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        std::fs::remove_file(m.join("fusebkt/a/b/small.txt")).unwrap();
        (data, names)
    })
    .await
    .unwrap();
    assert_eq!(seen.0, b"written by s3");
    assert_eq!(seen.1, vec!["a", "big.bin", "from-s3"]);
    assert_status(
        s3.head_object()
            .bucket("fusebkt")
            .key("a/b/small.txt")
            .send()
            .await,
        404,
    );
    srv.kill();
    // The test's own cleanup: a killed server's mount point is detached lazily.
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&mnt_path)
        .status();
}

// Linux errno values.
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const EINVAL: i32 = 22;
const ENOTEMPTY: i32 = 39;
