//! Request bodies: streaming into chunks (or inline) while computing MD5 and the S3 checksums,
//! and verifying what the client declared (Content-MD5, x-amz-checksum-*, trailers).

use base64::Engine;
use futures::StreamExt;
use md5::{Digest as _, Md5};
use s3s::checksum::ChecksumHasher;
use s3s::dto::{ChecksumAlgorithm, StreamingBlob};
use s3s::{s3_error, S3Result, TrailingHeaders};
use saker_client::sealed::Sealing;
use saker_client::{ChunkWriter, Cluster, Written};
use saker_rpc::Checksums;

use crate::http::checksum::Algorithm;
use crate::http::error;

/// The checksums a client declared, from headers (and later trailers).
#[derive(Default, Clone, Debug)]
pub struct Declared {
    pub md5_b64: Option<String>,
    pub sums: Checksums,
    /// Algorithm named by `x-amz-checksum-algorithm` or `x-amz-sdk-checksum-algorithm`.
    pub algorithm: Option<String>,
    /// An algorithm to compute whatever the client declared (a part of a multipart upload
    /// created with a checksum algorithm).
    pub required: Option<Algorithm>,
}

/// The [`Declared`] checksums of a PutObject or UploadPart input (same field names in both),
/// with `algorithm` from the SDK headers as the fallback algorithm.
#[macro_export]
macro_rules! declared_checksums {
    ($input:expr, $algorithm:expr) => {
        $crate::http::body::Declared {
            md5_b64: $input.content_md5.clone(),
            sums: saker_rpc::Checksums {
                crc32: $input.checksum_crc32.clone(),
                crc32c: $input.checksum_crc32c.clone(),
                crc64nvme: $input.checksum_crc64nvme.clone(),
                sha1: $input.checksum_sha1.clone(),
                sha256: $input.checksum_sha256.clone(),
            },
            algorithm: $input
                .checksum_algorithm
                .as_ref()
                .map(|a| a.as_str().to_string())
                .or($algorithm),
            required: None,
        }
    };
}

/// What was stored.
pub struct Ingested {
    pub written: Written,
    pub md5_hex: String,
    /// Checksums computed for every declared algorithm.
    pub sums: Checksums,
}

fn hasher_for(declared: &Declared, trailer: Option<&str>) -> ChecksumHasher {
    let mut h = ChecksumHasher::default();
    let mut want = |alg: &str| match alg.to_ascii_uppercase().as_str() {
        ChecksumAlgorithm::CRC32 => h.crc32 = Some(Default::default()),
        ChecksumAlgorithm::CRC32C => h.crc32c = Some(Default::default()),
        ChecksumAlgorithm::CRC64NVME => h.crc64nvme = Some(Default::default()),
        ChecksumAlgorithm::SHA1 => h.sha1 = Some(Default::default()),
        ChecksumAlgorithm::SHA256 => h.sha256 = Some(Default::default()),
        _ => {}
    };
    let s = &declared.sums;
    for (alg, v) in [
        ("CRC32", &s.crc32),
        ("CRC32C", &s.crc32c),
        ("CRC64NVME", &s.crc64nvme),
        ("SHA1", &s.sha1),
        ("SHA256", &s.sha256),
    ] {
        if v.is_some() {
            want(alg);
        }
    }
    if let Some(a) = &declared.algorithm {
        want(a);
    }
    if let Some(a) = declared.required {
        want(a.as_str());
    }
    if let Some(t) = trailer {
        for name in t.split(',') {
            if let Some(alg) = name.trim().strip_prefix("x-amz-checksum-") {
                want(alg);
            }
        }
    }
    h
}

fn to_checksums(c: s3s::dto::Checksum) -> Checksums {
    Checksums {
        crc32: c.checksum_crc32,
        crc32c: c.checksum_crc32c,
        crc64nvme: c.checksum_crc64nvme,
        sha1: c.checksum_sha1,
        sha256: c.checksum_sha256,
    }
}

