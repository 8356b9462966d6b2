//! A webhook receiver on loopback for the notification tests: an axum server that takes
//! `POST /<path>` with a JSON body, checks that it is `application/json` and parses as AWS
//! Lambda's `S3Event`, and keeps every record with the path it came to. It can go down (its
//! listener closed: connections are refused) and come back on the same port.

use std::sync::{Arc, Mutex};

use aws_lambda_events::event::s3::{S3Event, S3EventRecord};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;

/// One record received, with the path it was posted to.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub record: S3EventRecord,
}

impl Received {
    pub fn event_name(&self) -> &str {
        self.record.event_name.as_deref().unwrap_or("")
    }

    /// The object key as sent (URL-encoded).
    pub fn key(&self) -> &str {
        self.record.s3.object.key.as_deref().unwrap_or("")
    }

    pub fn sequencer(&self) -> &str {
        self.record.s3.object.sequencer.as_deref().unwrap_or("")
    }
}

#[derive(Clone, Default)]
struct Shared {
    got: Arc<Mutex<Vec<Received>>>,
    /// Bodies that were not an S3 event, or not sent as JSON (the test fails on any).
    bad: Arc<Mutex<Vec<String>>>,
    posts: Arc<Mutex<usize>>,
}

/// The receiver; it stops when dropped.
pub struct Webhook {
    port: u16,
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

async fn take(
    State(s): State<Shared>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    *s.posts.lock().unwrap() += 1;
    let json = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    match serde_json::from_slice::<S3Event>(&body) {
        Ok(ev) if json => {
            let mut got = s.got.lock().unwrap();
            got.extend(ev.records.into_iter().map(|record| Received {
                path: path.clone(),
                record,
            }));
            StatusCode::OK
        }
        Ok(_) => {
            s.bad.lock().unwrap().push("not application/json".into());
            StatusCode::BAD_REQUEST
        }
        Err(e) => {
            let text = format!("{e}: {}", String::from_utf8_lossy(&body));
            s.bad.lock().unwrap().push(text);
            StatusCode::BAD_REQUEST
        }
    }
}

impl Webhook {
    /// A receiver on a free loopback port, up.
    pub async fn start() -> Webhook {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut w = Webhook {
            port,
            shared: Shared::default(),
            stop: None,
        };
        w.serve(listener);
        w
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/{path}", post(take))
            .with_state(self.shared.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
                .unwrap();
        });
        self.stop = Some(tx);
    }

    /// The URL a target posts to (`path`: which of this receiver's targets it is).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// Closes the listener: posts are refused until [`Webhook::up`].
    pub async fn down(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        // The port is free once a connect is refused.
        let addr = format!("127.0.0.1:{}", self.port);
        let refused = super::poll_until(std::time::Duration::from_secs(10), || async {
            tokio::net::TcpStream::connect(&addr).await.is_err()
        })
        .await;
        assert!(refused, "the webhook listener did not close");
    }

    /// Listens again on the same port.
    pub async fn up(&mut self) {
        assert!(self.stop.is_none(), "the receiver is up");
        let addr = format!("127.0.0.1:{}", self.port);
        let listener = super::eventually("rebind the webhook port", || async {
            tokio::net::TcpListener::bind(&addr).await
        })
        .await;
        self.serve(listener);
    }

    /// Every record received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.got.lock().unwrap().clone()
    }

    /// POSTs received (well-formed or not).
    pub fn posts(&self) -> usize {
        *self.shared.posts.lock().unwrap()
    }

    /// Bodies that were not S3 events sent as JSON.
    pub fn bad(&self) -> Vec<String> {
        self.shared.bad.lock().unwrap().clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
