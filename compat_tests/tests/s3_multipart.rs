//! Multipart uploads.

mod common;

use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use common::*;

const MIB: usize = 1024 * 1024;

async fn create(c: &Client, b: &str, key: &str) -> String {
    c.create_multipart_upload()
        .bucket(b)
        .key(key)
        .send()
        .await
        .expect("create multipart upload")
        .upload_id
        .expect("upload id")
}

async fn upload(c: &Client, b: &str, key: &str, id: &str, n: i32, data: &[u8]) -> String {
    c.upload_part()
        .bucket(b)
        .key(key)
        .upload_id(id)
        .part_number(n)
        .body(body(data))
        .send()
        .await
        .unwrap_or_else(|e| panic!("upload part {n}: {e:?}"))
        .e_tag
        .expect("part etag")
}

fn completed(parts: &[(i32, &str)]) -> CompletedMultipartUpload {
    CompletedMultipartUpload::builder()
        .set_parts(Some(
            parts
                .iter()
                .map(|(n, e)| CompletedPart::builder().part_number(*n).e_tag(*e).build())
                .collect(),
        ))
        .build()
}

/// S3's multipart ETag: md5 of the concatenated binary part md5s, then `-N`.
fn multipart_etag(parts: &[&[u8]]) -> String {
    let mut all = Vec::new();
    for p in parts {
        all.extend(md5_raw(p));
    }
    format!("\"{}-{}\"", md5_hex(&all), parts.len())
}