fn merge_trailers(declared: &mut Declared, trailers: Option<TrailingHeaders>) {
    let Some(map) = trailers.and_then(|t| t.take()) else {
        return;
    };
    let get = |n: &str| map.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let s = &mut declared.sums;
    s.crc32 = get("x-amz-checksum-crc32").or(s.crc32.take());
    s.crc32c = get("x-amz-checksum-crc32c").or(s.crc32c.take());
    s.crc64nvme = get("x-amz-checksum-crc64nvme").or(s.crc64nvme.take());
    s.sha1 = get("x-amz-checksum-sha1").or(s.sha1.take());
    s.sha256 = get("x-amz-checksum-sha256").or(s.sha256.take());
}

fn verify(declared: &Declared, computed: &Checksums, md5_raw: &[u8; 16]) -> S3Result<()> {
    if let Some(b64) = &declared.md5_b64 {
        let want = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|_| s3_error!(InvalidDigest, "Content-MD5 is not valid base64"))?;
        if want.as_slice() != md5_raw {
            return Err(s3_error!(
                BadDigest,
                "the Content-MD5 you specified did not match what we received"
            ));
        }
    }
    let d = &declared.sums;
    for (name, want, got) in [
        ("CRC32", &d.crc32, &computed.crc32),
        ("CRC32C", &d.crc32c, &computed.crc32c),
        ("CRC64NVME", &d.crc64nvme, &computed.crc64nvme),
        ("SHA1", &d.sha1, &computed.sha1),
        ("SHA256", &d.sha256, &computed.sha256),
    ] {
        if let Some(w) = want {
            if Some(w) != got.as_ref() {
                return Err(s3_error!(
                    BadDigest,
                    "the {} checksum you specified did not match what we received",
                    name
                ));
            }
        }
    }
    Ok(())
}

/// Streams `body` into storage, encrypted with `seal` when set (the checksums are of the
/// plaintext). Small bodies stay inline unless `chunked`. On any error the chunks already
/// written are deleted.
pub async fn ingest(
    cluster: &Cluster,
    body: Option<StreamingBlob>,
    mut declared: Declared,
    trailers: Option<TrailingHeaders>,
    trailer_header: Option<&str>,
    chunked: bool,
    seal: Option<Sealing>,
) -> S3Result<Ingested> {
    let mut writer = ChunkWriter::new(cluster).sealed(seal);
    let mut md5 = Md5::new();
    let mut hasher = hasher_for(&declared, trailer_header);
    if let Some(mut body) = body {
        while let Some(piece) = body.next().await {
            let piece = match piece {
                Ok(p) => p,
                Err(e) => {
                    writer.abort().await;
                    tracing::debug!(error = %e, "request body failed");
                    return Err(s3_error!(
                        IncompleteBody,
                        "the request body could not be read"
                    ));
                }
            };
            md5.update(&piece);
            hasher.update(&piece);
            if let Err(e) = writer.write(&piece).await {
                writer.abort().await;
                return Err(error::client(e));
            }
        }
    }
    let md5_raw: [u8; 16] = md5.finalize().into();
    let sums = to_checksums(hasher.finalize());
    merge_trailers(&mut declared, trailers);
    if let Err(e) = verify(&declared, &sums, &md5_raw) {
        writer.abort().await;
        return Err(e);
    }
    let written = if chunked {
        writer.finish_chunked().await
    } else {
        writer.finish().await
    }
    .map_err(error::client)?;
    Ok(Ingested {
        written,
        md5_hex: hex::encode(md5_raw),
        sums,
    })
}

/// Deletes the chunks of data that no record will reference (a failed metadata commit).
pub async fn discard(cluster: &Cluster, written: &Written) {
    for c in written.layout.chunks() {
        if let Err(e) = cluster
            .chunk_store()
            .delete(saker_chunkstore::ChunkId(c.id))
            .await
        {
            tracing::warn!(error = %e, "could not delete an unreferenced chunk; the scrub will");
        }
    }
}
