//! Signatures whose credential scope names the region in upper case (s3cmd's default
//! `bucket_location = US`): taken as AWS and MinIO take them, and still checked.

mod common;

use aws_sdk_s3::config::Region;
use aws_sdk_s3::primitives::ByteStream;
use common::*;

#[tokio::test]
async fn a_scope_region_in_upper_case_is_taken_and_still_checked() {
    let srv = Server::default_start();
    let b = new_bucket(&srv.client(), "scope-us").await;
    let us = |ak: &str, sk: &str| {
        aws_sdk_s3::Client::from_conf(srv.config_with(ak, sk).region(Region::new("US")).build())
    };
    let c = us(ROOT_AK, ROOT_SK);
    // A key that needs encoding, query parameters, a header of its own and a body.
    let key = "dir/a b+c~d (1).txt";
    c.put_object()
        .bucket(&b)
        .key(key)
        .metadata("note", "upper case scope")
        .body(ByteStream::from_static(b"signed with US"))
        .send()
        .await
        .expect("PUT signed in scope US");
    let got = c.get_object().bucket(&b).key(key).send().await.unwrap();
    assert_eq!(got.metadata().unwrap()["note"], "upper case scope");
    let body = got.body.collect().await.unwrap().into_bytes();
    assert_eq!(&body[..], b"signed with US");
    let listed = c
        .list_objects_v2()
        .bucket(&b)
        .prefix("dir/")
        .delimiter("/")
        .max_keys(10)
        .send()
        .await
        .unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, [key]);
    // A wrong secret is still refused, as a bad signature.
    let err = us(ROOT_AK, "not-the-secret")
        .get_object()
        .bucket(&b)
        .key(key)
        .send()
        .await
        .expect_err("a wrong secret in scope US");
    let e = err.into_service_error();
    assert_eq!(e.meta().code(), Some("SignatureDoesNotMatch"), "{e:?}");
    c.delete_object().bucket(&b).key(key).send().await.unwrap();
}

/// s3cmd (PyPI, installed by `test.sh`) with the configuration a new user has: path-style
/// requests, SigV4, `bucket_location = US`.
#[test]
fn s3cmd_with_its_default_bucket_location_works() {
    let srv = Server::default_start();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("s3cfg");
    let host = srv.endpoint.trim_start_matches("http://");
    std::fs::write(
        &cfg,
        format!(
            "[default]\naccess_key = {ROOT_AK}\nsecret_key = {ROOT_SK}\nhost_base = {host}\n\
             host_bucket = {host}\nuse_https = False\nsignature_v2 = False\n\
             bucket_location = US\n"
        ),
    )
    .unwrap();
    let s3cmd = |args: &[&str]| {
        let out = std::process::Command::new("s3cmd")
            .arg("-c")
            .arg(&cfg)
            .args(args)
            .output()
            .expect("s3cmd is installed (test.sh installs it from PyPI)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "s3cmd {args:?}: {text}");
        text
    };
    let file = dir.path().join("f.txt");
    std::fs::write(&file, b"through s3cmd").unwrap();
    let file = file.to_str().unwrap();
    s3cmd(&["mb", "s3://s3cmd-us"]);
    s3cmd(&["put", file, "s3://s3cmd-us/dir/f g.txt"]);
    let listed = s3cmd(&["ls", "-r", "s3://s3cmd-us"]);
    assert!(listed.contains("s3://s3cmd-us/dir/f g.txt"), "{listed}");
    let back = dir.path().join("back.txt");
    s3cmd(&["get", "s3://s3cmd-us/dir/f g.txt", back.to_str().unwrap()]);
    assert_eq!(std::fs::read(&back).unwrap(), b"through s3cmd");
    s3cmd(&["del", "s3://s3cmd-us/dir/f g.txt"]);
    s3cmd(&["rb", "s3://s3cmd-us"]);
}
