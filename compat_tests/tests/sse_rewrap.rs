//! Master key rotation (`saker admin sse rotate`, `rewrap`, `retire-previous`): after a
//! rewrap every SSE-S3 object, current or noncurrent, reads back with the new key alone, and
//! an upload in progress goes on; a rewrap run again finds nothing to do; without a rewrap
//! the old key cannot go (control).

mod common;

use aws_sdk_s3::types::ServerSideEncryptionByDefault;
use aws_sdk_s3::types::{
    BucketVersioningStatus, CompletedMultipartUpload, CompletedPart, ServerSideEncryption,
};
use common::sse::*;
use common::*;

const MIB: usize = 1024 * 1024;

/// `saker admin sse ARGS` against `srv`: (succeeded, stdout, stderr).
fn sse_admin(srv: &Server, args: &[&str]) -> (bool, String, String) {
    let out = srv.admin_cmd(&[&["sse"][..], args].concat());
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewrap_lets_the_previous_master_key_go() {
    let (keys, key) = master_key();
    let mut srv = Server::start(with_key(&key));
    let c = srv.client();
    let b = new_bucket(&c, "rewrap").await;
    set_versioning(&c, &b, BucketVersioningStatus::Enabled).await;
    let v1 = marked(b"REWRAP-V1-0123456789abcdefghij!", MIB + 3);
    let first = put_sealed(&c, &b, "obj", ServerSideEncryption::Aes256, &v1)
        .await
        .unwrap();
    let v1_id = first.version_id().unwrap().to_string();
    put_sealed(&c, &b, "obj", ServerSideEncryption::Aes256, b"v2")
        .await
        .unwrap();
    put_sealed(
        &c,
        &b,
        "dir/inline",
        ServerSideEncryption::Aes256,
        b"inline",
    )
    .await
    .unwrap();
    put(&c, &b, "clear", b"never sealed").await;
    let by_default = new_bucket(&c, "rewrap-default").await;
    let aes = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .unwrap();
    set_default_encryption(&c, &by_default, aes).await;
    put(&c, &by_default, "x", b"sealed by default").await;
    let upload = c
        .create_multipart_upload()
        .bucket(&b)
        .key("pending")
        .server_side_encryption(ServerSideEncryption::Aes256)
        .send()
        .await
        .unwrap();
    let upload_id = upload.upload_id().unwrap().to_string();
    // Its first part is sealed before the rotation, its last one after the old key is gone.
    let part1 = marked(b"REWRAP-PART1-0123456789abcdefg!", 5 * MIB);
    let etag1 = upload_part(&c, &b, &upload_id, 1, &part1).await;

    ok_stdout(
        key_admin(&["sse", "rotate", key.to_str().unwrap()]),
        "sse rotate",
    );
    // Control: the old key dropped without a rewrap, the objects cannot be read.
    let early = keys.path().join("retired-early.key");
    std::fs::copy(&key, &early).unwrap();
    ok_stdout(
        key_admin(&["sse", "retire-previous", early.to_str().unwrap()]),
        "sse retire-previous",
    );
    srv.restart_with(with_key(&early));
    // (A restart serves on new ports.)
    let c = srv.client();
    assert_status(c.get_object().bucket(&b).key("obj").send().await, 500);

    srv.restart_with(with_key(&key));
    let c = srv.client();
    put_sealed(
        &c,
        &b,
        "after",
        ServerSideEncryption::Aes256,
        b"under the new key",
    )
    .await
    .unwrap();
    let (ok, out, err) = sse_admin(&srv, &["rewrap"]);
    assert!(ok, "{out}{err}");
    let line = |bucket: &str, text: &str| {
        text.lines()
            .find(|l| l.contains(&format!(" {bucket}: ")))
            .unwrap_or_else(|| panic!("no line for {bucket} in {text}"))
            .to_string()
    };
    // obj (2 versions), dir/inline, after (under the new key already), and the upload.
    let first_pass = line(&b, &out);
    assert!(
        first_pass.contains(
            "4 SSE-S3 versions, 3 rewrapped now; 1 uploads in progress, 1 rewrapped now; 0 changed"
        ),
        "{first_pass}"
    );
    assert!(
        line(&by_default, &out).contains("1 SSE-S3 versions, 1 rewrapped now"),
        "{out}"
    );
    assert!(out.contains("done: every SSE-S3 data key"), "{out}");
    // Run again: nothing left to do.
    let (ok, out, err) = sse_admin(&srv, &["rewrap"]);
    assert!(ok, "{out}{err}");
    assert!(
        line(&b, &out).contains("4 SSE-S3 versions, 0 rewrapped now; 1 uploads in progress, 0"),
        "{out}"
    );

    ok_stdout(
        key_admin(&["sse", "retire-previous", key.to_str().unwrap()]),
        "sse retire-previous",
    );
    srv.restart_with(with_key(&key));
    let c = srv.client();
    assert!(common::versions::get_v(&c, &b, "obj", &v1_id).await == v1);
    assert_eq!(get_bytes(&c, &b, "obj").await, b"v2");
    assert_eq!(get_bytes(&c, &b, "dir/inline").await, b"inline");
    assert_eq!(get_bytes(&c, &b, "after").await, b"under the new key");
    assert_eq!(get_bytes(&c, &b, "clear").await, b"never sealed");
    assert_eq!(get_bytes(&c, &by_default, "x").await, b"sealed by default");
    // The upload goes on under its rewrapped key, and its parts read back as one object.
    let etag2 = upload_part(&c, &b, &upload_id, 2, b"the last part").await;
    let parts = [(1, etag1), (2, etag2)]
        .map(|(n, e)| CompletedPart::builder().part_number(n).e_tag(e).build());
    c.complete_multipart_upload()
        .bucket(&b)
        .key("pending")
        .upload_id(&upload_id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts.to_vec()))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let whole = [&part1[..], b"the last part"].concat();
    assert!(get_bytes(&c, &b, "pending").await == whole);
}

/// Part `n` of upload `upload_id` of `b`/pending: its ETag.
async fn upload_part(
    c: &aws_sdk_s3::Client,
    b: &str,
    upload_id: &str,
    n: i32,
    data: &[u8],
) -> String {
    let out = c
        .upload_part()
        .bucket(b)
        .key("pending")
        .upload_id(upload_id)
        .part_number(n)
        .body(body(data))
        .send()
        .await
        .unwrap();
    out.e_tag().unwrap().to_string()
}
