//! Object operations: put/get/head/delete, headers, ranges, preconditions, copy, multi-delete,
//! tagging and checksums.

mod common;

use std::time::Duration;

use aws_sdk_s3::primitives::DateTime;
use aws_sdk_s3::types::{
    ChecksumAlgorithm, ChecksumMode, Delete, MetadataDirective, ObjectIdentifier, Tag, Tagging,
};
use base64::Engine;
use common::*;

const MIB: usize = 1024 * 1024;

#[tokio::test]
async fn round_trip_across_sizes() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "sizes").await;
    // Inline, at the inline threshold, just above it, and across the 8 MiB chunk size.
    for size in [0, 1024, 16 * 1024, 16 * 1024 + 1, 64 * 1024, 9 * MIB] {
        let key = format!("obj-{size}");
        let data = random_bytes(size);
        let etag = put(&c, &b, &key, &data).await;
        assert_eq!(etag, quoted_md5(&data), "PUT ETag of {size} bytes");

        let head = c
            .head_object()
            .bucket(&b)
            .key(&key)
            .send()
            .await
            .expect("head");
        assert_eq!(
            head.content_length,
            Some(size as i64),
            "HEAD length of {size}"
        );
        assert_eq!(
            head.e_tag.as_deref(),
            Some(etag.as_str()),
            "HEAD ETag of {size}"
        );
        assert!(head.last_modified.is_some());

        let got = c
            .get_object()
            .bucket(&b)
            .key(&key)
            .send()
            .await
            .expect("get");
        assert_eq!(
            got.e_tag.as_deref(),
            Some(etag.as_str()),
            "GET ETag of {size}"
        );
        assert_eq!(got.content_length, Some(size as i64));
        let bytes = got.body.collect().await.expect("body").into_bytes();
        assert!(
            bytes.as_ref() == data.as_slice(),
            "GET body of {size} bytes differs"
        );

        c.delete_object()
            .bucket(&b)
            .key(&key)
            .send()
            .await
            .expect("delete");
        assert_fails(
            c.get_object().bucket(&b).key(&key).send().await,
            404,
            "NoSuchKey",
        );
        assert_status(c.head_object().bucket(&b).key(&key).send().await, 404);
    }
}

#[tokio::test]
async fn range_across_a_chunk_boundary() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "chunkrange").await;
    let data = random_bytes(9 * MIB);
    put(&c, &b, "big", &data).await;
    let (start, end) = (8 * MIB - 10, 8 * MIB + 9);
    let out = c
        .get_object()
        .bucket(&b)
        .key("big")
        .range(format!("bytes={start}-{end}"))
        .send()
        .await
        .expect("ranged get");
    assert_eq!(
        out.content_range.as_deref(),
        Some(format!("bytes {start}-{end}/{}", data.len()).as_str())
    );
    let got = out.body.collect().await.expect("body").into_bytes();
    assert_eq!(got.as_ref(), &data[start..=end]);
}

