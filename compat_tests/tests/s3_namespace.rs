//! The namespace rules of ARCHITECTURE.md "The namespace": implicit directories, directory
//! markers, path conflicts and keys that cannot be mapped to a path.

mod common;

use aws_sdk_s3::Client;
use common::*;

/// Keys and common prefixes of one delimiter listing.
async fn ls(c: &Client, b: &str, prefix: &str) -> (Vec<String>, Vec<String>) {
    let out = c
        .list_objects_v2()
        .bucket(b)
        .prefix(prefix)
        .delimiter("/")
        .send()
        .await
        .expect("list");
    (
        out.contents()
            .iter()
            .filter_map(|o| o.key.clone())
            .collect(),
        out.common_prefixes()
            .iter()
            .filter_map(|p| p.prefix.clone())
            .collect(),
    )
}

#[tokio::test]
async fn parents_are_implicit_directories() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "implicit").await;
    put(&c, &b, "a/b/c", b"leaf").await;
    for key in ["a/b", "a", "a/b/", "a/"] {
        assert_fails(
            c.get_object().bucket(&b).key(key).send().await,
            404,
            "NoSuchKey",
        );
    }
    assert_eq!(get_bytes(&c, &b, "a/b/c").await, b"leaf");
    assert_eq!(
        list_all(&c, &b, None).await,
        vec!["a/b/c"],
        "implicit dirs are not objects"
    );
    assert_eq!(ls(&c, &b, "").await, (vec![], vec!["a/".to_string()]));
    assert_eq!(ls(&c, &b, "a/").await, (vec![], vec!["a/b/".to_string()]));
}

#[tokio::test]
async fn file_where_a_directory_is_conflicts() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "conflict").await;
    put(&c, &b, "a/b/c", b"x").await;
    let f = assert_fails(
        c.put_object()
            .bucket(&b)
            .key("a/b")
            .body(body(b"y"))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    assert!(
        f.message.as_deref().is_some_and(|m| m.contains("a/b")),
        "the message names the path: {f:?}"
    );
    // Same for a directory one level up.
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("a")
            .body(body(b"y"))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    // The tree is unchanged.
    assert_eq!(list_all(&c, &b, None).await, vec!["a/b/c"]);
    assert_eq!(get_bytes(&c, &b, "a/b/c").await, b"x");
}

#[tokio::test]
async fn directory_where_a_file_is_conflicts() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "conflict2").await;
    put(&c, &b, "a/b/c", b"file").await;
    let f = assert_fails(
        c.put_object()
            .bucket(&b)
            .key("a/b/c/d")
            .body(body(b"y"))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    assert!(
        f.message.as_deref().is_some_and(|m| m.contains("a/b/c")),
        "the message names the path: {f:?}"
    );
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("a/b/c/d/e/f")
            .body(body(b"y"))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    // A marker under a file is the same conflict.
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("a/b/c/")
            .body(body(b""))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    // Copy and multipart complete hit the same rule.
    put(&c, &b, "src", b"s").await;
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("a/b/c/copy")
            .copy_source(format!("{b}/src"))
            .send()
            .await,
        409,
        "ObjectPathConflict",
    );
    assert_eq!(list_all(&c, &b, None).await, vec!["a/b/c", "src"]);
    assert_eq!(get_bytes(&c, &b, "a/b/c").await, b"file");
}

#[tokio::test]
async fn unmappable_keys() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "badkeys").await;
    for key in [
        "a//b",
        "./x",
        "a/../b",
        "a/./b",
        "..",
        "x/.",
        "//lead",
        "nul\u{0}byte",
    ] {
        let f = failure(
            c.put_object()
                .bucket(&b)
                .key(key)
                .body(body(b"x"))
                .send()
                .await,
        );
        assert_eq!(
            (f.status, f.code.as_deref()),
            (400, Some("InvalidArgument")),
            "PUT {key:?}: {f:?}"
        );
        assert!(f.message.is_some(), "the 400 says why: {key:?}");
        assert_fails(
            c.get_object().bucket(&b).key(key).send().await,
            404,
            "NoSuchKey",
        );
        assert_status(c.head_object().bucket(&b).key(key).send().await, 404);
        c.delete_object()
            .bucket(&b)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("DELETE {key:?} is a 204: {e:?}"));
    }
    // The same key rules for copy destinations and multipart uploads.
    put(&c, &b, "ok", b"x").await;
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("a//copy")
            .copy_source(format!("{b}/ok"))
            .send()
            .await,
        400,
        "InvalidArgument",
    );
    assert_fails(
        c.copy_object()
            .bucket(&b)
            .key("copy")
            .copy_source(format!("{b}/a//b"))
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    assert_fails(
        c.create_multipart_upload()
            .bucket(&b)
            .key("m/../u")
            .send()
            .await,
        400,
        "InvalidArgument",
    );
    assert_eq!(list_all(&c, &b, None).await, vec!["ok"]);
}

