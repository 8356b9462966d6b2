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

fn b64(raw: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(raw)
}

fn crc32_b64(data: &[u8]) -> String {
    b64(&crc32fast::hash(data).to_be_bytes())
}

/// Uploads `parts` with checksum `alg`, returning each part's ETag and reported checksum.
async fn upload_with_checksum(
    c: &Client,
    b: &str,
    key: &str,
    id: &str,
    alg: aws_sdk_s3::types::ChecksumAlgorithm,
    parts: &[&[u8]],
) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (i, data) in parts.iter().enumerate() {
        let r = c
            .upload_part()
            .bucket(b)
            .key(key)
            .upload_id(id)
            .part_number(i as i32 + 1)
            .checksum_algorithm(alg.clone())
            .body(body(data))
            .send()
            .await
            .unwrap_or_else(|e| panic!("upload part {}: {e:?}", i + 1));
        let sum = r
            .checksum_crc32()
            .or(r.checksum_crc32_c())
            .map(str::to_string);
        out.push((r.e_tag.expect("part etag"), sum));
    }
    out
}

#[tokio::test]
async fn composite_checksum_of_a_crc32_upload() {
    use aws_sdk_s3::types::{ChecksumAlgorithm, ChecksumMode, ChecksumType, ObjectAttributes};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-cksum").await;
    let created = c
        .create_multipart_upload()
        .bucket(&b)
        .key("k")
        .checksum_algorithm(ChecksumAlgorithm::Crc32)
        .send()
        .await
        .expect("create");
    assert_eq!(
        created.checksum_algorithm(),
        Some(&ChecksumAlgorithm::Crc32)
    );
    // CRC32 uploads are COMPOSITE unless asked otherwise.
    assert_eq!(created.checksum_type(), Some(&ChecksumType::Composite));
    let id = created.upload_id.expect("upload id");
    let (p1, p2) = (random_bytes(5 * MIB), random_bytes(1000));
    let got = upload_with_checksum(&c, &b, "k", &id, ChecksumAlgorithm::Crc32, &[&p1, &p2]).await;
    assert_eq!(got[0].1.as_deref(), Some(crc32_b64(&p1).as_str()));
    assert_eq!(got[1].1.as_deref(), Some(crc32_b64(&p2).as_str()));
    // COMPOSITE: the CRC32 of the parts' raw CRC32s, then "-N".
    let mut raw = crc32fast::hash(&p1).to_be_bytes().to_vec();
    raw.extend(crc32fast::hash(&p2).to_be_bytes());
    let composite = format!("{}-2", crc32_b64(&raw));
    let listed = |with_sums: bool| {
        CompletedMultipartUpload::builder()
            .set_parts(Some(
                got.iter()
                    .enumerate()
                    .map(|(i, (etag, sum))| {
                        CompletedPart::builder()
                            .part_number(i as i32 + 1)
                            .e_tag(etag)
                            .set_checksum_crc32(sum.clone().filter(|_| with_sums))
                            .build()
                    })
                    .collect(),
            ))
            .build()
    };
    assert_fails(
        c.complete_multipart_upload()
            .bucket(&b)
            .key("k")
            .upload_id(&id)
            .checksum_crc32("AAAAAA==-2")
            .multipart_upload(listed(true))
            .send()
            .await,
        400,
        "BadDigest",
    );
    let done = c
        .complete_multipart_upload()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .checksum_crc32(&composite)
        .multipart_upload(listed(true))
        .send()
        .await
        .expect("complete with the right checksum");
    assert_eq!(done.checksum_crc32(), Some(composite.as_str()));
    assert_eq!(done.checksum_type(), Some(&ChecksumType::Composite));

    let plain = c
        .head_object()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .expect("head");
    assert_eq!(
        plain.checksum_crc32(),
        None,
        "no checksum without checksum mode"
    );
    let head = c
        .head_object()
        .bucket(&b)
        .key("k")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .expect("head with checksum mode");
    assert_eq!(head.checksum_crc32(), Some(composite.as_str()));
    assert_eq!(head.checksum_type(), Some(&ChecksumType::Composite));
    let part2 = c
        .get_object()
        .bucket(&b)
        .key("k")
        .part_number(2)
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .expect("get part 2");
    assert_eq!(part2.checksum_crc32(), Some(crc32_b64(&p2).as_str()));
    assert_eq!(part2.checksum_type(), Some(&ChecksumType::Composite));
    let attrs = c
        .get_object_attributes()
        .bucket(&b)
        .key("k")
        .object_attributes(ObjectAttributes::Checksum)
        .object_attributes(ObjectAttributes::Etag)
        .send()
        .await
        .expect("attributes");
    let sum = attrs.checksum().expect("checksum attribute");
    assert_eq!(sum.checksum_crc32(), Some(composite.as_str()));
    assert_eq!(sum.checksum_type(), Some(&ChecksumType::Composite));
    // GetObjectAttributes is the one answer whose ETag S3 does not quote.
    assert_eq!(
        attrs.e_tag(),
        Some(multipart_etag(&[&p1, &p2]).trim_matches('"'))
    );
}