#[tokio::test]
async fn standard_headers_and_user_metadata_round_trip() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "headers").await;
    let data = b"{\"hello\": 1}".to_vec();
    #[allow(deprecated)]
    c.put_object()
        .bucket(&b)
        .key("doc.json")
        .body(body(&data))
        .content_type("application/json; charset=utf-8")
        .cache_control("max-age=60, public")
        .content_disposition("attachment; filename=\"doc.json\"")
        .content_encoding("identity")
        .content_language("en-GB")
        .expires(DateTime::from_secs(2_000_000_000))
        .metadata("color", "blue")
        .metadata("Project-Name", "saker test")
        .send()
        .await
        .expect("put with headers");

    let head = c
        .head_object()
        .bucket(&b)
        .key("doc.json")
        .send()
        .await
        .expect("head");
    let get = c
        .get_object()
        .bucket(&b)
        .key("doc.json")
        .send()
        .await
        .expect("get");
    for (what, ct, cc, cd, ce, cl, exp, meta) in [
        (
            "HEAD",
            head.content_type(),
            head.cache_control(),
            head.content_disposition(),
            head.content_encoding(),
            head.content_language(),
            head.expires_string(),
            head.metadata(),
        ),
        (
            "GET",
            get.content_type(),
            get.cache_control(),
            get.content_disposition(),
            get.content_encoding(),
            get.content_language(),
            get.expires_string(),
            get.metadata(),
        ),
    ] {
        assert_eq!(
            ct,
            Some("application/json; charset=utf-8"),
            "{what} content-type"
        );
        assert_eq!(cc, Some("max-age=60, public"), "{what} cache-control");
        assert_eq!(
            cd,
            Some("attachment; filename=\"doc.json\""),
            "{what} content-disposition"
        );
        assert_eq!(ce, Some("identity"), "{what} content-encoding");
        assert_eq!(cl, Some("en-GB"), "{what} content-language");
        assert_eq!(exp, Some("Wed, 18 May 2033 03:33:20 GMT"), "{what} expires");
        let meta = meta.unwrap_or_else(|| panic!("{what}: no user metadata"));
        assert_eq!(meta.len(), 2, "{what} metadata: {meta:?}");
        assert_eq!(meta.get("color").map(String::as_str), Some("blue"));
        // S3 lower-cases metadata names.
        assert_eq!(
            meta.get("project-name").map(String::as_str),
            Some("saker test")
        );
    }
    let bytes = get.body.collect().await.expect("body").into_bytes();
    assert_eq!(bytes.as_ref(), data.as_slice());

    // No Content-Type given: S3 answers with a default, never an empty header.
    put(&c, &b, "plain", b"x").await;
    let h = c
        .head_object()
        .bucket(&b)
        .key("plain")
        .send()
        .await
        .expect("head");
    assert!(
        h.content_type().is_some_and(|t| !t.is_empty()),
        "default content type: {h:?}"
    );
    assert!(h.metadata().is_none_or(|m| m.is_empty()));
}

#[tokio::test]
async fn ranges() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "ranges").await;
    let data = random_bytes(1000);
    put(&c, &b, "r", &data).await;

    for (spec, start, end) in [
        ("bytes=0-9", 0usize, 9usize),
        ("bytes=-5", 995, 999),
        ("bytes=100-", 100, 999),
        ("bytes=990-5000", 990, 999),
    ] {
        let out = c
            .get_object()
            .bucket(&b)
            .key("r")
            .range(spec)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{spec}: {e:?}"));
        assert_eq!(
            out.content_range.as_deref(),
            Some(format!("bytes {start}-{end}/1000").as_str()),
            "{spec}"
        );
        assert_eq!(out.content_length, Some((end - start + 1) as i64), "{spec}");
        let got = out.body.collect().await.expect("body").into_bytes();
        assert_eq!(got.as_ref(), &data[start..=end], "{spec}");
    }
    for spec in ["bytes=1000-", "bytes=5000-6000"] {
        let f = failure(c.get_object().bucket(&b).key("r").range(spec).send().await);
        assert_eq!(
            (f.status, f.code.as_deref()),
            (416, Some("InvalidRange")),
            "{spec}: {f:?}"
        );
    }
}

