//! Every S3 operation gives the same answers with 1 MNode group, with 4, and with 4 where some
//! names are placed by path walk (`--pathwalk`): one scripted
//! workload (buckets, nested keys with implicit directories, directory markers, overwrites,
//! copies, multipart, tags, conflicts, listings with delimiters, prefixes, start-after and
//! pagination, deletes, reaping, DeleteBucket) runs against both servers, and the two
//! transcripts of normalized answers (status, error code, keys, sizes, ETags — no times or
//! request ids) must be equal.

mod common;

use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Tag, Tagging};
use aws_sdk_s3::Client;
use common::*;

/// The answer to one request, reduced to what must not depend on the number of groups.
fn outcome<T, E>(
    r: Result<T, aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>>,
    ok: impl FnOnce(T) -> String,
) -> String
where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::fmt::Debug,
{
    match r {
        Ok(v) => format!("ok {}", ok(v)),
        Err(e) => {
            let status = e.raw_response().map(|r| r.status().as_u16()).unwrap_or(0);
            use aws_sdk_s3::error::ProvideErrorMetadata;
            format!("err {status} {}", e.code().unwrap_or("-"))
        }
    }
}

/// prefix, delimiter, start-after, max-keys.
type ListCase<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<i32>,
);

/// Runs the workload; returns one line per request.
async fn transcript(c: &Client) -> Vec<String> {
    let mut t = Vec::new();
    let b = "equiv";
    t.push(outcome(c.create_bucket().bucket(b).send().await, |_| {
        String::new()
    }));
    t.push(outcome(c.create_bucket().bucket(b).send().await, |_| {
        String::new()
    }));

    // Keys at several depths, sharing implicit parents; names that sort around '/'.
    let keys = [
        "a",
        "a-c",
        "a.d",
        "a/b",
        "a/b2/c",
        "a/b2/d",
        "a/b3/x/y/z",
        "b/c/d/e/f",
        "top.txt",
        "deep/1/2/3/4/5/6/7/8/leaf",
        "x/y",
        "x/z",
        "x+y/é",
        "train/img_0001.jpg",
        "train/img_0002.jpg",
        "val/img_0001.jpg",
    ];
    for (i, k) in keys.iter().enumerate() {
        let data = format!("{k}:{i}").repeat(i + 1);
        t.push(outcome(
            c.put_object()
                .bucket(b)
                .key(*k)
                .body(body(data.as_bytes()))
                .send()
                .await,
            |o| o.e_tag.unwrap_or_default(),
        ));
    }
    // Conflicts the tree cannot hold.
    t.push(outcome(
        c.put_object()
            .bucket(b)
            .key("a/b/c")
            .body(body(b"x"))
            .send()
            .await,
        |o| o.e_tag.unwrap_or_default(),
    ));
    t.push(outcome(
        c.put_object()
            .bucket(b)
            .key("x")
            .body(body(b"x"))
            .send()
            .await,
        |o| o.e_tag.unwrap_or_default(),
    ));
    // A directory marker, an overwrite, a copy, a large object in chunks.
    t.push(outcome(
        c.put_object()
            .bucket(b)
            .key("x/")
            .body(body(b"marker"))
            .send()
            .await,
        |o| o.e_tag.unwrap_or_default(),
    ));
    t.push(outcome(
        c.put_object()
            .bucket(b)
            .key("top.txt")
            .body(body(b"second"))
            .send()
            .await,
        |o| o.e_tag.unwrap_or_default(),
    ));
    t.push(outcome(
        c.copy_object()
            .bucket(b)
            .key("copies/top")
            .copy_source(format!("{b}/top.txt"))
            .send()
            .await,
        |o| {
            o.copy_object_result
                .and_then(|r| r.e_tag)
                .unwrap_or_default()
        },
    ));
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    t.push(outcome(
        c.put_object()
            .bucket(b)
            .key("big/blob")
            .body(body(&big))
            .send()
            .await,
        |o| o.e_tag.unwrap_or_default(),
    ));

    // Multipart: two parts, completed.
    let up = c
        .create_multipart_upload()
        .bucket(b)
        .key("mp/obj")
        .send()
        .await
        .unwrap();
    let id = up.upload_id.unwrap();
    let part1 = vec![7u8; 5 * 1024 * 1024];
    let mut parts = Vec::new();
    for (n, data) in [(1, part1.clone()), (2, b"tail".to_vec())] {
        let p = c
            .upload_part()
            .bucket(b)
            .key("mp/obj")
            .upload_id(&id)
            .part_number(n)
            .body(body(&data))
            .send()
            .await
            .unwrap();
        parts.push(
            CompletedPart::builder()
                .part_number(n)
                .e_tag(p.e_tag.unwrap())
                .build(),
        );
    }
    t.push(outcome(
        c.complete_multipart_upload()
            .bucket(b)
            .key("mp/obj")
            .upload_id(&id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await,
        |o| o.e_tag.unwrap_or_default(),
    ));

    // Tags.
    let tags = Tagging::builder()
        .tag_set(Tag::builder().key("k").value("v").build().unwrap())
        .build()
        .unwrap();
    t.push(outcome(
        c.put_object_tagging()
            .bucket(b)
            .key("a/b")
            .tagging(tags)
            .send()
            .await,
        |_| String::new(),
    ));
    t.push(outcome(
        c.get_object_tagging().bucket(b).key("a/b").send().await,
        |o| {
            format!(
                "{:?}",
                o.tag_set
                    .iter()
                    .map(|t| (t.key.clone(), t.value.clone()))
                    .collect::<Vec<_>>()
            )
        },
    ));

    // Reads: HEAD, GET, ranges, missing keys, a directory.
    for k in [
        "a/b2/c",
        "x/",
        "top.txt",
        "big/blob",
        "mp/obj",
        "copies/top",
        "nope",
        "a/b2",
        "x",
    ] {
        t.push(outcome(
            c.head_object().bucket(b).key(k).send().await,
            |o| format!("{:?} {:?}", o.content_length, o.e_tag),
        ));
    }
    t.push(outcome(
        c.get_object()
            .bucket(b)
            .key("big/blob")
            .range("bytes=1000-1999")
            .send()
            .await,
        |o| format!("{:?} {:?}", o.content_length, o.content_range),
    ));

    // Listings.
    let list =
        |prefix: Option<&str>, delim: Option<&str>, start: Option<&str>, max: Option<i32>| {
            let mut req = c.list_objects_v2().bucket(b);
            req = req.set_prefix(prefix.map(str::to_string));
            req = req.set_delimiter(delim.map(str::to_string));
            req = req.set_start_after(start.map(str::to_string));
            req = req.set_max_keys(max);
            req
        };
    let cases: [ListCase; 9] = [
        (None, None, None, None),
        (None, Some("/"), None, None),
        (Some("a"), Some("/"), None, None),
        (Some("a/"), None, None, None),
        (Some("a/b"), Some("/"), None, None),
        (None, None, Some("a/b2/c"), None),
        (Some("train/"), None, None, None),
        (None, Some("-"), None, None),
        (Some("/"), None, None, None),
    ];
    for (prefix, delim, start, max) in cases {
        t.push(outcome(list(prefix, delim, start, max).send().await, |o| {
            let keys: Vec<String> = o
                .contents()
                .iter()
                .map(|x| format!("{}:{:?}:{:?}", x.key().unwrap_or(""), x.size, x.e_tag))
                .collect();
            let prefixes: Vec<&str> = o
                .common_prefixes()
                .iter()
                .filter_map(|p| p.prefix())
                .collect();
            format!("{keys:?} {prefixes:?} {:?}", o.is_truncated)
        }));
    }
    // Pagination, 3 keys a page, all pages.
    let mut token = None;
    loop {
        let o = list(None, None, None, Some(3))
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap();
        let keys: Vec<&str> = o.contents().iter().filter_map(|x| x.key()).collect();
        t.push(format!("page {keys:?}"));
        if o.is_truncated != Some(true) {
            break;
        }
        token = o.next_continuation_token.clone();
    }

    // Deletes: a marker of a non-empty directory, files (reaping their implicit parents),
    // a missing key, then the non-empty and finally the empty bucket.
    t.push(outcome(
        c.delete_object().bucket(b).key("x/").send().await,
        |_| String::new(),
    ));
    t.push(outcome(
        c.head_object().bucket(b).key("x/").send().await,
        |o| format!("{:?}", o.e_tag),
    ));
    t.push(outcome(c.delete_bucket().bucket(b).send().await, |_| {
        String::new()
    }));
    for k in ["a/b3/x/y/z", "deep/1/2/3/4/5/6/7/8/leaf", "missing/key"] {
        t.push(outcome(
            c.delete_object().bucket(b).key(k).send().await,
            |_| String::new(),
        ));
    }
    t.push(outcome(
        list(None, Some("/"), None, None).send().await,
        |o| {
            let prefixes: Vec<&str> = o
                .common_prefixes()
                .iter()
                .filter_map(|p| p.prefix())
                .collect();
            format!("{prefixes:?}")
        },
    ));
    let all = list_all(c, b, None).await;
    for k in &all {
        c.delete_object().bucket(b).key(k).send().await.unwrap();
    }
    t.push(format!("deleted {}", all.len()));
    t.push(outcome(c.delete_bucket().bucket(b).send().await, |_| {
        String::new()
    }));
    t.push(outcome(c.head_bucket().bucket(b).send().await, |_| {
        String::new()
    }));
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_and_four_groups_answer_alike() {
    let one = Server::start(Opts::default().arg("--mnodes", "1"));
    let four = Server::start(Opts::default().arg("--mnodes", "4"));
    // Path-walk placement for a directory name and a file name of the workload: requests go
    // to any group and are forwarded to the owner.
    let walked = Server::start(
        Opts::default()
            .arg("--mnodes", "4")
            .arg("--pathwalk", "train,img_0001.jpg"),
    );
    let a = transcript(&one.client()).await;
    let b = transcript(&four.client()).await;
    let c = transcript(&walked.client()).await;
    assert_eq!(a, c, "4 groups with path-walk names answer as 1 group");
    assert!(a.len() > 60, "the workload ran: {} answers", a.len());
    assert!(
        a.iter().any(|l| l.starts_with("err 409")),
        "conflicts were exercised"
    );
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "answer {i} differs between 1 and 4 groups");
    }
    assert_eq!(a.len(), b.len());
}

/// Path-walk names are fixed when the namespace is created: a restart that asks for others is
/// refused with the reason.
#[test]
fn pathwalk_names_are_fixed_at_creation() {
    let mut srv = Server::start(Opts::default().arg("--pathwalk", "train"));
    srv.kill();
    let out = std::process::Command::new(saker_bin())
        .arg("server")
        .arg("--data-dir")
        .arg(srv.data_dir())
        .args(["--s3-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--rpc-addr", "127.0.0.1:0", "--pathwalk", "val"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("path-walk names are fixed"), "{err}");
}
