//! S3 authorization end to end: per-key policies (`saker admin key … --policy`), bucket
//! policies (Principal "*" for anonymous reads, explicit Deny over Allow, conditions), the
//! policy status, the public access block and Object Ownership, with aws-sdk-s3 and unsigned
//! HTTP requests against a real server.

mod common;

use common::*;

fn create_key(srv: &Server, ak: &str, sk: &str, policy: &[&str]) {
    let mut args = vec!["key", "create", "--access-key", ak, "--secret-key", sk];
    args.extend_from_slice(policy);
    ok_stdout(srv.admin_cmd(&args), "key create");
}

/// An unsigned request's status and body.
async fn anonymous(method: reqwest::Method, url: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .request(method, url)
        .send()
        .await
        .expect("the server answers");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_readonly_key_reads_and_lists_but_writes_nothing() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "ro").await;
    let other = new_bucket(&root, "other").await;
    put(&root, &b, "a/one", b"1").await;
    put(&root, &other, "x", b"x").await;
    create_key(
        &srv,
        "AKREADER",
        "reader-secret-1",
        &["--policy", "readonly", "--bucket", &b],
    );
    let line = key_list_line(&srv, "AKREADER");
    assert!(line.contains("policy=readonly"), "{line}");
    let reader = srv.client_with("AKREADER", "reader-secret-1");

    assert_eq!(get_bytes(&reader, &b, "a/one").await, b"1");
    assert_eq!(list_all(&reader, &b, None).await, vec!["a/one".to_string()]);
    reader
        .head_object()
        .bucket(&b)
        .key("a/one")
        .send()
        .await
        .expect("HEAD is a read");
    assert_fails(
        reader
            .put_object()
            .bucket(&b)
            .key("a/two")
            .body(body(b"2"))
            .send()
            .await,
        403,
        "AccessDenied",
    );
    assert_fails(
        reader.delete_object().bucket(&b).key("a/one").send().await,
        403,
        "AccessDenied",
    );
    // Scoped to its bucket: the other bucket is not readable.
    assert_fails(
        reader.get_object().bucket(&other).key("x").send().await,
        403,
        "AccessDenied",
    );
    assert_fails(
        reader.create_bucket().bucket("ro-new").send().await,
        403,
        "AccessDenied",
    );
    // Nothing the refused requests asked for happened.
    assert_eq!(list_all(&root, &b, None).await, vec!["a/one".to_string()]);

    // The policy is replaced: read-write in the bucket.
    ok_stdout(
        srv.admin_cmd(&[
            "key",
            "policy",
            "set",
            "--access-key",
            "AKREADER",
            "readwrite",
            "--bucket",
            &b,
        ]),
        "key policy set",
    );
    put(&reader, &b, "a/two", b"2").await;
    // Admin: everything, in every bucket.
    ok_stdout(
        srv.admin_cmd(&["key", "policy", "set", "--access-key", "AKREADER", "admin"]),
        "key policy set admin",
    );
    assert_eq!(get_bytes(&reader, &other, "x").await, b"x");
    // And removed: a key without a policy may do nothing.
    ok_stdout(
        srv.admin_cmd(&["key", "policy", "remove", "--access-key", "AKREADER"]),
        "key policy remove",
    );
    assert_fails(
        reader.get_object().bucket(&other).key("x").send().await,
        403,
        "AccessDenied",
    );
    assert_fails(
        reader.get_object().bucket(&b).key("a/one").send().await,
        403,
        "AccessDenied",
    );
    // The root key takes no policy.
    let out = srv.admin_cmd(&["key", "policy", "set", "--access-key", ROOT_AK, "readonly"]);
    assert!(!out.status.success(), "the root key cannot be limited");
}

