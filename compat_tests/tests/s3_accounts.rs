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

/// `saker admin` arguments that make the alt account (an admin policy), with `display_name`.
fn alt_account(display_name: Option<&str>) -> Vec<&str> {
    let mut args = vec!["key", "create", "--account"];
    if let Some(name) = display_name {
        args.extend(["--display-name", name]);
    }
    args.extend([
        "--access-key",
        ALT_AK,
        "--secret-key",
        ALT_SK,
        "--policy",
        "admin",
    ]);
    args
}

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
    let args = alt_account(None);
    ok_stdout(srv.admin_cmd(&args), "key create --account");
    let line = key_list_line(&srv, ALT_AK);
    assert!(line.contains("policy=admin\taccount\t"), "{line}");
    let alt = srv.client_with(ALT_AK, ALT_SK);
    let (alt_id, _) = canonical_user(&srv, ALT_AK);
    let (root_id, _) = canonical_user(&srv, ROOT_AK);
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
    assert_eq!(acl.owner().and_then(|o| o.id()), Some(alt_id.as_str()));
    assert_eq!(object_owner(&alt, &mine, "a").await, alt_id);
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
    assert_eq!(object_owner(&root, &b, "w").await, alt_id);
    assert_eq!(object_owner(&root, &b, "k").await, root_id);
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
        root_id,
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
    assert_eq!(u.initiator().and_then(|i| i.id()), Some(alt_id.as_str()));
    assert_eq!(u.owner().and_then(|o| o.id()), Some(alt_id.as_str()));
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
    assert_eq!(parts.owner().and_then(|o| o.id()), Some(alt_id.as_str()));
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
    assert_eq!(object_owner(&root, &b, "mp").await, alt_id);

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
    assert_eq!(object_owner(&root, &b, "handed").await, root_id);
    put(&alt, &b, "kept", b"k").await;
    assert_eq!(object_owner(&root, &b, "kept").await, alt_id);

    // x-amz-expected-bucket-owner: another account than the owner is refused. The owner
    // is named by its canonical user id (or, as before canonical ids, its access key id).
    for other in [ALT_AK, alt_id.as_str()] {
        let wrong = root
            .list_objects_v2()
            .bucket(&b)
            .expected_bucket_owner(other)
            .send()
            .await;
        assert_fails(wrong, 403, "AccessDenied");
    }
    for right in [root_id.as_str(), ROOT_AK] {
        root.list_objects_v2()
            .bucket(&b)
            .expected_bucket_owner(right)
            .send()
            .await
            .expect("the right owner");
    }
}

/// Whether `id` is a canonical user id as AWS's: 64 lowercase hex digits.
fn is_canonical_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The (id, display name) of an owner as S3 showed it.
fn shown(o: Option<&aws_sdk_s3::types::Owner>) -> (String, String) {
    let o = o.expect("an owner is shown");
    let id = o.id().expect("an owner id").to_string();
    (id, o.display_name().unwrap_or("").to_string())
}

/// Asserts no access key id of `keys` is in `what` (a response, Debug-formatted or raw).
#[track_caller]
fn no_access_key(what: &str, keys: &[&str]) {
    for ak in keys {
        assert!(!what.contains(ak), "{ak} shown in: {what}");
    }
}

/// An unsigned GET's status and body.
async fn anonymous_get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("the server answers");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

