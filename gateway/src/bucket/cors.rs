//! Bucket CORS: the configuration (Put/Get/DeleteBucketCors, a bucket setting), preflight
//! `OPTIONS` requests answered from it, and the `Access-Control-*` headers of every other
//! response to a request that names an `Origin`.
//!
//! A preflight is not an S3 operation and browsers never sign it, so [`Cors::preflight`]
//! answers it before s3s sees the request; it discloses only whether the configuration
//! allows the origin, method and headers asked about, as S3 does.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, Method, StatusCode};
use s3s::dto::*;
use s3s::host::SingleDomain;
use s3s::{s3_error, S3Request, S3Response, S3Result};

use crate::bucket::cors_rules::{allow, matching, rules_from, Rule};
use crate::bucket::lookup::{bucket_exists, settings, store};
use crate::bucket::settings::{BucketSettings, Setting};
use crate::Gateway;

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The headers a preflight asks to send (`Access-Control-Request-Headers`).
fn requested_headers(h: &HeaderMap) -> (Option<&str>, Vec<&str>) {
    let raw = header(h, "access-control-request-headers");
    let list = raw
        .map(|r| {
            r.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    (raw, list)
}

/// The CORS side of the S3 listener: preflights, and headers for the other responses.
pub struct Cors {
    settings: Arc<BucketSettings>,
    domain: Option<SingleDomain>,
}

/// What a response to a cross-origin request needs: the bucket, the origin, the method.
pub struct CrossOrigin {
    bucket: String,
    origin: String,
    method: String,
}

fn error_response(status: StatusCode, code: &str, message: &str) -> http::Response<s3s::Body> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    );
    let mut resp = http::Response::new(s3s::Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml"),
    );
    resp
}

impl Cors {
    pub fn new(gw: &Gateway, domain: Option<SingleDomain>) -> Self {
        Self {
            settings: gw.settings.clone(),
            domain,
        }
    }

    fn bucket<B>(&self, req: &http::Request<B>) -> Option<String> {
        match crate::http::path::s3_path(req.uri(), req.headers(), self.domain.as_ref()) {
            Ok(p) => p.get_bucket_name().map(str::to_string),
            Err(_) => None,
        }
    }

    async fn rules(&self, bucket: &str) -> Option<Vec<Rule>> {
        match self.settings.get(bucket).await {
            Ok(s) => s.cors.clone(),
            Err(e) => {
                tracing::warn!(bucket, error = %e, "bucket settings unavailable for CORS");
                None
            }
        }
    }

    /// The answer to a preflight (`OPTIONS`) request; `None` for any other request.
    pub async fn preflight<B>(&self, req: &http::Request<B>) -> Option<http::Response<s3s::Body>> {
        if req.method() != Method::OPTIONS {
            return None;
        }
        let h = req.headers();
        let (Some(origin), Some(method)) = (
            header(h, "origin"),
            header(h, "access-control-request-method"),
        ) else {
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "Insufficient information. Origin request header needed.",
            ));
        };
        let Some(bucket) = self.bucket(req) else {
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "A CORS preflight names a bucket.",
            ));
        };
        let (raw, asked) = requested_headers(h);
        let Some(rules) = self.rules(&bucket).await else {
            return Some(error_response(
                StatusCode::FORBIDDEN,
                "AccessForbidden",
                "CORSResponse: CORS is not enabled for this bucket.",
            ));
        };
        match matching(&rules, origin, method, &asked) {
            Some(rule) => {
                let mut resp = http::Response::new(s3s::Body::empty());
                allow(rule, origin, resp.headers_mut(), raw);
                Some(resp)
            }
            None => Some(error_response(
                StatusCode::FORBIDDEN,
                "AccessForbidden",
                "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
            )),
        }
    }

    /// For a request with an `Origin`: what [`Cors::decorate`] needs once it is answered.
    pub fn cross_origin<B>(&self, req: &http::Request<B>) -> Option<CrossOrigin> {
        let h = req.headers();
        let origin = header(h, "origin")?.to_string();
        let method = header(h, "access-control-request-method")
            .map(str::to_string)
            .unwrap_or_else(|| req.method().as_str().to_string());
        Some(CrossOrigin {
            bucket: self.bucket(req)?,
            origin,
            method,
        })
    }

    /// Adds the `Access-Control-*` headers of the bucket's matching rule, if any, to a
    /// response (errors too, so a browser can read them).
    pub async fn decorate(&self, x: CrossOrigin, headers: &mut HeaderMap) {
        if let Some(rules) = self.rules(&x.bucket).await {
            if let Some(rule) = matching(&rules, &x.origin, &x.method, &[]) {
                allow(rule, &x.origin, headers, None);
            }
        }
    }
}

pub async fn put_bucket_cors(
    gw: &Gateway,
    req: S3Request<PutBucketCorsInput>,
) -> S3Result<S3Response<PutBucketCorsOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let rules = rules_from(input.cors_configuration)?;
    let value = serde_json::to_vec(&rules).expect("CORS rules serialize");
    store(gw, &input.bucket, Setting::Cors, Some(value)).await?;
    Ok(S3Response::new(PutBucketCorsOutput::default()))
}

pub async fn get_bucket_cors(
    gw: &Gateway,
    req: S3Request<GetBucketCorsInput>,
) -> S3Result<S3Response<GetBucketCorsOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let Some(rules) = &s.cors else {
        return Err(s3_error!(
            NoSuchCORSConfiguration,
            "The CORS configuration does not exist"
        ));
    };
    let cors_rules = rules
        .iter()
        .map(|r| CORSRule {
            id: r.id.clone(),
            allowed_origins: r.origins.clone(),
            allowed_methods: r.methods.clone(),
            allowed_headers: (!r.headers.is_empty()).then(|| r.headers.clone()),
            expose_headers: (!r.expose.is_empty()).then(|| r.expose.clone()),
            max_age_seconds: r.max_age,
        })
        .collect();
    Ok(S3Response::new(GetBucketCorsOutput {
        cors_rules: Some(cors_rules),
    }))
}

pub async fn delete_bucket_cors(
    gw: &Gateway,
    req: S3Request<DeleteBucketCorsInput>,
) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
    bucket_exists(gw, &req.input.bucket).await?;
    store(gw, &req.input.bucket, Setting::Cors, None).await?;
    Ok(S3Response::new(DeleteBucketCorsOutput::default()))
}
