//! Requests the gateway answers itself instead of through s3s's `S3` trait, because s3s would
//! put them on the wire differently from S3: GetObjectAttributes (its ETag is unquoted).
//!
//! s3s has checked the signature before a route runs; the route finds the bucket and key the
//! way s3s does (virtual-hosted style under the configured domain, else path style).

use http::{HeaderMap, Method, Uri};
use s3s::host::SingleDomain;
use s3s::path::S3Path;
use s3s::route::S3Route;
use s3s::{Body, S3Request, S3Response, S3Result};

use crate::http::path::{has_query_key, s3_path};
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