/// Deny by default: a key made without a policy may do nothing with the root key's buckets
/// but what a bucket policy grants it by name; `admin` may do everything; removing a policy
/// takes the access away again.
#[tokio::test]
async fn a_key_without_a_policy_may_do_nothing() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "private").await;
    put(&root, &b, "k", b"root's").await;
    create_key(&srv, "AKNOTHING", "nothing-secret-1", &[]);
    let line = key_list_line(&srv, "AKNOTHING");
    assert!(line.contains("policy=none"), "{line}");
    let nothing = srv.client_with("AKNOTHING", "nothing-secret-1");
    let denied = |r: Failure, what: &str| {
        assert_eq!(
            (r.status, r.code.as_deref()),
            (403, Some("AccessDenied")),
            "{what}"
        );
    };
    denied(
        failure(nothing.get_object().bucket(&b).key("k").send().await),
        "GET",
    );
    assert_status(nothing.head_object().bucket(&b).key("k").send().await, 403);
    let put_new = || {
        nothing
            .put_object()
            .bucket(&b)
            .key("new")
            .body(body(b"n"))
            .send()
    };
    denied(failure(put_new().await), "PUT");
    denied(
        failure(nothing.list_objects_v2().bucket(&b).send().await),
        "LIST",
    );
    denied(failure(nothing.list_buckets().send().await), "ListBuckets");
    denied(
        failure(
            nothing
                .create_bucket()
                .bucket(bucket_name("nope"))
                .send()
                .await,
        ),
        "CreateBucket",
    );
    denied(
        failure(nothing.delete_object().bucket(&b).key("k").send().await),
        "DELETE",
    );
    assert_eq!(list_all(&root, &b, None).await, vec!["k".to_string()]);

    // A bucket policy naming the key grants it what it says, and nothing more.
    let grant = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow",
            "Principal":{{"AWS":["AKNOTHING"]}},"Action":"s3:GetObject",
            "Resource":"arn:aws:s3:::{b}/*"}}]}}"#
    );
    root.put_bucket_policy()
        .bucket(&b)
        .policy(&grant)
        .send()
        .await
        .unwrap();
    assert_eq!(get_bytes(&nothing, &b, "k").await, b"root's");
    denied(failure(put_new().await), "PUT with a GET grant");
    root.delete_bucket_policy().bucket(&b).send().await.unwrap();

    // --policy admin: everything.
    create_key(&srv, "AKALL", "all-secret-123", &["--policy", "admin"]);
    let all = srv.client_with("AKALL", "all-secret-123");
    assert_eq!(get_bytes(&all, &b, "k").await, b"root's");
    put(&all, &b, "by-admin", b"a").await;
    assert_eq!(list_all(&all, &b, None).await.len(), 2);
    let made = new_bucket(&all, "byadmin").await;
    all.list_buckets().send().await.expect("ListBuckets");
    // Removing its policy takes it all away.
    ok_stdout(
        srv.admin_cmd(&["key", "policy", "remove", "--access-key", "AKALL"]),
        "key policy remove",
    );
    let show = srv.admin_cmd(&["key", "policy", "show", "--access-key", "AKALL"]);
    let show = ok_stdout(show, "key policy show");
    assert!(show.contains("may do nothing"), "{show}");
    denied(
        failure(all.get_object().bucket(&b).key("k").send().await),
        "GET after remove",
    );
    denied(
        failure(all.list_objects_v2().bucket(&made).send().await),
        "LIST after remove",
    );
    denied(
        failure(
            all.create_bucket()
                .bucket(bucket_name("again"))
                .send()
                .await,
        ),
        "CreateBucket after remove",
    );
}

#[tokio::test]
async fn a_prefix_scoped_key_writes_under_its_prefix_only() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "logs").await;
    put(&root, &b, "secret/x", b"s").await;
    let doc = format!(
        r#"{{"Version":"2012-10-17","Statement":[
          {{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject"],
            "Resource":"arn:aws:s3:::{b}/logs/*"}},
          {{"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::{b}",
            "Condition":{{"StringLike":{{"s3:prefix":"logs/*"}}}}}}]}}"#
    );
    let file = srv.data_dir().join("logs-policy.json");
    std::fs::write(&file, doc).unwrap();
    create_key(
        &srv,
        "AKLOGGER",
        "logger-secret-1",
        &["--policy", file.to_str().unwrap()],
    );
    let logger = srv.client_with("AKLOGGER", "logger-secret-1");
    put(&logger, &b, "logs/2026/a.log", b"line").await;
    assert_fails(
        logger
            .put_object()
            .bucket(&b)
            .key("elsewhere.log")
            .body(body(b"no"))
            .send()
            .await,
        403,
        "AccessDenied",
    );
    assert_fails(
        logger.get_object().bucket(&b).key("secret/x").send().await,
        403,
        "AccessDenied",
    );
    assert_eq!(
        list_all(&logger, &b, Some("logs/")).await,
        vec!["logs/2026/a.log".to_string()]
    );
    assert_fails(
        logger.list_objects_v2().bucket(&b).send().await,
        403,
        "AccessDenied",
    );
    // A policy that does not parse is refused before anything is stored.
    std::fs::write(
        &file,
        r#"{"Statement":[{"Effect":"Maybe","Action":"s3:*"}]}"#,
    )
    .unwrap();
    let out = srv.admin_cmd(&[
        "key",
        "policy",
        "set",
        "--access-key",
        "AKLOGGER",
        file.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "a bad policy is refused");
    put(&logger, &b, "logs/2026/b.log", b"still").await;
}

