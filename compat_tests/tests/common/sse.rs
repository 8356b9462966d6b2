//! Server-side encryption helpers: master keys made by `saker admin master-key`, marked
//! bytes, a search of a data directory for plaintext, bucket default encryption.

use std::path::{Path, PathBuf};

use aws_sdk_s3::types::{
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
    ServerSideEncryptionRule,
};
use aws_sdk_s3::Client;

use base64::Engine as _;

use super::*;

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

/// A PUT of `data` at `k` with `x-amz-server-side-encryption: sse`.
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
