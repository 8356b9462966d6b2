//! Request bodies that are read to their end even when the handler answers without them (an
//! early error: a bad signature, AccessDenied, SlowDown). Unread request bytes left in the
//! socket when the server closes it make the kernel reset the connection, and the reset can
//! destroy the answer before the client reads it (the SDK then sees a broken connection, not
//! the error). A dropped, unfinished body is drained in the background instead, up to
//! [`DRAIN_LIMIT`] bytes or [`DRAIN_TIME`], so the answer arrives whole and the connection may
//! be reused.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// The most a dropped body is read for (a larger one is cut, as before).
const DRAIN_LIMIT: u64 = 64 << 20;
/// The longest a dropped body is read for.
const DRAIN_TIME: Duration = Duration::from_secs(30);

/// An incoming body, drained when dropped unfinished.
pub struct Drained(Option<Incoming>);

impl Drained {
    pub fn new(body: Incoming) -> Self {
        Self(Some(body))
    }
}

impl Body for Drained {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.0.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.0.as_ref().map(Body::size_hint).unwrap_or_default()
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        let Some(mut body) = self.0.take().filter(|b| !b.is_end_stream()) else {
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
