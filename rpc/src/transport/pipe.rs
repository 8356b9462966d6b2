//! The pipe: one long-lived bidirectional stream per connection for raft messages and `Meta`
//! calls.
//!
//! A unary gRPC call costs a new HTTP/2 stream each time: request headers (HPACK, the cluster
//! token, which the server verifies), response headers and trailers. Raft traffic and the
//! calls between nodes are many small messages to the same few peers (AppendEntries under a
//! write load: one per entry and follower; a gateway's writes to the groups other nodes lead),
//! so they have their own method, `RaftPipe`: the caller opens one stream per connection,
//! authenticated once when it opens (what it may send is decided by the credential it opened
//! with, message by message as for unary calls), and sends each message as one frame tagged
//! with an id; the callee runs each on its own task and answers with a frame of the same id,
//! in whatever order they finish. A raft message not answered within its timeout fails as
//! `Unavailable` on its own; a stream that breaks fails every message still on it (a `Meta`
//! call has no deadline, as a unary one: a silent peer's connection is dropped by the
//! transport's keepalive, which breaks the stream) and is opened again by the next message. A
//! peer without the method (an older build) gets unary calls, as before. Chunkstore requests
//! stay unary: their data is large, and one stream's HTTP/2 flow-control window would hold
//! every other message behind it (with them piped, a FUSE test that runs tar, rsync and git
//! on the mount took 455 s in a full test run, against 150-194 s before).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::Stream;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

use super::pb::saker_client::SakerClient;
use super::pb::Frame;
use super::server::MetaRouter;
use super::wire::{decode, encode, MetaCall, MetaReply};
use crate::auth::Kind;
use crate::error::MetaError;
use crate::service::RaftService;

/// What travels on the pipe.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Piped {
    /// A raft message to group `group`'s replica; answered with the replica's answer.
    Raft { group: u32, body: Bytes },
    /// A `Meta` call and the caller's `traceparent`; answered with the encoded [`MetaReply`].
    Meta {
        call: Box<MetaCall>,
        traceparent: Option<String>,
    },
}

/// One message on the pipe.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct PipedCall {
    pub id: u64,
    pub msg: Piped,
}

/// The answer to the [`PipedCall`] of the same id.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct PipedReply {
    pub id: u64,
    pub result: Result<Bytes, Unanswered>,
}

/// Why a message got no answer.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Unanswered {
    /// The caller's credential may not send it.
    Refused(String),
    /// The receiver could not take it.
    Failed(String),
}

type Waiters = Mutex<HashMap<u64, oneshot::Sender<Result<Bytes, Unanswered>>>>;

/// One open stream.
struct Open {
    frames: mpsc::UnboundedSender<Frame>,
    waiting: Arc<Waiters>,
    broken: Arc<AtomicBool>,
}

/// The caller's side, one per [`RpcChannel`](super::RpcChannel) (shared by its clones).
#[derive(Debug, Default)]
pub(super) struct Pipe {
    open: tokio::sync::Mutex<Option<OpenHandle>>,
    next_id: AtomicU64,
    /// The peer has no `RaftPipe` method: use unary calls.
    unsupported: AtomicBool,
}

#[derive(Clone)]
struct OpenHandle(Arc<Open>);

impl std::fmt::Debug for OpenHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenHandle")
    }
}

/// What [`Pipe::call`] could not do.
pub(super) enum PipeError {
    /// The peer does not serve the pipe: send the message (given back) the old way.
    Unsupported(Piped),
    Failed(MetaError),
}