#[tokio::test]
async fn upload_list_complete_get() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu").await;
    let key = "nested/dir/big.bin";
    let parts = [
        random_bytes(5 * MIB),
        random_bytes(5 * MIB),
        random_bytes(1024),
    ];

    let id = c
        .create_multipart_upload()
        .bucket(&b)
        .key(key)
        .content_type("application/x-big")
        .metadata("purpose", "test")
        .send()
        .await
        .expect("create")
        .upload_id
        .expect("upload id");
    // Nothing is visible before Complete.
    assert!(list_all(&c, &b, None).await.is_empty());
    assert_fails(
        c.get_object().bucket(&b).key(key).send().await,
        404,
        "NoSuchKey",
    );

    let mut etags = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let e = upload(&c, &b, key, &id, i as i32 + 1, p).await;
        assert_eq!(e, quoted_md5(p), "part {} ETag", i + 1);
        etags.push(e);
    }

    let lp = c
        .list_parts()
        .bucket(&b)
        .key(key)
        .upload_id(&id)
        .send()
        .await
        .expect("list parts");
    let listed: Vec<_> = lp
        .parts()
        .iter()
        .map(|p| (p.part_number(), p.size(), p.e_tag().map(str::to_string)))
        .collect();
    assert_eq!(
        listed,
        vec![
            (Some(1), Some(5 * MIB as i64), Some(etags[0].clone())),
            (Some(2), Some(5 * MIB as i64), Some(etags[1].clone())),
            (Some(3), Some(1024), Some(etags[2].clone())),
        ]
    );
    assert_eq!(lp.is_truncated(), Some(false));
    // Paged: max-parts and part-number-marker.
    let lp = c
        .list_parts()
        .bucket(&b)
        .key(key)
        .upload_id(&id)
        .max_parts(2)
        .send()
        .await
        .expect("list parts page 1");
    assert_eq!(lp.parts().len(), 2);
    assert_eq!(lp.is_truncated(), Some(true));
    assert_eq!(lp.next_part_number_marker(), Some("2"));
    let lp = c
        .list_parts()
        .bucket(&b)
        .key(key)
        .upload_id(&id)
        .part_number_marker("2")
        .send()
        .await
        .expect("list parts page 2");
    assert_eq!(
        lp.parts()
            .iter()
            .map(|p| p.part_number())
            .collect::<Vec<_>>(),
        vec![Some(3)]
    );

    let lu = c
        .list_multipart_uploads()
        .bucket(&b)
        .send()
        .await
        .expect("list uploads");
    let ups: Vec<_> = lu
        .uploads()
        .iter()
        .map(|u| {
            (
                u.key().map(str::to_string),
                u.upload_id().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(ups, vec![(Some(key.to_string()), Some(id.clone()))]);

    let pairs: Vec<(i32, &str)> = etags
        .iter()
        .enumerate()
        .map(|(i, e)| (i as i32 + 1, e.as_str()))
        .collect();
    let out = c
        .complete_multipart_upload()
        .bucket(&b)
        .key(key)
        .upload_id(&id)
        .multipart_upload(completed(&pairs))
        .send()
        .await
        .expect("complete");
    let want_etag = multipart_etag(&[&parts[0], &parts[1], &parts[2]]);
    assert_eq!(out.e_tag(), Some(want_etag.as_str()));

    let whole: Vec<u8> = parts.concat();
    let got = c
        .get_object()
        .bucket(&b)
        .key(key)
        .send()
        .await
        .expect("get");
    assert_eq!(got.e_tag(), Some(want_etag.as_str()));
    assert_eq!(got.content_length, Some(whole.len() as i64));
    assert_eq!(got.content_type(), Some("application/x-big"));
    assert_eq!(
        got.metadata()
            .and_then(|m| m.get("purpose"))
            .map(String::as_str),
        Some("test")
    );
    let bytes = got.body.collect().await.expect("body").into_bytes();
    assert!(
        bytes.as_ref() == whole.as_slice(),
        "GET is the concatenation of the parts"
    );

    // GET ?partNumber=2 is the second part.
    let p2 = c
        .get_object()
        .bucket(&b)
        .key(key)
        .part_number(2)
        .send()
        .await
        .expect("get part 2");
    assert_eq!(p2.parts_count(), Some(3));
    assert_eq!(
        p2.content_range(),
        Some(format!("bytes {}-{}/{}", 5 * MIB, 10 * MIB - 1, whole.len()).as_str())
    );
    let bytes = p2.body.collect().await.expect("body").into_bytes();
    assert!(bytes.as_ref() == parts[1].as_slice());
    // A range across the part boundary.
    let r = c
        .get_object()
        .bucket(&b)
        .key(key)
        .range(format!("bytes={}-{}", 5 * MIB - 3, 5 * MIB + 2))
        .send()
        .await
        .expect("range");
    let bytes = r.body.collect().await.expect("body").into_bytes();
    assert_eq!(bytes.as_ref(), &whole[5 * MIB - 3..5 * MIB + 3]);

    // Preconditions and HEAD ?partNumber with the multipart ETag.
    c.get_object()
        .bucket(&b)
        .key(key)
        .if_match(&want_etag)
        .range("bytes=0-0")
        .send()
        .await
        .expect("If-Match with the multipart ETag");
    assert_status(
        c.head_object()
            .bucket(&b)
            .key(key)
            .if_none_match(&want_etag)
            .send()
            .await,
        304,
    );
    let h = c
        .head_object()
        .bucket(&b)
        .key(key)
        .part_number(3)
        .send()
        .await
        .expect("HEAD partNumber=3");
    assert_eq!((h.content_length, h.parts_count), (Some(1024), Some(3)));

    let listed = c.list_objects_v2().bucket(&b).send().await.expect("list");
    assert_eq!(listed.contents().len(), 1);
    assert_eq!(listed.contents()[0].e_tag(), Some(want_etag.as_str()));
    assert_eq!(listed.contents()[0].size(), Some(whole.len() as i64));

    // The upload is gone.
    let lu = c
        .list_multipart_uploads()
        .bucket(&b)
        .send()
        .await
        .expect("list uploads");
    assert!(lu.uploads().is_empty(), "{lu:?}");
    assert_fails(
        c.list_parts()
            .bucket(&b)
            .key(key)
            .upload_id(&id)
            .send()
            .await,
        404,
        "NoSuchUpload",
    );
}

#[tokio::test]
async fn single_small_part_and_part_overwrite() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-small").await;
    let id = create(&c, &b, "k").await;
    upload(&c, &b, "k", &id, 1, b"first version").await;
    // Uploading the same part number again replaces it.
    let data = random_bytes(3000);
    let e = upload(&c, &b, "k", &id, 1, &data).await;
    let lp = c
        .list_parts()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .send()
        .await
        .expect("list parts");
    assert_eq!(lp.parts().len(), 1);
    assert_eq!(lp.parts()[0].e_tag(), Some(e.as_str()));
    let out = c
        .complete_multipart_upload()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .multipart_upload(completed(&[(1, &e)]))
        .send()
        .await
        .expect("a single part may be small");
    assert_eq!(out.e_tag(), Some(multipart_etag(&[&data]).as_str()));
    assert_eq!(get_bytes(&c, &b, "k").await, data);
    // A retried Complete answers like the first one; a different part list does not.
    let again = c
        .complete_multipart_upload()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .multipart_upload(completed(&[(1, &e)]))
        .send()
        .await
        .expect("completing a completed upload again");
    assert_eq!(again.e_tag(), out.e_tag());
    let f = failure(
        c.complete_multipart_upload()
            .bucket(&b)
            .key("k")
            .upload_id(&id)
            .multipart_upload(completed(&[(1, "\"00000000000000000000000000000000\"")]))
            .send()
            .await,
    );
    assert_eq!(f.code.as_deref(), Some("NoSuchUpload"), "{f:?}");
}

#[tokio::test]
async fn abort() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-abort").await;
    let id = create(&c, &b, "a/b").await;
    let e = upload(&c, &b, "a/b", &id, 1, &random_bytes(1000)).await;
    c.abort_multipart_upload()
        .bucket(&b)
        .key("a/b")
        .upload_id(&id)
        .send()
        .await
        .expect("abort");
    assert_fails(
        c.list_parts()
            .bucket(&b)
            .key("a/b")
            .upload_id(&id)
            .send()
            .await,
        404,
        "NoSuchUpload",
    );
    assert_fails(
        c.upload_part()
            .bucket(&b)
            .key("a/b")
            .upload_id(&id)
            .part_number(2)
            .body(body(b"x"))
            .send()
            .await,
        404,
        "NoSuchUpload",
    );
    assert_fails(
        c.complete_multipart_upload()
            .bucket(&b)
            .key("a/b")
            .upload_id(&id)
            .multipart_upload(completed(&[(1, &e)]))
            .send()
            .await,
        404,
        "NoSuchUpload",
    );
    let lu = c
        .list_multipart_uploads()
        .bucket(&b)
        .send()
        .await
        .expect("list uploads");
    assert!(lu.uploads().is_empty());
    assert!(list_all(&c, &b, None).await.is_empty());
    // An upload id that never existed.
    assert_fails(
        c.list_parts()
            .bucket(&b)
            .key("a/b")
            .upload_id("0123456789abcdef")
            .send()
            .await,
        404,
        "NoSuchUpload",
    );
}

