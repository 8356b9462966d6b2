//! Authentication failures and the shape of S3 error responses.

mod common;

use std::time::Duration;

use aws_sdk_s3::Client;

use common::*;

/// The `<Code>` of an S3 XML error body.
fn xml_code(body: &str) -> Option<String> {
    let start = body.find("<Code>")? + "<Code>".len();
    let end = body[start..].find("</Code>")? + start;
    Some(body[start..end].to_string())
}

#[tokio::test]
async fn wrong_secret_is_signature_does_not_match() {
    let srv = Server::default_start();
    let b = new_bucket(&srv.client(), "authsig").await;
    let bad = srv.client_with(ROOT_AK, "definitely-not-the-secret");
    assert_fails(
        bad.list_buckets().send().await,
        403,
        "SignatureDoesNotMatch",
    );
    assert_fails(
        bad.put_object()
            .bucket(&b)
            .key("k")
            .body(body(b"x"))
            .send()
            .await,
        403,
        "SignatureDoesNotMatch",
    );
    assert_fails(
        bad.get_object().bucket(&b).key("k").send().await,
        403,
        "SignatureDoesNotMatch",
    );
    // Nothing was written.
    assert!(list_all(&srv.client(), &b, None).await.is_empty());
}

#[tokio::test]
async fn unknown_access_key_is_invalid_access_key_id() {
    let srv = Server::default_start();
    let b = new_bucket(&srv.client(), "authkey").await;
    let bad = srv.client_with("NO-SUCH-KEY", "whatever-secret");
    assert_fails(bad.list_buckets().send().await, 403, "InvalidAccessKeyId");
    assert_fails(
        bad.put_object()
            .bucket(&b)
            .key("k")
            .body(body(b"x"))
            .send()
            .await,
        403,
        "InvalidAccessKeyId",
    );
}

#[tokio::test]
async fn unsigned_requests_are_access_denied() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "anon").await;
    put(&c, &b, "public?", b"secret data").await;
    let http = reqwest::Client::new();

    for (method, url) in [
        (
            reqwest::Method::GET,
            format!("{}/{b}/public%3F", srv.endpoint),
        ),
        (reqwest::Method::GET, format!("{}/{b}", srv.endpoint)),
        (reqwest::Method::GET, format!("{}/", srv.endpoint)),
        (
            reqwest::Method::GET,
            format!("{}/{b}/public%3F?attributes", srv.endpoint),
        ),
        (reqwest::Method::PUT, format!("{}/{b}/new", srv.endpoint)),
        (
            reqwest::Method::DELETE,
            format!("{}/{b}/public%3F", srv.endpoint),
        ),
    ] {
        let resp = http
            .request(method.clone(), &url)
            .body("x")
            .send()
            .await
            .expect("plain HTTP request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        assert_eq!(status, 403, "{method} {url}: {text}");
        assert_eq!(
            xml_code(&text).as_deref(),
            Some("AccessDenied"),
            "{method} {url}: {text}"
        );
        assert!(!text.contains("secret data"));
    }
    // Nothing changed.
    assert_eq!(list_all(&c, &b, None).await, vec!["public?"]);
    assert_eq!(get_bytes(&c, &b, "public?").await, b"secret data");

    // A bucket that does not exist is NoSuchBucket to anyone, as in S3.
    for (method, query) in [
        (reqwest::Method::GET, ""),
        (reqwest::Method::DELETE, ""),
        (reqwest::Method::GET, "?attributes"),
    ] {
        let url = format!("{}/no-such-bucket-here/k{query}", srv.endpoint);
        let resp = http
            .request(method.clone(), &url)
            .send()
            .await
            .expect("plain HTTP request");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        assert_eq!(status, 404, "{method} {url}: {text}");
        assert_eq!(xml_code(&text).as_deref(), Some("NoSuchBucket"), "{text}");
    }
}

#[tokio::test]
async fn garbage_authorization_header_is_refused() {
    let srv = Server::default_start();
    let b = new_bucket(&srv.client(), "garbage").await;
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("{}/{b}", srv.endpoint))
        .header("authorization", "AWS4-HMAC-SHA256 nonsense")
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    assert!(
        status == 400 || status == 403,
        "a malformed Authorization header: {status} {text}"
    );
    assert!(xml_code(&text).is_some(), "an S3 XML error: {text}");
}