impl Pipe {
    /// Sends `msg` and waits for its answer, up to `timeout` if there is one.
    pub async fn call(
        &self,
        client: &SakerClient<Channel>,
        addr: &str,
        msg: Piped,
        timeout: Option<Duration>,
    ) -> Result<Result<Bytes, Unanswered>, PipeError> {
        if self.unsupported() {
            return Err(PipeError::Unsupported(msg));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let sent = async {
            let open = match self.open(client, addr).await {
                Ok(open) => open,
                Err(None) => return Err(PipeError::Unsupported(msg)),
                Err(Some(e)) => return Err(PipeError::Failed(e)),
            };
            let (tx, rx) = oneshot::channel();
            open.0.waiting.lock().insert(id, tx);
            // The stream broke after `open` found it whole: its reader marked it broken before
            // it failed the waiters, so a waiter added after that sees the mark here.
            if open.0.broken.load(Ordering::Acquire) {
                open.0.waiting.lock().remove(&id);
                return Err(PipeError::Failed(failed(addr, "the pipe broke")));
            }
            let frame = Frame {
                body: encode(&PipedCall { id, msg }),
            };
            if open.0.frames.send(frame).is_err() {
                open.0.broken.store(true, Ordering::Release);
                return Err(PipeError::Failed(failed(addr, "the pipe closed")));
            }
            Ok((open, rx))
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let (open, rx) = match within(deadline, sent).await {
            Some(r) => r?,
            None => {
                return Err(PipeError::Failed(failed(
                    addr,
                    "timed out opening the pipe",
                )))
            }
        };
        match within(deadline, rx).await {
            Some(Ok(answer)) => Ok(answer),
            Some(Err(_)) => Err(PipeError::Failed(failed(
                addr,
                "the pipe broke before the answer",
            ))),
            None => {
                open.0.waiting.lock().remove(&id);
                Err(PipeError::Failed(failed(addr, "timed out")))
            }
        }
    }

    /// Whether the peer was found to have no pipe.
    pub fn unsupported(&self) -> bool {
        self.unsupported.load(Ordering::Relaxed)
    }

    /// The open stream, opened now if there is none or it broke; `Err(None)` if the peer has
    /// no pipe.
    async fn open(
        &self,
        client: &SakerClient<Channel>,
        addr: &str,
    ) -> Result<OpenHandle, Option<MetaError>> {
        let mut slot = self.open.lock().await;
        if let Some(open) = slot.as_ref() {
            if !open.0.broken.load(Ordering::Acquire) {
                return Ok(open.clone());
            }
        }
        *slot = None;
        let (frames, outbound) = mpsc::unbounded_channel::<Frame>();
        let mut request = Request::new(receiver_stream(outbound));
        super::client::stamp(request.metadata_mut());
        let inbound = match client.clone().raft_pipe(request).await {
            Ok(r) => r.into_inner(),
            Err(s) if s.code() == tonic::Code::Unimplemented => {
                self.unsupported.store(true, Ordering::Relaxed);
                return Err(None);
            }
            Err(s) => return Err(Some(super::client::status_error(addr, &s))),
        };
        let open = OpenHandle(Arc::new(Open {
            frames,
            waiting: Arc::default(),
            broken: Arc::default(),
        }));
        tokio::spawn(read_answers(
            inbound,
            open.0.waiting.clone(),
            open.0.broken.clone(),
            addr.to_string(),
        ));
        *slot = Some(open.clone());
        Ok(open)
    }
}

/// `fut`'s output, or None if `deadline` passed first.
async fn within<F: std::future::Future>(deadline: Option<Instant>, fut: F) -> Option<F::Output> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), fut).await.ok(),
        None => Some(fut.await),
    }
}

/// Hands each answer to its waiter until the stream ends; then fails whoever still waits.
async fn read_answers(
    mut inbound: Streaming<Frame>,
    waiting: Arc<Waiters>,
    broken: Arc<AtomicBool>,
    addr: String,
) {
    loop {
        match inbound.message().await {
            Ok(Some(frame)) => match decode::<PipedReply>(&frame.body) {
                Ok(reply) => {
                    if let Some(tx) = waiting.lock().remove(&reply.id) {
                        let _ = tx.send(reply.result);
                    }
                }
                Err(e) => {
                    tracing::warn!(peer = %addr, error = %e, "undecodable pipe answer");
                    break;
                }
            },
            Ok(None) => break,
            Err(s) => {
                tracing::debug!(peer = %addr, status = %s, "pipe broke");
                break;
            }
        }
    }
    broken.store(true, Ordering::Release);
    waiting.lock().clear();
}

