//! Encrypted versions in an archive tier: `saker archive` moves SSE-S3 objects (inline,
//! chunked, multipart with parts of their own streams) to a tier whose copies hold the
//! ciphertext followed by the packages' records; GETs and ranges read them back through their
//! tags, and RestoreObject brings back chunks that read as the originals did.

mod common;

use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, GlacierJobParameters, RestoreRequest,
    ServerSideEncryption, Tier,
};
use common::sse::master_key;
use common::tier::{add_tier, archive_cmd, remote_keys};
use common::*;

const PACKAGE: usize = 65536;
const RECORD: usize = 28;

async fn put_sse(c: &aws_sdk_s3::Client, b: &str, k: &str, data: &[u8]) {
    c.put_object()
        .bucket(b)
        .key(k)
        .server_side_encryption(ServerSideEncryption::Aes256)
        .body(body(data))
        .send()
        .await
        .unwrap();
}

async fn multipart_sse(c: &aws_sdk_s3::Client, b: &str, k: &str, parts: &[&[u8]]) {
    let up = c
        .create_multipart_upload()
        .bucket(b)
        .key(k)
        .server_side_encryption(ServerSideEncryption::Aes256)
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap();
    let mut done = Vec::new();
    for (i, data) in parts.iter().enumerate() {
        let n = 2 + 3 * i as i32;
        let p = c
            .upload_part()
            .bucket(b)
            .key(k)
            .upload_id(id)
            .part_number(n)
            .body(body(data))
            .send()
            .await
            .unwrap();
        let e = p.e_tag().unwrap();
        done.push(CompletedPart::builder().part_number(n).e_tag(e).build());
    }
    let all = CompletedMultipartUpload::builder()
        .set_parts(Some(done))
        .build();
    c.complete_multipart_upload()
        .bucket(b)
        .key(k)
        .upload_id(id)
        .multipart_upload(all)
        .send()
        .await
        .unwrap();
}

async fn range(c: &aws_sdk_s3::Client, b: &str, k: &str, from: usize, to: usize) -> Vec<u8> {
    let o = c
        .get_object()
        .bucket(b)
        .key(k)
        .range(format!("bytes={from}-{}", to - 1))
        .send()
        .await
        .unwrap();
    o.body.collect().await.unwrap().into_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_versions_move_to_a_tier_with_their_tags_and_come_back() {
    let cold = Server::default_start();
    let cc = cold.client();
    create_bucket(&cc, "archive").await;
    let (_keys, key) = master_key();
    let hot = Server::start(
        Opts::fast_gc()
            .arg("--sse-key-file", key.to_str().unwrap())
            .arg("--chunk-size", "1MiB")
            .arg("--tier-cache-size", "1MiB"),
    );
    ok_stdout(
        add_tier(&hot, &cold, "COLD", "archive", ROOT_SK),
        "tier add",
    );
    let c = hot.client();
    let b = new_bucket(&c, "enc").await;
    let inline = random_bytes(10_000);
    let mid = random_bytes(300_000);
    let (p1, p2) = (random_bytes(5 << 20), random_bytes(PACKAGE + 7));
    put_sse(&c, &b, "enc/inline", &inline).await;
    put_sse(&c, &b, "enc/mid", &mid).await;
    multipart_sse(&c, &b, "enc/parts", &[&p1, &p2]).await;
    let mut parts = p1.clone();
    parts.extend_from_slice(&p2);

    let out = ok_stdout(
        archive_cmd(&hot, &format!("{b}/enc/"), &[])
            .output()
            .unwrap(),
        "archive",
    );
    let job: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(job["report"]["moved"], 3, "{job}");
    assert_eq!(job["report"]["verified"], 3, "{job}");
    // Each copy is the ciphertext, then a record per package.
    let mut sizes: Vec<i64> = remote_keys(&cc, "archive")
        .await
        .iter()
        .map(|(_, n)| *n)
        .collect();
    sizes.sort();
    let with_records = |n: usize| (n + n.div_ceil(PACKAGE) * RECORD) as i64;
    let parts_size = with_records(p1.len()) + with_records(p2.len());
    assert_eq!(
        sizes,
        [with_records(10_000), with_records(300_000), parts_size]
    );

    // Whole objects (the small ones from the tier cache), and ranges across packages and
    // across the part boundary, straight from the tier.
    assert_eq!(get_bytes(&c, &b, "enc/inline").await, inline);
    assert_eq!(get_bytes(&c, &b, "enc/mid").await, mid);
    assert_eq!(get_bytes(&c, &b, "enc/parts").await, parts);
    for (from, to) in [(65_000, 140_000), ((5 << 20) - 100, (5 << 20) + 65_000)] {
        assert_eq!(range(&c, &b, "enc/parts", from, to).await, parts[from..to]);
    }
    assert_eq!(
        range(&c, &b, "enc/mid", 299_000, 300_000).await,
        mid[299_000..]
    );

    // The local chunks go after the grace period.
    let freed = poll_until(std::time::Duration::from_secs(30), || async {
        hot.stored_chunks() == 0
    })
    .await;
    assert!(freed, "{} chunks stored", hot.stored_chunks());

    // Restored, the bytes are local chunks again and read the same.
    c.restore_object()
        .bucket(&b)
        .key("enc/parts")
        .restore_request(
            RestoreRequest::builder()
                .days(1)
                .glacier_job_parameters(
                    GlacierJobParameters::builder()
                        .tier(Tier::Standard)
                        .build()
                        .unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        hot.stored_chunks(),
        6,
        "5 MiB and 64 KiB + 7 in 1 MiB chunks"
    );
    assert_eq!(get_bytes(&c, &b, "enc/parts").await, parts);
    let (from, to) = ((5 << 20) - 5, (5 << 20) + 5);
    assert_eq!(range(&c, &b, "enc/parts", from, to).await, parts[from..to]);
}