#[tokio::test]
async fn error_bodies_are_s3_xml() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "xmlerr").await;
    let f = assert_fails(
        c.get_object().bucket(&b).key("missing").send().await,
        404,
        "NoSuchKey",
    );
    assert!(f.message.is_some() || f.code.is_some());
    // A 409 conflict carries its message.
    put(&c, &b, "f", b"x").await;
    let f = assert_fails(
        c.put_object()
            .bucket(&b)
            .key("f/g")
            .body(body(b"y"))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    assert!(f.message.is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn every_answer_has_a_request_id() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "reqid").await;
    // An error: the x-amz-request-id header and the body's <RequestId> are the same id.
    let p = c
        .get_object()
        .bucket(&b)
        .key("missing")
        .presigned(
            aws_sdk_s3::presigning::PresigningConfig::expires_in(std::time::Duration::from_secs(
                60,
            ))
            .expect("expiry"),
        )
        .await
        .expect("presign");
    let resp = reqwest::get(p.uri()).await.expect("GET");
    assert_eq!(resp.status().as_u16(), 404);
    let header = resp
        .headers()
        .get("x-amz-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .expect("x-amz-request-id on an error");
    let text = resp.text().await.expect("body");
    let start = text.find("<RequestId>").expect("RequestId in the body") + "<RequestId>".len();
    let end = text[start..].find("</RequestId>").expect("closed") + start;
    assert_eq!(&text[start..end], header);
    // A success has one too, and ids differ between requests.
    use aws_sdk_s3::operation::RequestId;
    let a = c
        .head_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("head bucket");
    let a = a.request_id().expect("request id on a success").to_string();
    assert_ne!(a, header);
}

/// A chunkstore whose disk fills up (a small tmpfs under DATA_DIR/chunks): a PUT that does
/// not fit gets 507 InsufficientStorage and stores nothing, what was acknowledged reads
/// back, `/health` says which store is full, and once objects are deleted and collected
/// writes are taken again, without a restart.
#[tokio::test]
async fn a_full_chunkstore_answers_507_and_recovers_once_space_is_freed() {
    let mut srv = Server::start(Opts::fast_gc());
    srv.kill();
    let chunks = srv.data_dir().join("chunks");
    let _tmpfs = Tmpfs::mount(&chunks, "6m");
    srv.restart();
    let c = srv.client_no_retry();
    let bucket = new_bucket(&c, "full").await;
    let data = random_bytes(1 << 20);
    let mut stored = Vec::new();
    let refused = loop {
        let key = format!("big-{}", stored.len());
        let r = c
            .put_object()
            .bucket(&bucket)
            .key(&key)
            .body(body(&data))
            .send()
            .await;
        match r {
            Ok(_) => stored.push(key),
            Err(e) => break failure(Err::<(), _>(e)),
        }
        assert!(stored.len() < 10, "a 6 MiB disk took {} MiB", stored.len());
    };
    assert_eq!(refused.status, 507, "{refused:?}");
    assert_eq!(
        refused.code.as_deref(),
        Some("InsufficientStorage"),
        "{refused:?}"
    );
    assert!(stored.len() >= 2, "only {} objects fit", stored.len());
    let full_key = format!("big-{}", stored.len());
    assert_status(
        c.head_object().bucket(&bucket).key(&full_key).send().await,
        404,
    );
    for key in &stored {
        assert_eq!(get_bytes(&c, &bucket, key).await, data, "{key}");
    }
    let health = reqwest::get(format!("{}/health", srv.admin)).await.unwrap();
    assert_eq!(health.status(), 503);
    let why = health.text().await.unwrap();
    assert!(why.contains("disk full"), "{why}");

    // Deleted and collected: room again.
    for key in &stored {
        c.delete_object()
            .bucket(&bucket)
            .key(key)
            .send()
            .await
            .unwrap();
    }
    let ok = put_until(&c, &bucket, "after", &data, Duration::from_secs(60), true).await;
    assert!(ok, "writes did not resume after the space was freed");
    assert_eq!(get_bytes(&c, &bucket, "after").await, data);
    let health = reqwest::get(format!("{}/health", srv.admin)).await.unwrap();
    assert_eq!(health.status(), 200, "{}", health.text().await.unwrap());
}

/// Polls PUTs of `data` to `key` for up to `within` until one succeeds (`ok`) or fails (not
/// `ok`); whether one did.
async fn put_until(
    c: &Client,
    bucket: &str,
    key: &str,
    data: &[u8],
    within: Duration,
    ok: bool,
) -> bool {
    let (c, bucket, key, data) = (
        c.clone(),
        bucket.to_string(),
        key.to_string(),
        data.to_vec(),
    );
    poll_until(within, move || {
        let (c, bucket, key, data) = (c.clone(), bucket.clone(), key.clone(), data.clone());
        async move {
            let put = c.put_object().bucket(&bucket).key(&key).body(body(&data));
            put.send().await.is_ok() == ok
        }
    })
    .await
}

/// A metadata store whose disk fills up (the data directory on a small tmpfs, filled by
/// another file to below `--meta-reserve`): small PUTs (stored in the MNode) get 507
/// InsufficientStorage before they reach the raft log, reads and deletes still work,
/// `/health` says why, and once the space is freed writes are taken again, without a
/// restart; nothing acknowledged is lost.
#[tokio::test]
async fn a_metadata_store_short_of_space_refuses_new_data_and_recovers() {
    let reserve: u64 = 24 << 20;
    let mut srv = Server::start(Opts::default().arg("--meta-reserve", "24MiB"));
    srv.kill();
    let dir = srv.data_dir().to_path_buf();
    let _tmpfs = Tmpfs::mount(&dir, "96m");
    srv.restart();
    let c = srv.client_no_retry();
    let bucket = new_bucket(&c, "metafull").await;
    let small = random_bytes(2048);
    for i in 0..20 {
        put(&c, &bucket, &format!("before-{i}"), &small).await;
    }

    // Another file takes the space down to 8 MiB under the reserve.
    let filler = dir.join("filler");
    let take = free_bytes(&dir) - (reserve - (8 << 20));
    std::fs::write(&filler, vec![0u8; take as usize]).unwrap();
    assert!(free_bytes(&dir) < reserve);
    // (Taken until the reserve check sees the filler, within half a second.)
    let refused = put_until(&c, &bucket, "probe", &small, Duration::from_secs(10), false).await;
    assert!(refused, "a PUT was taken with the disk under the reserve");
    let f = assert_fails(
        c.put_object()
            .bucket(&bucket)
            .key("refused")
            .body(body(&small))
            .send()
            .await,
        507,
        "InsufficientStorage",
    );
    assert!(f.message.unwrap_or_default().contains("disk full"));
    assert_status(
        c.head_object().bucket(&bucket).key("refused").send().await,
        404,
    );
    let health = reqwest::get(format!("{}/health", srv.admin)).await.unwrap();
    assert_eq!(health.status(), 503);
    let why = health.text().await.unwrap();
    assert!(
        why.contains("metadata store") && why.contains("disk full"),
        "{why}"
    );
    // Reads and deletes still work.
    assert_eq!(get_bytes(&c, &bucket, "before-0").await, small);
    c.delete_object()
        .bucket(&bucket)
        .key("before-0")
        .send()
        .await
        .expect("a delete passes on a full disk");
    assert_status(
        c.head_object().bucket(&bucket).key("before-0").send().await,
        404,
    );

    // Space freed: writes are taken again without a restart.
    std::fs::remove_file(&filler).unwrap();
    let ok = put_until(&c, &bucket, "after", &small, Duration::from_secs(10), true).await;
    assert!(ok, "writes did not resume after the space was freed");
    assert_eq!(get_bytes(&c, &bucket, "after").await, small);
    for i in 1..20 {
        assert_eq!(get_bytes(&c, &bucket, &format!("before-{i}")).await, small);
    }
    let health = reqwest::get(format!("{}/health", srv.admin)).await.unwrap();
    assert_eq!(health.status(), 200, "{}", health.text().await.unwrap());
}

/// Headers a write must not silently ignore: a storage class other than STANDARD, SSE-S3 on
/// a server without a master key and SSE-KMS are refused, and nothing is stored (`s3_sse`
/// has encryption that works).
#[tokio::test]
async fn storage_class_and_encryption_headers_are_not_ignored() {
    use aws_sdk_s3::types::{ServerSideEncryption, StorageClass};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "wheaders").await;
    c.put_object()
        .bucket(&b)
        .key("std")
        .storage_class(StorageClass::Standard)
        .body(body(b"x"))
        .send()
        .await
        .expect("STANDARD is accepted");
    let r = c
        .put_object()
        .bucket(&b)
        .key("cold")
        .storage_class(StorageClass::Glacier)
        .body(body(b"x"))
        .send()
        .await;
    assert_fails(r, 400, "InvalidStorageClass");
    let r = c
        .put_object()
        .bucket(&b)
        .key("sse")
        .server_side_encryption(ServerSideEncryption::Aes256)
        .body(body(b"x"))
        .send()
        .await;
    assert_fails(r, 501, "NotImplemented");
    let r = c
        .create_multipart_upload()
        .bucket(&b)
        .key("sse-mpu")
        .server_side_encryption(ServerSideEncryption::AwsKms)
        .send()
        .await;
    assert_fails(r, 501, "NotImplemented");
    let r = c
        .copy_object()
        .bucket(&b)
        .key("copy")
        .copy_source(format!("{b}/std"))
        .storage_class(StorageClass::DeepArchive)
        .send()
        .await;
    assert_fails(r, 400, "InvalidStorageClass");
    for key in ["cold", "sse", "copy"] {
        let r = c.head_object().bucket(&b).key(key).send().await;
        assert_fails(r, 404, "NotFound");
    }
}