#[tokio::test]
async fn full_object_crc32c_of_an_upload() {
    use aws_sdk_s3::types::{ChecksumAlgorithm, ChecksumMode, ChecksumType};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-full").await;
    let created = c
        .create_multipart_upload()
        .bucket(&b)
        .key("k")
        .checksum_algorithm(ChecksumAlgorithm::Crc32C)
        .checksum_type(ChecksumType::FullObject)
        .send()
        .await
        .expect("create");
    assert_eq!(created.checksum_type(), Some(&ChecksumType::FullObject));
    let id = created.upload_id.expect("upload id");
    let parts = [
        random_bytes(5 * MIB),
        random_bytes(5 * MIB + 17),
        random_bytes(3),
    ];
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let got = upload_with_checksum(&c, &b, "k", &id, ChecksumAlgorithm::Crc32C, &refs).await;
    let listed: Vec<(i32, &str)> = got
        .iter()
        .enumerate()
        .map(|(i, (e, _))| (i as i32 + 1, e.as_str()))
        .collect();
    // FULL_OBJECT: the CRC32C of all the bytes, combined from the parts' CRCs.
    let whole = b64(&crc32c::crc32c(&parts.concat()).to_be_bytes());
    let done = c
        .complete_multipart_upload()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .multipart_upload(completed(&listed))
        .send()
        .await
        .expect("complete");
    assert_eq!(done.checksum_crc32_c(), Some(whole.as_str()));
    assert_eq!(done.checksum_type(), Some(&ChecksumType::FullObject));
    let got = c
        .get_object()
        .bucket(&b)
        .key("k")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .expect("get (the SDK validates the full-object checksum)");
    assert_eq!(got.checksum_crc32_c(), Some(whole.as_str()));
    assert_eq!(got.checksum_type(), Some(&ChecksumType::FullObject));
    let data = got.body.collect().await.expect("body").into_bytes();
    assert_eq!(data.as_ref(), parts.concat().as_slice());
}

#[tokio::test]
async fn checksum_type_needs_a_matching_algorithm() {
    use aws_sdk_s3::types::{ChecksumAlgorithm, ChecksumType};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-ctype").await;
    for (alg, t) in [
        (Some(ChecksumAlgorithm::Sha256), ChecksumType::FullObject),
        (Some(ChecksumAlgorithm::Crc64Nvme), ChecksumType::Composite),
        (None, ChecksumType::Composite),
    ] {
        assert_fails(
            c.create_multipart_upload()
                .bucket(&b)
                .key("k")
                .set_checksum_algorithm(alg)
                .checksum_type(t)
                .send()
                .await,
            400,
            "InvalidRequest",
        );
    }
}

#[tokio::test]
async fn conditional_complete() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpu-cond").await;
    let prepare = |key: &'static str| {
        let (c, b) = (c.clone(), b.clone());
        async move {
            let id = create(&c, &b, key).await;
            let etag = upload(&c, &b, key, &id, 1, b"abc").await;
            (id, etag)
        }
    };
    let existing = put(&c, &b, "k", b"old").await;
    let (id, etag) = prepare("k").await;
    let f = c
        .complete_multipart_upload()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .if_none_match("*")
        .multipart_upload(completed(&[(1, &etag)]))
        .send()
        .await;
    assert_fails(f, 412, "PreconditionFailed");
    // The upload survives a failed condition.
    c.complete_multipart_upload()
        .bucket(&b)
        .key("k")
        .upload_id(&id)
        .if_match(&existing)
        .multipart_upload(completed(&[(1, &etag)]))
        .send()
        .await
        .expect("If-Match the current ETag");
    assert_eq!(get_bytes(&c, &b, "k").await, b"abc");
    let (id, etag) = prepare("absent").await;
    assert_fails(
        c.complete_multipart_upload()
            .bucket(&b)
            .key("absent")
            .upload_id(&id)
            .if_match("*")
            .multipart_upload(completed(&[(1, &etag)]))
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    c.complete_multipart_upload()
        .bucket(&b)
        .key("absent")
        .upload_id(&id)
        .if_none_match("*")
        .multipart_upload(completed(&[(1, &etag)]))
        .send()
        .await
        .expect("If-None-Match * on a new key");
}