#[tokio::test]
async fn key_length_limit() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "keylen").await;
    // 1024 bytes in components of at most 255 bytes is fine…
    let comp = "k".repeat(200);
    let mut ok = [comp.as_str(); 5].join("/"); // 1004 bytes
    ok.push_str(&format!("/{}", "z".repeat(1024 - ok.len() - 1)));
    assert_eq!(ok.len(), 1024);
    put(&c, &b, &ok, b"x").await;
    assert_eq!(get_bytes(&c, &b, &ok).await, b"x");
    // …1025 bytes is not.
    let long = format!("{ok}z");
    assert_eq!(long.len(), 1025);
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key(&long)
            .body(body(b"x"))
            .send()
            .await,
        400,
        "KeyTooLongError",
    );
    // A component over 255 bytes cannot be a file name.
    let f = failure(
        c.put_object()
            .bucket(&b)
            .key("n".repeat(256))
            .body(body(b"x"))
            .send()
            .await,
    );
    assert_eq!(f.status, 400, "{f:?}");
    assert_eq!(list_all(&c, &b, None).await, vec![ok]);
}

#[tokio::test]
async fn explicit_directory_markers() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "markers").await;
    let payload = b"marker payload".to_vec();
    let etag = c
        .put_object()
        .bucket(&b)
        .key("d/")
        .body(body(&payload))
        .content_type("application/x-directory")
        .metadata("kind", "dir")
        .send()
        .await
        .expect("put d/")
        .e_tag
        .expect("etag");
    assert_eq!(etag, quoted_md5(&payload));
    let got = c
        .get_object()
        .bucket(&b)
        .key("d/")
        .send()
        .await
        .expect("get d/");
    assert_eq!(got.e_tag(), Some(etag.as_str()));
    assert_eq!(got.content_type(), Some("application/x-directory"));
    assert_eq!(
        got.metadata()
            .and_then(|m| m.get("kind"))
            .map(String::as_str),
        Some("dir")
    );
    let bytes = got.body.collect().await.expect("body").into_bytes();
    assert_eq!(bytes.as_ref(), payload.as_slice());
    // `d` (no slash) is not an object.
    assert_fails(
        c.get_object().bucket(&b).key("d").send().await,
        404,
        "NoSuchKey",
    );

    // The marker lists as `d/` with its own ETag and size.
    let out = c.list_objects_v2().bucket(&b).send().await.expect("list");
    let objs = out.contents();
    assert_eq!(objs.len(), 1, "{objs:?}");
    assert_eq!(objs[0].key(), Some("d/"));
    assert_eq!(objs[0].e_tag(), Some(etag.as_str()));
    assert_eq!(objs[0].size(), Some(payload.len() as i64));

    // Children next to an explicit directory; the marker shows with them.
    put(&c, &b, "d/x", b"child").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["d/", "d/x"]);
    assert_eq!(ls(&c, &b, "").await, (vec![], vec!["d/".to_string()]));
    assert_eq!(
        ls(&c, &b, "d/").await,
        (vec!["d/".to_string(), "d/x".to_string()], vec![])
    );

    // Deleting the marker of a non-empty directory keeps its children and hides `d/`.
    c.delete_object()
        .bucket(&b)
        .key("d/")
        .send()
        .await
        .expect("delete d/");
    assert_fails(
        c.get_object().bucket(&b).key("d/").send().await,
        404,
        "NoSuchKey",
    );
    assert_eq!(list_all(&c, &b, None).await, vec!["d/x"]);
    assert_eq!(get_bytes(&c, &b, "d/x").await, b"child");

    // Making an implicit directory explicit with a marker; an empty marker.
    put(&c, &b, "d/", b"").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["d/", "d/x"]);
    assert_eq!(get_bytes(&c, &b, "d/").await, b"");

    // Deleting the last child keeps an explicit directory.
    c.delete_object()
        .bucket(&b)
        .key("d/x")
        .send()
        .await
        .expect("delete d/x");
    assert_eq!(list_all(&c, &b, None).await, vec!["d/"]);
    c.delete_object()
        .bucket(&b)
        .key("d/")
        .send()
        .await
        .expect("delete d/");
    assert!(list_all(&c, &b, None).await.is_empty());
}