/// A key whose name the log must never carry.
const CANARY: &str = "saker-log-canary-7f3a9";

/// Sends a DeleteObjects and a PutBucketTagging whose bodies are cut short (not XML), naming
/// `key` and [`CANARY`]; both must be MalformedXML. The body is replaced before signing, so
/// the signature holds.
async fn send_malformed(c: &Client, b: &str, key: &str, i: usize) {
    use aws_sdk_s3::primitives::SdkBody;
    use aws_sdk_s3::types::{Delete, ObjectIdentifier, Tag, Tagging};
    let malformed = |text: String| {
        move |req: &mut aws_sdk_s3::config::http::HttpRequest| {
            let names: Vec<String> = req
                .headers()
                .iter()
                .map(|(n, _)| n.to_string())
                .filter(|n| n.starts_with("x-amz-checksum-") || n == "content-md5")
                .collect();
            for n in names {
                req.headers_mut().remove(n);
            }
            req.headers_mut()
                .insert("content-length", text.len().to_string());
            *req.body_mut() = SdkBody::from(text.clone());
        }
    };
    let object = ObjectIdentifier::builder().key(key).build().unwrap();
    let delete = Delete::builder().objects(object).build().unwrap();
    let cut = format!("<Delete><Object><Key>{key}</Key></Object><Object><Key>{CANARY}-{i}");
    let r = c
        .delete_objects()
        .bucket(b)
        .delete(delete)
        .customize()
        .mutate_request(malformed(cut))
        .send()
        .await;
    assert_fails(r, 400, "MalformedXML");
    let tag = Tag::builder().key(CANARY).value(key).build().unwrap();
    let tagging = Tagging::builder().tag_set(tag).build().unwrap();
    let cut = format!("<Tagging><TagSet><Tag><Key>{CANARY}</Key><Value>{key}-{i}</Va");
    let r = c
        .put_bucket_tagging()
        .bucket(b)
        .tagging(tagging)
        .customize()
        .mutate_request(malformed(cut))
        .send()
        .await;
    assert_fails(r, 400, "MalformedXML");
}

