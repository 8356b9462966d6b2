//! Bucket operations: create, head, list, location, delete, tagging.

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

/// A bucket created without Object Lock (and not versioned) refuses lock requests as S3
/// validates and refuses them (object_lock.rs has buckets with Object Lock).
#[tokio::test]
async fn object_lock_needs_a_lock_bucket() {
    use aws_sdk_s3::types::{
        DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled, ObjectLockLegalHold,
        ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetention, ObjectLockRetentionMode,
        ObjectLockRule,
    };
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "nolock").await;
    put(&c, &b, "k", b"x").await;
    let conf = |enabled: &str, days: Option<i32>, years: Option<i32>| {
        ObjectLockConfiguration::builder()
            .object_lock_enabled(ObjectLockEnabled::from(enabled))
            .rule(
                ObjectLockRule::builder()
                    .default_retention(
                        DefaultRetention::builder()
                            .mode(ObjectLockRetentionMode::Governance)
                            .set_days(days)
                            .set_years(years)
                            .build(),
                    )
                    .build(),
            )
            .build()
    };
    for (c_, status, code) in [
        (conf("Enabled", Some(1), None), 409, "InvalidBucketState"),
        (
            conf("Enabled", Some(0), None),
            400,
            "InvalidRetentionPeriod",
        ),
        (conf("Enabled", Some(1), Some(1)), 400, "MalformedXML"),
        (conf("Disabled", Some(1), None), 400, "MalformedXML"),
    ] {
        assert_fails(
            c.put_object_lock_configuration()
                .bucket(&b)
                .object_lock_configuration(c_)
                .send()
                .await,
            status,
            code,
        );
    }
    assert_fails(
        c.get_object_lock_configuration().bucket(&b).send().await,
        404,
        "ObjectLockConfigurationNotFoundError",
    );
    let until = aws_sdk_s3::primitives::DateTime::from_secs(4_102_444_800);
    assert_fails(
        c.put_object_retention()
            .bucket(&b)
            .key("k")
            .retention(
                ObjectLockRetention::builder()
                    .mode(ObjectLockRetentionMode::Governance)
                    .retain_until_date(until)
                    .build(),
            )
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    assert_fails(
        c.get_object_retention().bucket(&b).key("k").send().await,
        400,
        "InvalidRequest",
    );
    assert_fails(
        c.put_object_legal_hold()
            .bucket(&b)
            .key("k")
            .legal_hold(
                ObjectLockLegalHold::builder()
                    .status(ObjectLockLegalHoldStatus::On)
                    .build(),
            )
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    assert_fails(
        c.get_object_legal_hold().bucket(&b).key("k").send().await,
        400,
        "InvalidRequest",
    );
    // A write that asks for a lock is refused rather than stored unlocked.
    assert_fails(
        c.put_object()
            .bucket(&b)
            .key("locked")
            .body(body(b"y"))
            .object_lock_mode(ObjectLockMode::Governance)
            .object_lock_retain_until_date(until)
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    assert_eq!(list_all(&c, &b, None).await, vec!["k"]);
    assert_fails(
        c.get_object_lock_configuration()
            .bucket("no-such-bucket-here")
            .send()
            .await,
        404,
        "NoSuchBucket",
    );
}

/// Grantees are checked: a grant to nobody is a 400; grants to real grantees are kept
/// (s3_policy.rs shows what they allow).
#[tokio::test]
async fn acl_grants() {
    use aws_sdk_s3::types::{AccessControlPolicy, Grant, Grantee, Owner, Permission, Type};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "acl").await;
    let acl = c.get_bucket_acl().bucket(&b).send().await.expect("get acl");
    let owner = acl
        .owner()
        .and_then(|o| o.id())
        .expect("owner id")
        .to_string();
    let policy = |grantee: Grantee| {
        AccessControlPolicy::builder()
            .owner(Owner::builder().id(&owner).build())
            .grants(
                Grant::builder()
                    .grantee(
                        Grantee::builder()
                            .r#type(Type::CanonicalUser)
                            .id(&owner)
                            .build()
                            .expect("grantee"),
                    )
                    .permission(Permission::FullControl)
                    .build(),
            )
            .grants(
                Grant::builder()
                    .grantee(grantee)
                    .permission(Permission::Read)
                    .build(),
            )
            .build()
    };
    let user = |id: &str| {
        Grantee::builder()
            .r#type(Type::CanonicalUser)
            .id(id)
            .build()
            .expect("grantee")
    };
    let email = Grantee::builder()
        .r#type(Type::AmazonCustomerByEmail)
        .email_address("nobody@example.invalid")
        .build()
        .expect("grantee");
    for (grantee, status, code) in [
        (user("no-such-user"), 400, "InvalidArgument"),
        (email, 400, "UnresolvableGrantByEmailAddress"),
        (user(&owner), 200, ""),
    ] {
        let r = c
            .put_bucket_acl()
            .bucket(&b)
            .access_control_policy(policy(grantee))
            .send()
            .await;
        if status == 200 {
            r.expect("the owner may grant to itself");
        } else {
            assert_fails(r, status, code);
        }
    }
    assert_fails(
        c.put_bucket_acl()
            .bucket(&b)
            .grant_read("id=\"no-such-user\"")
            .send()
            .await,
        400,
        "InvalidArgument",
    );
    c.put_bucket_acl()
        .bucket(&b)
        .grant_read("uri=\"http://acs.amazonaws.com/groups/global/AllUsers\"")
        .send()
        .await
        .expect("a grant to AllUsers");
    let acl = c.get_bucket_acl().bucket(&b).send().await.expect("get acl");
    let all_users: Vec<_> = acl
        .grants()
        .iter()
        .filter(|g| {
            g.grantee()
                .and_then(|e| e.uri())
                .is_some_and(|u| u.ends_with("/AllUsers"))
        })
        .filter_map(|g| g.permission().cloned())
        .collect();
    assert_eq!(all_users, vec![Permission::Read]);
}

#[tokio::test]
async fn bucket_tagging_is_kept_replaced_and_deleted() {
    use aws_sdk_s3::types::{Tag, Tagging};
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "btags").await;
    let none = c.get_bucket_tagging().bucket(&b).send().await;
    assert_fails(none, 404, "NoSuchTagSet");
    let tagging = |pairs: &[(&str, &str)]| {
        let tags = pairs
            .iter()
            .map(|(k, v)| Tag::builder().key(*k).value(*v).build().unwrap())
            .collect();
        Tagging::builder().set_tag_set(Some(tags)).build().unwrap()
    };
    c.put_bucket_tagging()
        .bucket(&b)
        .tagging(tagging(&[("team", "ml"), ("cost", "42")]))
        .send()
        .await
        .expect("put bucket tagging");
    let got = c.get_bucket_tagging().bucket(&b).send().await.unwrap();
    let pairs: Vec<(&str, &str)> = got.tag_set().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(pairs, [("team", "ml"), ("cost", "42")]);

    // Bad sets are refused and change nothing.
    let many: Vec<(String, String)> = (0..51).map(|i| (format!("k{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = c
        .put_bucket_tagging()
        .bucket(&b)
        .tagging(tagging(&many))
        .send()
        .await;
    assert_fails(r, 400, "InvalidTag");
    let r = c
        .put_bucket_tagging()
        .bucket(&b)
        .tagging(tagging(&[("a", "1"), ("a", "2")]))
        .send()
        .await;
    assert_fails(r, 400, "InvalidTag");
    let got = c.get_bucket_tagging().bucket(&b).send().await.unwrap();
    assert_eq!(got.tag_set().len(), 2);

    c.delete_bucket_tagging().bucket(&b).send().await.unwrap();
    let none = c.get_bucket_tagging().bucket(&b).send().await;
    assert_fails(none, 404, "NoSuchTagSet");
    let missing = c
        .get_bucket_tagging()
        .bucket("no-such-bucket-x")
        .send()
        .await;
    assert_fails(missing, 404, "NoSuchBucket");

    // A bucket made again under the name does not inherit the old one's tags.
    c.put_bucket_tagging()
        .bucket(&b)
        .tagging(tagging(&[("old", "yes")]))
        .send()
        .await
        .unwrap();
    c.delete_bucket().bucket(&b).send().await.unwrap();
    create_bucket(&c, &b).await;
    let none = c.get_bucket_tagging().bucket(&b).send().await;
    assert_fails(none, 404, "NoSuchTagSet");
}