/// A multi-object delete is answered per key: what the key may delete is deleted, the rest
/// is AccessDenied in the answer's errors and stays.
#[tokio::test]
async fn a_multi_object_delete_answers_each_key() {
    use aws_sdk_s3::types::{Delete, ObjectIdentifier};
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "multidel").await;
    for k in ["tmp/a", "tmp/b", "keep/c"] {
        put(&root, &b, k, b"x").await;
    }
    let doc = format!(
        r#"{{"Version":"2012-10-17","Statement":[
          {{"Effect":"Allow","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::{b}/tmp/*"}}]}}"#
    );
    let file = srv.data_dir().join("tmp-policy.json");
    std::fs::write(&file, doc).unwrap();
    create_key(
        &srv,
        "AKCLEANER",
        "cleaner-secret-1",
        &["--policy", file.to_str().unwrap()],
    );
    let cleaner = srv.client_with("AKCLEANER", "cleaner-secret-1");
    let ids: Vec<ObjectIdentifier> = ["tmp/a", "keep/c", "tmp/b"]
        .iter()
        .map(|k| ObjectIdentifier::builder().key(*k).build().unwrap())
        .collect();
    let out = cleaner
        .delete_objects()
        .bucket(&b)
        .delete(Delete::builder().set_objects(Some(ids)).build().unwrap())
        .send()
        .await
        .expect("a multi-object delete with some keys denied is answered 200");
    let mut deleted: Vec<&str> = out.deleted().iter().filter_map(|d| d.key()).collect();
    deleted.sort();
    assert_eq!(deleted, ["tmp/a", "tmp/b"]);
    let errors: Vec<(&str, &str)> = out
        .errors()
        .iter()
        .map(|e| (e.key().unwrap(), e.code().unwrap()))
        .collect();
    assert_eq!(errors, [("keep/c", "AccessDenied")]);
    assert_eq!(list_all(&root, &b, None).await, vec!["keep/c".to_string()]);
}

