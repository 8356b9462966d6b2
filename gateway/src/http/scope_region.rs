//! Credential scopes whose region is a region but for its case.
//!
//! s3cmd's default configuration (`bucket_location = US`) signs with the region `US`; AWS and
//! MinIO take it, s3s refuses any region outside `[a-z0-9-]` (after checking the signature).
//! So a SigV4 request (Authorization header) whose scope names such a region is checked here,
//! against the same key store: if its signature holds, it is signed again with the region in
//! lower case, and s3s checks that signature as usual. A request whose signature does not hold
//! passes unchanged, and s3s refuses it. Requests whose chunks are signed too
//! (`STREAMING-AWS4-HMAC-SHA256-…`) chain their chunk signatures from the region and pass
//! unchanged.

use http::HeaderMap;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use saker_coordinator::AccessKeyStore;

use crate::http::sigv4;

/// What SigV4 leaves unencoded: letters, digits and `-_.~`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// An Authorization header's parts.
struct Authorization<'a> {
    access_key: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: &'a str,
    signature: &'a str,
}

fn parse(header: &str) -> Option<Authorization<'_>> {
    let rest = header.strip_prefix("AWS4-HMAC-SHA256")?.trim_start();
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed_headers = Some(v),
            "Signature" => signature = Some(v),
            _ => return None,
        }
    }
    let mut scope = credential?.split('/');
    let auth = Authorization {
        access_key: scope.next()?,
        date: scope.next()?,
        region: scope.next()?,
        service: scope.next()?,
        signed_headers: signed_headers?,
        signature: signature?,
    };
    (scope.next()? == "aws4_request" && scope.next().is_none()).then_some(auth)
}

/// Whether s3s would refuse `region` only for its upper-case letters.
fn needs_lowering(region: &str) -> bool {
    region.bytes().any(|b| b.is_ascii_uppercase())
        && region
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn encode(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The canonical request of SigV4 for a request with these parts.
fn canonical_request(
    method: &str,
    uri: &http::Uri,
    headers: &HeaderMap,
    signed_headers: &str,
    payload_hash: &str,
) -> Option<String> {
    let path: Vec<String> = uri.path().split('/').map(|s| encode(&decode(s))).collect();
    let mut query: Vec<(String, String)> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (encode(&decode(k)), encode(&decode(v)))
        })
        .collect();
    query.sort();
    let query: Vec<String> = query.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut canonical_headers = String::new();
    for name in signed_headers.split(';') {
        let values: Vec<String> = if name == "host" && !headers.contains_key("host") {
            vec![uri.authority()?.to_string()]
        } else {
            headers
                .get_all(name)
                .iter()
                .map(|v| {
                    let v = String::from_utf8_lossy(v.as_bytes());
                    v.split_whitespace().collect::<Vec<_>>().join(" ")
                })
                .collect()
        };
        if values.is_empty() {
            return None;
        }
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    Some(format!(
        "{method}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
        path.join("/"),
        query.join("&")
    ))
}

/// Whether `a` and `b` are equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Signs `req` again with its scope's region in lower case, when that region needs it and its
/// signature holds (module docs). Anything else is left as it is.
pub async fn lower_region<B>(keys: &AccessKeyStore, req: &mut http::Request<B>) {
    let Some(header) = req.headers().get(http::header::AUTHORIZATION) else {
        return;
    };
    let Ok(header) = header.to_str() else { return };
    let Some(a) = parse(header) else { return };
    if !needs_lowering(a.region) {
        return;
    }
    let text = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let (Some(amz_date), Some(payload_hash)) = (text("x-amz-date"), text("x-amz-content-sha256"))
    else {
        return;
    };
    if payload_hash.starts_with("STREAMING-AWS4-") {
        return;
    }
    let Some(canonical) = canonical_request(
        req.method().as_str(),
        req.uri(),
        req.headers(),
        a.signed_headers,
        payload_hash,
    ) else {
        return;
    };
    let Some(key) = keys.lookup(a.access_key).await else {
        return;
    };
    let sign = |region| {
        sigv4::signature(
            &key.secret_key,
            amz_date,
            a.date,
            region,
            a.service,
            &canonical,
        )
    };
    let given = sign(a.region);
    if !same(given.as_bytes(), a.signature.as_bytes()) {
        return;
    }
    let lower = a.region.to_ascii_lowercase();
    let again = sign(&lower);
    let rewritten = format!(
        "AWS4-HMAC-SHA256 Credential={}/{}/{lower}/{}/aws4_request, SignedHeaders={}, Signature={again}",
        a.access_key, a.date, a.service, a.signed_headers
    );
    if let Ok(v) = http::HeaderValue::from_str(&rewritten) {
        req.headers_mut().insert(http::header::AUTHORIZATION, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_region_with_upper_case_letters_is_lowered() {
        assert!(needs_lowering("US"));
        assert!(needs_lowering("EU-West-1"));
        assert!(!needs_lowering("us-east-1"));
        assert!(!needs_lowering("US_EAST"));
        assert!(!needs_lowering(""));
    }

    /// The example of AWS's SigV4 documentation (GET Object with a Range header).
    #[test]
    fn the_signature_of_awss_example_comes_out() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "examplebucket.s3.amazonaws.com".parse().unwrap());
        headers.insert("range", "bytes=0-9".parse().unwrap());
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        headers.insert("x-amz-content-sha256", empty.parse().unwrap());
        headers.insert("x-amz-date", "20130524T000000Z".parse().unwrap());
        let uri: http::Uri = "/test.txt".parse().unwrap();
        let signed = "host;range;x-amz-content-sha256;x-amz-date";
        let canonical = canonical_request("GET", &uri, &headers, signed, empty).unwrap();
        let header = format!(
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders={signed}, Signature=x"
        );
        let a = parse(&header).unwrap();
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        assert_eq!(
            sigv4::signature(
                secret,
                "20130524T000000Z",
                a.date,
                "us-east-1",
                a.service,
                &canonical
            ),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }
}
