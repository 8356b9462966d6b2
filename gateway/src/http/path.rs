//! Where a request points: the bucket and key it names (virtual-hosted or path style, as s3s
//! finds them) and its query parameters, percent-decoded.

use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, Uri};
use s3s::host::{S3Host, SingleDomain};
use s3s::path::S3Path;
use s3s::{s3_error, S3Result};

/// The bucket and key a request names: virtual-hosted style under `domain` (unless the Host
/// is an IP address), else path style.
pub fn s3_path(uri: &Uri, headers: &HeaderMap, domain: Option<&SingleDomain>) -> S3Result<S3Path> {
    let decoded = percent_encoding::percent_decode_str(uri.path())
        .decode_utf8()
        .map_err(|_| s3_error!(InvalidURI))?;
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let parsed = match (host, domain) {
        (Some(h), Some(d)) if !is_ip(h) => {
            let vh = d.parse_host_header(h)?;
            s3s::path::parse_virtual_hosted_style(vh.bucket(), &decoded)
        }
        _ => s3s::path::parse_path_style(&decoded),
    };
    parsed.map_err(|e| match e {
        s3s::path::ParseS3PathError::InvalidPath => s3_error!(InvalidURI),
        s3s::path::ParseS3PathError::InvalidBucketName => s3_error!(InvalidBucketName),
        s3s::path::ParseS3PathError::KeyTooLong => s3_error!(KeyTooLongError),
    })
}

/// A Host that is an IP address (with or without a port) is never virtual-hosted style.
fn is_ip(host: &str) -> bool {
    host.parse::<SocketAddr>().is_ok() || host.parse::<IpAddr>().is_ok()
}

/// The percent-decoded value of query parameter `name`, if present.
pub fn query_value(uri: &Uri, name: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| {
            percent_encoding::percent_decode_str(&v.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

pub fn has_query_key(uri: &Uri, name: &str) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.split_once('=').map_or(pair, |(k, _)| k) == name)
    })
}

/// `a=b&c=d` (percent-decoded, `+` as a space).
pub fn query_pairs(q: &str) -> impl Iterator<Item = (String, String)> + '_ {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    q.split('&').filter(|p| !p.is_empty()).map(move |p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (decode(k), decode(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_helpers() {
        let uri: Uri = "/b/k?attributes&versionId=a%2Fb".parse().unwrap();
        assert!(has_query_key(&uri, "attributes"));
        assert!(!has_query_key(&uri, "attr"));
        assert_eq!(query_value(&uri, "versionId").as_deref(), Some("a/b"));
        assert_eq!(query_value(&uri, "attributes").as_deref(), Some(""));
    }

    #[test]
    fn ip_hosts() {
        assert!(is_ip("127.0.0.1:9000"));
        assert!(is_ip("[::1]:9000"));
        assert!(!is_ip("bucket.s3.example.com"));
    }

    #[test]
    fn query_pairs_decode() {
        let got: Vec<_> =
            query_pairs("prefix=logs%2F2026&delimiter=%2F&list-type=2&x=a+b").collect();
        assert_eq!(
            got,
            vec![
                ("prefix".into(), "logs/2026".into()),
                ("delimiter".into(), "/".into()),
                ("list-type".into(), "2".into()),
                ("x".into(), "a b".into()),
            ]
        );
    }
}