#[tokio::test]
async fn a_public_bucket_policy_serves_anonymous_reads_only() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "pub").await;
    put(&root, &b, "site/index.html", b"<html>").await;
    let url = format!("{}/{b}/site/index.html", srv.endpoint);
    let (status, text) = anonymous(reqwest::Method::GET, &url).await;
    assert_eq!(
        (status, text.contains("AccessDenied")),
        (403, true),
        "{text}"
    );
    assert_fails(
        root.get_bucket_policy().bucket(&b).send().await,
        404,
        "NoSuchBucketPolicy",
    );
    let status = root
        .get_bucket_policy_status()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_eq!(
        status.policy_status().and_then(|p| p.is_public()),
        Some(false)
    );

    let policy = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Sid":"PublicRead","Effect":"Allow",
          "Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{b}/site/*"}}]}}"#
    );
    root.put_bucket_policy()
        .bucket(&b)
        .policy(&policy)
        .send()
        .await
        .expect("put bucket policy");
    assert_eq!(
        root.get_bucket_policy()
            .bucket(&b)
            .send()
            .await
            .unwrap()
            .policy(),
        Some(policy.as_str())
    );
    let status = root
        .get_bucket_policy_status()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_eq!(
        status.policy_status().and_then(|p| p.is_public()),
        Some(true)
    );

    let (status, text) = anonymous(reqwest::Method::GET, &url).await;
    assert_eq!((status, text.as_str()), (200, "<html>"));
    // Only what the policy names: not a write, not a listing, not another prefix.
    let (status, _) = anonymous(reqwest::Method::PUT, &format!("{url}2")).await;
    assert_eq!(status, 403);
    let (status, _) = anonymous(reqwest::Method::GET, &format!("{}/{b}", srv.endpoint)).await;
    assert_eq!(status, 403);
    put(&root, &b, "private/p", b"p").await;
    let (status, _) = anonymous(
        reqwest::Method::GET,
        &format!("{}/{b}/private/p", srv.endpoint),
    )
    .await;
    assert_eq!(status, 403);
    assert_fails(
        root.head_object()
            .bucket(&b)
            .key("site/index.html2")
            .send()
            .await,
        404,
        "NotFound",
    );

    // Restricting public buckets turns the public policy off for anonymous requests.
    root.put_public_access_block()
        .bucket(&b)
        .public_access_block_configuration(
            aws_sdk_s3::types::PublicAccessBlockConfiguration::builder()
                .restrict_public_buckets(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let (status, _) = anonymous(reqwest::Method::GET, &url).await;
    assert_eq!(status, 403);
    let got = root
        .get_public_access_block()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let c = got.public_access_block_configuration().unwrap();
    assert_eq!(
        (c.restrict_public_buckets(), c.block_public_policy()),
        (Some(true), Some(false))
    );
    root.delete_public_access_block()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let (status, _) = anonymous(reqwest::Method::GET, &url).await;
    assert_eq!(status, 200);

    // Deleting the policy ends anonymous reads; a deleted bucket takes its policy with it.
    root.delete_bucket_policy().bucket(&b).send().await.unwrap();
    let (status, _) = anonymous(reqwest::Method::GET, &url).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn explicit_deny_wins_and_public_policies_can_be_blocked() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "deny").await;
    put(&root, &b, "keep", b"k").await;
    create_key(&srv, "AKWORKER", "worker-secret-1", &["--policy", "admin"]);
    let worker = srv.client_with("AKWORKER", "worker-secret-1");
    put(&worker, &b, "mine", b"m").await;

    // The key may do everything (admin), but the bucket denies it deletes, and denies everyone
    // requests from outside 10.0.0.0/8 to the archive/ prefix (all of ours: loopback).
    let policy = format!(
        r#"{{"Version":"2012-10-17","Statement":[
          {{"Effect":"Deny","Principal":{{"AWS":["AKWORKER"]}},"Action":"s3:DeleteObject",
            "Resource":"arn:aws:s3:::{b}/*"}},
          {{"Effect":"Deny","Principal":"*","Action":"s3:*",
            "Resource":"arn:aws:s3:::{b}/archive/*",
            "Condition":{{"NotIpAddress":{{"aws:SourceIp":"10.0.0.0/8"}}}}}}]}}"#
    );
    root.put_bucket_policy()
        .bucket(&b)
        .policy(&policy)
        .send()
        .await
        .unwrap();
    assert_fails(
        worker.delete_object().bucket(&b).key("mine").send().await,
        403,
        "AccessDenied",
    );
    assert_eq!(get_bytes(&worker, &b, "mine").await, b"m");
    assert_fails(
        worker
            .put_object()
            .bucket(&b)
            .key("archive/a")
            .body(body(b"a"))
            .send()
            .await,
        403,
        "AccessDenied",
    );
    // A bucket policy's explicit Deny binds the root key too (as it binds an AWS account's
    // users), but the root key may always manage the policy itself.
    assert_fails(
        root.put_object()
            .bucket(&b)
            .key("archive/a")
            .body(body(b"a"))
            .send()
            .await,
        403,
        "AccessDenied",
    );
    root.delete_object()
        .bucket(&b)
        .key("mine")
        .send()
        .await
        .unwrap();

    // A policy naming another bucket is malformed.
    let foreign = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*",
        "Action":"s3:GetObject","Resource":"arn:aws:s3:::some-other-bucket/*"}]}"#;
    assert_fails(
        root.put_bucket_policy()
            .bucket(&b)
            .policy(foreign)
            .send()
            .await,
        400,
        "MalformedPolicy",
    );
    assert_fails(
        root.put_bucket_policy()
            .bucket(&b)
            .policy("{not json")
            .send()
            .await,
        400,
        "MalformedPolicy",
    );

    // block_public_policy refuses a public policy and keeps the old one.
    root.put_public_access_block()
        .bucket(&b)
        .public_access_block_configuration(
            aws_sdk_s3::types::PublicAccessBlockConfiguration::builder()
                .block_public_policy(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let public = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*",
          "Action":"s3:GetObject","Resource":"arn:aws:s3:::{b}/*"}}]}}"#
    );
    assert_fails(
        root.put_bucket_policy()
            .bucket(&b)
            .policy(&public)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    assert_eq!(
        root.get_bucket_policy()
            .bucket(&b)
            .send()
            .await
            .unwrap()
            .policy(),
        Some(policy.as_str())
    );

    // Settings go with the bucket.
    root.delete_object()
        .bucket(&b)
        .key("keep")
        .send()
        .await
        .unwrap();
    root.delete_bucket().bucket(&b).send().await.unwrap();
    root.create_bucket().bucket(&b).send().await.unwrap();
    assert_fails(
        root.get_bucket_policy().bucket(&b).send().await,
        404,
        "NoSuchBucketPolicy",
    );
    assert_fails(
        root.get_public_access_block().bucket(&b).send().await,
        404,
        "NoSuchPublicAccessBlockConfiguration",
    );
}

