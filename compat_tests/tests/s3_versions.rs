//! Bucket versioning: versions kept on every write, read and deleted by version id, delete
//! markers, suspended buckets' `null` version, ListObjectVersions across pages and groups,
//! and noncurrent versions' chunks kept through GC and scrub.

mod common;

use std::time::Duration;

use aws_sdk_s3::types::BucketVersioningStatus;
use common::versions::{all_versions, get_v, put_v};
use common::*;

#[tokio::test]
async fn versions_are_kept_read_listed_and_deleted_by_id() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "versions").await;
    let got = c.get_bucket_versioning().bucket(&b).send().await.unwrap();
    assert_eq!(got.status(), None);
    assert_eq!(
        put_v(&c, &b, "k", b"one").await,
        None,
        "no version ids before"
    );

    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let got = c.get_bucket_versioning().bucket(&b).send().await.unwrap();
    assert_eq!(got.status(), Some(&BucketVersioningStatus::Enabled));
    let v2 = put_v(&c, &b, "k", b"two").await.expect("a version id");
    let v3 = put_v(&c, &b, "k", b"three").await.expect("a version id");
    assert!(v2 != v3 && v2 != "null");
    let head = c.head_object().bucket(&b).key("k").send().await.unwrap();
    assert_eq!(head.version_id(), Some(v3.as_str()));
    assert_eq!(get_bytes(&c, &b, "k").await, b"three");
    assert_eq!(get_v(&c, &b, "k", &v2).await, b"two");
    assert_eq!(get_v(&c, &b, "k", "null").await, b"one");
    let bad = c
        .get_object()
        .bucket(&b)
        .key("k")
        .version_id("00000000000000ff")
        .send()
        .await;
    assert_fails(bad, 404, "NoSuchVersion");

    let want = |v: &[(&str, bool, bool)]| -> Vec<(String, String, bool, bool)> {
        v.iter()
            .map(|(id, l, m)| ("k".to_string(), id.to_string(), *l, *m))
            .collect()
    };
    assert_eq!(
        all_versions(&c, &b, 1000).await,
        want(&[
            (&v3, true, false),
            (&v2, false, false),
            ("null", false, false)
        ])
    );

    // A delete writes a marker; the object is gone, its versions are not.
    let d = c.delete_object().bucket(&b).key("k").send().await.unwrap();
    assert_eq!(d.delete_marker(), Some(true));
    let marker = d.version_id().expect("the marker's version id").to_string();
    assert_fails(
        c.get_object().bucket(&b).key("k").send().await,
        404,
        "NoSuchKey",
    );
    let by_id = c
        .head_object()
        .bucket(&b)
        .key("k")
        .version_id(&marker)
        .send()
        .await;
    assert_status(by_id, 405);
    assert_eq!(
        all_versions(&c, &b, 2).await,
        want(&[
            (&marker, true, true),
            (&v3, false, false),
            (&v2, false, false),
            ("null", false, false)
        ])
    );
    let listed = c.list_objects_v2().bucket(&b).send().await.unwrap();
    assert_eq!(listed.key_count(), Some(0), "a deleted key is not listed");
    assert_fails(
        c.delete_bucket().bucket(&b).send().await,
        409,
        "BucketNotEmpty",
    );

    // Deleting the marker brings the newest version back; deleting that, the next one.
    let d = c
        .delete_object()
        .bucket(&b)
        .key("k")
        .version_id(&marker)
        .send()
        .await
        .unwrap();
    assert_eq!(
        (d.delete_marker(), d.version_id()),
        (Some(true), Some(marker.as_str()))
    );
    assert_eq!(get_bytes(&c, &b, "k").await, b"three");
    c.delete_object()
        .bucket(&b)
        .key("k")
        .version_id(&v3)
        .send()
        .await
        .unwrap();
    assert_eq!(get_bytes(&c, &b, "k").await, b"two");
    let head = c.head_object().bucket(&b).key("k").send().await.unwrap();
    assert_eq!(head.version_id(), Some(v2.as_str()));
    for v in [v2.as_str(), "null"] {
        c.delete_object()
            .bucket(&b)
            .key("k")
            .version_id(v)
            .send()
            .await
            .unwrap();
    }
    assert_eq!(all_versions(&c, &b, 1000).await, vec![]);
    c.delete_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("an empty bucket goes");
}

