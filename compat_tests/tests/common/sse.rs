//! Server-side encryption for tests: a master key made by `saker admin master-key` in a
//! directory of its own (never the server's data directory), the chunk files an encrypted
//! object's bytes are stored in, marked bytes and a search of a data directory for them,
//! bucket default encryption and SSE-C keys.

use std::path::{Path, PathBuf};

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, ServerSideEncryption, ServerSideEncryptionByDefault,
    ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
};
use aws_sdk_s3::Client;
use base64::Engine as _;

use super::{body, md5_raw, ok_stdout, random_bytes, saker_bin, Opts, Server};

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

pub fn with_key(path: &Path) -> Opts {
    Opts::default()
        .arg("--sse-key-file", path.to_str().unwrap())
        .arg("--chunk-size", "1MiB")
}

/// `n` bytes that carry `marker` at several places (so any stored piece would show it).
pub fn marked(marker: &[u8], n: usize) -> Vec<u8> {
    let mut data = random_bytes(n);
    let step = (n / 4).max(marker.len());
    let mut at = 0;
    while at + marker.len() <= n {
        data[at..at + marker.len()].copy_from_slice(marker);
        at += step;
    }
    data
}

/// Whether any file under the server's data directory contains each of `needles`.
pub async fn on_disk<const N: usize>(srv: &Server, needles: [&'static [u8]; N]) -> [bool; N] {
    let dir = srv.data_dir().to_path_buf();
    tokio::task::spawn_blocking(move || needles.map(|n| under(&dir, n)))
        .await
        .unwrap()
}

/// Whether any file under `dir` contains `needle`.
pub fn under(dir: &Path, needle: &[u8]) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            under(&path, needle)
        } else {
            std::fs::read(&path)
                .map(|b| b.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
        }
    })
}

/// The bucket's default encryption is `by_default`.
pub async fn set_default_encryption(
    c: &Client,
    b: &str,
    by_default: ServerSideEncryptionByDefault,
) {
    let rule = ServerSideEncryptionRule::builder()
        .apply_server_side_encryption_by_default(by_default)
        .build();
    let conf = ServerSideEncryptionConfiguration::builder()
        .rules(rule)
        .build()
        .unwrap();
    c.put_bucket_encryption()
        .bucket(b)
        .server_side_encryption_configuration(conf)
        .send()
        .await
        .unwrap();
}

/// An SSE-C key made of `seed`, and its MD5, both base64.
pub fn customer(seed: u8) -> (String, String) {
    let key = [seed; 32];
    let b64 = base64::engine::general_purpose::STANDARD;
    (b64.encode(key), b64.encode(md5_raw(&key)))
}

/// A PUT of `data` at `k` under the SSE-C key of `seed` ([`customer`]).
pub async fn put_customer_sealed(c: &Client, b: &str, k: &str, seed: u8, data: &[u8]) {
    let (key, md5) = customer(seed);
    c.put_object()
        .bucket(b)
        .key(k)
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&key)
        .sse_customer_key_md5(&md5)
        .body(body(data))
        .send()
        .await
        .unwrap();
}