/// Owners are accounts, never access keys: every account (the root's included) is shown by a
/// canonical user id of 64 hex digits and its display name, the same in ListBuckets,
/// Get{Bucket,Object}Acl, the object listings and multipart uploads; a grant by canonical id
/// reaches the account; the ids survive a restart; no response carries an access key id.
#[tokio::test]
async fn owners_are_shown_by_canonical_user_never_by_access_key() {
    let mut srv = Server::default_start();
    let args = alt_account(Some("Alt Team"));
    let created = ok_stdout(srv.admin_cmd(&args), "key create --account --display-name");
    let (alt_id, alt_name) = canonical_user(&srv, ALT_AK);
    assert!(is_canonical_id(&alt_id), "{alt_id}");
    assert_eq!(alt_name, "Alt Team");
    assert!(
        created.contains(&format!("canonical user id (its account): {alt_id}"))
            && created.contains("display name: Alt Team"),
        "{created}"
    );
    let line = key_list_line(&srv, ALT_AK);
    assert!(
        line.ends_with(&format!("\tcanonical-id={alt_id}\tdisplay-name=Alt Team")),
        "{line}"
    );
    // A key of the root account, with the root account's canonical user.
    let member = ["key", "create", "--access-key", "AKMEMBER", "--secret-key"];
    let member = [&member[..], &["member-secret-1", "--policy", "admin"]].concat();
    ok_stdout(srv.admin_cmd(&member), "key create");
    let (root_id, root_name) = canonical_user(&srv, ROOT_AK);
    assert!(is_canonical_id(&root_id), "{root_id}");
    assert_ne!(root_id, alt_id);
    assert_eq!(root_name, format!("saker-{}", &root_id[..8]), "the default");
    assert_eq!(
        canonical_user(&srv, "AKMEMBER"),
        (root_id.clone(), root_name.clone())
    );
    // A display name goes with an account only.
    let plain = [
        "key",
        "create",
        "--access-key",
        "AKPLAIN",
        "--display-name",
        "x",
    ];
    assert!(!srv.admin_cmd(&plain).status.success());
    let keys = [ALT_AK, ROOT_AK, "AKMEMBER"];
    let root_user = (root_id.clone(), root_name.clone());
    let alt_user = (alt_id.clone(), alt_name.clone());

    let root = srv.client();
    let alt = srv.client_with(ALT_AK, ALT_SK);
    let member = srv.client_with("AKMEMBER", "member-secret-1");
    let b = new_bucket(&root, "owners").await;
    put(&root, &b, "k", b"root's").await;
    let mine = new_bucket(&alt, "altowned").await;
    put(&alt, &mine, "a", b"alt's").await;

    // ListBuckets: the account of the key that asks.
    for (c, want) in [
        (&root, &root_user),
        (&member, &root_user),
        (&alt, &alt_user),
    ] {
        let out = c.list_buckets().send().await.unwrap();
        assert_eq!(&shown(out.owner()), want);
        no_access_key(&format!("{out:?}"), &keys);
    }
    // GetBucketAcl and GetObjectAcl: owner and grants.
    for (c, bucket, key, want) in [(&root, &b, "k", &root_user), (&alt, &mine, "a", &alt_user)] {
        let acl = c.get_bucket_acl().bucket(bucket).send().await.unwrap();
        assert_eq!(&shown(acl.owner()), want);
        let grantee = acl.grants()[0].grantee().unwrap();
        assert_eq!(grantee.id(), Some(want.0.as_str()));
        assert_eq!(grantee.display_name(), Some(want.1.as_str()));
        no_access_key(&format!("{acl:?}"), &keys);
        let acl = c
            .get_object_acl()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .unwrap();
        assert_eq!(&shown(acl.owner()), want);
        assert_eq!(
            acl.grants()[0].grantee().unwrap().id(),
            Some(want.0.as_str())
        );
        no_access_key(&format!("{acl:?}"), &keys);
        // The object listings.
        let v2 = c
            .list_objects_v2()
            .bucket(bucket)
            .fetch_owner(true)
            .send()
            .await
            .unwrap();
        assert_eq!(&shown(v2.contents()[0].owner()), want);
        no_access_key(&format!("{v2:?}"), &keys);
        let v1 = c.list_objects().bucket(bucket).send().await.unwrap();
        assert_eq!(&shown(v1.contents()[0].owner()), want);
        let versions = c
            .list_object_versions()
            .bucket(bucket)
            .send()
            .await
            .unwrap();
        assert_eq!(&shown(versions.versions()[0].owner()), want);
        no_access_key(&format!("{v1:?}{versions:?}"), &keys);
    }

    // A grant by canonical id reaches the account: alt may not read root's object until
    // it is granted READ by its canonical user id, then may; the ACL shows the grant so.
    assert_fails(
        alt.get_object().bucket(&b).key("k").send().await,
        403,
        "AccessDenied",
    );
    root.put_object_acl()
        .bucket(&b)
        .key("k")
        .grant_full_control(format!("id={root_id}"))
        .grant_read(format!("id=\"{alt_id}\""))
        .send()
        .await
        .expect("a grant by canonical id");
    assert_eq!(get_bytes(&alt, &b, "k").await, b"root's");
    let acl = root
        .get_object_acl()
        .bucket(&b)
        .key("k")
        .send()
        .await
        .unwrap();
    let read: Vec<_> = acl
        .grants()
        .iter()
        .filter(|g| g.permission().map(|p| p.as_str()) == Some("READ"))
        .map(|g| {
            let e = g.grantee().unwrap();
            (
                e.id().unwrap_or("").to_string(),
                e.display_name().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(read, vec![alt_user.clone()]);
    no_access_key(&format!("{acl:?}"), &keys);
    // An AccessControlPolicy body naming alt by canonical id: bucket WRITE, so alt writes
    // (and starts multipart uploads) into root's bucket.
    use aws_sdk_s3::types::{AccessControlPolicy, Grant, Grantee, Owner, Permission, Type};
    let user = |id: &str, p: Permission| {
        Grant::builder()
            .grantee(
                Grantee::builder()
                    .r#type(Type::CanonicalUser)
                    .id(id)
                    .build()
                    .unwrap(),
            )
            .permission(p)
            .build()
    };
    let policy = AccessControlPolicy::builder()
        .owner(Owner::builder().id(&root_id).build())
        .grants(user(&root_id, Permission::FullControl))
        .grants(user(&alt_id, Permission::Write))
        .grants(user(&alt_id, Permission::Read))
        .build();
    root.put_bucket_acl()
        .bucket(&b)
        .access_control_policy(policy)
        .send()
        .await
        .expect("an ACL body naming canonical ids");
    let acl = root.get_bucket_acl().bucket(&b).send().await.unwrap();
    let ids: Vec<_> = acl
        .grants()
        .iter()
        .filter_map(|g| g.grantee()?.id())
        .collect();
    assert_eq!(
        ids,
        vec![root_id.as_str(), alt_id.as_str(), alt_id.as_str()]
    );
    put(&alt, &b, "from-alt", b"w").await;
    assert_eq!(object_owner(&root, &b, "from-alt").await, alt_id);
    // Multipart: initiator and owner are the account.
    let up = alt
        .create_multipart_upload()
        .bucket(&b)
        .key("mp")
        .send()
        .await
        .unwrap();
    let uploads = root
        .list_multipart_uploads()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    let u = &uploads.uploads()[0];
    let initiator = u.initiator().unwrap();
    assert_eq!(initiator.id(), Some(alt_id.as_str()));
    assert_eq!(initiator.display_name(), Some("Alt Team"));
    assert_eq!(shown(u.owner()), alt_user);
    no_access_key(&format!("{uploads:?}"), &keys);
    let parts = alt
        .list_parts()
        .bucket(&b)
        .key("mp")
        .upload_id(up.upload_id().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(shown(parts.owner()), alt_user);
    assert_eq!(
        parts.initiator().and_then(|i| i.id()),
        Some(alt_id.as_str())
    );
    no_access_key(&format!("{parts:?}"), &keys);
    // A bucket policy names an account by its canonical user id as well.
    let pol = new_bucket(&root, "bypolicy").await;
    put(&root, &pol, "p", b"by policy").await;
    assert_fails(
        alt.get_object().bucket(&pol).key("p").send().await,
        403,
        "AccessDenied",
    );
    let doc = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow",
          "Principal":{{"CanonicalUser":"{alt_id}"}},"Action":"s3:GetObject",
          "Resource":"arn:aws:s3:::{pol}/*"}}]}}"#
    );
    root.put_bucket_policy()
        .bucket(&pol)
        .policy(doc)
        .send()
        .await
        .unwrap();
    assert_eq!(get_bytes(&alt, &pol, "p").await, b"by policy");
    // Grants to a canonical id nobody has are refused.
    let nobody = "0".repeat(64);
    let r = root
        .put_object_acl()
        .bucket(&b)
        .key("k")
        .grant_read(format!("id={nobody}"))
        .send()
        .await;
    assert_fails(r, 400, "InvalidArgument");

    // The raw XML, as an anonymous reader of a public bucket and object ACL gets it.
    root.put_bucket_acl()
        .bucket(&b)
        .acl(BucketCannedAcl::PublicRead)
        .send()
        .await
        .unwrap();
    root.put_object_acl()
        .bucket(&b)
        .key("k")
        .grant_full_control(format!("id={root_id}"))
        .grant_read_acp("uri=http://acs.amazonaws.com/groups/global/AllUsers")
        .send()
        .await
        .unwrap();
    for query in ["?list-type=2&fetch-owner=true", "", "?versions", "/k?acl"] {
        let (status, xml) = anonymous_get(&format!("{}/{b}{query}", srv.endpoint)).await;
        assert_eq!(status, 200, "{query}: {xml}");
        assert!(
            xml.contains(&format!("<ID>{root_id}</ID>")),
            "{query}: {xml}"
        );
        assert!(
            xml.contains(&format!("<DisplayName>{root_name}</DisplayName>")),
            "{query}: {xml}"
        );
        no_access_key(&xml, &keys);
    }

    // The same ids after a restart.
    srv.restart();
    assert_eq!(canonical_user(&srv, ROOT_AK), root_user);
    assert_eq!(canonical_user(&srv, ALT_AK), alt_user);
    let alt = srv.client_with(ALT_AK, ALT_SK);
    let out = alt.list_buckets().send().await.unwrap();
    assert_eq!(shown(out.owner()), alt_user);
    assert_eq!(object_owner(&srv.client(), &b, "from-alt").await, alt_id);
}