#[tokio::test]
async fn ownership_controls_round_trip() {
    use aws_sdk_s3::types::{ObjectOwnership, OwnershipControls, OwnershipControlsRule};
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "own").await;
    assert_fails(
        root.get_bucket_ownership_controls().bucket(&b).send().await,
        404,
        "OwnershipControlsNotFoundError",
    );
    let controls = |o: ObjectOwnership| {
        OwnershipControls::builder()
            .rules(
                OwnershipControlsRule::builder()
                    .object_ownership(o)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap()
    };
    root.put_bucket_ownership_controls()
        .bucket(&b)
        .ownership_controls(controls(ObjectOwnership::ObjectWriter))
        .send()
        .await
        .unwrap();
    let got = root
        .get_bucket_ownership_controls()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let rules = got.ownership_controls().unwrap().rules();
    assert_eq!(rules[0].object_ownership(), &ObjectOwnership::ObjectWriter);
    root.delete_bucket_ownership_controls()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_fails(
        root.get_bucket_ownership_controls().bucket(&b).send().await,
        404,
        "OwnershipControlsNotFoundError",
    );
    assert_fails(
        root.put_bucket_ownership_controls()
            .bucket("no-such-bucket-here")
            .ownership_controls(controls(ObjectOwnership::ObjectWriter))
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
}

#[tokio::test]
async fn requests_without_tls_can_be_denied() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "tlsonly").await;
    put(&root, &b, "k", b"v").await;
    create_key(&srv, "AKPLAIN", "plain-secret-1", &["--policy", "admin"]);
    let user = srv.client_with("AKPLAIN", "plain-secret-1");
    assert_eq!(get_bytes(&user, &b, "k").await, b"v");
    root.put_bucket_policy()
        .bucket(&b)
        .policy(insecure_denied(&b))
        .send()
        .await
        .unwrap();
    // This server speaks plain HTTP: aws:SecureTransport is false (tls.rs: true over TLS).
    assert_fails(
        user.get_object().bucket(&b).key("k").send().await,
        403,
        "AccessDenied",
    );
    assert_fails(
        user.list_objects_v2().bucket(&b).send().await,
        403,
        "AccessDenied",
    );
}