#[tokio::test]
async fn entity_too_small() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-small-part").await;
    let id = create(&c, &b, "k").await;
    let e1 = upload(&c, &b, "k", &id, 1, &random_bytes(1024)).await;
    let e2 = upload(&c, &b, "k", &id, 2, &random_bytes(1024)).await;
    assert_fails(
        c.complete_multipart_upload()
            .bucket(&b)
            .key("k")
            .upload_id(&id)
            .multipart_upload(completed(&[(1, &e1), (2, &e2)]))
            .send()
            .await,
        400,
        "EntityTooSmall",
    );
    // The upload survives a failed Complete.
    c.list_parts()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .send()
        .await
        .expect("upload still exists");
    assert_status(c.head_object().bucket(&b).key("k").send().await, 404);
}

#[tokio::test]
async fn invalid_part_and_order() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-invalid").await;
    let id = create(&c, &b, "k").await;
    let p1 = random_bytes(5 * MIB);
    let p2 = random_bytes(100);
    let e1 = upload(&c, &b, "k", &id, 1, &p1).await;
    let e2 = upload(&c, &b, "k", &id, 2, &p2).await;
    let complete = |parts: Vec<(i32, String)>| {
        let refs: Vec<(i32, &str)> = parts.iter().map(|(n, e)| (*n, e.as_str())).collect();
        c.complete_multipart_upload()
            .bucket(&b)
            .key("k")
            .upload_id(&id)
            .multipart_upload(completed(&refs))
            .send()
    };
    assert_fails(
        complete(vec![
            (1, e1.clone()),
            (2, "\"0123456789abcdef0123456789abcdef\"".into()),
        ])
        .await,
        400,
        "InvalidPart",
    );
    assert_fails(
        complete(vec![(1, e1.clone()), (3, e2.clone())]).await,
        400,
        "InvalidPart",
    );
    assert_fails(
        complete(vec![(2, e2.clone()), (1, e1.clone())]).await,
        400,
        "InvalidPartOrder",
    );
    assert_status(c.head_object().bucket(&b).key("k").send().await, 404);
    // The right list still completes.
    let out = complete(vec![(1, e1), (2, e2)]).await.expect("complete");
    assert_eq!(out.e_tag(), Some(multipart_etag(&[&p1, &p2]).as_str()));
    assert!(get_bytes(&c, &b, "k").await == [p1, p2].concat());
}

