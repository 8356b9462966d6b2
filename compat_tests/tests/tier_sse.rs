//! Encrypted versions in an archive tier: `saker archive` moves SSE-S3 objects (inline,
//! chunked, multipart with parts of their own streams) to a tier whose copies hold the
//! ciphertext followed by the packages' records; GETs and ranges read them back through their
//! tags, and RestoreObject brings back chunks that read as the originals did.

mod common;

use aws_sdk_s3::types::ServerSideEncryption;
use common::sse::{master_key, multipart, put_sealed};
use common::tier::{add_tier, archive_cmd, remote_keys, restore};
use common::*;

const PACKAGE: usize = 65536;
const RECORD: usize = 28;

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
    for (k, data) in [("enc/inline", &inline), ("enc/mid", &mid)] {
        put_sealed(&c, &b, k, ServerSideEncryption::Aes256, data)
            .await
            .unwrap();
    }
    multipart(&c, &b, "enc/parts", &[&p1, &p2], true).await;
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
        let r = format!("bytes={from}-{}", to - 1);
        assert_eq!(get_range(&c, &b, "enc/parts", &r).await, parts[from..to]);
    }
    let tail = get_range(&c, &b, "enc/mid", "bytes=299000-299999").await;
    assert_eq!(tail, mid[299_000..]);

    // The local chunks go after the grace period.
    let freed = poll_until(std::time::Duration::from_secs(30), || async {
        hot.stored_chunks() == 0
    })
    .await;
    assert!(freed, "{} chunks stored", hot.stored_chunks());

    // Restored, the bytes are local chunks again and read the same.
    restore(&c, &b, "enc/parts", 1).await.unwrap();
    assert_eq!(
        hot.stored_chunks(),
        6,
        "5 MiB and 64 KiB + 7 in 1 MiB chunks"
    );
    assert_eq!(get_bytes(&c, &b, "enc/parts").await, parts);
    let at = 5 << 20;
    let r = format!("bytes={}-{}", at - 5, at + 4);
    assert_eq!(
        get_range(&c, &b, "enc/parts", &r).await,
        parts[at - 5..at + 5]
    );
}
