//! Encrypted bytes are authenticated and never share a keystream: a block rewritten on disk
//! with its checksums made to match (so only the encryption can tell) fails the GET on a server
//! of one copy, and is read from another copy, and rewritten, on a cluster; a part uploaded
//! twice leaves two ciphertexts under different keystreams.

mod common;

use aws_sdk_s3::types::ServerSideEncryption;
use common::cluster::{chunks_held, Nodes};
use common::sse::{chunk_data, chunk_files, master_key, put_sealed, tamper_consistently};
use common::*;

/// Above the small-chunk limit (a chunk file of its own), four packages and a short one.
const SIZE: usize = 4 * 65536 + 12_345;

async fn put_sse(c: &aws_sdk_s3::Client, b: &str, k: &str, data: &[u8]) {
    let out = put_sealed(c, b, k, ServerSideEncryption::Aes256, data)
        .await
        .unwrap();
    assert_eq!(
        out.server_side_encryption(),
        Some(&ServerSideEncryption::Aes256)
    );
}

/// A server of one copy with a master key (kept alive by the directory answered).
fn sse_server() -> (tempfile::TempDir, Server) {
    let (keys, key) = master_key();
    let srv = Server::start(
        Opts::default()
            .arg("--sse-key-file", key.to_str().unwrap())
            .arg("--chunk-size", "1MiB"),
    );
    (keys, srv)
}

/// The bytes of a GET of `k` (with `range`), or the failure of the request or of its body.
async fn try_get(
    c: &aws_sdk_s3::Client,
    b: &str,
    k: &str,
    range: Option<&str>,
) -> Result<Vec<u8>, String> {
    let out = c
        .get_object()
        .bucket(b)
        .key(k)
        .set_range(range.map(str::to_string))
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let bytes = out.body.collect().await.map_err(|e| e.to_string())?;
    Ok(bytes.into_bytes().to_vec())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_block_fails_its_tag_on_a_server_of_one_copy() {
    let (_keys, srv) = sse_server();
    let c = srv.client();
    let b = new_bucket(&c, "tamper").await;
    let data = random_bytes(SIZE);
    put_sse(&c, &b, "k", &data).await;
    assert_eq!(try_get(&c, &b, "k", None).await.unwrap(), data);

    let files = chunk_files(srv.data_dir());
    assert_eq!(files.len(), 1, "one chunk file: {files:?}");
    let mut file = std::fs::read(&files[0]).unwrap();
    // The data region holds the ciphertext then one record (nonce, tag) per package.
    assert_eq!(chunk_data(&file).len(), SIZE + 5 * 28);
    tamper_consistently(&mut file, 70_000);
    std::fs::write(&files[0], &file).unwrap();

    let failed = try_get(&c, &b, "k", None).await;
    assert!(failed.is_err(), "a GET of tampered bytes answered them");
    let ranged = try_get(&c, &b, "k", Some("bytes=65600-65700")).await;
    assert!(ranged.is_err(), "a range in the tampered package answered");
    // Other packages still read, checked by their own tags.
    let intact = try_get(&c, &b, "k", Some("bytes=140000-140099"))
        .await
        .unwrap();
    assert_eq!(intact, &data[140_000..140_100]);
    assert!(metric(&srv.admin, "saker_sse_tag_failures_total").await >= 2.0);
    // The chunkstore's own checksums saw nothing: only the tags could tell.
    assert_eq!(
        metric(&srv.admin, "saker_chunkstore_crc_failures_total").await,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_part_uploaded_twice_is_under_two_keystreams() {
    let (_keys, srv) = sse_server();
    let c = srv.client();
    let b = new_bucket(&c, "parts").await;
    let up = c
        .create_multipart_upload()
        .bucket(&b)
        .key("k")
        .server_side_encryption(ServerSideEncryption::Aes256)
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap();
    let (first, second) = (vec![0u8; SIZE], vec![0xffu8; SIZE]);
    let mut stored = Vec::new();
    for data in [&first, &second] {
        c.upload_part()
            .bucket(&b)
            .key("k")
            .upload_id(id)
            .part_number(1)
            .body(body(data))
            .send()
            .await
            .unwrap();
        let files = chunk_files(srv.data_dir());
        let new = files
            .iter()
            .map(|f| std::fs::read(f).unwrap())
            .find(|f| !stored.contains(f))
            .expect("the part's chunk file");
        stored.push(new);
    }
    let (a, b2) = (chunk_data(&stored[0]), chunk_data(&stored[1]));
    assert!(a.len() >= SIZE && b2.len() >= SIZE);
    // Under one keystream the ciphertexts' XOR would be the plaintexts' (all 0xff).
    let same_stream = (0..SIZE).filter(|&i| a[i] ^ b2[i] == 0xff).count();
    assert!(
        same_stream < SIZE / 64,
        "{same_stream} of {SIZE} bytes XOR as under one keystream"
    );
    // Neither plaintext is on disk.
    assert!(!a[..SIZE].windows(64).any(|w| w == &first[..64]));
    assert!(!b2[..SIZE].windows(64).any(|w| w == &second[..64]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tampered_copy_is_read_from_another_and_rewritten_on_a_cluster() {
    let (_keys, key) = master_key();
    let nodes = Nodes::start(&["--sse-key-file", key.to_str().unwrap()]);
    let c = nodes.client(0, true);
    let b = new_bucket(&c, "tamper3").await;
    let data = random_bytes(SIZE);
    let before = chunks_held(&nodes.rpc[2]).await;
    put_sse(&c, &b, "k", &data).await;
    let id = chunks_held(&nodes.rpc[2])
        .await
        .into_iter()
        .find(|c| !before.contains(c))
        .expect("node 3 holds a copy of the new chunk");
    let name = format!("{id:032x}");
    let path = nodes
        .dir
        .path()
        .join("node3/chunks")
        .join(&name[..2])
        .join(format!("{name}.chunk"));
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    tamper_consistently(&mut bad, 3);
    std::fs::write(&path, &bad).unwrap();

    // Node 3 reads its own copy first: its tag fails, another copy answers.
    let c3 = nodes.client(2, true);
    assert_eq!(try_get(&c3, &b, "k", None).await.unwrap(), data);
    assert!(nodes.metric(2, "saker_sse_tag_failures_total").await >= 1.0);
    assert!(nodes.metric(2, "saker_chunk_read_repairs_total").await >= 1.0);
    // The bad copy was rewritten before the answer.
    let now = std::fs::read(&path).unwrap();
    assert_eq!(chunk_data(&now), chunk_data(&good));
}