#[tokio::test]
async fn preconditions() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "cond").await;
    let data = random_bytes(100);
    let etag = put(&c, &b, "k", &data).await;
    let lm = c
        .head_object()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .expect("head")
        .last_modified
        .expect("last-modified");
    let before = DateTime::from_secs(lm.secs() - 3600);
    let after = DateTime::from_secs(lm.secs() + 3600);
    let get = || c.get_object().bucket(&b).key("k");

    get()
        .if_match(&etag)
        .send()
        .await
        .expect("If-Match current etag");
    get().if_match("*").send().await.expect("If-Match *");
    assert_fails(
        get()
            .if_match("\"0123456789abcdef0123456789abcdef\"")
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    assert_status(get().if_none_match(&etag).send().await, 304);
    get()
        .if_none_match("\"0123456789abcdef0123456789abcdef\"")
        .send()
        .await
        .expect("If-None-Match other etag");
    assert_status(get().if_modified_since(after).send().await, 304);
    assert_status(get().if_modified_since(lm).send().await, 304);
    get()
        .if_modified_since(before)
        .send()
        .await
        .expect("modified since an hour before");
    assert_fails(
        get().if_unmodified_since(before).send().await,
        412,
        "PreconditionFailed",
    );
    get()
        .if_unmodified_since(after)
        .send()
        .await
        .expect("unmodified since an hour after");
    // If-Match wins over a failing If-Unmodified-Since; If-None-Match over If-Modified-Since.
    get()
        .if_match(&etag)
        .if_unmodified_since(before)
        .send()
        .await
        .expect("If-Match true + If-Unmodified-Since false = 200");
    assert_status(
        get()
            .if_none_match(&etag)
            .if_modified_since(before)
            .send()
            .await,
        304,
    );

    let head = || c.head_object().bucket(&b).key("k");
    assert_status(head().if_match("\"nope\"").send().await, 412);
    assert_status(head().if_none_match(&etag).send().await, 304);
    head().if_match(&etag).send().await.expect("HEAD If-Match");
}

#[tokio::test]
async fn response_header_overrides() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "override").await;
    c.put_object()
        .bucket(&b)
        .key("o")
        .body(body(b"data"))
        .content_type("text/plain")
        .send()
        .await
        .expect("put");
    let out = c
        .get_object()
        .bucket(&b)
        .key("o")
        .response_content_type("application/x-override")
        .response_cache_control("no-cache")
        .response_content_disposition("inline")
        .response_content_language("fr")
        .send()
        .await
        .expect("get with overrides");
    assert_eq!(out.content_type(), Some("application/x-override"));
    assert_eq!(out.cache_control(), Some("no-cache"));
    assert_eq!(out.content_disposition(), Some("inline"));
    assert_eq!(out.content_language(), Some("fr"));
    // The stored header is unchanged.
    let h = c
        .head_object()
        .bucket(&b)
        .key("o")
        .send()
        .await
        .expect("head");
    assert_eq!(h.content_type(), Some("text/plain"));
}

#[tokio::test]
async fn part_number_of_a_simple_object() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "partnum").await;
    let data = random_bytes(2000);
    put(&c, &b, "p", &data).await;
    let out = c
        .get_object()
        .bucket(&b)
        .key("p")
        .part_number(1)
        .send()
        .await
        .expect("partNumber=1 of a simple object is the whole object");
    assert_eq!(out.content_length, Some(2000));
    let got = out.body.collect().await.expect("body").into_bytes();
    assert_eq!(got.as_ref(), data.as_slice());
    let h = c
        .head_object()
        .bucket(&b)
        .key("p")
        .part_number(1)
        .send()
        .await
        .expect("HEAD partNumber=1");
    assert_eq!(h.content_length, Some(2000));
    let f = failure(
        c.get_object()
            .bucket(&b)
            .key("p")
            .part_number(2)
            .send()
            .await,
    );
    // ceph/s3-tests (test_non_multipart_get_part): 400 InvalidPart.
    assert_eq!(f.status, 400, "partNumber=2 of a simple object: {f:?}");
    assert_eq!(f.code.as_deref(), Some("InvalidPart"), "{f:?}");
}

