//! Encrypted files through a library mount (`saker mount --cluster` with a client credential,
//! no master key on its host): it reads SSE-S3 objects with data keys a node hands it after
//! a read's check, and what it writes into a bucket with default encryption is sealed under
//! fresh data keys from a node, so no plaintext reaches any disk of the cluster. Needs
//! /dev/fuse, root and `setpriv`.

mod common;

use aws_sdk_s3::types::{ServerSideEncryption, ServerSideEncryptionByDefault};
use common::fuse::{as_user, errno, LibraryMount};
use common::sse::*;
use common::*;

const MIB: usize = 1024 * 1024;

async fn head_sse(c: &aws_sdk_s3::Client, b: &str, k: &str) -> Option<ServerSideEncryption> {
    let head = c.head_object().bucket(b).key(k).send().await.unwrap();
    head.server_side_encryption().cloned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_library_mount_reads_sse_s3_objects_with_keys_from_the_nodes() {
    let (_keys, key) = master_key();
    let srv = Server::start(with_key(&key));
    let c = srv.client();
    let b = new_bucket(&c, "libsse").await;
    let big = marked(b"LIB-READ-MARKER-0123456789abcd!", 2 * MIB + 77);
    let small = b"a small object sealed by S3".to_vec();
    for (k, data) in [("big", &big), ("small", &small), ("private", &small)] {
        put_sealed(&c, &b, k, ServerSideEncryption::Aes256, data)
            .await
            .unwrap();
    }
    put_customer_sealed(&c, &b, "customer", 3, b"only with the client's key").await;
    let lib = tokio::task::block_in_place(|| LibraryMount::start(&srv));
    let dir = lib.root.join(&b);
    let (got_big, got_small, sse_c, other_user) = tokio::task::block_in_place(|| {
        // Readable by root only: another user's read is refused (the open's check, and the
        // node's before it hands out a key).
        std::fs::set_permissions(
            dir.join("private"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let private = dir.join("private");
        let script = format!("cat {}", private.display());
        (
            std::fs::read(dir.join("big")).unwrap(),
            std::fs::read(dir.join("small")).unwrap(),
            errno(std::fs::read(dir.join("customer"))),
            as_user(4242, 4242, &[], &script),
        )
    });
    assert!(got_big == big, "the library mount read other bytes");
    assert_eq!(got_small, small);
    assert_eq!(sse_c, libc::EACCES, "SSE-C stays S3's");
    assert!(!other_user.status.success());
    let err = String::from_utf8_lossy(&other_user.stderr);
    assert!(err.contains("Permission denied"), "{err}");
    let metrics = metrics_text(&srv.admin).await;
    let given = "saker_mnode_sse_keys_total{kind=\"open\",outcome=\"given\"}";
    assert!(metrics.contains(given), "{given} missing");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_library_mount_writing_into_a_default_encrypted_bucket_leaves_no_plaintext_on_disk() {
    let (_keys, key) = master_key();
    let srv = Server::start(with_key(&key));
    let c = srv.client();
    let sealed = new_bucket(&c, "libseal").await;
    let clear = new_bucket(&c, "libclear").await;
    let aes = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .unwrap();
    set_default_encryption(&c, &sealed, aes).await;
    let big = marked(b"LIB-WRITE-BIG-0123456789abcdef!", 3 * MIB + 5);
    let small = marked(b"LIB-WRITE-SMALL-0123456789abcd!", 200);
    let control = marked(b"LIB-WRITE-CLEAR-0123456789abcd!", 200);
    let lib = tokio::task::block_in_place(|| LibraryMount::start(&srv));
    let (back_big, back_small) = tokio::task::block_in_place(|| {
        let d = lib.root.join(&sealed);
        std::fs::write(d.join("big"), &big).unwrap();
        std::fs::write(d.join("small"), &small).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/small"), &small).unwrap();
        std::fs::write(lib.root.join(&clear).join("control"), &control).unwrap();
        (
            std::fs::read(d.join("big")).unwrap(),
            std::fs::read(d.join("small")).unwrap(),
        )
    });
    assert!(back_big == big, "the mount reads back other bytes");
    assert_eq!(back_small, small);
    for (k, data) in [("big", &big), ("small", &small), ("sub/small", &small)] {
        assert_eq!(
            head_sse(&c, &sealed, k).await,
            Some(ServerSideEncryption::Aes256),
            "{k}"
        );
        assert!(
            get_bytes(&c, &sealed, k).await == *data,
            "{k} reads other bytes"
        );
    }
    assert_eq!(head_sse(&c, &clear, "control").await, None);
    let found = on_disk(
        &srv,
        [
            &b"LIB-WRITE-CLEAR-0123456789abcd!"[..],
            b"LIB-WRITE-BIG-0123456789abcdef!",
            b"LIB-WRITE-SMALL-0123456789abcd!",
        ],
    )
    .await;
    // The control file, written in the clear, shows that the search would find them.
    assert_eq!(found, [true, false, false]);
    // A rewrite through the mount (read, decrypted, sealed again under a fresh key).
    tokio::task::block_in_place(|| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(lib.root.join(&sealed).join("small"))
            .unwrap();
        std::io::Write::write_all(&mut f, b"+more").unwrap();
    });
    let want = [&small[..], b"+more"].concat();
    assert_eq!(get_bytes(&c, &sealed, "small").await, want);
    let metrics = metrics_text(&srv.admin).await;
    let given = "saker_mnode_sse_keys_total{kind=\"fresh\",outcome=\"given\"}";
    assert!(metrics.contains(given), "{given} missing");
}
