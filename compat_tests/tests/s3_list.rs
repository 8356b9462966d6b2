//! ListObjects V1 and V2: order, prefix, delimiter, pagination, encoding, owner.

mod common;

use aws_sdk_s3::types::EncodingType;
use aws_sdk_s3::Client;
use common::*;

async fn fill(c: &Client, b: &str, keys: &[&str]) {
    for k in keys {
        put(c, b, k, k.as_bytes()).await;
    }
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
    v.sort(); // byte order of UTF-8 strings
    v
}

#[tokio::test]
async fn full_key_byte_order() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "order").await;
    // A directory `a` sorts as the string `a/`: `a-c` < `a.d` < `a/b` < `a0`.
    let keys = ["b", "a0", "a/c/d", "a/b", "a.d", "a-c", "a/b0", "a/b.x"];
    fill(&c, &b, &keys).await;
    let got = list_all(&c, &b, None).await;
    assert_eq!(
        got,
        vec!["a-c", "a.d", "a/b", "a/b.x", "a/b0", "a/c/d", "a0", "b"]
    );
    assert_eq!(got, sorted(&keys));

    // V1 agrees.
    let out = c.list_objects().bucket(&b).send().await.expect("list v1");
    let v1: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    assert_eq!(v1, got);

    // Delimiter listing: the directory `a` is the prefix `a/`, between `a.d` and `a0`.
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .delimiter("/")
        .send()
        .await
        .expect("list");
    let files: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    let dirs: Vec<_> = out
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix.clone())
        .collect();
    assert_eq!(files, vec!["a-c", "a.d", "a0", "b"]);
    assert_eq!(dirs, vec!["a/"]);
    assert_eq!(out.key_count, Some(5));
}

#[tokio::test]
async fn objects_carry_etag_size_and_class() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "attrs").await;
    let data = random_bytes(70 * 1024);
    put(&c, &b, "x/y", &data).await;
    let out = c.list_objects_v2().bucket(&b).send().await.expect("list");
    let o = &out.contents()[0];
    assert_eq!(o.key(), Some("x/y"));
    assert_eq!(o.size(), Some(data.len() as i64));
    assert_eq!(o.e_tag(), Some(quoted_md5(&data).as_str()));
    assert!(o.last_modified().is_some());
    assert!(o.storage_class().is_some());
    assert_eq!(out.name(), Some(b.as_str()));
    assert_eq!(out.is_truncated(), Some(false));
}

#[tokio::test]
async fn prefix_and_delimiter() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "prefix").await;
    fill(
        &c,
        &b,
        &[
            "photos/2024/jan/1.jpg",
            "photos/2024/feb/2.jpg",
            "photos/2025/mar/3.jpg",
            "photos/index.html",
            "photoshop.exe",
            "videos/v.mp4",
        ],
    )
    .await;
    let list = |prefix: &'static str, delim: Option<&'static str>| {
        let c = c.clone();
        let b = b.clone();
        async move {
            let out = c
                .list_objects_v2()
                .bucket(&b)
                .prefix(prefix)
                .set_delimiter(delim.map(str::to_string))
                .send()
                .await
                .expect("list");
            let files: Vec<String> = out
                .contents()
                .iter()
                .filter_map(|o| o.key.clone())
                .collect();
            let dirs: Vec<String> = out
                .common_prefixes()
                .iter()
                .filter_map(|p| p.prefix.clone())
                .collect();
            (files, dirs)
        }
    };
    assert_eq!(
        list("photos/", Some("/")).await,
        (
            vec!["photos/index.html".to_string()],
            vec!["photos/2024/".to_string(), "photos/2025/".to_string()]
        )
    );
    assert_eq!(
        list("photos", Some("/")).await,
        (
            vec!["photoshop.exe".to_string()],
            vec!["photos/".to_string()]
        )
    );
    assert_eq!(
        list("photos/2024/", None).await.0,
        vec!["photos/2024/feb/2.jpg", "photos/2024/jan/1.jpg"]
    );
    assert_eq!(
        list("photos/20", Some("/")).await,
        (
            vec![],
            vec!["photos/2024/".to_string(), "photos/2025/".to_string()]
        )
    );
    assert_eq!(list("nothing", Some("/")).await, (vec![], vec![]));
    // A delimiter other than '/' rolls up mid-name.
    assert_eq!(
        list("photos/", Some("j")).await,
        (
            vec!["photos/index.html".to_string()],
            vec![
                "photos/2024/feb/2.j".to_string(),
                "photos/2024/j".to_string(),
                "photos/2025/mar/3.j".to_string()
            ]
        )
    );
}