/// A client's mistakes are not the server's errors, and the log carries no user data: 50
/// malformed XML bodies naming a distinctive key, a PUT, GET and a missing GET of
/// distinctively named keys leave no ERROR line and never that name in the server's log. At
/// debug level, each refusal is one line in saker's words (operation, code, status), still
/// without the key; s3s's own lines (which echo bodies) stay off unless named.
#[tokio::test]
async fn malformed_requests_leave_no_error_and_no_key_in_the_log() {
    let mut srv = Server::start(Opts::default().whole_log());
    let c = srv.client_no_retry();
    let b = new_bucket(&c, "logs").await;
    let key = format!("private/{CANARY}/report.pdf");
    put(&c, &b, &key, b"data").await;
    assert_eq!(get_bytes(&c, &b, &key).await, b"data");
    assert_fails(
        c.get_object()
            .bucket(&b)
            .key(format!("{CANARY}-missing"))
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    for i in 0..25 {
        send_malformed(&c, &b, &key, i).await;
    }
    // The object is still there.
    assert_eq!(get_bytes(&c, &b, &key).await, b"data");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = srv.stderr_tail();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "ERROR lines:\n{}", errors.join("\n"));
    assert!(
        !log.contains(CANARY),
        "the log names the client's key:\n{log}"
    );

    // The gateway at debug: one line per refusal, naming the operation and the code.
    let debug = "warn,saker=info,saker_gateway=debug";
    srv.restart_with(Opts::default().whole_log().env("SAKER_LOG", debug));
    let c = srv.client_no_retry();
    send_malformed(&c, &b, &key, 99).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = srv.stderr_tail();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("MalformedXML")).collect();
    assert_eq!(refused.len(), 2, "{log}");
    assert!(
        refused[0].contains("DEBUG") && refused[0].contains("DeleteObjects"),
        "{log}"
    );
    assert!(
        refused[1].contains("PutBucketTagging") && refused[1].contains("400"),
        "{log}"
    );
    assert!(
        !log.contains(CANARY),
        "the log names the client's key:\n{log}"
    );
    assert!(!log.contains("s3s::"), "s3s logs though not named:\n{log}");
}
