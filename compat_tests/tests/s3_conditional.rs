//! Conditional writes (`If-None-Match: *`, `If-Match`) on PutObject, CopyObject's destination,
//! CompleteMultipartUpload (in s3_multipart) and DeleteObject: checked in the MNode batch
//! that applies the write, so of racing writers exactly the right ones win.

mod common;

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use common::*;
use tokio::sync::Barrier;

#[tokio::test]
async fn conditional_put() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "condput").await;
    c.put_object()
        .bucket(&b)
        .key("k")
        .body(body(b"first"))
        .if_none_match("*")
        .send()
        .await
        .expect("If-None-Match: * on a new key");
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("k")
            .body(body(b"second"))
            .if_none_match("*")
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    assert_eq!(get_bytes(&c, &b, "k").await, b"first");
    let etag = quoted_md5(b"first");
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("k")
            .body(body(b"third"))
            .if_match("\"0123456789abcdef0123456789abcdef\"")
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    c.put_object()
        .bucket(&b)
        .key("k")
        .body(body(b"fourth"))
        .if_match(&etag)
        .send()
        .await
        .expect("If-Match with the current ETag");
    assert_eq!(get_bytes(&c, &b, "k").await, b"fourth");
}

/// 16 writers race `If-None-Match: *` on a fresh key, 200 times: exactly one wins each round,
/// every other gets 412, and the key holds the winner's bytes. The rounds' keys hash to every
/// MNode group, and the racing requests meet in merged batches.
#[tokio::test]
async fn racing_if_none_match_writers_have_exactly_one_winner() {
    const WRITERS: usize = 16;
    const ROUNDS: usize = 200;
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "race").await;
    let barrier = Arc::new(Barrier::new(WRITERS));
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let (c, b, barrier) = (c.clone(), b.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for r in 0..ROUNDS {
                barrier.wait().await;
                let res = c
                    .put_object()
                    .bucket(&b)
                    .key(format!("round-{r}"))
                    .body(body(format!("writer {w}").as_bytes()))
                    .if_none_match("*")
                    .send()
                    .await;
                match res {
                    Ok(_) => won.push(r),
                    Err(e) => {
                        let status = e.raw_response().map(|r| r.status().as_u16());
                        assert_eq!(status, Some(412), "round {r}, writer {w}: {e:?}");
                    }
                }
            }
            (w, won)
        }));
    }
    let mut winner = vec![Vec::new(); ROUNDS];
    for t in tasks {
        let (w, won) = t.await.expect("writer task");
        for r in won {
            winner[r].push(w);
        }
    }
    for (r, ws) in winner.iter().enumerate() {
        assert_eq!(ws.len(), 1, "round {r} had winners {ws:?}");
        let got = get_bytes(&c, &b, &format!("round-{r}")).await;
        assert_eq!(got, format!("writer {}", ws[0]).as_bytes(), "round {r}");
    }
}

/// The chunks of a write that lost its condition are queued for collection by the MNode in
/// the batch that refused it (the scrub, which would also find them, is off here).
#[tokio::test]
async fn chunks_of_a_refused_conditional_write_are_collected() {
    let srv = Server::start(
        Opts::default()
            .arg("--gc-grace", "1s")
            .arg("--gc-interval", "200ms"),
    );
    let c = srv.client();
    let b = new_bucket(&c, "condgc").await;
    let first = random_bytes(100 * 1024);
    put(&c, &b, "k", &first).await;
    assert_eq!(srv.stored_chunks(), 1);
    for _ in 0..3 {
        assert_fails(
            c.put_object()
                .bucket(&b)
                .key("k")
                .body(body(&random_bytes(100 * 1024)))
                .if_none_match("*")
                .send()
                .await,
            412,
            "PreconditionFailed",
        );
    }
    let ok = poll_until(Duration::from_secs(15), || async {
        srv.stored_chunks() == 1
    })
    .await;
    assert!(ok, "{} chunks stored, want 1", srv.stored_chunks());
    assert!(get_bytes(&c, &b, "k").await == first);
}

#[tokio::test]
async fn conditional_copy_and_delete() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "condcopy").await;
    let src_etag = put(&c, &b, "src", b"source").await;
    let dst_etag = put(&c, &b, "dst", b"old").await;
    let copy = || {
        c.copy_object()
            .bucket(&b)
            .key("dst")
            .copy_source(format!("{b}/src"))
    };
    assert_fails(
        copy().if_none_match("*").send().await,
        412,
        "PreconditionFailed",
    );
    assert_fails(
        copy().if_match(&src_etag).send().await,
        412,
        "PreconditionFailed",
    );
    assert_eq!(get_bytes(&c, &b, "dst").await, b"old");
    copy()
        .if_match(&dst_etag)
        .send()
        .await
        .expect("copy over the ETag named");

    // DeleteObject with If-Match: only the named version of the object goes.
    assert_fails(
        c.delete_object()
            .bucket(&b)
            .key("dst")
            .if_match(&dst_etag)
            .send()
            .await,
        412,
        "PreconditionFailed",
    );
    assert_fails(
        c.delete_object()
            .bucket(&b)
            .key("missing")
            .if_match("*")
            .send()
            .await,
        404,
        "NoSuchKey",
    );
    c.delete_object()
        .bucket(&b)
        .key("dst")
        .if_match(&src_etag)
        .send()
        .await
        .expect("delete with the current ETag");
    assert_fails(
        c.head_object().bucket(&b).key("dst").send().await,
        404,
        "NotFound",
    );

    // DeleteObjects: a key named with a stale ETag is refused, the others go.
    put(&c, &b, "a", b"a").await;
    let b_etag = put(&c, &b, "b", b"b").await;
    let ids = [("a", quoted_md5(b"other")), ("b", b_etag)]
        .into_iter()
        .map(|(k, e)| ObjectIdentifier::builder().key(k).e_tag(e).build().unwrap())
        .collect();
    let out = c
        .delete_objects()
        .bucket(&b)
        .delete(Delete::builder().set_objects(Some(ids)).build().unwrap())
        .send()
        .await
        .expect("delete objects");
    let errors = out.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].key(), Some("a"));
    assert_eq!(errors[0].code(), Some("PreconditionFailed"));
    assert_eq!(out.deleted().len(), 1);
    assert_eq!(get_bytes(&c, &b, "a").await, b"a");
}