#[tokio::test]
async fn empty_implicit_directories_vanish() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "vanish").await;
    put(&c, &b, "top/mid/leaf", b"1").await;
    put(&c, &b, "keep/me", b"2").await;
    assert_eq!(
        ls(&c, &b, "").await,
        (vec![], vec!["keep/".to_string(), "top/".to_string()])
    );
    c.delete_object()
        .bucket(&b)
        .key("top/mid/leaf")
        .send()
        .await
        .expect("delete");
    assert_eq!(ls(&c, &b, "").await, (vec![], vec!["keep/".to_string()]));
    assert_eq!(ls(&c, &b, "top/").await, (vec![], vec![]));
    assert_eq!(list_all(&c, &b, None).await, vec!["keep/me"]);
    // The name is free again for a file.
    put(&c, &b, "top", b"now a file").await;
    assert_eq!(get_bytes(&c, &b, "top").await, b"now a file");
    // And a path under a former directory works again.
    c.delete_object()
        .bucket(&b)
        .key("top")
        .send()
        .await
        .expect("delete");
    put(&c, &b, "top/mid/again", b"3").await;
    assert_eq!(
        list_all(&c, &b, None).await,
        vec!["keep/me", "top/mid/again"]
    );
}

#[tokio::test]
async fn prefixes_are_plain_strings() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "plainprefix").await;
    put(&c, &b, "a/b", b"1").await;
    // A prefix that is no path is not an error.
    assert!(
        list_all(&c, &b, Some("/")).await.is_empty(),
        "Prefix='/' lists nothing"
    );
    assert!(list_all(&c, &b, Some("a//")).await.is_empty());
    assert!(list_all(&c, &b, Some("../")).await.is_empty());
    assert_eq!(list_all(&c, &b, Some("a/")).await, vec!["a/b"]);
    assert_eq!(list_all(&c, &b, Some("a")).await, vec!["a/b"]);
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .start_after("a//")
        .send()
        .await
        .expect("start-after that is no path");
    assert_eq!(out.contents().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_puts_create_one_implicit_parent() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mkdirrace").await;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..16 {
        let (c, b) = (c.clone(), b.clone());
        set.spawn(async move {
            let key = format!("new/deep/dir/k{i:02}");
            c.put_object()
                .bucket(&b)
                .key(&key)
                .body(body(key.as_bytes()))
                .send()
                .await
                .map(|_| ())
                .map_err(|e| format!("{key}: {e:?}"))
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("task")
            .expect("every PUT under a new directory succeeds");
    }
    let keys = list_all(&c, &b, None).await;
    assert_eq!(keys.len(), 16, "{keys:?}");
    assert_eq!(ls(&c, &b, "").await, (vec![], vec!["new/".to_string()]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn put_racing_the_reap_of_its_parent() {
    // Deleting the last object of an implicit directory reaps it; a PUT into the same directory
    // at the same moment must still succeed and stay visible.
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "reaprace").await;
    let mut lost = Vec::new();
    for i in 0..25 {
        let old = format!("p{i}/q/r/old");
        let new = format!("p{i}/q/r/new");
        put(&c, &b, &old, b"old").await;
        let (c1, b1, o) = (c.clone(), b.clone(), old.clone());
        let del = tokio::spawn(async move { c1.delete_object().bucket(&b1).key(&o).send().await });
        let (c2, b2, n) = (c.clone(), b.clone(), new.clone());
        let add = tokio::spawn(async move {
            c2.put_object()
                .bucket(&b2)
                .key(&n)
                .body(body(b"new"))
                .send()
                .await
        });
        del.await.expect("task").expect("delete");
        if let Err(e) = add.await.expect("task") {
            lost.push(format!("PUT {new} failed: {e:?}"));
            continue;
        }
        match c.get_object().bucket(&b).key(&new).send().await {
            Ok(_) => {}
            Err(e) => lost.push(format!("{new} acknowledged but not readable: {e:?}")),
        }
        let listed = list_all(&c, &b, Some(&format!("p{i}/"))).await;
        if listed != vec![new.clone()] {
            lost.push(format!("listing of p{i}/: {listed:?}"));
        }
    }
    assert!(lost.is_empty(), "{}", lost.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn file_and_directory_racing_for_one_name() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "namerace").await;
    for i in 0..20 {
        let file = format!("r{i}/x");
        let child = format!("r{i}/x/y");
        let (c1, b1, f) = (c.clone(), b.clone(), file.clone());
        let a = tokio::spawn(async move {
            c1.put_object()
                .bucket(&b1)
                .key(&f)
                .body(body(b"f"))
                .send()
                .await
        });
        let (c2, b2, ch) = (c.clone(), b.clone(), child.clone());
        let d = tokio::spawn(async move {
            c2.put_object()
                .bucket(&b2)
                .key(&ch)
                .body(body(b"c"))
                .send()
                .await
        });
        let ra = a.await.expect("task");
        let rd = d.await.expect("task");
        // Exactly one wins; the other is a 409.
        let listed = list_all(&c, &b, Some(&format!("r{i}/"))).await;
        match (ra.is_ok(), rd.is_ok()) {
            (true, false) => {
                assert_eq!(failure(rd).status, 409);
                assert_eq!(listed, vec![file]);
            }
            (false, true) => {
                assert_eq!(failure(ra).status, 409);
                assert_eq!(listed, vec![child]);
            }
            (x, y) => panic!("round {i}: file ok={x}, child ok={y}, listing {listed:?}"),
        }
    }
}

#[tokio::test]
async fn multipart_complete_hits_path_conflicts() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "mpuconflict").await;
    put(&c, &b, "f", b"file").await;
    let created = c
        .create_multipart_upload()
        .bucket(&b)
        .key("f/under")
        .send()
        .await;
    match created {
        // Refusing at create is fine…
        Err(e) => assert_eq!(failure::<(), _>(Err(e)).status, 409),
        // …otherwise Complete must refuse.
        Ok(out) => {
            let id = out.upload_id.expect("id");
            let e = c
                .upload_part()
                .bucket(&b)
                .key("f/under")
                .upload_id(&id)
                .part_number(1)
                .body(body(b"part"))
                .send()
                .await
                .expect("upload part")
                .e_tag
                .expect("etag");
            let parts = aws_sdk_s3::types::CompletedMultipartUpload::builder()
                .parts(
                    aws_sdk_s3::types::CompletedPart::builder()
                        .part_number(1)
                        .e_tag(e)
                        .build(),
                )
                .build();
            assert_fails(
                c.complete_multipart_upload()
                    .bucket(&b)
                    .key("f/under")
                    .upload_id(&id)
                    .multipart_upload(parts)
                    .send()
                    .await,
                409,
                "ObjectPathConflict",
            );
        }
    }
    assert_eq!(list_all(&c, &b, None).await, vec!["f"]);
    assert_eq!(get_bytes(&c, &b, "f").await, b"file");
}

#[tokio::test]
async fn start_after_and_prefix_around_a_marker() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "markerlist").await;
    put(&c, &b, "d/", b"m").await;
    put(&c, &b, "d/x", b"x").await;
    put(&c, &b, "d-", b"y").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["d-", "d/", "d/x"]);
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .start_after("d/")
        .send()
        .await
        .expect("list");
    let keys: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    assert_eq!(keys, vec!["d/x"]);
    // Pages of one key step through the marker.
    let mut got = Vec::new();
    let mut token = None;
    loop {
        let out = c
            .list_objects_v2()
            .bucket(&b)
            .max_keys(1)
            .set_continuation_token(token)
            .send()
            .await
            .expect("page");
        got.extend(out.contents().iter().filter_map(|o| o.key.clone()));
        if out.is_truncated != Some(true) {
            break;
        }
        token = out.next_continuation_token;
    }
    assert_eq!(got, vec!["d-", "d/", "d/x"]);
    // Delimiter listing with the directory's own prefix shows the marker as a key.
    assert_eq!(
        ls(&c, &b, "d").await,
        (vec!["d-".to_string()], vec!["d/".to_string()])
    );
}

