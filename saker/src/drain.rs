//! Request bodies that are read to their end even when the handler answers without them (an
//! early error: a bad signature, AccessDenied, SlowDown). Unread request bytes left in the
//! socket when the server closes it make the kernel reset the connection, and the reset can
//! destroy the answer before the client reads it (the SDK then sees a broken connection, not
//! the error). A dropped, unfinished body is drained in the background instead, up to
//! [`DRAIN_LIMIT`] bytes or [`DRAIN_TIME`], so the answer arrives whole and the connection may
//! be reused.
//!
//! Except a request that sent `Expect: 100-continue`: its client sends the body only once
//! told to continue, so reading it would tell it to, after its answer, and take the next
//! request's bytes for the body. Its early answer closes the connection instead
//! ([`must_close`]).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// The most a dropped body is read for (a larger one is cut, as before).
const DRAIN_LIMIT: u64 = 64 << 20;
/// The longest a dropped body is read for.
const DRAIN_TIME: Duration = Duration::from_secs(30);

/// An incoming body, drained when dropped unfinished (unless its client waits to be told to
/// send it).
pub struct Drained {
    body: Option<Incoming>,
    drain: bool,
}

impl Drained {
    /// `body`, drained when dropped unfinished if `drain`.
    pub fn new(body: Incoming, drain: bool) -> Self {
        Self {
            body: Some(body),
            drain,
        }
    }
}

/// Whether a request with headers `headers` waits for `100 Continue` to send its body.
pub fn expects_continue(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// Whether the answer `status` to a request that `expects_continue` must close the
/// connection: an error answered to a client that may still hold its body back, which cannot
/// be drained (see the module documentation).
pub fn must_close(expects_continue: bool, status: http::StatusCode) -> bool {
    expects_continue && (status.is_client_error() || status.is_server_error())
}

impl Body for Drained {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.body.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map(Body::size_hint).unwrap_or_default()
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        let body = self
            .body
            .take()
            .filter(|b| self.drain && !b.is_end_stream());
        let Some(mut body) = body else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        tokio::spawn(async move {
            let mut read = 0u64;
            let drained = tokio::time::timeout(DRAIN_TIME, async {
                while let Some(Ok(frame)) = http_body_util::BodyExt::frame(&mut body).await {
                    read += frame.data_ref().map_or(0, |d| d.len() as u64);
                    if read > DRAIN_LIMIT {
                        break;
                    }
                }
            });
            let _ = drained.await;
        });
    }
}
