//! Server-side encryption keys for tests: a master key made by `saker admin master-key` in a
//! directory of its own (never the server's data directory), and the chunk files an
//! encrypted object's bytes are stored in.

use std::path::{Path, PathBuf};

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, ServerSideEncryption};
use aws_sdk_s3::Client;

use super::{body, ok_stdout, saker_bin};

/// A new master key in a directory of its own (not the server's data directory).
pub fn master_key() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("master.key");
    ok_stdout(
        key_admin(&["master-key", path.to_str().unwrap()]),
        "master-key",
    );
    (dir, path)
}

/// `saker admin ARGS` (the key commands, which need no server).
pub fn key_admin(args: &[&str]) -> std::process::Output {
    std::process::Command::new(saker_bin())
        .arg("admin")
        .args(args)
        .output()
        .unwrap()
}

/// The chunk files (`*.chunk`: chunks above the small-chunk limit) under `dir`.
pub fn chunk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(chunk_files(&path));
        } else if path.extension().is_some_and(|x| x == "chunk") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The data of a chunk file (format 1: a 24-byte header, the data, a CRC32C per block, a
/// CRC32C of all the data).
pub fn chunk_data(file: &[u8]) -> &[u8] {
    let len = u64::from_le_bytes(file[8..16].try_into().unwrap()) as usize;
    &file[24..24 + len]
}

/// `file` (a chunk file's bytes) with byte `at` of its data flipped and every checksum the
/// format keeps rewritten to match, so that only the encryption's tags can tell.
pub fn tamper_consistently(file: &mut [u8], at: usize) {
    let len = u64::from_le_bytes(file[8..16].try_into().unwrap()) as usize;
    let block = u32::from_le_bytes(file[16..20].try_into().unwrap()) as usize;
    file[24 + at] ^= 0x5a;
    let data = file[24..24 + len].to_vec();
    let table = 24 + len;
    for (i, b) in data.chunks(block).enumerate() {
        let crc = crc32c::crc32c(b).to_le_bytes();
        file[table + 4 * i..table + 4 * i + 4].copy_from_slice(&crc);
    }
    let whole = table + 4 * len.div_ceil(block);
    file[whole..whole + 4].copy_from_slice(&crc32c::crc32c(&data).to_le_bytes());
}

/// A PUT of `k` encrypted as `sse` says.
pub async fn put_sealed(
    c: &Client,
    b: &str,
    k: &str,
    sse: ServerSideEncryption,
    data: &[u8],
) -> Result<
    aws_sdk_s3::operation::put_object::PutObjectOutput,
    aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::put_object::PutObjectError, HttpResponse>,
> {
    c.put_object()
        .bucket(b)
        .key(k)
        .server_side_encryption(sse)
        .body(body(data))
        .send()
        .await
}

/// Uploads `parts` as part numbers 1, 3, 5… (gaps on purpose: each part is its own stream).
pub async fn multipart(c: &Client, b: &str, k: &str, parts: &[&[u8]], sse: bool) {
    let mut create = c.create_multipart_upload().bucket(b).key(k);
    if sse {
        create = create.server_side_encryption(ServerSideEncryption::Aes256);
    }
    let up = create.send().await.unwrap();
    assert_eq!(
        up.server_side_encryption(),
        sse.then_some(&ServerSideEncryption::Aes256)
    );
    let id = up.upload_id().unwrap();
    let mut done = Vec::new();
    for (i, data) in parts.iter().enumerate() {
        let n = 1 + 2 * i as i32;
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
        done.push(
            CompletedPart::builder()
                .part_number(n)
                .e_tag(p.e_tag().unwrap())
                .build(),
        );
    }
    let parts = CompletedMultipartUpload::builder()
        .set_parts(Some(done))
        .build();
    c.complete_multipart_upload()
        .bucket(b)
        .key(k)
        .upload_id(id)
        .multipart_upload(parts)
        .send()
        .await
        .unwrap();
}