/// A data directory from before accounts had canonical ids (its key file without them):
/// the root account and an account key get ids derived from their keys at the first start,
/// kept from then on, and the account still owns its bucket and objects.
#[tokio::test]
async fn accounts_from_before_canonical_ids_get_one_and_keep_it() {
    let mut srv = Server::default_start();
    let args = alt_account(None);
    ok_stdout(srv.admin_cmd(&args), "key create --account");
    let alt = srv.client_with(ALT_AK, ALT_SK);
    let mine = new_bucket(&alt, "oldacct").await;
    put(&alt, &mine, "a", b"alt's").await;
    srv.kill();
    // The key file as saker wrote it before (version 2, no canonical users).
    let path = srv.data_dir().join("access-keys.json");
    let old = format!(
        r#"{{"version":2,"keys":[
          {{"access_key":"{ROOT_AK}","secret_key":"{ROOT_SK}","uid":0,"gid":0,"root":true}},
          {{"access_key":"{ALT_AK}","secret_key":"{ALT_SK}","uid":0,"gid":0,"root":false,
            "policy":{policy},"account":true}}]}}"#,
        policy = serde_json::to_string(&read_policy(&path, ALT_AK)).unwrap()
    );
    std::fs::write(&path, old).unwrap();
    srv.restart();
    let (root_id, root_name) = canonical_user(&srv, ROOT_AK);
    let (alt_id, alt_name) = canonical_user(&srv, ALT_AK);
    assert!(is_canonical_id(&root_id) && is_canonical_id(&alt_id));
    assert_ne!(root_id, alt_id);
    assert_eq!(alt_name, format!("saker-{}", &alt_id[..8]));
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(
        file.contains(&alt_id) && file.contains(&root_id),
        "stored: {file}"
    );
    let alt = srv.client_with(ALT_AK, ALT_SK);
    let acl = alt.get_bucket_acl().bucket(&mine).send().await.unwrap();
    assert_eq!(shown(acl.owner()), (alt_id.clone(), alt_name.clone()));
    assert_eq!(object_owner(&alt, &mine, "a").await, alt_id);
    let out = srv.client().list_buckets().send().await.unwrap();
    assert_eq!(shown(out.owner()), (root_id.clone(), root_name.clone()));
    srv.restart();
    assert_eq!(canonical_user(&srv, ROOT_AK), (root_id, root_name));
    assert_eq!(canonical_user(&srv, ALT_AK), (alt_id.clone(), alt_name));
    let alt = srv.client_with(ALT_AK, ALT_SK);
    assert_eq!(object_owner(&alt, &mine, "a").await, alt_id);
}