#[tokio::test]
async fn bucket_acls_grant_what_s3_acls_grant() {
    use aws_sdk_s3::types::{BucketCannedAcl, ObjectOwnership, OwnershipControls};
    use aws_sdk_s3::types::{OwnershipControlsRule, Permission, PublicAccessBlockConfiguration};
    let srv = Server::default_start();
    let root = srv.client();
    let b = bucket_name("acl");
    root.create_bucket()
        .bucket(&b)
        .acl(BucketCannedAcl::PublicRead)
        .send()
        .await
        .expect("create a public-read bucket");
    put(&root, &b, "k", b"v").await;
    let bucket_url = format!("{}/{b}", srv.endpoint);
    // Bucket READ lists; reading an object needs the object's ACL (private).
    let (status, text) = anonymous(reqwest::Method::GET, &bucket_url).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("<Key>k</Key>"), "{text}");
    let (status, _) = anonymous(reqwest::Method::GET, &format!("{bucket_url}/k")).await;
    assert_eq!(status, 403);
    let (status, _) = anonymous(reqwest::Method::PUT, &format!("{bucket_url}/anon")).await;
    assert_eq!(status, 403);
    let s = root
        .get_bucket_policy_status()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_eq!(s.policy_status().and_then(|p| p.is_public()), Some(true));

    // public-read-write: bucket WRITE lets anyone write objects.
    root.put_bucket_acl()
        .bucket(&b)
        .acl(BucketCannedAcl::PublicReadWrite)
        .send()
        .await
        .unwrap();
    let got = root.get_bucket_acl().bucket(&b).send().await.unwrap();
    let mut perms: Vec<String> = got
        .grants()
        .iter()
        .filter(|g| {
            g.grantee()
                .and_then(|e| e.uri())
                .is_some_and(|u| u.ends_with("/AllUsers"))
        })
        .filter_map(|g| g.permission().map(|p| p.as_str().to_string()))
        .collect();
    perms.sort();
    assert_eq!(perms, vec!["READ".to_string(), "WRITE".to_string()]);
    let r = reqwest::Client::new()
        .put(format!("{bucket_url}/anon"))
        .body("from nobody")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(get_bytes(&root, &b, "anon").await, b"from nobody");

    // A grant to one key: a write-only key may list through the ACL.
    create_key(
        &srv,
        "AKFRIEND",
        "friend-secret-1",
        &["--policy", "writeonly"],
    );
    let friend = srv.client_with("AKFRIEND", "friend-secret-1");
    root.put_bucket_acl()
        .bucket(&b)
        .grant_read("id=\"AKFRIEND\"")
        .send()
        .await
        .unwrap();
    assert_eq!(list_all(&friend, &b, None).await.len(), 2);
    let (status, _) = anonymous(reqwest::Method::GET, &bucket_url).await;
    assert_eq!(status, 403, "the grant replaced the public ACL");
    // Grantees must exist.
    assert_fails(
        root.put_bucket_acl()
            .bucket(&b)
            .grant_read("id=\"AKNOBODY\"")
            .send()
            .await,
        400,
        "InvalidArgument",
    );
    assert_fails(
        root.put_bucket_acl()
            .bucket(&b)
            .grant_read("emailAddress=\"a@example.com\"")
            .send()
            .await,
        400,
        "UnresolvableGrantByEmailAddress",
    );

    // block_public_acls refuses a public ACL; BucketOwnerEnforced refuses any but private.
    root.put_public_access_block()
        .bucket(&b)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_fails(
        root.put_bucket_acl()
            .bucket(&b)
            .acl(BucketCannedAcl::PublicRead)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    let enforced = OwnershipControls::builder()
        .rules(
            OwnershipControlsRule::builder()
                .object_ownership(ObjectOwnership::BucketOwnerEnforced)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    assert_fails(
        root.put_bucket_ownership_controls()
            .bucket(&b)
            .ownership_controls(enforced.clone())
            .send()
            .await,
        400,
        "InvalidBucketAclWithObjectOwnership",
    );
    root.put_bucket_acl()
        .bucket(&b)
        .acl(BucketCannedAcl::Private)
        .send()
        .await
        .unwrap();
    root.put_bucket_ownership_controls()
        .bucket(&b)
        .ownership_controls(enforced)
        .send()
        .await
        .unwrap();
    root.delete_public_access_block()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_fails(
        root.put_bucket_acl()
            .bucket(&b)
            .acl(BucketCannedAcl::PublicRead)
            .send()
            .await,
        400,
        "AccessControlListNotSupported",
    );
    let got = root.get_bucket_acl().bucket(&b).send().await.unwrap();
    assert_eq!(got.grants().len(), 1);
    assert_eq!(got.grants()[0].permission(), Some(&Permission::FullControl));
}

/// An unsigned browser-form upload (POST with `key` and `file` fields).
async fn anonymous_post(bucket_url: &str, key: &str) -> u16 {
    let body = format!(
        "--XB\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n{key}\r\n\
         --XB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\
         Content-Type: text/plain\r\n\r\nposted\r\n--XB--\r\n"
    );
    reqwest::Client::new()
        .post(bucket_url)
        .header("content-type", "multipart/form-data; boundary=XB")
        .body(body)
        .send()
        .await
        .expect("the server answers")
        .status()
        .as_u16()
}

#[tokio::test]
async fn an_unsigned_post_upload_needs_a_grant() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "post").await;
    let url = format!("{}/{b}", srv.endpoint);
    assert_eq!(anonymous_post(&url, "x").await, 403);
    assert!(list_all(&root, &b, None).await.is_empty());
    // A policy granting anyone uploads under drop/ lets it in there only.
    let policy = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*",
          "Action":"s3:PutObject","Resource":"arn:aws:s3:::{b}/drop/*"}}]}}"#
    );
    root.put_bucket_policy()
        .bucket(&b)
        .policy(&policy)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous_post(&url, "x").await, 403);
    assert_eq!(anonymous_post(&url, "drop/y").await, 204);
    assert_eq!(list_all(&root, &b, None).await, vec!["drop/y".to_string()]);
    assert_eq!(get_bytes(&root, &b, "drop/y").await, b"posted");
}

