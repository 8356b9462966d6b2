//! The S3 access log (`saker server --access-log FILE`, `-` for stdout; off by default): one
//! JSON line per request, as MinIO's and RGW's users expect: time, access key, operation,
//! bucket, key, status, bytes in and out, remote address, request id, time taken. Signatures
//! and secrets are never written: the access key is read from the credential scope only.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use http::{HeaderMap, Method, Request, Response};
use serde::Serialize;

/// Where the lines go.
pub struct AccessLog {
    out: Mutex<Box<dyn Write + Send>>,
}

#[derive(Serialize)]
struct Line<'a> {
    time: String,
    access_key: &'a str,
    operation: String,
    bucket: &'a str,
    key: &'a str,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
    remote: String,
    request_id: &'a str,
    millis: u64,
}

/// The request's facts known before it is served.
pub struct Pending {
    started: Instant,
    access_key: String,
    method: Method,
    path: String,
    query: String,
    bytes_in: u64,
    remote: SocketAddr,
}

impl AccessLog {
    /// Appends to `path` (`-`: standard output).
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stdout())
        } else {
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?,
            )
        };
        Ok(Self {
            out: Mutex::new(out),
        })
    }

    /// What to log of `req` from `remote`, taken before it is served.
    pub fn begin<B>(req: &Request<B>, remote: SocketAddr) -> Pending {
        let query = req.uri().query().unwrap_or("");
        Pending {
            started: Instant::now(),
            access_key: access_key(req.headers(), query).unwrap_or("-").to_string(),
            method: req.method().clone(),
            path: req.uri().path().to_string(),
            query: query.to_string(),
            bytes_in: content_length(req.headers(), "x-amz-decoded-content-length")
                .or_else(|| content_length(req.headers(), "content-length"))
                .unwrap_or(0),
            remote,
        }
    }

    /// Writes the line of a request that ended with `resp`.
    pub fn end<B>(&self, p: Pending, resp: &Response<B>) {
        let path = percent_decode(p.path.trim_start_matches('/'));
        let (bucket, key) = path.split_once('/').unwrap_or((path.as_str(), ""));
        let line = Line {
            time: time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
            access_key: &p.access_key,
            operation: operation(&p.method, bucket, key, &p.query),
            bucket,
            key,
            status: resp.status().as_u16(),
            bytes_in: p.bytes_in,
            bytes_out: content_length(resp.headers(), "content-length").unwrap_or(0),
            remote: p.remote.to_string(),
            request_id: resp
                .headers()
                .get("x-amz-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-"),
            millis: p.started.elapsed().as_millis() as u64,
        };
        let Ok(mut text) = serde_json::to_vec(&line) else {
            return;
        };
        text.push(b'\n');
        let mut out = self.out.lock().expect("access log lock");
        if let Err(e) = out.write_all(&text).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "access log write failed");
        }
    }
}

fn content_length(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.parse().ok()
}

/// The access key of a signed request: from the Authorization header's credential scope, or a
/// presigned URL's `X-Amz-Credential` (SigV4), or a SigV2 `AWS AK:signature`.
fn access_key<'a>(headers: &'a HeaderMap, query: &'a str) -> Option<&'a str> {
    if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        if let Some(rest) = auth.split("Credential=").nth(1) {
            return rest.split('/').next();
        }
        if let Some(rest) = auth.strip_prefix("AWS ") {
            return rest.split(':').next();
        }
    }
    let cred = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("X-Amz-Credential="))?;
    // The scope's separators are percent-encoded (`AK%2FDATE%2F…`); an access key is not.
    cred.split("%2F").next()?.split('/').next()
}

/// An S3 server-access-log style operation name: `REST.GET.OBJECT`, `REST.PUT.BUCKET`,
/// `REST.GET.SERVICE`, with a subresource where the query names one (`REST.PUT.TAGGING`).
fn operation(method: &Method, bucket: &str, key: &str, query: &str) -> String {
    const SUBRESOURCES: [&str; 12] = [
        "uploads",
        "uploadId",
        "tagging",
        "acl",
        "versioning",
        "versions",
        "policy",
        "lifecycle",
        "cors",
        "location",
        "delete",
        "list-type",
    ];
    let sub = query.split('&').find_map(|kv| {
        let name = kv.split('=').next()?;
        SUBRESOURCES.contains(&name).then_some(name)
    });
    let what = match (sub, bucket.is_empty(), key.is_empty()) {
        (Some(s), _, _) => s.to_uppercase().replace('-', "_"),
        (None, true, _) => "SERVICE".into(),
        (None, false, true) => "BUCKET".into(),
        (None, false, false) => "OBJECT".into(),
    };
    format!("REST.{method}.{what}")
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_keys_come_from_the_credential_scope_only() {
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=AKID/20261126/us-east-1/s3/aws4_request, \
             SignedHeaders=host, Signature=deadbeef"
                .parse()
                .unwrap(),
        );
        assert_eq!(access_key(&h, ""), Some("AKID"));
        let q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKP%2F20261126%2Fus-east-1";
        assert_eq!(access_key(&HeaderMap::new(), q), Some("AKP"));
        assert_eq!(access_key(&HeaderMap::new(), ""), None);
    }

    #[test]
    fn operations_are_named_as_s3_names_them() {
        assert_eq!(operation(&Method::GET, "b", "k", ""), "REST.GET.OBJECT");
        assert_eq!(operation(&Method::PUT, "b", "", ""), "REST.PUT.BUCKET");
        assert_eq!(operation(&Method::GET, "", "", ""), "REST.GET.SERVICE");
        assert_eq!(
            operation(&Method::GET, "b", "", "list-type=2&prefix=a"),
            "REST.GET.LIST_TYPE"
        );
        assert_eq!(
            operation(&Method::PUT, "b", "k", "tagging"),
            "REST.PUT.TAGGING"
        );
        assert_eq!(percent_decode("a%20b/%E2%82%AC"), "a b/€");
    }
}