#[tokio::test]
async fn deepest_possible_key() {
    // 512 components in 1023 bytes: every parent is created implicitly, then reaped.
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "deep").await;
    let key = vec!["a"; 512].join("/");
    assert_eq!(key.len(), 1023);
    put(&c, &b, &key, b"deep").await;
    assert_eq!(get_bytes(&c, &b, &key).await, b"deep");
    assert_eq!(list_all(&c, &b, None).await, vec![key.clone()]);
    let parent = vec!["a"; 300].join("/") + "/";
    assert_eq!(ls(&c, &b, &parent).await.1.len(), 1);
    c.delete_object()
        .bucket(&b)
        .key(&key)
        .send()
        .await
        .expect("delete");
    assert_eq!(ls(&c, &b, "").await, (vec![], vec![]));
    // The whole chain is gone: `a` is free for a file.
    put(&c, &b, "a", b"file").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["a"]);
}

#[tokio::test]
async fn reaping_stops_at_an_explicit_directory() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "reapstop").await;
    put(&c, &b, "x/", b"").await;
    put(&c, &b, "x/y/z/f", b"f").await;
    c.delete_object()
        .bucket(&b)
        .key("x/y/z/f")
        .send()
        .await
        .expect("delete");
    assert_eq!(list_all(&c, &b, None).await, vec!["x/"]);
    assert_eq!(ls(&c, &b, "x/").await, (vec!["x/".to_string()], vec![]));
    // `x/y` is free for a file now.
    put(&c, &b, "x/y", b"file").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["x/", "x/y"]);
}

