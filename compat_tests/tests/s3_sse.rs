//! Server-side encryption end to end: SSE-S3 (under a master key file kept outside the data
//! directory), SSE-KMS (under a named key of a local keyring), SSE-C (under the client's key,
//! sent with every request) and bucket default encryption. The bytes on disk are ciphertext
//! (a marker written in the clear in a control object is found on disk, the encrypted
//! objects' markers are not); reads, ranges, parts, copies and the mount give the plaintext
//! back; a wrong or missing key is refused.

mod common;

use aws_sdk_s3::types::{ServerSideEncryption, ServerSideEncryptionByDefault};
use aws_sdk_s3::Client;
use common::fuse::{errno, Mounted};
use common::sse::*;
use common::*;

const MIB: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread")]
async fn sse_s3_objects_are_ciphertext_on_disk_and_plaintext_to_readers() {
    let (_keys, key) = master_key();
    let srv = Server::start(with_key(&key));
    let c = srv.client();
    let b = new_bucket(&c, "sses3").await;
    // A control object in the clear: its marker must be found on disk, or the scan proves
    // nothing.
    let clear = marked(b"CLEAR-MARKER-0123456789abcdef!!", 3000);
    put(&c, &b, "clear", &clear).await;
    let small = marked(b"SMALL-MARKER-0123456789abcdef!!", 3000);
    let big = marked(b"BIG-MARKER-0123456789abcdefgh!!", 3 * MIB + 123);
    let part1 = marked(b"PART1-MARKER-0123456789abcdef!!", 5 * MIB);
    let part2 = marked(b"PART2-MARKER-0123456789abcdef!!", MIB + 7);
    for (k, data) in [("small", &small), ("big", &big)] {
        let out = put_sealed(&c, &b, k, ServerSideEncryption::Aes256, data)
            .await
            .unwrap();
        assert_eq!(
            out.server_side_encryption(),
            Some(&ServerSideEncryption::Aes256)
        );
        // The ETag is the plaintext's MD5, as S3 answers for SSE-S3.
        assert_eq!(out.e_tag(), Some(quoted_md5(data).as_str()));
    }
    multipart(&c, &b, "parts", &[&part1, &part2], true).await;

    for (k, data) in [("small", &small), ("big", &big)] {
        assert_eq!(&get_bytes(&c, &b, k).await, data, "{k}");
        let shown = head(&c, &b, k).await;
        assert_eq!(
            shown.server_side_encryption(),
            Some(&ServerSideEncryption::Aes256)
        );
    }
    // Ranges across a chunk boundary and across the part boundary.
    assert_eq!(
        get_range(&c, &b, "big", "bytes=1048500-2097200").await,
        &big[1048500..=2097200]
    );
    let mut whole = part1.clone();
    whole.extend_from_slice(&part2);
    assert_eq!(get_bytes(&c, &b, "parts").await, whole);
    let across = 5 * MIB - 10;
    assert_eq!(
        get_range(&c, &b, "parts", &format!("bytes={across}-{}", across + 99)).await,
        &whole[across..across + 100]
    );
    let second = c
        .get_object()
        .bucket(&b)
        .key("parts")
        .part_number(2)
        .send()
        .await
        .unwrap();
    assert_eq!(
        second.body.collect().await.unwrap().into_bytes().to_vec(),
        part2
    );

    // Copies: encrypted to clear, clear to encrypted; both read back the same bytes. (The
    // source copied to the clear is an object of its own: its bytes are on disk in the
    // clear from then on.)
    let to_clear = random_bytes(MIB + 1);
    put_sealed(&c, &b, "sealed", ServerSideEncryption::Aes256, &to_clear)
        .await
        .unwrap();
    c.copy_object()
        .bucket(&b)
        .key("big-clear")
        .copy_source(format!("{b}/sealed"))
        .send()
        .await
        .unwrap();
    let shown = head(&c, &b, "big-clear").await;
    assert_eq!(shown.server_side_encryption(), None);
    assert_eq!(get_bytes(&c, &b, "big-clear").await, to_clear);
    let copied = c
        .copy_object()
        .bucket(&b)
        .key("clear-sealed")
        .copy_source(format!("{b}/clear"))
        .server_side_encryption(ServerSideEncryption::Aes256)
        .send()
        .await
        .unwrap();
    assert_eq!(
        copied.server_side_encryption(),
        Some(&ServerSideEncryption::Aes256)
    );
    assert_eq!(get_bytes(&c, &b, "clear-sealed").await, clear);

    // SSE-KMS is refused, and nothing is stored.
    let kms = put_sealed(&c, &b, "kms", ServerSideEncryption::AwsKms, b"secret").await;
    assert_fails(kms, 501, "NotImplemented");
    assert_status(c.head_object().bucket(&b).key("kms").send().await, 404);

    let found = on_disk(
        &srv,
        [
            &b"CLEAR-MARKER-0123456789abcdef!!"[..],
            b"SMALL-MARKER-0123456789abcdef!!",
            b"BIG-MARKER-0123456789abcdefgh!!",
            b"PART1-MARKER-0123456789abcdef!!",
            b"PART2-MARKER-0123456789abcdef!!",
        ],
    )
    .await;
    assert_eq!(found, [true, false, false, false, false]);
}