/// The policy key `ak` has in the key file at `path`.
fn read_policy(path: &std::path::Path, ak: &str) -> serde_json::Value {
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["access_key"] == ak)
        .map(|k| k["policy"].clone())
        .unwrap()
}

/// In a cluster every node shows an account by the same canonical user: the root account's
/// (derived from the root key, the same at every node without a write) and one made through
/// one node's admin API, at every node's gateway, in `key list` and in ACLs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_node_of_a_cluster_shows_the_same_canonical_users() {
    let nodes = common::cluster::Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let args = alt_account(Some("Cluster Team"));
    nodes.admin(0, &args);
    let listed: Vec<Vec<serde_json::Value>> = (0..3)
        .map(|i| serde_json::from_str(&nodes.admin(i, &["key", "list", "--json"])).unwrap())
        .collect();
    let user_of = |keys: &[serde_json::Value], ak: &str| {
        let k = keys.iter().find(|k| k["access_key"] == ak).unwrap();
        let field = |f: &str| k[f].as_str().unwrap().to_string();
        (field("canonical_id"), field("display_name"))
    };
    let root_user = user_of(&listed[0], ROOT_AK);
    let alt_user = user_of(&listed[0], ALT_AK);
    assert!(is_canonical_id(&root_user.0) && is_canonical_id(&alt_user.0));
    assert_eq!(alt_user.1, "Cluster Team");
    for keys in &listed[1..] {
        assert_eq!(user_of(keys, ROOT_AK), root_user);
        assert_eq!(user_of(keys, ALT_AK), alt_user);
    }
    let alt0 = nodes.client_as(0, true, ALT_AK, ALT_SK);
    let b = new_bucket(&alt0, "clusteracct").await;
    put(&alt0, &b, "k", b"v").await;
    for i in 0..3 {
        let root = nodes.client(i, true);
        let out = root.list_buckets().send().await.unwrap();
        assert_eq!(shown(out.owner()), root_user, "node {}", i + 1);
        let alt = nodes.client_as(i, true, ALT_AK, ALT_SK);
        let out = alt.list_buckets().send().await.unwrap();
        assert_eq!(shown(out.owner()), alt_user, "node {}", i + 1);
        // The bucket's owner record reaches every gateway within its refresh.
        let acl = eventually("the bucket's owner at every node", || {
            let root = root.clone();
            let b = b.clone();
            let want = alt_user.0.clone();
            async move {
                let acl = root.get_object_acl().bucket(&b).key("k").send().await;
                let acl = acl.map_err(|e| format!("{e:?}"))?;
                match acl.owner().and_then(|o| o.id()) {
                    Some(id) if id == want => Ok(acl),
                    other => Err(format!("owner {other:?}")),
                }
            }
        })
        .await;
        assert_eq!(shown(acl.owner()), alt_user, "node {}", i + 1);
        no_access_key(&format!("{acl:?}{out:?}"), &[ALT_AK, ROOT_AK]);
    }
}
