//! Keys as accounts (`saker admin key create --account`), end to end with aws-sdk-s3: an
//! account owns the buckets it creates, lists only those, reaches another account's bucket
//! only where its ACL or policy grants it, and owns what it writes there; bucket names stay
//! one namespace (BucketAlreadyExists).

mod common;

use aws_sdk_s3::types::{
    BucketCannedAcl, CompletedMultipartUpload, CompletedPart, ObjectCannedAcl, ObjectOwnership,
    OwnershipControls, OwnershipControlsRule,
};
use common::*;

const ALT_AK: &str = "AKALTACCOUNT";
const ALT_SK: &str = "alt-account-secret-1";

/// The owner id GetObjectAcl shows for `key` of `bucket`.
async fn object_owner(c: &aws_sdk_s3::Client, bucket: &str, key: &str) -> String {
    let acl = c
        .get_object_acl()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GetObjectAcl {key}: {e:?}"));
    acl.owner().and_then(|o| o.id()).unwrap_or("").to_string()
}

async fn bucket_names(c: &aws_sdk_s3::Client) -> Vec<String> {
    let out = c.list_buckets().send().await.expect("ListBuckets");
    out.buckets()
        .iter()
        .filter_map(|b| b.name().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn an_account_reaches_another_accounts_bucket_only_through_its_grants() {
    let srv = Server::default_start();
    let root = srv.client();
    let args = [
        "key",
        "create",
        "--account",
        "--access-key",
        ALT_AK,
        "--secret-key",
        ALT_SK,
        "--policy",
        "admin",
    ];
    ok_stdout(srv.admin_cmd(&args), "key create --account");
    let line = key_list_line(&srv, ALT_AK);
    assert!(line.ends_with("policy=admin\taccount"), "{line}");
    let alt = srv.client_with(ALT_AK, ALT_SK);
    // A key of the root account (no --account) keeps reaching the root account's buckets.
    let args = [
        "key",
        "create",
        "--access-key",
        "AKSAME",
        "--secret-key",
        "same-secret-1",
        "--policy",
        "admin",
    ];
    ok_stdout(srv.admin_cmd(&args), "key create");
    let same = srv.client_with("AKSAME", "same-secret-1");

    let b = new_bucket(&root, "main").await;
    put(&root, &b, "k", b"root's").await;
    assert_eq!(get_bytes(&same, &b, "k").await, b"root's");
    // Private: nothing for the other account.
    assert_fails(
        alt.get_object().bucket(&b).key("k").send().await,
        403,
        "AccessDenied",
    );
    assert_fails(
        alt.list_objects_v2().bucket(&b).send().await,
        403,
        "AccessDenied",
    );
    let w = alt
        .put_object()
        .bucket(&b)
        .key("w")
        .body(body(b"x"))
        .send()
        .await;
    assert_fails(w, 403, "AccessDenied");

    // One namespace of names: the other account cannot take it; the owner may create it
    // again only with the ACL it has.
    let again = alt.create_bucket().bucket(&b).send().await;
    assert_fails(again, 409, "BucketAlreadyExists");
    root.create_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("the owner creates it again");
    let with_acl = root
        .create_bucket()
        .bucket(&b)
        .acl(BucketCannedAcl::PublicRead)
        .send()
        .await;
    assert_fails(with_acl, 409, "BucketAlreadyExists");

    // Its own bucket: owned by it, listed for it only (the root key lists every bucket).
    let mine = new_bucket(&alt, "alt").await;
    put(&alt, &mine, "a", b"alt's").await;
    assert_eq!(bucket_names(&alt).await, vec![mine.clone()]);
    let all = bucket_names(&root).await;
    assert!(all.contains(&mine) && all.contains(&b), "{all:?}");
    assert!(!bucket_names(&same).await.contains(&mine));
    let acl = alt.get_bucket_acl().bucket(&mine).send().await.unwrap();
    assert_eq!(acl.owner().and_then(|o| o.id()), Some(ALT_AK));
    assert_eq!(object_owner(&alt, &mine, "a").await, ALT_AK);
    // The root account's other keys are another account there.
    assert_fails(
        same.get_object().bucket(&mine).key("a").send().await,
        403,
        "AccessDenied",
    );
    // Copying out of a bucket it may not read is refused.
    let copy = alt
        .copy_object()
        .bucket(&mine)
        .key("stolen")
        .copy_source(format!("{b}/k"))
        .send()
        .await;
    assert_fails(copy, 403, "AccessDenied");

    // A public-read-write bucket: the other account lists and writes, and owns what it
    // writes; the objects it did not write stay private to it.
    root.put_bucket_acl()
        .bucket(&b)
        .acl(BucketCannedAcl::PublicReadWrite)
        .send()
        .await
        .unwrap();
    put(&alt, &b, "w", b"alt wrote").await;
    assert_eq!(list_all(&alt, &b, None).await, vec!["k", "w"]);
    assert_eq!(object_owner(&root, &b, "w").await, ALT_AK);
    assert_eq!(object_owner(&root, &b, "k").await, ROOT_AK);
    assert_fails(
        alt.get_object().bucket(&b).key("k").send().await,
        403,
        "AccessDenied",
    );
    root.put_object_acl()
        .bucket(&b)
        .key("k")
        .acl(ObjectCannedAcl::PublicRead)
        .send()
        .await
        .unwrap();
    assert_eq!(get_bytes(&alt, &b, "k").await, b"root's");
    assert_eq!(
        object_owner(&root, &b, "k").await,
        ROOT_AK,
        "kept its owner"
    );

    // A multipart upload is the initiator's: listed as such, and the object it completes.
    let up = alt
        .create_multipart_upload()
        .bucket(&b)
        .key("mp")
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap();
    let uploads = root
        .list_multipart_uploads()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let u = &uploads.uploads()[0];
    assert_eq!(u.initiator().and_then(|i| i.id()), Some(ALT_AK));
    assert_eq!(u.owner().and_then(|o| o.id()), Some(ALT_AK));
    let part = alt
        .upload_part()
        .bucket(&b)
        .key("mp")
        .upload_id(id)
        .part_number(1)
        .body(body(b"parts"))
        .send()
        .await
        .unwrap();
    let parts = alt
        .list_parts()
        .bucket(&b)
        .key("mp")
        .upload_id(id)
        .send()
        .await
        .unwrap();
    assert_eq!(parts.owner().and_then(|o| o.id()), Some(ALT_AK));
    let done = CompletedMultipartUpload::builder()
        .parts(
            CompletedPart::builder()
                .part_number(1)
                .e_tag(part.e_tag().unwrap())
                .build(),
        )
        .build();
    alt.complete_multipart_upload()
        .bucket(&b)
        .key("mp")
        .upload_id(id)
        .multipart_upload(done)
        .send()
        .await
        .unwrap();
    assert_eq!(object_owner(&root, &b, "mp").await, ALT_AK);

    // BucketOwnerPreferred: bucket-owner-full-control hands the object to the bucket owner.
    let rule = OwnershipControlsRule::builder()
        .object_ownership(ObjectOwnership::BucketOwnerPreferred)
        .build()
        .unwrap();
    root.put_bucket_ownership_controls()
        .bucket(&b)
        .ownership_controls(OwnershipControls::builder().rules(rule).build().unwrap())
        .send()
        .await
        .unwrap();
    alt.put_object()
        .bucket(&b)
        .key("handed")
        .acl(ObjectCannedAcl::BucketOwnerFullControl)
        .body(body(b"h"))
        .send()
        .await
        .unwrap();
    assert_eq!(object_owner(&root, &b, "handed").await, ROOT_AK);
    put(&alt, &b, "kept", b"k").await;
    assert_eq!(object_owner(&root, &b, "kept").await, ALT_AK);

    // x-amz-expected-bucket-owner: another account than the owner is refused.
    let wrong = root
        .list_objects_v2()
        .bucket(&b)
        .expected_bucket_owner(ALT_AK)
        .send()
        .await;
    assert_fails(wrong, 403, "AccessDenied");
    root.list_objects_v2()
        .bucket(&b)
        .expected_bucket_owner(ROOT_AK)
        .send()
        .await
        .expect("the right owner");
}