#[tokio::test(flavor = "multi_thread")]
async fn bucket_default_encryption_seals_new_objects() {
    let (_keys, key) = master_key();
    let srv = Server::start(with_key(&key));
    let c = srv.client();
    let b = new_bucket(&c, "ssedefault").await;
    assert_fails(
        c.get_bucket_encryption().bucket(&b).send().await,
        400,
        "ServerSideEncryptionConfigurationNotFoundError",
    );
    put(&c, &b, "before", b"not sealed").await;
    let aes = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .unwrap();
    set_default_encryption(&c, &b, aes).await;
    let got = c.get_bucket_encryption().bucket(&b).send().await.unwrap();
    let rules = got.server_side_encryption_configuration().unwrap().rules();
    assert_eq!(
        rules[0]
            .apply_server_side_encryption_by_default()
            .unwrap()
            .sse_algorithm(),
        &ServerSideEncryption::Aes256
    );
    let out = c
        .put_object()
        .bucket(&b)
        .key("after")
        .body(body(b"sealed by default"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        out.server_side_encryption(),
        Some(&ServerSideEncryption::Aes256)
    );
    assert_eq!(get_bytes(&c, &b, "after").await, b"sealed by default");
    let before = head(&c, &b, "before").await;
    assert_eq!(before.server_side_encryption(), None);
    c.delete_bucket_encryption()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    put(&c, &b, "later", b"clear again").await;
    let later = head(&c, &b, "later").await;
    assert_eq!(later.server_side_encryption(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_kms_seals_under_the_named_keyring_key() {
    let (keys, master) = master_key();
    let ring = keys.path().join("kms.keyring");
    for id in ["lake-key", "other-key"] {
        let out = key_admin(&["kms-key", ring.to_str().unwrap(), id]);
        ok_stdout(out, "saker admin kms-key");
    }
    let opts = with_key(&master).arg("--sse-kms-keyring", ring.to_str().unwrap());
    let srv = Server::start(opts);
    let c = srv.client();
    let b = new_bucket(&c, "ssekms").await;
    let data = marked(b"KMS-MARKER-0123456789abcdefghi!", MIB + 3);
    let out = c
        .put_object()
        .bucket(&b)
        .key("obj")
        .server_side_encryption(ServerSideEncryption::AwsKms)
        .ssekms_key_id("lake-key")
        .body(body(&data))
        .send()
        .await
        .unwrap();
    assert_eq!(
        out.server_side_encryption(),
        Some(&ServerSideEncryption::AwsKms)
    );
    assert_eq!(out.ssekms_key_id(), Some("lake-key"));
    let shown = head(&c, &b, "obj").await;
    assert_eq!(shown.ssekms_key_id(), Some("lake-key"));
    assert_eq!(get_bytes(&c, &b, "obj").await, data);
    // An unknown key, a key id without aws:kms, and aws:kms without a key id are refused.
    for (sse, id) in [
        (Some(ServerSideEncryption::AwsKms), Some("no-such-key")),
        (None, Some("lake-key")),
        (Some(ServerSideEncryption::Aes256), Some("lake-key")),
        (Some(ServerSideEncryption::AwsKms), None),
    ] {
        let r = c
            .put_object()
            .bucket(&b)
            .key("refused")
            .set_server_side_encryption(sse.clone())
            .set_ssekms_key_id(id.map(str::to_string))
            .body(body(b"x"))
            .send()
            .await;
        assert_fails(r, 400, "InvalidArgument");
    }
    // A bucket default of SSE-KMS names its key.
    let by_default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::AwsKms)
        .kms_master_key_id("other-key")
        .build()
        .unwrap();
    set_default_encryption(&c, &b, by_default).await;
    put(&c, &b, "defaulted", b"under other-key").await;
    let shown = head(&c, &b, "defaulted").await;
    assert_eq!(
        shown.server_side_encryption(),
        Some(&ServerSideEncryption::AwsKms)
    );
    assert_eq!(shown.ssekms_key_id(), Some("other-key"));
    assert_eq!(get_bytes(&c, &b, "defaulted").await, b"under other-key");
    let [found] = on_disk(&srv, [b"KMS-MARKER-0123456789abcdefghi!"]).await;
    assert!(!found, "SSE-KMS plaintext found on disk");
}

async fn head(
    c: &Client,
    b: &str,
    k: &str,
) -> aws_sdk_s3::operation::head_object::HeadObjectOutput {
    c.head_object().bucket(b).key(k).send().await.unwrap()
}

/// A PUT of `data` at `k` with `x-amz-server-side-encryption: sse`.
/// A GET of `k` with the SSE-C key `key` (and `md5` as its MD5).
fn keyed_get(
    c: &Client,
    b: &str,
    k: &str,
    key: &str,
    md5: &str,
) -> aws_sdk_s3::operation::get_object::builders::GetObjectFluentBuilder {
    c.get_object()
        .bucket(b)
        .key(k)
        .sse_customer_algorithm("AES256")
        .sse_customer_key(key)
        .sse_customer_key_md5(md5)
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_c_objects_need_their_key_for_every_read() {
    // No master key: SSE-C needs none, SSE-S3 is refused.
    let srv = Server::start(Opts::default().arg("--chunk-size", "1MiB"));
    let c = srv.client();
    let b = new_bucket(&c, "ssec").await;
    let refused = put_sealed(&c, &b, "s3", ServerSideEncryption::Aes256, b"x").await;
    assert_fails(refused, 501, "NotImplemented");

    let (key, md5) = customer(1);
    let (other, other_md5) = customer(2);
    let data = marked(b"SSEC-MARKER-0123456789abcdefgh!", 2 * MIB + 5);
    let out = c
        .put_object()
        .bucket(&b)
        .key("obj")
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&key)
        .sse_customer_key_md5(&md5)
        .body(body(&data))
        .send()
        .await
        .unwrap();
    assert_eq!(out.sse_customer_key_md5(), Some(md5.as_str()));
    // Without the key, or with another key: 400 (GET and HEAD).
    assert_fails(
        c.get_object().bucket(&b).key("obj").send().await,
        400,
        "InvalidRequest",
    );
    assert_status(c.head_object().bucket(&b).key("obj").send().await, 400);
    let wrong = keyed_get(&c, &b, "obj", &other, &other_md5).send().await;
    assert_fails(wrong, 400, "InvalidRequest");
    // A key whose MD5 does not match it is a bad request.
    let mismatched = keyed_get(&c, &b, "obj", &key, &other_md5).send().await;
    assert_fails(mismatched, 400, "InvalidArgument");
    let got = keyed_get(&c, &b, "obj", &key, &md5)
        .range("bytes=1048570-1048600")
        .send()
        .await
        .unwrap();
    assert_eq!(got.sse_customer_algorithm(), Some("AES256"));
    let bytes = got.body.collect().await.unwrap().into_bytes();
    assert_eq!(&bytes[..], &data[1048570..=1048600]);

    // A copy needs the source's key, and is stored under the destination's.
    let no_source_key = c
        .copy_object()
        .bucket(&b)
        .key("copy")
        .copy_source(format!("{b}/obj"))
        .send()
        .await;
    assert_fails(no_source_key, 400, "InvalidRequest");
    c.copy_object()
        .bucket(&b)
        .key("copy")
        .copy_source(format!("{b}/obj"))
        .copy_source_sse_customer_algorithm("AES256")
        .copy_source_sse_customer_key(&key)
        .copy_source_sse_customer_key_md5(&md5)
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&other)
        .sse_customer_key_md5(&other_md5)
        .send()
        .await
        .unwrap();
    let copy = keyed_get(&c, &b, "copy", &other, &other_md5)
        .send()
        .await
        .unwrap();
    assert_eq!(
        copy.body.collect().await.unwrap().into_bytes().to_vec(),
        data
    );

    // Every part of an SSE-C upload carries the key.
    let up = c
        .create_multipart_upload()
        .bucket(&b)
        .key("mp")
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&key)
        .sse_customer_key_md5(&md5)
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap();
    let keyless = c
        .upload_part()
        .bucket(&b)
        .key("mp")
        .upload_id(id)
        .part_number(1)
        .body(body(b"part"))
        .send()
        .await;
    assert_fails(keyless, 400, "InvalidRequest");
    let [found] = on_disk(&srv, [b"SSEC-MARKER-0123456789abcdefgh!"]).await;
    assert!(!found, "SSE-C plaintext found on disk");
}

#[test]
fn a_master_key_inside_the_data_directory_or_open_to_others_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let inside = data.path().join("master.key");
    let out = key_admin(&["master-key", inside.to_str().unwrap()]);
    ok_stdout(out, "saker admin master-key");
    let err = server_refuses(
        data.path(),
        &["--sse-key-file".as_ref(), inside.as_os_str()],
    );
    assert!(err.contains("inside the data directory"), "{err}");

    let (_keys, key) = master_key();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let other = tempfile::tempdir().unwrap();
    let err = server_refuses(other.path(), &["--sse-key-file".as_ref(), key.as_os_str()]);
    assert!(err.contains("chmod 600"), "{err}");
    // `create` never replaces a key (objects sealed under it would be lost).
    let again = key_admin(&["master-key", key.to_str().unwrap()]);
    assert!(!again.status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mount_reads_sse_s3_objects_and_rewrites_them_sealed() {
    let (_keys, key) = master_key();
    let opts = with_key(&key);
    let mounted = tokio::task::spawn_blocking(move || Mounted::start(opts))
        .await
        .unwrap();
    let c = mounted.srv.client();
    let b = new_bucket(&c, "ssemount").await;
    let big = marked(b"MOUNT-MARKER-0123456789abcdef!!", 2 * MIB + 77);
    let small = b"a small sealed object".to_vec();
    for (k, data) in [("big", &big), ("small", &small)] {
        put_sealed(&c, &b, k, ServerSideEncryption::Aes256, data)
            .await
            .unwrap();
    }
    put_customer_sealed(&c, &b, "customer", 3, b"only with the client's key").await;
    let dir = mounted.root.join(&b);
    let rewritten = b"REWRITE-MARKER-0123456789abcdef".to_vec();
    let new_bytes = rewritten.clone();
    let out = tokio::task::spawn_blocking(move || {
        let big = std::fs::read(dir.join("big")).unwrap();
        let small = std::fs::read(dir.join("small")).unwrap();
        // Rewritten through the mount, a sealed file is sealed again (under a fresh key).
        std::fs::write(dir.join("small"), &new_bytes).unwrap();
        let mut appended = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("big"))
            .unwrap();
        std::io::Write::write_all(&mut appended, b"+tail").unwrap();
        drop(appended);
        let customer = std::fs::read(dir.join("customer"));
        (big, small, errno(customer))
    })
    .await
    .unwrap();
    assert!(out.0 == big, "the mount read other bytes");
    assert_eq!(out.1, small);
    assert_eq!(out.2, libc::EACCES);
    // Sealed and intact through S3.
    for (k, want) in [("small", rewritten), ("big", [&big[..], b"+tail"].concat())] {
        let shown = head(&c, &b, k).await;
        assert_eq!(
            shown.server_side_encryption(),
            Some(&ServerSideEncryption::Aes256),
            "{k}"
        );
        assert!(get_bytes(&c, &b, k).await == want, "{k} reads other bytes");
    }
    let [found] = on_disk(&mounted.srv, [b"REWRITE-MARKER-0123456789abcdef"]).await;
    assert!(!found, "a rewrite through the mount left plaintext on disk");
}