#[tokio::test]
async fn copy_object_directives_and_conditions() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "copy").await;
    let b2 = new_bucket(&c, "copy-dst").await;
    let data = random_bytes(100 * 1024);
    let etag = quoted_md5(&data);
    c.put_object()
        .bucket(&b)
        .key("src/obj")
        .body(body(&data))
        .content_type("image/png")
        .metadata("origin", "source")
        .send()
        .await
        .expect("put source");

    // COPY (the default): data and metadata both copied, to another bucket and a new path.
    let out = c
        .copy_object()
        .bucket(&b2)
        .key("deep/copy/of/obj")
        .copy_source(format!("{b}/src/obj"))
        .metadata_directive(MetadataDirective::Copy)
        .send()
        .await
        .expect("copy");
    assert_eq!(
        out.copy_object_result().and_then(|r| r.e_tag()),
        Some(etag.as_str())
    );
    let h = c
        .head_object()
        .bucket(&b2)
        .key("deep/copy/of/obj")
        .send()
        .await
        .expect("head copy");
    assert_eq!(h.content_type(), Some("image/png"));
    assert_eq!(
        h.metadata()
            .and_then(|m| m.get("origin"))
            .map(String::as_str),
        Some("source")
    );
    assert_eq!(h.e_tag(), Some(etag.as_str()));
    assert_eq!(get_bytes(&c, &b2, "deep/copy/of/obj").await, data);

    // REPLACE: the request's metadata replaces the source's.
    c.copy_object()
        .bucket(&b)
        .key("replaced")
        .copy_source(format!("{b}/src/obj"))
        .metadata_directive(MetadataDirective::Replace)
        .content_type("text/plain")
        .metadata("fresh", "yes")
        .send()
        .await
        .expect("copy with REPLACE");
    let h = c
        .head_object()
        .bucket(&b)
        .key("replaced")
        .send()
        .await
        .expect("head");
    assert_eq!(h.content_type(), Some("text/plain"));
    let m = h.metadata().cloned().unwrap_or_default();
    assert_eq!(m.get("fresh").map(String::as_str), Some("yes"));
    assert!(
        !m.contains_key("origin"),
        "REPLACE dropped the old metadata: {m:?}"
    );

    // x-amz-copy-source-if-match.
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("cond")
            .copy_source(format!("{b}/src/obj"))
            .copy_source_if_match("\"0123456789abcdef0123456789abcdef\"")
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    assert_status(c.head_object().bucket(&b).key("cond").send().await, 404);
    c.copy_object()
        .bucket(&b)
        .key("cond")
        .copy_source(format!("{b}/src/obj"))
        .copy_source_if_match(&etag)
        .send()
        .await
        .expect("copy-source-if-match with the right ETag");
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("cond2")
            .copy_source(format!("{b}/src/obj"))
            .copy_source_if_none_match(&etag)
            .send()
            .await,
        412,
        "PreconditionFailed",
    );

    // Copy to itself needs REPLACE.
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("src/obj")
            .copy_source(format!("{b}/src/obj"))
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    c.copy_object()
        .bucket(&b)
        .key("src/obj")
        .copy_source(format!("{b}/src/obj"))
        .metadata_directive(MetadataDirective::Replace)
        .metadata("origin", "self")
        .send()
        .await
        .expect("copy onto itself with REPLACE");
    let h = c
        .head_object()
        .bucket(&b)
        .key("src/obj")
        .send()
        .await
        .expect("head");
    assert_eq!(
        h.metadata()
            .and_then(|m| m.get("origin"))
            .map(String::as_str),
        Some("self")
    );
    assert_eq!(
        get_bytes(&c, &b, "src/obj").await,
        data,
        "data survives a self-copy"
    );

    // Missing source.
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("x")
            .copy_source(format!("{b}/no/such/key"))
            .send()
            .await,
        404,
        "NoSuchKey",
    );
}

#[tokio::test]
async fn copy_of_a_chunked_object() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "bigcopy").await;
    let data = random_bytes(9 * MIB);
    put(&c, &b, "big", &data).await;
    let out = c
        .copy_object()
        .bucket(&b)
        .key("big-copy")
        .copy_source(format!("{b}/big"))
        .send()
        .await
        .expect("copy 9 MiB");
    assert_eq!(
        out.copy_object_result().and_then(|r| r.e_tag()),
        Some(quoted_md5(&data).as_str())
    );
    // The copy is independent of its source.
    c.delete_object()
        .bucket(&b)
        .key("big")
        .send()
        .await
        .expect("delete source");
    assert!(get_bytes(&c, &b, "big-copy").await == data);
}

