//! The FUSE front door against the real server (`saker server --mount`), with S3 on the other
//! side of the same namespace: a bucket made by mkdir, files written through the mount read
//! through S3 (bytes and ETag = MD5) and the reverse, errors as errnos.
//! Needs /dev/fuse and root (as CI has); fails loudly without.

mod common;

use std::path::PathBuf;

use common::fuse::{errno, Mounted};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn files_cross_between_the_mount_and_s3() {
    // Mounting blocks this thread briefly; the runtime has other workers.
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let mnt_path: PathBuf = mounted.root.clone();
    let s3 = mounted.srv.client();

    // Through the mount: a bucket, nested directories, a small and a chunked file.
    let small = b"hello from fuse\n".to_vec();
    let big = random_bytes(300 * 1024);
    // Past the client's 1 MiB memory buffer: hashed partly at the spill, partly as written.
    let spilled = random_bytes(1536 * 1024 + 7);
    let sp = spilled.clone();
    let (m, s, b) = (mnt_path.clone(), small.clone(), big.clone());
    let errs = tokio::task::spawn_blocking(move || {
        std::fs::create_dir(m.join("fusebkt")).unwrap();
        std::fs::create_dir_all(m.join("fusebkt/a/b")).unwrap();
        std::fs::write(m.join("fusebkt/a/b/small.txt"), &s).unwrap();
        std::fs::write(m.join("fusebkt/big.bin"), &b).unwrap();
        std::fs::write(m.join("fusebkt/spilled.bin"), &sp).unwrap();
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
    for (key, data) in [("a/b/small.txt", &small), ("spilled.bin", &spilled)] {
        let head = s3
            .head_object()
            .bucket("fusebkt")
            .key(key)
            .send()
            .await
            .unwrap();
        assert_eq!(head.e_tag.unwrap(), quoted_md5(data), "{key}");
    }
    assert_eq!(get_bytes(&s3, "fusebkt", "spilled.bin").await, spilled);

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
    assert_eq!(seen.1, vec!["a", "big.bin", "from-s3", "spilled.bin"]);
    assert_status(
        s3.head_object()
            .bucket("fusebkt")
            .key("a/b/small.txt")
            .send()
            .await,
        404,
    );
    // Unmounting blocks too.
    tokio::task::spawn_blocking(move || drop(mounted))
        .await
        .unwrap();
}

const ENOENT: i32 = libc::ENOENT;
const EEXIST: i32 = libc::EEXIST;
const EINVAL: i32 = libc::EINVAL;
const ENOTEMPTY: i32 = libc::ENOTEMPTY;

/// A write through the mount that does not fit on the chunkstore's disk fails with ENOSPC
/// (not EIO), and the file system keeps serving what it holds.
#[test]
fn a_full_disk_is_enospc_through_the_mount() {
    let mut m = Mounted::start(Opts::default());
    let b = m.bucket("full");
    std::fs::write(b.join("small"), b"fits").unwrap();
    m.srv.kill();
    let _tmpfs = Tmpfs::mount(&m.srv.data_dir().join("chunks"), "4m");
    m.remount_after_kill();
    let b = m.root.join("full");
    let data = random_bytes(8 << 20);
    let mut f = std::fs::File::create(b.join("big")).unwrap();
    let wrote = std::io::Write::write_all(&mut f, &data).and_then(|()| f.sync_all());
    assert_eq!(errno(wrote), libc::ENOSPC);
    drop(f);
    assert_eq!(std::fs::read(b.join("small")).unwrap(), b"fits");
}
