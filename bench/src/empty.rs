//! The `empty` phase of `saker bench s3`: removes every object of one size the run wrote,
//! as bulk deletes do it (`aws s3 rm --recursive`, `rclone purge`, lifecycle clean-ups):
//! a ListObjectsV2 page of 1,000 keys, then one DeleteObjects of them, until the prefix is
//! empty. Objects/s is the objects removed over the whole time, listings included; the
//! latencies are the DeleteObjects requests'. Keys the server did not delete are errors.

use std::time::Instant;

use base64::Engine;
use bytes::Bytes;
use md5::{Digest, Md5};

use super::s3::{PhaseResult, Recorder, Target};
use super::sigv4::uri_encode;

/// The text of every `<tag>…</tag>` in `xml`, unescaped.
pub(super) fn texts(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        let Some(j) = rest.find(&close) else { break };
        out.push(unescape(&rest[..j]));
        rest = &rest[j + close.len()..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One page of keys under `prefix` after `token`, and the token of the next page.
async fn list(
    target: &Target,
    prefix: &str,
    token: Option<&str>,
) -> anyhow::Result<(Vec<String>, Option<String>)> {
    let mut query = String::new();
    if let Some(t) = token {
        query.push_str(&format!("continuation-token={}&", uri_encode(t, false)));
    }
    query.push_str(&format!(
        "list-type=2&max-keys=1000&prefix={}",
        uri_encode(prefix, false)
    ));
    let (status, body) = target.call("GET", &query, &[], Bytes::new()).await?;
    let text = String::from_utf8_lossy(&body);
    anyhow::ensure!(status == 200, "list: HTTP {status}: {text}");
    let next = (texts(&text, "IsTruncated").first().map(String::as_str) == Some("true"))
        .then(|| texts(&text, "NextContinuationToken").into_iter().next())
        .flatten();
    Ok((texts(&text, "Key"), next))
}

/// DeleteObjects of `keys` (quiet); answers how many the server did not delete.
async fn delete(target: &Target, keys: &[String]) -> anyhow::Result<u64> {
    let mut xml = String::from("<Delete><Quiet>true</Quiet>");
    for k in keys {
        xml.push_str(&format!("<Object><Key>{}</Key></Object>", escape(k)));
    }
    xml.push_str("</Delete>");
    let md5 = base64::engine::general_purpose::STANDARD.encode(Md5::digest(xml.as_bytes()));
    let extra = [("content-md5", md5)];
    let (status, body) = target
        .call("POST", "delete=", &extra, Bytes::from(xml))
        .await?;
    let text = String::from_utf8_lossy(&body);
    anyhow::ensure!(status == 200, "DeleteObjects: HTTP {status}: {text}");
    Ok(texts(&text, "Code").len() as u64)
}

/// Empties the objects of `size` (keys `<size>/…`).
pub async fn run(target: &Target, size: u64, concurrency: usize) -> PhaseResult {
    let prefix = format!("{size}/");
    let start = Instant::now();
    let mut rec = Recorder::default();
    let mut token: Option<String> = None;
    loop {
        let (keys, next) = match list(target, &prefix, token.as_deref()).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(error = %e, "list failed");
                rec.errors += 1;
                break;
            }
        };
        if !keys.is_empty() {
            let t0 = Instant::now();
            match delete(target, &keys).await {
                Ok(failed) => {
                    rec.ops += keys.len() as u64 - failed;
                    rec.errors += failed;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "DeleteObjects failed");
                    rec.errors += keys.len() as u64;
                }
            }
            let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
            rec.lat_us.push(us);
        }
        match next {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    rec.bytes = rec.ops * size;
    PhaseResult::of(
        "empty",
        size,
        concurrency,
        start.elapsed().as_secs_f64(),
        rec,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_tokens_come_out_of_the_xml() {
        let xml = "<R><IsTruncated>true</IsTruncated><Contents><Key>a&amp;b</Key></Contents>\
                   <Contents><Key>c</Key></Contents><NextContinuationToken>t1</NextContinuationToken></R>";
        assert_eq!(texts(xml, "Key"), ["a&b", "c"]);
        assert_eq!(texts(xml, "NextContinuationToken"), ["t1"]);
        assert_eq!(escape("a&b<"), "a&amp;b&lt;");
    }
}