#[tokio::test]
async fn overwrite_replaces_content() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "overwrite").await;
    let mut last_etag = String::new();
    for size in [10, 200 * 1024, 9 * MIB, 5, 0] {
        let data = random_bytes(size);
        let etag = put(&c, &b, "k", &data).await;
        assert_ne!(etag, last_etag, "a different body has a different ETag");
        assert!(
            get_bytes(&c, &b, "k").await == data,
            "content after overwrite with {size}"
        );
        let h = c
            .head_object()
            .bucket(&b)
            .key("k")
            .send()
            .await
            .expect("head");
        assert_eq!(h.content_length, Some(size as i64));
        last_etag = etag;
    }
    // Metadata of the old version does not leak into the new one.
    c.put_object()
        .bucket(&b)
        .key("m")
        .body(body(b"1"))
        .metadata("old", "1")
        .send()
        .await
        .expect("put");
    c.put_object()
        .bucket(&b)
        .key("m")
        .body(body(b"2"))
        .metadata("new", "2")
        .send()
        .await
        .expect("overwrite");
    let h = c
        .head_object()
        .bucket(&b)
        .key("m")
        .send()
        .await
        .expect("head");
    let m = h.metadata().cloned().unwrap_or_default();
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m.get("new").map(String::as_str), Some("2"));
    assert_eq!(list_all(&c, &b, None).await, vec!["k", "m"]);
}

fn ids(keys: &[&str]) -> Vec<ObjectIdentifier> {
    keys.iter()
        .map(|k| {
            ObjectIdentifier::builder()
                .key(*k)
                .build()
                .expect("key set")
        })
        .collect()
}

#[tokio::test]
async fn delete_objects_quiet_and_verbose() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "multidel").await;
    for k in ["a", "b/c", "d", "e"] {
        put(&c, &b, k, k.as_bytes()).await;
    }
    let out = c
        .delete_objects()
        .bucket(&b)
        .delete(
            Delete::builder()
                .set_objects(Some(ids(&["a", "b/c", "missing"])))
                .build()
                .expect("delete"),
        )
        .send()
        .await
        .expect("delete objects");
    let mut deleted: Vec<_> = out.deleted().iter().filter_map(|d| d.key.clone()).collect();
    deleted.sort();
    assert_eq!(
        deleted,
        vec!["a", "b/c", "missing"],
        "a missing key counts as deleted"
    );
    assert!(out.errors().is_empty(), "{:?}", out.errors());

    // A key that cannot exist is deleted like a missing one.
    let out = c
        .delete_objects()
        .bucket(&b)
        .delete(
            Delete::builder()
                .set_objects(Some(ids(&["x//y", "../z"])))
                .build()
                .expect("delete"),
        )
        .send()
        .await
        .expect("delete objects with unmappable keys");
    let mut deleted: Vec<_> = out.deleted().iter().filter_map(|d| d.key.clone()).collect();
    deleted.sort();
    assert_eq!(deleted, vec!["../z", "x//y"]);
    assert!(out.errors().is_empty(), "{:?}", out.errors());

    let out = c
        .delete_objects()
        .bucket(&b)
        .delete(
            Delete::builder()
                .set_objects(Some(ids(&["d"])))
                .quiet(true)
                .build()
                .expect("delete"),
        )
        .send()
        .await
        .expect("quiet delete objects");
    assert!(
        out.deleted().is_empty(),
        "quiet mode lists no successes: {out:?}"
    );
    assert!(out.errors().is_empty());
    assert_eq!(list_all(&c, &b, None).await, vec!["e"]);
}

#[tokio::test]
async fn missing_keys_and_directories_are_no_such_key() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "missing").await;
    put(&c, &b, "dir/sub/file", b"x").await;
    for key in [
        "nope",
        "dir",
        "dir/sub",
        "dir/",
        "dir/sub/",
        "dir/sub/file/",
    ] {
        assert_fails(
            c.get_object().bucket(&b).key(key).send().await,
            404,
            "NoSuchKey",
        );
        assert_status(c.head_object().bucket(&b).key(key).send().await, 404);
    }
    // Deleting a missing key is a success.
    c.delete_object()
        .bucket(&b)
        .key("nope")
        .send()
        .await
        .expect("delete of a missing key");
    // Deleting the name of an implicit directory leaves its contents alone.
    c.delete_object()
        .bucket(&b)
        .key("dir/sub")
        .send()
        .await
        .expect("delete of a directory's name");
    assert_eq!(get_bytes(&c, &b, "dir/sub/file").await, b"x");
}

