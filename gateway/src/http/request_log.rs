//! One log line for each S3 request that fails, in saker's words: the operation, the S3
//! error code, the status and the method; never the key, the body or the signature.
//!
//! A client's mistake (4xx) is no error of the server's: it is logged at debug. A 500 is a
//! warning here, after its cause was logged where it was handled ([`crate::http::error`]); other
//! 5xx (a store out of space or unreachable, a request slowed down) are logged with their
//! cause where they are handled, and at debug here. s3s logs every failed request at ERROR
//! with the request echoed (a malformed body's bytes: object keys), so its own log target is
//! off unless named (`saker/src/telemetry.rs`).

use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use s3s::service::S3Service;
use s3s::{HttpError, HttpResponse};

/// The s3s service, logging each failed request once.
#[derive(Clone)]
pub struct Logged {
    inner: S3Service,
}

impl Logged {
    pub fn new(inner: S3Service) -> Self {
        Self { inner }
    }
}

/// The operation a request turned out to be: set by the access check (s3s knows it, but
/// does not tell it with the response).
#[derive(Clone, Default)]
pub(crate) struct Operation(Arc<OnceLock<String>>);

impl Operation {
    pub(crate) fn set(&self, name: &str) {
        let _ = self.0.set(name.to_string());
    }
}

impl<B> tower::Service<http::Request<B>> for Logged
where
    S3Service: tower::Service<
        http::Request<B>,
        Response = HttpResponse,
        Error = HttpError,
        Future = BoxFuture<'static, Result<HttpResponse, HttpError>>,
    >,
{
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = BoxFuture<'static, Result<HttpResponse, HttpError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), HttpError>> {
        tower::Service::<http::Request<B>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let op = Operation::default();
        req.extensions_mut().insert(op.clone());
        let method = req.method().clone();
        let answer = tower::Service::call(&mut self.inner, req);
        Box::pin(async move {
            let resp = answer.await?;
            log_failure(&op, &method, &resp);
            Ok(resp)
        })
    }
}

/// Logs `resp` to a request of `method` if it is a failure (see the module documentation).
fn log_failure(op: &Operation, method: &http::Method, resp: &HttpResponse) {
    let status = resp.status();
    if !status.is_client_error() && !status.is_server_error() {
        return;
    }
    // s3s answers a failure with its XML error document, whole.
    let body = resp.body().bytes();
    let code = body.as_deref().and_then(error_code).unwrap_or("-");
    let op = op.0.get().map_or("-", String::as_str);
    let status = status.as_u16();
    if status == 500 {
        tracing::warn!(op, %method, code, status, "S3 request failed");
    } else if status >= 500 {
        tracing::debug!(op, %method, code, status, "S3 request failed");
    } else {
        tracing::debug!(op, %method, code, status, "S3 request refused");
    }
}

/// The `<Code>` of an S3 error document, if it is a plain name (nothing else of the
/// document, which may quote the request, is logged).
fn error_code(xml: &[u8]) -> Option<&str> {
    const OPEN: &[u8] = b"<Code>";
    let start = xml.windows(OPEN.len()).position(|w| w == OPEN)? + OPEN.len();
    let len = xml[start..].iter().position(|&b| b == b'<')?;
    let code = &xml[start..start + len];
    let plain = !code.is_empty() && code.len() <= 64 && code.iter().all(u8::is_ascii_alphanumeric);
    plain.then(|| std::str::from_utf8(code).expect("ASCII"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_code_is_taken_from_an_error_document() {
        let doc = br#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>"#;
        assert_eq!(error_code(doc), Some("NoSuchKey"));
        assert_eq!(error_code(b"<Error><Code>a/key</Code></Error>"), None);
        assert_eq!(error_code(b"<Error><Code></Code></Error>"), None);
        assert_eq!(error_code(b"<Error><Code>NoEnd"), None);
        assert_eq!(error_code(b""), None);
    }
}