#[tokio::test]
async fn a_suspended_bucket_replaces_its_null_version() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "suspended").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let v1 = put_v(&c, &b, "k", b"one").await.unwrap();
    set_versioning(&c, &b, BucketVersioningStatus::Suspended).await;
    // The null version is not named in a write's answer.
    assert_eq!(put_v(&c, &b, "k", b"two").await, None);
    assert_eq!(put_v(&c, &b, "k", b"three").await, None);
    assert_eq!(get_bytes(&c, &b, "k").await, b"three");
    assert_eq!(get_v(&c, &b, "k", &v1).await, b"one");
    let versions = all_versions(&c, &b, 1000).await;
    let ids: Vec<&str> = versions.iter().map(|v| v.1.as_str()).collect();
    assert_eq!(
        ids,
        ["null", v1.as_str()],
        "one null version, replaced in place"
    );
    // A delete writes the null delete marker in the null version's place.
    let d = c.delete_object().bucket(&b).key("k").send().await.unwrap();
    assert_eq!(
        (d.delete_marker(), d.version_id()),
        (Some(true), Some("null"))
    );
    let versions = all_versions(&c, &b, 1000).await;
    assert_eq!(versions.len(), 2);
    assert_eq!((versions[0].1.as_str(), versions[0].3), ("null", true));
    assert_eq!(get_v(&c, &b, "k", &v1).await, b"one");
}

#[tokio::test]
async fn version_listings_page_across_groups_in_s3_order() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "vlist").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let mut want = Vec::new();
    for i in 0..12 {
        let key = format!("d{}/k{i:02}", i % 3);
        let mut ids = Vec::new();
        for n in 0..3 {
            ids.push(
                put_v(&c, &b, &key, format!("{key}-{n}").as_bytes())
                    .await
                    .unwrap(),
            );
        }
        if i % 4 == 0 {
            let d = c.delete_object().bucket(&b).key(&key).send().await.unwrap();
            ids.push(d.version_id().unwrap().to_string());
        }
        let n = ids.len();
        for (j, id) in ids.into_iter().rev().enumerate() {
            let marker = i % 4 == 0 && j == 0;
            want.push((key.clone(), id, j == 0, marker));
            let _ = n;
        }
    }
    want.sort_by(|a, b| a.0.cmp(&b.0));
    // Versions of one key keep their newest-first order through the stable sort.
    for page in [1000, 7, 1] {
        assert_eq!(all_versions(&c, &b, page).await, want, "pages of {page}");
    }
    // A delimiter rolls keys up into common prefixes.
    let r = c
        .list_object_versions()
        .bucket(&b)
        .delimiter("/")
        .send()
        .await
        .unwrap();
    let cps: Vec<&str> = r
        .common_prefixes()
        .iter()
        .filter_map(|p| p.prefix())
        .collect();
    assert_eq!(cps, ["d0/", "d1/", "d2/"]);
    assert!(r.versions().is_empty());
}

#[tokio::test]
async fn noncurrent_versions_keep_their_chunks_through_gc_and_scrub() {
    let srv = Server::start(Opts::fast_gc());
    let c = srv.client();
    let b = new_bucket(&c, "vchunks").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let one = random_bytes(100 * 1024);
    let two = random_bytes(100 * 1024);
    let v1 = put_v(&c, &b, "k", &one).await.unwrap();
    put_v(&c, &b, "k", &two).await.unwrap();
    let written = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert_eq!(srv.stored_chunks(), 2);
    // A leak scrub that checked chunks written after both versions' finds both referenced.
    let scrubbed = poll_until(Duration::from_secs(30), || {
        let admin = srv.admin.clone();
        async move {
            let text = metrics_text(&admin).await;
            text.lines()
                .find(|l| l.starts_with("saker_gc_scrub_cutoff_seconds "))
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .is_some_and(|cutoff| cutoff > written)
        }
    })
    .await;
    assert!(scrubbed, "no leak scrub covered the versions' chunks");
    assert_eq!(
        srv.stored_chunks(),
        2,
        "a noncurrent version's chunk was collected"
    );
    assert!(get_v(&c, &b, "k", &v1).await == one);
    // Deleting the version releases its chunk.
    c.delete_object()
        .bucket(&b)
        .key("k")
        .version_id(&v1)
        .send()
        .await
        .unwrap();
    let ok = poll_until(Duration::from_secs(15), || async {
        srv.stored_chunks() == 1
    })
    .await;
    assert!(ok, "{} chunks stored, want 1", srv.stored_chunks());
    assert!(get_bytes(&c, &b, "k").await == two);
}