fn failed(addr: &str, why: &str) -> MetaError {
    MetaError::Unavailable(format!("RPC to {addr}: {why}"))
}

fn receiver_stream<T: Send + 'static>(
    rx: mpsc::UnboundedReceiver<T>,
) -> impl Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) })
}

/// The answers a callee streams back.
pub(super) type Answers = Pin<Box<dyn Stream<Item = Result<Frame, Status>> + Send>>;

/// What the callee's side serves.
#[derive(Clone)]
pub(super) struct Callee {
    pub raft: Option<Arc<dyn RaftService>>,
    pub meta: MetaRouter,
}

impl Callee {
    /// Runs one message from a caller that proved `kind`.
    async fn answer(self, kind: Kind, msg: Piped) -> Result<Bytes, Unanswered> {
        match msg {
            Piped::Raft { .. } if kind != Kind::Node => Err(Unanswered::Refused(
                "a client credential may not send raft messages".to_string(),
            )),
            Piped::Raft { group, body } => {
                let Some(raft) = self.raft else {
                    return Err(Unanswered::Failed(
                        "no MNode replica is served at this address".to_string(),
                    ));
                };
                let start = Instant::now();
                let answer = raft
                    .raft(group, body)
                    .await
                    .map(Bytes::from)
                    .map_err(Unanswered::Failed);
                crate::metrics::SERVER_LATENCY
                    .with_label_values(&["raft", "raft"])
                    .observe(start.elapsed().as_secs_f64());
                answer
            }
            Piped::Meta { call, traceparent } => {
                let reply = match self.meta.call(kind, *call, traceparent.as_deref()).await {
                    Ok(reply) => reply,
                    // Refused (or the handler failed) before anything ran, as a unary call's
                    // status would have said.
                    Err(s) => MetaReply {
                        routing_version: 0,
                        result: Err(match s.code() {
                            tonic::Code::PermissionDenied => {
                                MetaError::Unauthenticated(s.message().to_string())
                            }
                            _ => MetaError::Unavailable(s.message().to_string()),
                        }),
                    },
                };
                Ok(encode(&reply))
            }
        }
    }
}

/// The callee's side: runs each message on its own task (a message runs to completion even
/// if its caller goes away) and streams the answers back as they come, until the caller
/// closes the stream or `closing` turns true (the server shuts down: the stream ends at once,
/// and a message still unanswered fails on the caller's side as the stream breaks).
pub(super) fn serve(
    mut inbound: Streaming<Frame>,
    kind: Kind,
    callee: Callee,
    mut closing: tokio::sync::watch::Receiver<bool>,
) -> Response<Answers> {
    let (tx, rx) = mpsc::unbounded_channel::<Result<Frame, Status>>();
    let mut closed = closing.clone();
    let answers = futures::StreamExt::take_until(receiver_stream(rx), async move {
        let _ = closed.wait_for(|c| *c).await;
    });
    tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                m = inbound.message() => match m {
                    Ok(Some(frame)) => frame,
                    _ => return,
                },
                _ = closing.wait_for(|c| *c) => return,
            };
            let call: PipedCall = match decode(&frame.body) {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(Status::invalid_argument(e.to_string())));
                    return;
                }
            };
            let (tx, callee) = (tx.clone(), callee.clone());
            tokio::spawn(async move {
                let reply = PipedReply {
                    id: call.id,
                    result: callee.answer(kind, call.msg).await,
                };
                let _ = tx.send(Ok(Frame {
                    body: encode(&reply),
                }));
            });
        }
    });
    Response::new(Box::pin(answers))
}