#[tokio::test]
async fn deleting_a_nested_marker_frees_the_names() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "nestedmarker").await;
    put(&c, &b, "a/b/", b"").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["a/b/"]);
    assert_eq!(ls(&c, &b, "").await, (vec![], vec!["a/".to_string()]));
    c.delete_object()
        .bucket(&b)
        .key("a/b/")
        .send()
        .await
        .expect("delete marker");
    assert_eq!(list_all(&c, &b, None).await, Vec::<String>::new());
    assert_eq!(ls(&c, &b, "").await, (vec![], vec![]));
    put(&c, &b, "a", b"file").await;
    assert_eq!(list_all(&c, &b, None).await, vec!["a"]);
}

#[tokio::test]
async fn multi_delete_reaps_implicit_parents() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "multireap").await;
    put(&c, &b, "top/one", b"1").await;
    put(&c, &b, "top/sub/two", b"2").await;
    let ids = ["top/one", "top/sub/two"]
        .iter()
        .map(|k| {
            aws_sdk_s3::types::ObjectIdentifier::builder()
                .key(*k)
                .build()
                .expect("key")
        })
        .collect();
    c.delete_objects()
        .bucket(&b)
        .delete(
            aws_sdk_s3::types::Delete::builder()
                .set_objects(Some(ids))
                .build()
                .expect("delete"),
        )
        .send()
        .await
        .expect("delete objects");
    assert_eq!(ls(&c, &b, "").await, (vec![], vec![]));
    put(&c, &b, "top", b"file").await;
    c.delete_object()
        .bucket(&b)
        .key("top")
        .send()
        .await
        .expect("delete");
    c.delete_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("bucket is empty");
}

/// Failed writes into new directories leave no trace in listings and block no names.
#[tokio::test]
async fn failed_writes_leave_no_directories() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "failedwrites").await;

    // A PUT refused for its checksum.
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("bad/digest/k")
            .body(body(b"data"))
            .checksum_crc32("AAAAAA==")
            .send()
            .await,
        400,
        "BadDigest",
    );

    // A multipart Complete refused for a too-small part, and an aborted upload.
    let id = c
        .create_multipart_upload()
        .bucket(&b)
        .key("mp/dir/k")
        .send()
        .await
        .expect("create")
        .upload_id
        .expect("id");
    let mut parts = Vec::new();
    for n in 1..=2 {
        let e = c
            .upload_part()
            .bucket(&b)
            .key("mp/dir/k")
            .upload_id(&id)
            .part_number(n)
            .body(body(b"tiny"))
            .send()
            .await
            .expect("part")
            .e_tag
            .expect("etag");
        parts.push(
            aws_sdk_s3::types::CompletedPart::builder()
                .part_number(n)
                .e_tag(e)
                .build(),
        );
    }
    assert_fails(
        c.complete_multipart_upload()
            .bucket(&b)
            .key("mp/dir/k")
            .upload_id(&id)
            .multipart_upload(
                aws_sdk_s3::types::CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await,
        400,
        "EntityTooSmall",
    );
    c.abort_multipart_upload()
        .bucket(&b)
        .key("mp/dir/k")
        .upload_id(&id)
        .send()
        .await
        .expect("abort");
    let id = c
        .create_multipart_upload()
        .bucket(&b)
        .key("ab/orted/k")
        .send()
        .await
        .expect("create")
        .upload_id
        .expect("id");
    c.abort_multipart_upload()
        .bucket(&b)
        .key("ab/orted/k")
        .upload_id(&id)
        .send()
        .await
        .expect("abort");

    assert_eq!(ls(&c, &b, "").await, (vec![], vec![]), "no directory shows");
    assert!(list_all(&c, &b, None).await.is_empty());
    for name in ["bad", "mp", "ab"] {
        put(&c, &b, name, b"file").await;
    }
    assert_eq!(list_all(&c, &b, None).await, vec!["ab", "bad", "mp"]);
}