#[tokio::test]
async fn a_key_whose_latest_version_is_a_marker_answers_404_saying_so() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "vmarker").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    put_v(&c, &b, "k", b"one").await.unwrap();
    let marker = c.delete_object().bucket(&b).key("k").send().await.unwrap();
    let marker = marker.version_id().unwrap().to_string();
    let r = reqwest::Client::new()
        .head(format!("{}/{b}/k", srv.endpoint))
        .send()
        .await
        .unwrap();
    // Unsigned: refused; the root key's HEAD below is what S3 answers with the headers.
    assert_eq!(r.status(), 403);
    let e = c
        .head_object()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .unwrap_err();
    let raw = e.raw_response().expect("an HTTP answer");
    assert_eq!(raw.status().as_u16(), 404);
    assert_eq!(raw.headers().get("x-amz-delete-marker"), Some("true"));
    assert_eq!(raw.headers().get("x-amz-version-id"), Some(marker.as_str()));
    // A key with no versions at all is a plain 404 that says so (as RGW does).
    let e = c
        .head_object()
        .bucket(&b)
        .key("never")
        .send()
        .await
        .unwrap_err();
    let raw = e.raw_response().expect("an HTTP answer");
    assert_eq!(raw.status().as_u16(), 404);
    assert_eq!(raw.headers().get("x-amz-delete-marker"), Some("false"));
    assert_eq!(raw.headers().get("x-amz-version-id"), None);
}

/// What a bucket-emptying tool does (list every version, delete each by its id) empties a
/// bucket, directory markers (whose one version is `null`) included.
#[tokio::test]
async fn deleting_every_listed_version_empties_the_bucket() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "vempty").await;
    put(&c, &b, "plain", b"p").await;
    put(&c, &b, "dir/", b"").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    put_v(&c, &b, "dir/k", b"1").await;
    put_v(&c, &b, "dir/k", b"2").await;
    c.delete_object()
        .bucket(&b)
        .key("plain")
        .send()
        .await
        .unwrap();
    let listed = all_versions(&c, &b, 1000).await;
    assert_eq!(listed.len(), 5, "{listed:?}");
    for (key, vid, _, _) in &listed {
        c.delete_object()
            .bucket(&b)
            .key(key)
            .version_id(vid)
            .send()
            .await
            .unwrap_or_else(|e| panic!("delete {key}?versionId={vid}: {e:?}"));
    }
    assert_eq!(all_versions(&c, &b, 1000).await, vec![]);
    c.delete_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("the bucket is empty");
}

/// GetObjectAttributes reads a version by its id and names the version it read.
#[tokio::test]
async fn object_attributes_of_a_version() {
    use aws_sdk_s3::types::ObjectAttributes;
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "attrv").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let v1 = put_v(&c, &b, "k", b"first").await.unwrap();
    let v2 = put_v(&c, &b, "k", b"second!").await.unwrap();
    for (vid, size, asked) in [(&v1, 5, Some(&v1)), (&v2, 7, None)] {
        let r = c
            .get_object_attributes()
            .bucket(&b)
            .key("k")
            .set_version_id(asked.cloned())
            .object_attributes(ObjectAttributes::ObjectSize)
            .send()
            .await
            .unwrap();
        assert_eq!(r.object_size(), Some(size));
        assert_eq!(r.version_id(), Some(vid.as_str()));
    }
}

