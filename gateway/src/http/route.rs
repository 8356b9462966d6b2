//! Requests the gateway answers itself instead of through s3s's `S3` trait, because s3s would
//! put them on the wire differently from S3: GetObjectAttributes (its ETag is unquoted).
//!
//! s3s has checked the signature before a route runs; the route finds the bucket and key the
//! way s3s does (virtual-hosted style under the configured domain, else path style).

use std::net::{IpAddr, SocketAddr};

use http::{HeaderMap, Method, Uri};
use s3s::host::{S3Host, SingleDomain};
use s3s::path::S3Path;
use s3s::route::S3Route;
use s3s::{s3_error, Body, S3Request, S3Response, S3Result};

use crate::object::attributes;
use crate::{keys, Gateway};

pub struct Routes {
    gw: Gateway,
    host: Option<SingleDomain>,
    access: crate::auth::Access,
}

impl Routes {
    pub fn new(gw: Gateway, host: Option<SingleDomain>, access: crate::auth::Access) -> Self {
        Self { gw, host, access }
    }

    /// The bucket and key a request names.
    fn s3_path(&self, uri: &Uri, headers: &HeaderMap) -> S3Result<S3Path> {
        s3_path(uri, headers, self.host.as_ref())
    }

    async fn object_attributes(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let path = self.s3_path(&req.uri, &req.headers)?;
        let input = attributes::input(path, &req.uri, &req.headers)?;
        let out = attributes::get_object_attributes(&self.gw, input).await?;
        let body = attributes::render(&out)?;
        let mut resp = S3Response::new(Body::from(body));
        resp.headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/xml"),
        );
        if let Some(v) = out
            .last_modified
            .as_ref()
            .and_then(keys::format_http_date)
            .and_then(|d| http::HeaderValue::from_str(&d).ok())
        {
            resp.headers.insert(http::header::LAST_MODIFIED, v);
        }
        if let Some(v) = out
            .version_id
            .as_deref()
            .and_then(|v| http::HeaderValue::from_str(v).ok())
        {
            resp.headers.insert("x-amz-version-id", v);
        }
        Ok(resp)
    }
}

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

fn has_query_key(uri: &Uri, name: &str) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.split_once('=').map_or(pair, |(k, _)| k) == name)
    })
}

#[async_trait::async_trait]
impl S3Route for Routes {
    fn is_match(
        &self,
        method: &Method,
        uri: &Uri,
        _headers: &HeaderMap,
        _extensions: &mut http::Extensions,
    ) -> bool {
        method == Method::GET && has_query_key(uri, "attributes")
    }

    /// The same rules as every other operation ([`crate::auth::Access`]; s3s does not
    /// apply them to routes).
    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        let path = self.s3_path(&req.uri, &req.headers)?;
        let (ak, cx) = crate::auth::parts(req);
        self.access
            .authorize(ak, "GetObjectAttributes", &path, &cx)
            .await
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        crate::service::run("GetObjectAttributes", self.object_attributes(req)).await
    }
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
}