#[tokio::test]
async fn upload_part_copy_with_ranges() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-copy").await;
    let src = random_bytes(10 * MIB + 100);
    put(&c, &b, "src/object", &src).await;

    let id = create(&c, &b, "dst").await;
    let r1 = (0usize, 5 * MIB - 1);
    let r2 = (5 * MIB, src.len() - 1);
    let mut etags = Vec::new();
    for (n, (first, last)) in [(1, r1), (2, r2)] {
        let out = c
            .upload_part_copy()
            .bucket(&b)
            .key("dst")
            .upload_id(&id)
            .part_number(n)
            .copy_source(format!("{b}/src/object"))
            .copy_source_range(format!("bytes={first}-{last}"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("upload part copy {n}: {e:?}"));
        let e = out
            .copy_part_result()
            .and_then(|r| r.e_tag())
            .expect("part etag")
            .to_string();
        assert_eq!(e, quoted_md5(&src[first..=last]), "part {n} ETag");
        etags.push(e);
    }
    // A plain part after copied ones.
    let tail = random_bytes(10);
    etags.push(upload(&c, &b, "dst", &id, 3, &tail).await);

    // A range past the end of the source.
    let f = failure(
        c.upload_part_copy()
            .bucket(&b)
            .key("dst")
            .upload_id(&id)
            .part_number(4)
            .copy_source(format!("{b}/src/object"))
            .copy_source_range(format!("bytes=0-{}", src.len()))
            .send()
            .await,
    );
    assert_eq!(f.status, 416, "{f:?}");

    let pairs = [
        (1, etags[0].as_str()),
        (2, etags[1].as_str()),
        (3, etags[2].as_str()),
    ];
    let out = c
        .complete_multipart_upload()
        .bucket(&b)
        .key("dst")
        .upload_id(&id)
        .multipart_upload(completed(&pairs))
        .send()
        .await
        .expect("complete");
    assert_eq!(
        out.e_tag(),
        Some(multipart_etag(&[&src[..5 * MIB], &src[5 * MIB..], &tail]).as_str())
    );
    let want = [src.as_slice(), tail.as_slice()].concat();
    assert!(get_bytes(&c, &b, "dst").await == want);
}

#[tokio::test]
async fn list_uploads_prefix_and_delimiter() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-list").await;
    let id1 = create(&c, &b, "logs/a").await;
    let id2 = create(&c, &b, "logs/b").await;
    let id3 = create(&c, &b, "top").await;
    let lu = c
        .list_multipart_uploads()
        .bucket(&b)
        .prefix("logs/")
        .send()
        .await
        .expect("list uploads");
    let mut ids: Vec<_> = lu
        .uploads()
        .iter()
        .filter_map(|u| u.upload_id().map(str::to_string))
        .collect();
    ids.sort();
    let mut want = vec![id1, id2];
    want.sort();
    assert_eq!(ids, want);
    let lu = c
        .list_multipart_uploads()
        .bucket(&b)
        .delimiter("/")
        .send()
        .await
        .expect("list uploads with delimiter");
    assert_eq!(
        lu.common_prefixes()
            .iter()
            .filter_map(|p| p.prefix().map(str::to_string))
            .collect::<Vec<_>>(),
        vec!["logs/"]
    );
    assert_eq!(
        lu.uploads()
            .iter()
            .filter_map(|u| u.upload_id().map(str::to_string))
            .collect::<Vec<_>>(),
        vec![id3]
    );
}

#[tokio::test]
async fn upload_part_checksums() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-digest").await;
    let id = create(&c, &b, "k").await;
    let data = random_bytes(2000);
    use base64::Engine;
    let b64 = |raw: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(raw);
    assert_fails(
        c.upload_part()
            .bucket(&b)
            .key("k")
            .upload_id(&id)
            .part_number(1)
            .body(body(&data))
            .content_md5(b64(md5_raw(b"something else")))
            .send()
            .await,
        400,
        "BadDigest",
    );
    let lp = c
        .list_parts()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .send()
        .await
        .expect("list parts");
    assert!(lp.parts().is_empty(), "a rejected part is not stored");
    c.upload_part()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .part_number(1)
        .body(body(&data))
        .content_md5(b64(md5_raw(&data)))
        .send()
        .await
        .expect("part with the right Content-MD5");
    // Part numbers are 1..=10000.
    for n in [0, 10001] {
        let f = failure(
            c.upload_part()
                .bucket(&b)
                .key("k")
                .upload_id(&id)
                .part_number(n)
                .body(body(b"x"))
                .send()
                .await,
        );
        assert_eq!(f.status, 400, "part number {n}: {f:?}");
    }
}