/// Object ACLs are kept with the object: a public-read upload serves anonymous reads (and
/// nothing else), PutObjectAcl changes it, GetObjectAcl shows it, a grant to one key lets that
/// key read, a copy is private unless its request says otherwise, and the bucket's public
/// access block and ownership apply.
#[tokio::test]
async fn object_acls_are_kept_and_grant_what_s3_object_acls_grant() {
    use aws_sdk_s3::types::{ObjectCannedAcl, ObjectOwnership, PublicAccessBlockConfiguration};
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "objacl").await;
    let put_acl = |key: &'static str, acl: ObjectCannedAcl| {
        root.put_object()
            .bucket(&b)
            .key(key)
            .acl(acl)
            .body(body(key.as_bytes()))
            .send()
    };
    let anon_get = |key: &str| {
        let url = format!("{}/{b}/{key}", srv.endpoint);
        async move { anonymous(reqwest::Method::GET, &url).await }
    };
    put_acl("a", ObjectCannedAcl::Private).await.unwrap();
    put_acl("p", ObjectCannedAcl::PublicRead).await.unwrap();
    assert_eq!(anon_get("p").await, (200, "p".to_string()));
    assert_eq!(anon_get("a").await.0, 403, "a private object stays private");
    // Read, not write: an anonymous PUT over it is refused and changes nothing.
    let url = format!("{}/{b}/p", srv.endpoint);
    assert_eq!(anonymous(reqwest::Method::PUT, &url).await.0, 403);
    assert_eq!(get_bytes(&root, &b, "p").await, b"p");
    let grants = |key: &'static str| {
        let root = &root;
        let b = &b;
        async move {
            let got = root
                .get_object_acl()
                .bucket(b)
                .key(key)
                .send()
                .await
                .unwrap();
            let mut g: Vec<String> = got
                .grants()
                .iter()
                .map(|g| {
                    let who = g.grantee().unwrap();
                    let who = who.uri().or(who.id()).unwrap_or("?").to_string();
                    format!("{who}:{}", g.permission().unwrap().as_str())
                })
                .collect();
            g.sort();
            (got.owner().and_then(|o| o.id()).map(str::to_string), g)
        }
    };
    let all_users = "http://acs.amazonaws.com/groups/global/AllUsers";
    // The root account is shown by its canonical user id, never by the access key.
    let (root_id, _) = canonical_user(&srv, ROOT_AK);
    let mut want = vec![
        format!("{all_users}:READ"),
        format!("{root_id}:FULL_CONTROL"),
    ];
    want.sort();
    assert_eq!(grants("p").await, (Some(root_id.clone()), want));
    assert_eq!(grants("a").await.1, vec![format!("{root_id}:FULL_CONTROL")]);
    // PutObjectAcl: private again, and the anonymous read is refused at once.
    root.put_object_acl()
        .bucket(&b)
        .key("p")
        .acl(ObjectCannedAcl::Private)
        .send()
        .await
        .unwrap();
    assert_eq!(anon_get("p").await.0, 403);
    // A grant to one key (with a policy that allows nothing) lets it read that object only.
    let doc = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:ListAllMyBuckets","Resource":"*"}]}"#;
    let file = srv.data_dir().join("nothing.json");
    std::fs::write(&file, doc).unwrap();
    create_key(
        &srv,
        "AKGRANTEE",
        "grantee-secret-1",
        &["--policy", file.to_str().unwrap()],
    );
    let grantee = srv.client_with("AKGRANTEE", "grantee-secret-1");
    assert_fails(
        grantee.get_object().bucket(&b).key("a").send().await,
        403,
        "AccessDenied",
    );
    root.put_object_acl()
        .bucket(&b)
        .key("a")
        .grant_read("id=AKGRANTEE")
        .send()
        .await
        .unwrap();
    assert_eq!(get_bytes(&grantee, &b, "a").await, b"a");
    assert_fails(
        grantee.get_object().bucket(&b).key("p").send().await,
        403,
        "AccessDenied",
    );
    assert_fails(
        grantee.get_object_acl().bucket(&b).key("a").send().await,
        403,
        "AccessDenied",
    );
    // A grantee that does not exist is refused.
    assert_fails(
        root.put_object_acl()
            .bucket(&b)
            .key("a")
            .grant_read("id=NOSUCHKEY")
            .send()
            .await,
        400,
        "InvalidArgument",
    );
    // A copy gets the ACL its request names, not its source's.
    put_acl("src", ObjectCannedAcl::PublicRead).await.unwrap();
    root.copy_object()
        .bucket(&b)
        .key("copy")
        .copy_source(format!("{b}/src"))
        .send()
        .await
        .unwrap();
    assert_eq!(anon_get("copy").await.0, 403);
    root.copy_object()
        .bucket(&b)
        .key("copy2")
        .copy_source(format!("{b}/src"))
        .acl(ObjectCannedAcl::PublicRead)
        .send()
        .await
        .unwrap();
    assert_eq!(anon_get("copy2").await, (200, "src".to_string()));
    // ignore_public_acls disregards them; block_public_acls refuses new ones.
    let block = |ignore: bool, refuse: bool| {
        root.put_public_access_block()
            .bucket(&b)
            .public_access_block_configuration(
                PublicAccessBlockConfiguration::builder()
                    .ignore_public_acls(ignore)
                    .block_public_acls(refuse)
                    .build(),
            )
            .send()
    };
    block(true, false).await.unwrap();
    assert_eq!(anon_get("copy2").await.0, 403);
    block(false, true).await.unwrap();
    assert_eq!(anon_get("copy2").await.0, 200);
    assert_fails(
        put_acl("c", ObjectCannedAcl::PublicRead).await,
        403,
        "AccessDenied",
    );
    assert_fails(
        root.create_multipart_upload()
            .bucket(&b)
            .key("m")
            .acl(ObjectCannedAcl::PublicReadWrite)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    block(false, false).await.unwrap();
    // BucketOwnerEnforced turns ACLs off: kept ones no longer grant, new ones are refused.
    root.put_bucket_ownership_controls()
        .bucket(&b)
        .ownership_controls(
            aws_sdk_s3::types::OwnershipControls::builder()
                .rules(
                    aws_sdk_s3::types::OwnershipControlsRule::builder()
                        .object_ownership(ObjectOwnership::BucketOwnerEnforced)
                        .build()
                        .unwrap(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(anon_get("copy2").await.0, 403);
    assert_fails(
        put_acl("d", ObjectCannedAcl::PublicRead).await,
        400,
        "AccessControlListNotSupported",
    );
    let mut listed = list_all(&root, &b, None).await;
    listed.sort();
    assert_eq!(listed, ["a", "copy", "copy2", "p", "src"]);
}

/// As S3 does: a requester refused a GET or HEAD learns that a key is missing (404) only if
/// it may list the bucket; otherwise every refused read is 403, so keys cannot be probed.
#[tokio::test]
async fn only_a_requester_who_may_list_learns_that_a_key_is_missing() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "probe").await;
    put(&root, &b, "there", b"x").await;
    let url = |k: &str| format!("{}/{b}/{k}", srv.endpoint);
    let (status, _) = anonymous(reqwest::Method::GET, &url("missing")).await;
    assert_eq!(
        status, 403,
        "without s3:ListBucket a missing key is not told apart"
    );
    let policy = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*",
          "Action":"s3:ListBucket","Resource":"arn:aws:s3:::{b}"}}]}}"#
    );
    root.put_bucket_policy()
        .bucket(&b)
        .policy(&policy)
        .send()
        .await
        .expect("put bucket policy");
    let (status, text) = anonymous(reqwest::Method::GET, &url("missing")).await;
    assert_eq!((status, text.contains("NoSuchKey")), (404, true), "{text}");
    let (status, _) = anonymous(reqwest::Method::HEAD, &url("missing")).await;
    assert_eq!(status, 404);
    let (status, text) = anonymous(reqwest::Method::GET, &url("there")).await;
    assert_eq!(
        (status, text.contains("AccessDenied")),
        (403, true),
        "{text}"
    );
}