#[tokio::test]
async fn tagging() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "tags").await;
    c.put_object()
        .bucket(&b)
        .key("t")
        .body(body(b"x"))
        .tagging("team=data&note=two%20words")
        .send()
        .await
        .expect("put with x-amz-tagging");
    let tags = |out: &[Tag]| {
        let mut v: Vec<(String, String)> = out
            .iter()
            .map(|t| (t.key().to_string(), t.value().to_string()))
            .collect();
        v.sort();
        v
    };
    let out = c
        .get_object_tagging()
        .bucket(&b)
        .key("t")
        .send()
        .await
        .expect("get tagging");
    assert_eq!(
        tags(out.tag_set()),
        vec![
            ("note".to_string(), "two words".to_string()),
            ("team".to_string(), "data".to_string())
        ]
    );

    let set = Tagging::builder()
        .tag_set(Tag::builder().key("k1").value("v1").build().expect("tag"))
        .tag_set(Tag::builder().key("k2").value("").build().expect("tag"))
        .build()
        .expect("tagging");
    c.put_object_tagging()
        .bucket(&b)
        .key("t")
        .tagging(set)
        .send()
        .await
        .expect("put tagging");
    let out = c
        .get_object_tagging()
        .bucket(&b)
        .key("t")
        .send()
        .await
        .expect("get tagging");
    assert_eq!(
        tags(out.tag_set()),
        vec![
            ("k1".to_string(), "v1".to_string()),
            ("k2".to_string(), String::new())
        ]
    );
    // Tagging leaves the data alone.
    assert_eq!(get_bytes(&c, &b, "t").await, b"x");
    // HEAD tells the tag count as GET does (the SDK's HeadObjectOutput has no field for it).
    let head = c
        .head_object()
        .bucket(&b)
        .key("t")
        .presigned(
            aws_sdk_s3::presigning::PresigningConfig::expires_in(Duration::from_secs(60))
                .expect("expiry"),
        )
        .await
        .expect("presign HEAD");
    let resp = reqwest::Client::new()
        .head(head.uri())
        .send()
        .await
        .expect("presigned HEAD");
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()
            .get("x-amz-tagging-count")
            .and_then(|v| v.to_str().ok()),
        Some("2")
    );

    c.delete_object_tagging()
        .bucket(&b)
        .key("t")
        .send()
        .await
        .expect("delete tagging");
    let out = c
        .get_object_tagging()
        .bucket(&b)
        .key("t")
        .send()
        .await
        .expect("get tagging");
    assert!(out.tag_set().is_empty(), "{out:?}");

    assert_fails(
        c.get_object_tagging()
            .bucket(&b)
            .key("missing")
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    let too_many = Tagging::builder()
        .set_tag_set(Some(
            (0..11)
                .map(|i| {
                    Tag::builder()
                        .key(format!("k{i}"))
                        .value("v")
                        .build()
                        .expect("tag")
                })
                .collect(),
        ))
        .build()
        .expect("tagging");
    assert_fails(
        c.put_object_tagging()
            .bucket(&b)
            .key("t")
            .tagging(too_many)
            .send()
            .await,
        400,
        "InvalidTag",
    );
}

fn crc32_b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(crc32fast::hash(data).to_be_bytes())
}

#[tokio::test]
async fn sdk_default_checksums_are_accepted() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "defsum").await;
    // The SDK's default: a CRC in an aws-chunked trailer.
    for size in [0, 17, 100 * 1024, 9 * MIB] {
        let data = random_bytes(size);
        let key = format!("k{size}");
        let out = c
            .put_object()
            .bucket(&b)
            .key(&key)
            .body(body(&data))
            .send()
            .await
            .unwrap_or_else(|e| panic!("put {size}: {e:?}"));
        assert_eq!(out.e_tag(), Some(quoted_md5(&data).as_str()));
        // The trailer was read and checked: the server answers with the CRC32 it computed.
        assert_eq!(
            out.checksum_crc32(),
            Some(crc32_b64(&data).as_str()),
            "PUT of {size} bytes"
        );
        assert!(get_bytes(&c, &b, &key).await == data, "{size} bytes");
        let got = c
            .get_object()
            .bucket(&b)
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .expect("get with checksum mode");
        assert_eq!(got.checksum_crc32(), Some(crc32_b64(&data).as_str()));
    }
}