#[tokio::test]
async fn v2_pagination_with_continuation_tokens() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "pages").await;
    let keys: Vec<String> = (0..10)
        .map(|i| {
            if i % 3 == 0 {
                format!("dir{}/k{i:02}", i % 2)
            } else {
                format!("k{i:02}")
            }
        })
        .collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    fill(&c, &b, &refs).await;
    let want = sorted(&refs);

    let mut got = Vec::new();
    let mut token = None;
    let mut pages = 0;
    loop {
        let out = c
            .list_objects_v2()
            .bucket(&b)
            .max_keys(3)
            .set_continuation_token(token.clone())
            .send()
            .await
            .expect("page");
        pages += 1;
        assert_eq!(out.max_keys, Some(3));
        assert_eq!(out.continuation_token, token, "the token is echoed");
        let n = out.contents().len();
        assert_eq!(out.key_count, Some(n as i32));
        got.extend(out.contents().iter().filter_map(|o| o.key.clone()));
        if out.is_truncated == Some(true) {
            assert_eq!(n, 3, "a truncated page is full");
            token = out.next_continuation_token.clone();
            assert!(token.is_some());
        } else {
            assert!(out.next_continuation_token.is_none());
            break;
        }
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(got, want);
    assert_eq!(pages, 4);

    // start-after skips up to and including the given key (it need not exist).
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .start_after("k05")
        .send()
        .await
        .expect("start-after");
    let after: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    let want_after: Vec<_> = want
        .iter()
        .filter(|k| k.as_str() > "k05")
        .cloned()
        .collect();
    assert_eq!(after, want_after);
    assert_eq!(out.start_after(), Some("k05"));
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .start_after("k045")
        .send()
        .await
        .expect("start-after a key that does not exist");
    let after: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    assert_eq!(after.first().map(String::as_str), Some("k05"));

    // Delimiter pagination: common prefixes count towards max-keys.
    let mut items = Vec::new();
    let mut token = None;
    loop {
        let out = c
            .list_objects_v2()
            .bucket(&b)
            .delimiter("/")
            .max_keys(2)
            .set_continuation_token(token.clone())
            .send()
            .await
            .expect("page");
        let n = out.contents().len() + out.common_prefixes().len();
        assert!(n <= 2);
        items.extend(
            out.common_prefixes()
                .iter()
                .filter_map(|p| p.prefix.clone()),
        );
        items.extend(out.contents().iter().filter_map(|o| o.key.clone()));
        if out.is_truncated != Some(true) {
            break;
        }
        token = out.next_continuation_token.clone();
    }
    items.sort();
    let mut want_items: Vec<String> = want.iter().filter(|k| !k.contains('/')).cloned().collect();
    want_items.extend(["dir0/".to_string(), "dir1/".to_string()]);
    want_items.sort();
    assert_eq!(items, want_items, "every prefix exactly once");
}