/// `s3:ExistingObjectTag/<key>`: a key may read only objects tagged for it, and a retag
/// changes what it may read.
#[tokio::test]
async fn a_condition_on_an_existing_tag_reads_the_objects_tags() {
    let srv = Server::default_start();
    let root = srv.client();
    let b = new_bucket(&root, "tagged").await;
    let doc = format!(
        r#"{{"Version":"2012-10-17","Statement":[
          {{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::{b}/*",
            "Condition":{{"StringEquals":{{"s3:ExistingObjectTag/class":"public"}}}}}}]}}"#
    );
    let file = srv.data_dir().join("tag-policy.json");
    std::fs::write(&file, doc).unwrap();
    create_key(
        &srv,
        "AKTAGGED",
        "tagged-secret-1",
        &["--policy", file.to_str().unwrap()],
    );
    let reader = srv.client_with("AKTAGGED", "tagged-secret-1");
    let tag = |v: &str| {
        aws_sdk_s3::types::Tagging::builder()
            .tag_set(
                aws_sdk_s3::types::Tag::builder()
                    .key("class")
                    .value(v)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap()
    };
    for (key, class) in [("open", "public"), ("closed", "private")] {
        put(&root, &b, key, key.as_bytes()).await;
        root.put_object_tagging()
            .bucket(&b)
            .key(key)
            .tagging(tag(class))
            .send()
            .await
            .unwrap();
    }
    put(&root, &b, "untagged", b"u").await;
    assert_eq!(get_bytes(&reader, &b, "open").await, b"open");
    for key in ["closed", "untagged", "missing"] {
        assert_fails(
            reader.get_object().bucket(&b).key(key).send().await,
            403,
            "AccessDenied",
        );
    }
    // Retagged: what it may read follows the tags at the time of the request.
    root.put_object_tagging()
        .bucket(&b)
        .key("open")
        .tagging(tag("private"))
        .send()
        .await
        .unwrap();
    assert_fails(
        reader.get_object().bucket(&b).key("open").send().await,
        403,
        "AccessDenied",
    );
}
