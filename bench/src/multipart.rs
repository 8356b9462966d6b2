//! Large objects the way `aws s3 cp` and SDK transfer managers move them: a PUT as a
//! multipart upload whose parts go over several streams at once, a GET as ranged GETs of
//! part-sized pieces over several streams, every piece checked against the bytes written.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::empty::texts;
use super::s3::Target;
use super::sigv4::uri_encode;

/// Part size and streams of one large-object transfer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Transfer {
    pub part_size: u64,
    pub streams: usize,
}

impl Transfer {
    /// The byte ranges [start, end) of `len` bytes' parts.
    fn parts(&self, len: u64) -> Vec<(u64, u64)> {
        let step = self.part_size.max(1);
        (0..len.div_ceil(step))
            .map(|i| (i * step, ((i + 1) * step).min(len)))
            .collect()
    }
}

/// A failed step's status (and what it answered, for the log).
fn failed(step: &str, status: u16, body: &Bytes) -> anyhow::Error {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    anyhow::anyhow!("{step} answered {status}: {text}")
}

/// Uploads `written` to `key` as a multipart upload; answers like [`Target::send`] (status,
/// bytes sent, and true).
pub(super) async fn put(
    target: &Target,
    key: &str,
    written: &Bytes,
    t: Transfer,
) -> anyhow::Result<(u16, u64, bool)> {
    let (status, _, body) = target
        .object_request("POST", key, "uploads=", &[], Bytes::new())
        .await?;
    if status != 200 {
        return Err(failed("CreateMultipartUpload", status, &body));
    }
    let text = String::from_utf8_lossy(&body);
    let upload = texts(&text, "UploadId")
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no UploadId in {text}"))?;
    let id = uri_encode(&upload, false);
    let mut etags: Vec<(usize, String)> = futures::stream::iter(t.parts(written.len() as u64))
        .enumerate()
        .map(|(i, (start, end))| {
            let query = format!("partNumber={}&uploadId={id}", i + 1);
            let part = written.slice(start as usize..end as usize);
            async move {
                let (status, etag, _) =
                    target.object_request("PUT", key, &query, &[], part).await?;
                match (status, etag) {
                    (200, Some(etag)) => Ok::<_, anyhow::Error>((i + 1, etag)),
                    (status, _) => Err(anyhow::anyhow!("UploadPart answered {status}")),
                }
            }
        })
        .buffer_unordered(t.streams.max(1))
        .try_collect()
        .await?;
    etags.sort();
    let mut xml = String::from("<CompleteMultipartUpload>");
    for (n, etag) in &etags {
        xml.push_str(&format!(
            "<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>"
        ));
    }
    xml.push_str("</CompleteMultipartUpload>");
    let query = format!("uploadId={id}");
    let (status, _, body) = target
        .object_request("POST", key, &query, &[], Bytes::from(xml))
        .await?;
    // A completion can fail in a 200's body.
    if status != 200 || String::from_utf8_lossy(&body).contains("<Error>") {
        return Err(failed("CompleteMultipartUpload", status, &body));
    }
    Ok((status, written.len() as u64, true))
}

/// Reads `key` as ranged GETs of part-sized pieces over several streams; answers like
/// [`Target::send`]: the status (206 for every piece, else the first other), the bytes read
/// and whether every piece held the bytes `written` has there.
pub(super) async fn get(
    target: &Target,
    key: &str,
    written: &Bytes,
    t: Transfer,
) -> anyhow::Result<(u16, u64, bool)> {
    let pieces: Vec<(u16, Bytes, bool)> = futures::stream::iter(t.parts(written.len() as u64))
        .map(|(start, end)| async move {
            let range = [("range", format!("bytes={start}-{}", end - 1))];
            let (status, _, body) = target
                .object_request("GET", key, "", &range, Bytes::new())
                .await?;
            let same = written.get(start as usize..end as usize) == Some(&body[..]);
            Ok::<_, anyhow::Error>((status, body, same))
        })
        .buffer_unordered(t.streams.max(1))
        .try_collect()
        .await?;
    let status = pieces
        .iter()
        .map(|p| p.0)
        .find(|s| *s != 206)
        .unwrap_or(206);
    let n = pieces.iter().map(|p| p.1.len() as u64).sum();
    let same = pieces.iter().all(|p| p.2) && n == written.len() as u64;
    Ok((status, n, same))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_object_once() {
        let t = Transfer {
            part_size: 8,
            streams: 2,
        };
        assert_eq!(t.parts(20), [(0, 8), (8, 16), (16, 20)]);
        assert_eq!(t.parts(16), [(0, 8), (8, 16)]);
        assert!(t.parts(0).is_empty());
    }
}