#[tokio::test]
async fn v1_pagination_with_markers() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "markers").await;
    let keys = ["a", "b/1", "b/2", "c", "d/x/y", "e", "f"];
    fill(&c, &b, &keys).await;

    // Without a delimiter there is no NextMarker: the last key is the next marker.
    let mut got = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let out = c
            .list_objects()
            .bucket(&b)
            .max_keys(2)
            .set_marker(marker.clone())
            .send()
            .await
            .expect("page");
        let page: Vec<_> = out
            .contents()
            .iter()
            .filter_map(|o| o.key.clone())
            .collect();
        got.extend(page.iter().cloned());
        if out.is_truncated != Some(true) {
            break;
        }
        marker = out.next_marker.clone().or_else(|| page.last().cloned());
    }
    assert_eq!(got, sorted(&keys));

    // With a delimiter, NextMarker is returned and may be a common prefix.
    let out = c
        .list_objects()
        .bucket(&b)
        .delimiter("/")
        .max_keys(2)
        .send()
        .await
        .expect("page 1");
    assert_eq!(out.is_truncated, Some(true));
    assert_eq!(out.next_marker(), Some("b/"));
    let out = c
        .list_objects()
        .bucket(&b)
        .delimiter("/")
        .max_keys(3)
        .marker("b/")
        .send()
        .await
        .expect("page 2");
    let files: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    let dirs: Vec<_> = out
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix.clone())
        .collect();
    assert_eq!(files, vec!["c", "e"]);
    assert_eq!(dirs, vec!["d/"]);
    assert_eq!(out.marker(), Some("b/"));
}

/// `unquote_plus`: what a client does with an `encoding-type=url` value.
fn url_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).expect("ascii");
                out.push(u8::from_str_radix(h, 16).expect("hex escape"));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).expect("utf-8")
}

#[tokio::test]
async fn encoding_type_url() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "encoding").await;
    let key = "dir with space/über+naïve ☃.txt";
    put(&c, &b, key, b"x").await;
    put(&c, &b, "plain/key", b"y").await;

    let out = c
        .list_objects_v2()
        .bucket(&b)
        .encoding_type(EncodingType::Url)
        .send()
        .await
        .expect("list v2 url");
    assert_eq!(out.encoding_type(), Some(&EncodingType::Url));
    let raw: Vec<_> = out
        .contents()
        .iter()
        .filter_map(|o| o.key.clone())
        .collect();
    assert_eq!(raw.len(), 2);
    assert!(
        raw[0].is_ascii() && !raw[0].contains(' '),
        "the key is URL-encoded: {:?}",
        raw[0]
    );
    assert!(!raw[0].contains("+naïve"), "'+' is escaped: {:?}", raw[0]);
    assert_eq!(url_decode(&raw[0]), key);
    assert_eq!(raw[1], "plain/key");

    // Delimiter listing: prefixes are encoded too.
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .delimiter("/")
        .encoding_type(EncodingType::Url)
        .send()
        .await
        .expect("list v2 url with delimiter");
    let dirs: Vec<_> = out
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix.clone())
        .map(|p| url_decode(&p))
        .collect();
    assert_eq!(dirs, vec!["dir with space/", "plain/"]);
    assert!(out
        .common_prefixes()
        .iter()
        .all(|p| !p.prefix().unwrap_or_default().contains(' ')));

    // V1 as well; and the plain listing returns the key unchanged.
    let out = c
        .list_objects()
        .bucket(&b)
        .encoding_type(EncodingType::Url)
        .send()
        .await
        .expect("list v1 url");
    let raw1 = out.contents()[0].key().expect("key");
    assert!(raw1.is_ascii() && !raw1.contains(' '));
    assert_eq!(url_decode(raw1), key);
    assert_eq!(list_all(&c, &b, None).await, vec![key, "plain/key"]);

    // Unicode keys page correctly: the continuation token is the raw key.
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .max_keys(1)
        .send()
        .await
        .expect("page 1");
    assert_eq!(out.contents()[0].key(), Some(key));
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .max_keys(1)
        .set_continuation_token(out.next_continuation_token)
        .send()
        .await
        .expect("page 2");
    assert_eq!(out.contents()[0].key(), Some("plain/key"));
}

#[tokio::test]
async fn fetch_owner() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "owner").await;
    put(&c, &b, "k", b"x").await;
    let out = c.list_objects_v2().bucket(&b).send().await.expect("list");
    assert!(
        out.contents()[0].owner().is_none(),
        "V2 omits the owner by default"
    );
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .fetch_owner(true)
        .send()
        .await
        .expect("list fetch-owner");
    let owner = out.contents()[0]
        .owner()
        .expect("fetch-owner=true returns the owner");
    assert!(owner.id().is_some_and(|s| !s.is_empty()));
    // V1 always returns it.
    let out = c.list_objects().bucket(&b).send().await.expect("list v1");
    assert!(out.contents()[0].owner().is_some());
}