#[tokio::test]
async fn crc32c_checksum_is_stored_and_returned() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "crc32c").await;
    let data = random_bytes(100 * 1024);
    let want =
        base64::engine::general_purpose::STANDARD.encode(crc32c::crc32c(&data).to_be_bytes());
    let out = c
        .put_object()
        .bucket(&b)
        .key("k")
        .body(body(&data))
        .checksum_algorithm(ChecksumAlgorithm::Crc32C)
        .send()
        .await
        .expect("put with CRC32C");
    assert_eq!(out.checksum_crc32_c(), Some(want.as_str()));
    let got = c
        .get_object()
        .bucket(&b)
        .key("k")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .expect("get");
    assert_eq!(got.checksum_crc32_c(), Some(want.as_str()));
    // An explicit right value in a header is accepted too.
    c.put_object()
        .bucket(&b)
        .key("k2")
        .body(body(&data))
        .checksum_crc32_c(&want)
        .send()
        .await
        .expect("put with a correct x-amz-checksum-crc32c");
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("k3")
            .body(body(&data))
            .checksum_crc32_c("AAAAAA==")
            .send()
            .await,
        400,
        "BadDigest",
    );
}

#[tokio::test]
async fn range_of_an_empty_object() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "emptyrange").await;
    put(&c, &b, "empty", b"").await;
    assert_fails(
        c.get_object()
            .bucket(&b)
            .key("empty")
            .range("bytes=0-0")
            .send()
            .await,
        416,
        "InvalidRange",
    );
    assert_eq!(get_bytes(&c, &b, "empty").await, b"");
}

#[tokio::test]
async fn copy_source_with_encoded_key() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "copyenc").await;
    let key = "src dir/ü+file %.txt";
    put(&c, &b, key, b"payload").await;
    // x-amz-copy-source is URL-encoded by the caller.
    let encoded: String = key
        .bytes()
        .map(|x| {
            if x.is_ascii_alphanumeric() || b"-_.~/".contains(&x) {
                (x as char).to_string()
            } else {
                format!("%{x:02X}")
            }
        })
        .collect();
    c.copy_object()
        .bucket(&b)
        .key("dst ü")
        .copy_source(format!("{b}/{encoded}"))
        .send()
        .await
        .expect("copy from an encoded source");
    assert_eq!(get_bytes(&c, &b, "dst ü").await, b"payload");
}

#[tokio::test]
async fn crc32_checksum_is_stored_and_returned() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "crc").await;
    for size in [1000, 200 * 1024] {
        let data = random_bytes(size);
        let want = crc32_b64(&data);
        let key = format!("crc-{size}");
        let out = c
            .put_object()
            .bucket(&b)
            .key(&key)
            .body(body(&data))
            .checksum_algorithm(ChecksumAlgorithm::Crc32)
            .send()
            .await
            .expect("put with CRC32");
        assert_eq!(out.checksum_crc32(), Some(want.as_str()), "PUT answer");
        let got = c
            .get_object()
            .bucket(&b)
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .expect("get with checksum mode");
        assert_eq!(
            got.checksum_crc32(),
            Some(want.as_str()),
            "GET x-amz-checksum-crc32"
        );
        let bytes = got.body.collect().await.expect("body").into_bytes();
        assert!(bytes.as_ref() == data.as_slice());
        let h = c
            .head_object()
            .bucket(&b)
            .key(&key)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .expect("head with checksum mode");
        assert_eq!(
            h.checksum_crc32(),
            Some(want.as_str()),
            "HEAD x-amz-checksum-crc32"
        );
    }
}