/// Tags and ACLs are each version's own: set, read and removed by version id, without
/// touching the current object's.
#[tokio::test]
async fn tags_and_acls_belong_to_each_version() {
    use aws_sdk_s3::types::{ObjectCannedAcl, Tag, Tagging};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "vertags").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let old = put_v(&c, &b, "k", b"old").await.unwrap();
    let new = put_v(&c, &b, "k", b"new").await.unwrap();
    let tagging = |v: &str| {
        Tagging::builder()
            .tag_set(Tag::builder().key("v").value(v).build().unwrap())
            .build()
            .unwrap()
    };
    let tags_of = |v: Option<&str>| {
        let req = c
            .get_object_tagging()
            .bucket(&b)
            .key("k")
            .set_version_id(v.map(str::to_string));
        async move {
            let got = req.send().await.unwrap();
            got.tag_set()
                .iter()
                .map(|t| format!("{}={}", t.key(), t.value()))
                .collect::<Vec<_>>()
        }
    };
    c.put_object_tagging()
        .bucket(&b)
        .key("k")
        .version_id(&old)
        .tagging(tagging("old"))
        .send()
        .await
        .unwrap();
    c.put_object_tagging()
        .bucket(&b)
        .key("k")
        .tagging(tagging("current"))
        .send()
        .await
        .unwrap();
    assert_eq!(tags_of(Some(&old)).await, ["v=old"]);
    assert_eq!(tags_of(Some(&new)).await, ["v=current"]);
    assert_eq!(tags_of(None).await, ["v=current"]);
    c.delete_object_tagging()
        .bucket(&b)
        .key("k")
        .version_id(&old)
        .send()
        .await
        .unwrap();
    assert!(tags_of(Some(&old)).await.is_empty());
    assert_eq!(tags_of(None).await, ["v=current"]);
    let missing = c
        .get_object_tagging()
        .bucket(&b)
        .key("k")
        .version_id("00000000000000ff")
        .send()
        .await;
    assert_fails(missing, 404, "NoSuchVersion");

    // An ACL by version id.
    c.put_object_acl()
        .bucket(&b)
        .key("k")
        .version_id(&old)
        .acl(ObjectCannedAcl::PublicRead)
        .send()
        .await
        .unwrap();
    let public = |v: &str| {
        let req = c.get_object_acl().bucket(&b).key("k").version_id(v);
        async move {
            req.send().await.unwrap().grants().iter().any(|g| {
                g.grantee()
                    .and_then(|w| w.uri())
                    .is_some_and(|u| u.ends_with("AllUsers"))
            })
        }
    };
    assert!(public(&old).await);
    assert!(!public(&new).await);
    // And it is that version's ACL that grants a read of it.
    let anonymous = |query: String| {
        let url = format!("{}/{b}/k{query}", srv.endpoint);
        async move { reqwest::get(url).await.unwrap().status().as_u16() }
    };
    assert_eq!(anonymous(format!("?versionId={old}")).await, 200);
    assert_eq!(anonymous(format!("?versionId={new}")).await, 403);
    assert_eq!(anonymous(String::new()).await, 403);
}

/// A request naming a version is checked as S3 checks it: the action's version form
/// (`s3:GetObjectVersion`), that version's tags for `s3:ExistingObjectTag`, and for a copy,
/// `s3:GetObjectVersion` on the source version.
#[tokio::test]
async fn a_request_for_a_version_needs_the_version_actions() {
    use aws_sdk_s3::types::{Tag, Tagging};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "veract").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let old = put_v(&c, &b, "k", b"old").await.unwrap();
    let new = put_v(&c, &b, "k", b"new").await.unwrap();
    for (v, tag) in [(&old, "old"), (&new, "current")] {
        let tags = Tagging::builder()
            .tag_set(Tag::builder().key("v").value(tag).build().unwrap())
            .build()
            .unwrap();
        let req = c.put_object_tagging().bucket(&b).key("k").version_id(v);
        req.tagging(tags).send().await.unwrap();
    }
    let allow = |actions: &str, condition: &str| {
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*",
              "Action":{actions},"Resource":"arn:aws:s3:::{b}/*"{condition}}}]}}"#
        );
        c.put_bucket_policy().bucket(&b).policy(policy).send()
    };
    let http = reqwest::Client::new();
    let get = |version: Option<&str>| {
        let query = version
            .map(|v| format!("?versionId={v}"))
            .unwrap_or_default();
        let req = http.get(format!("{}/{b}/k{query}", srv.endpoint));
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let copy = |version: &str| {
        let req = http
            .put(format!("{}/{b}/copied", srv.endpoint))
            .header("x-amz-copy-source", format!("/{b}/k?versionId={version}"));
        async move { req.send().await.unwrap().status().as_u16() }
    };

    // s3:GetObject alone reads the current object, not a version by its id.
    allow(r#""s3:GetObject""#, "").await.unwrap();
    assert_eq!(get(None).await, 200);
    assert_eq!(get(Some(&old)).await, 403);
    // s3:GetObjectVersion alone reads versions by id only.
    allow(r#""s3:GetObjectVersion""#, "").await.unwrap();
    assert_eq!(get(None).await, 403);
    assert_eq!(get(Some(&old)).await, 200);
    // s3:ExistingObjectTag is the tag of the version asked for.
    let tagged_old = r#","Condition":{"StringEquals":{"s3:ExistingObjectTag/v":"old"}}"#;
    allow(r#""s3:GetObjectVersion""#, tagged_old).await.unwrap();
    assert_eq!(get(Some(&old)).await, 200);
    assert_eq!(get(Some(&new)).await, 403);
    // A copy of a version reads it: s3:GetObjectVersion on the source.
    allow(r#"["s3:GetObject","s3:PutObject"]"#, "")
        .await
        .unwrap();
    assert_eq!(copy(&old).await, 403);
    allow(r#"["s3:GetObjectVersion","s3:PutObject"]"#, "")
        .await
        .unwrap();
    assert_eq!(copy(&old).await, 200);
    assert_eq!(get_bytes(&c, &b, "copied").await, b"old");
}