#[tokio::test]
async fn max_keys_zero_and_empty_bucket() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "empty").await;
    let out = c.list_objects_v2().bucket(&b).send().await.expect("list");
    assert!(out.contents().is_empty());
    assert_eq!(out.key_count, Some(0));
    assert_eq!(out.is_truncated, Some(false));
    put(&c, &b, "k", b"x").await;
    let out = c
        .list_objects_v2()
        .bucket(&b)
        .max_keys(0)
        .send()
        .await
        .expect("max-keys 0");
    assert!(out.contents().is_empty());
    assert_eq!(out.key_count, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_than_a_thousand_keys() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "many").await;
    let keys: Vec<String> = (0..1100)
        .map(|i| format!("d{}/s{}/k{i:04}", i % 7, i % 3))
        .collect();
    let mut set = tokio::task::JoinSet::new();
    for chunk in keys.chunks(138) {
        let (c, b, chunk) = (c.clone(), b.clone(), chunk.to_vec());
        set.spawn(async move {
            for k in chunk {
                put(&c, &b, &k, b"").await;
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("writer");
    }
    let first = c.list_objects_v2().bucket(&b).send().await.expect("page 1");
    assert_eq!(
        first.contents().len(),
        1000,
        "the default page is 1000 keys"
    );
    assert_eq!(first.is_truncated, Some(true));
    let v1 = c.list_objects().bucket(&b).send().await.expect("v1 page 1");
    assert_eq!(v1.contents().len(), 1000);
    assert_eq!(v1.is_truncated, Some(true));
    let mut want = keys.clone();
    want.sort();
    assert_eq!(list_all(&c, &b, None).await, want);
    assert_eq!(
        list_all(&c, &b, Some("d3/s1/")).await,
        want.iter()
            .filter(|k| k.starts_with("d3/s1/"))
            .cloned()
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn pages_stay_correct_while_entries_come_and_go() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "moving").await;
    fill(&c, &b, &["a/x/1", "a/x/2", "a/y", "b/1", "c"]).await;
    let p1 = c
        .list_objects_v2()
        .bucket(&b)
        .max_keys(2)
        .send()
        .await
        .expect("page 1");
    let keys: Vec<_> = p1.contents().iter().filter_map(|o| o.key.clone()).collect();
    assert_eq!(keys, vec!["a/x/1", "a/x/2"]);
    // The directory holding the token disappears; keys appear before and after the token.
    for k in ["a/x/1", "a/x/2", "a/y"] {
        c.delete_object()
            .bucket(&b)
            .key(k)
            .send()
            .await
            .expect("delete");
    }
    fill(&c, &b, &["a/a", "a/z"]).await;
    let p2 = c
        .list_objects_v2()
        .bucket(&b)
        .set_continuation_token(p1.next_continuation_token)
        .send()
        .await
        .expect("page 2");
    let keys: Vec<_> = p2.contents().iter().filter_map(|o| o.key.clone()).collect();
    assert_eq!(keys, vec!["a/z", "b/1", "c"]);

    // A common prefix as the token: the next page starts after everything under it.
    let p = c
        .list_objects_v2()
        .bucket(&b)
        .delimiter("/")
        .max_keys(1)
        .send()
        .await
        .expect("page 1");
    assert_eq!(
        p.common_prefixes()
            .iter()
            .filter_map(|p| p.prefix.clone())
            .collect::<Vec<_>>(),
        vec!["a/"]
    );
    let p = c
        .list_objects_v2()
        .bucket(&b)
        .delimiter("/")
        .set_continuation_token(p.next_continuation_token)
        .send()
        .await
        .expect("page 2");
    let keys: Vec<_> = p.contents().iter().filter_map(|o| o.key.clone()).collect();
    let dirs: Vec<_> = p
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix.clone())
        .collect();
    assert_eq!(
        (keys, dirs),
        (vec!["c".to_string()], vec!["b/".to_string()])
    );
}