#[tokio::test]
async fn wrong_checksums_are_bad_digest() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "baddigest").await;
    let data = random_bytes(4096);
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("crc")
            .body(body(&data))
            .checksum_crc32("AAAAAA==")
            .send()
            .await,
        400,
        "BadDigest",
    );
    let wrong_md5 = base64::engine::general_purpose::STANDARD.encode(md5_raw(b"other data"));
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("md5")
            .body(body(&data))
            .content_md5(wrong_md5)
            .send()
            .await,
        400,
        "BadDigest",
    );
    // Nothing was stored.
    for k in ["crc", "md5"] {
        assert_status(c.head_object().bucket(&b).key(k).send().await, 404);
    }
    // The right Content-MD5 is accepted.
    let right = base64::engine::general_purpose::STANDARD.encode(md5_raw(&data));
    c.put_object()
        .bucket(&b)
        .key("md5")
        .body(body(&data))
        .content_md5(right)
        .send()
        .await
        .expect("correct Content-MD5");
}

#[tokio::test]
async fn last_modified_moves_forward_on_overwrite() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mtime").await;
    put(&c, &b, "k", b"1").await;
    let t1 = c
        .head_object()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .expect("head")
        .last_modified
        .expect("lm");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    assert!((t1.secs() - now).abs() < 60, "Last-Modified is about now");
    // Wait for the next whole second (HTTP dates have second precision) by polling the clock.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
        <= t1.secs()
    {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    put(&c, &b, "k", b"2").await;
    let t2 = c
        .head_object()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .expect("head")
        .last_modified
        .expect("lm");
    assert!(t2.secs() > t1.secs(), "{t1:?} -> {t2:?}");
}

#[tokio::test]
async fn copy_of_a_directory_marker() {
    // `d/` is an object in S3: it can be the source of a copy to any key.
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "markercopy").await;
    c.put_object()
        .bucket(&b)
        .key("d/")
        .body(body(b"marker body"))
        .content_type("text/x-marker")
        .send()
        .await
        .expect("put d/");
    c.copy_object()
        .bucket(&b)
        .key("e/")
        .copy_source(format!("{b}/d/"))
        .send()
        .await
        .expect("copy d/ to e/");
    assert_eq!(get_bytes(&c, &b, "e/").await, b"marker body");
    c.copy_object()
        .bucket(&b)
        .key("plain")
        .copy_source(format!("{b}/d/"))
        .send()
        .await
        .expect("copy d/ to a plain key");
    assert_eq!(get_bytes(&c, &b, "plain").await, b"marker body");
    let h = c
        .head_object()
        .bucket(&b)
        .key("plain")
        .send()
        .await
        .expect("head");
    assert_eq!(h.content_type(), Some("text/x-marker"));
}

#[tokio::test]
async fn object_attributes_without_data() {
    use aws_sdk_s3::types::ObjectAttributes;
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "attrs").await;
    let data = random_bytes(5000);
    let etag = put(&c, &b, "o", &data).await;
    let out = c
        .get_object_attributes()
        .bucket(&b)
        .key("o")
        .object_attributes(ObjectAttributes::ObjectSize)
        .object_attributes(ObjectAttributes::Etag)
        .object_attributes(ObjectAttributes::StorageClass)
        .object_attributes(ObjectAttributes::ObjectParts)
        .send()
        .await
        .expect("GetObjectAttributes");
    assert_eq!(out.object_size(), Some(5000));
    // The one S3 answer whose ETag is not quoted.
    assert_eq!(out.e_tag(), Some(etag.trim_matches('"')));
    assert_eq!(out.storage_class().map(|s| s.as_str()), Some("STANDARD"));
    assert!(out.object_parts().is_none(), "a simple object has no parts");
    let f = failure(
        c.get_object_attributes()
            .bucket(&b)
            .key("missing")
            .object_attributes(ObjectAttributes::ObjectSize)
            .send()
            .await,
    );
    assert_eq!(f.code.as_deref(), Some("NoSuchKey"), "{f:?}");
}
