//! Bucket operations: create, head, list, location, delete.

mod common;

use common::*;

#[tokio::test]
async fn create_head_list_location_delete() {
    let srv = Server::default_start();
    let c = srv.client();
    let (a, b) = (bucket_name("alpha"), bucket_name("beta"));
    create_bucket(&c, &b).await;
    create_bucket(&c, &a).await;

    c.head_bucket()
        .bucket(&a)
        .send()
        .await
        .expect("head existing bucket");

    let out = c.list_buckets().send().await.expect("list buckets");
    let names: Vec<_> = out
        .buckets()
        .iter()
        .filter_map(|b| b.name.clone())
        .collect();
    assert_eq!(names, vec![a.clone(), b.clone()], "sorted, both listed");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    for bk in out.buckets() {
        let created = bk.creation_date().expect("creation date").secs();
        assert!(
            (created - now).abs() < 600,
            "creation date about now: {bk:?}"
        );
    }

    let loc = c
        .get_bucket_location()
        .bucket(&a)
        .send()
        .await
        .expect("get bucket location");
    // us-east-1 is the empty LocationConstraint.
    assert!(
        loc.location_constraint.is_none()
            || loc.location_constraint.as_ref().map(|l| l.as_str()) == Some(""),
        "location of a us-east-1 bucket: {loc:?}"
    );

    c.delete_bucket()
        .bucket(&a)
        .send()
        .await
        .expect("delete empty bucket");
    assert_status(c.head_bucket().bucket(&a).send().await, 404);
    let names: Vec<_> = c
        .list_buckets()
        .send()
        .await
        .expect("list buckets")
        .buckets()
        .iter()
        .filter_map(|b| b.name.clone())
        .collect();
    assert_eq!(names, vec![b]);
}

#[tokio::test]
async fn invalid_bucket_names_are_refused() {
    let srv = Server::default_start();
    let c = srv.client();
    for bad in [
        "ab",
        "Upper-Case",
        "under_score",
        "-edge",
        "192.168.1.1",
        "a..b",
    ] {
        let f = failure(c.create_bucket().bucket(bad).send().await);
        assert_eq!(
            (f.status, f.code.as_deref()),
            (400, Some("InvalidBucketName")),
            "bucket name {bad:?}: {f:?}"
        );
    }
    let out = c.list_buckets().send().await.expect("list buckets");
    assert!(out.buckets().is_empty(), "no bucket was created: {out:?}");
}

#[tokio::test]
async fn create_existing_bucket() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "dup").await;
    put(&c, &b, "keep/me", b"x").await;
    // us-east-1 answers 200 for a bucket the caller owns; other regions 409
    // BucketAlreadyOwnedByYou. Either way the bucket and its contents stay.
    match c.create_bucket().bucket(&b).send().await {
        Ok(_) => {}
        Err(e) => {
            let f = failure::<(), _>(Err(e));
            assert_eq!(
                (f.status, f.code.as_deref()),
                (409, Some("BucketAlreadyOwnedByYou")),
                "{f:?}"
            );
        }
    }
    assert_eq!(get_bytes(&c, &b, "keep/me").await, b"x");
    let names: Vec<_> = c
        .list_buckets()
        .send()
        .await
        .expect("list buckets")
        .buckets()
        .iter()
        .filter_map(|b| b.name.clone())
        .collect();
    assert_eq!(names, vec![b]);
}

#[tokio::test]
async fn delete_non_empty_and_missing_bucket() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "full").await;
    put(&c, &b, "dir/obj", b"x").await;
    assert_fails(
        c.delete_bucket().bucket(&b).send().await,
        409,
        "BucketNotEmpty",
    );
    c.head_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("still there");

    // Once the object is gone its implicit directory must not keep the bucket alive.
    c.delete_object()
        .bucket(&b)
        .key("dir/obj")
        .send()
        .await
        .expect("delete object");
    c.delete_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("bucket with only implicit (now empty) directories is empty");

    assert_fails(
        c.delete_bucket().bucket(&b).send().await,
        404,
        "NoSuchBucket",
    );
    assert_status(c.head_bucket().bucket("no-such-bucket-x").send().await, 404);
    assert_fails(
        c.get_bucket_location()
            .bucket("no-such-bucket-x")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
    assert_fails(
        c.list_objects_v2().bucket("no-such-bucket-x").send().await,
        404,
        "NoSuchBucket",
    );
    assert_fails(
        c.put_object()
            .bucket("no-such-bucket-x")
            .key("k")
            .body(body(b"x"))
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
    assert_fails(
        c.get_object()
            .bucket("no-such-bucket-x")
            .key("k")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
}

#[tokio::test]
async fn explicit_dir_marker_keeps_bucket_non_empty() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "marker").await;
    put(&c, &b, "d/", b"").await;
    assert_fails(
        c.delete_bucket().bucket(&b).send().await,
        409,
        "BucketNotEmpty",
    );
    c.delete_object()
        .bucket(&b)
        .key("d/")
        .send()
        .await
        .expect("delete marker");
    c.delete_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("now empty");
}

#[tokio::test]
async fn valid_edge_case_bucket_names() {
    let srv = Server::default_start();
    let c = srv.client();
    let names = ["my.dotted.bucket", "abc", "0-9", &"a".repeat(63)];
    for n in names {
        create_bucket(&c, n).await;
        c.head_bucket().bucket(n).send().await.expect("head");
        put(&c, n, "k", b"x").await;
        assert_eq!(get_bytes(&c, n, "k").await, b"x");
    }
    assert_fails(
        c.create_bucket().bucket("a".repeat(64)).send().await,
        400,
        "InvalidBucketName",
    );
}
