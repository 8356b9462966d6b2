//! [`RpcServer`]: serves a process's MNode groups, coordinator and cluster map.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::pb::saker_server::{Saker, SakerServer};
use super::pb::Frame;
use super::wire::WIRE_VERSION;
use super::wire::{
    decode, encode, LinkCall, MetaCall, MetaReply, RaftCall, RemoveDirCall, RenameCall,
    SetDirAttrCall, TierReadCall,
};
use super::{MAX_MESSAGE, VERSION_HEADER};

/// Calls one connection may have in flight (HTTP/2 streams). Every group of a node shares
/// one connection to a peer, and a library client's connection carries its concurrency.
const MAX_STREAMS: u32 = 4096;
use super::secure::{incoming, PeerInfo};
use crate::auth::{Kind, Process};
use crate::chunk::{ChunkReply, ChunkRequest, ChunkService, ChunkWireError};
use crate::cluster_map::{ClusterMap, MapSource};
use crate::error::MetaError;
use crate::service::{
    AdminCall, AdminService, CoordinatorService, MetaService, RaftService, TierReadService,
};
use crate::{metrics, trace_context};

/// HTTP/2 pings on idle connections, so a dead peer is noticed.
const KEEPALIVE: Duration = Duration::from_secs(20);

/// The RPC endpoint of one process.
pub struct RpcServer {
    handler: Arc<Handler>,
}

/// The groups a process serves, by group id; shared, so replicas can come and go while it
/// serves (a node taking or giving up a replica of a group).
#[derive(Clone, Default)]
pub struct ServedGroups(Arc<std::sync::RwLock<BTreeMap<u32, Arc<dyn MetaService>>>>);

impl ServedGroups {
    pub fn get(&self, group: u32) -> Option<Arc<dyn MetaService>> {
        self.0
            .read()
            .expect("served groups lock")
            .get(&group)
            .cloned()
    }

    pub fn insert(&self, group: u32, service: Arc<dyn MetaService>) {
        self.0
            .write()
            .expect("served groups lock")
            .insert(group, service);
    }

    pub fn remove(&self, group: u32) {
        self.0.write().expect("served groups lock").remove(&group);
    }
}

impl From<BTreeMap<u32, Arc<dyn MetaService>>> for ServedGroups {
    fn from(groups: BTreeMap<u32, Arc<dyn MetaService>>) -> Self {
        Self(Arc::new(std::sync::RwLock::new(groups)))
    }
}

struct Handler {
    meta: MetaRouter,
    coordinator: Arc<dyn CoordinatorService>,
    map: Arc<dyn MapSource>,
    chunks: Option<Arc<dyn ChunkService>>,
    raft: Option<Arc<dyn RaftService>>,
    admin: Option<Arc<dyn AdminService>>,
    tiers: Option<Arc<dyn TierReadService>>,
    /// Set when the server begins to shut down: open pipes end, so that the connections
    /// they keep busy can finish.
    closing: Arc<tokio::sync::watch::Sender<bool>>,
}

/// Where a `Meta` call goes: the group it names, or the node itself.
#[derive(Clone)]
pub(super) struct MetaRouter {
    groups: ServedGroups,
    /// Takes the requests addressed to the node itself ([`crate::MetaRequest::is_node_call`]).
    node: Option<Arc<dyn MetaService>>,
}

impl MetaRouter {
    /// Runs `call` from a caller that proved `kind` (on its own task, in a span whose parent
    /// is `traceparent`). A status is a refusal: nothing ran.
    pub(super) async fn call(
        &self,
        kind: Kind,
        call: MetaCall,
        traceparent: Option<&str>,
    ) -> Result<MetaReply, Status> {
        if kind == Kind::Client && !call.req.client_allowed() {
            return Err(Status::permission_denied(format!(
                "a client credential may not send {}",
                call.req.op_name()
            )));
        }
        let service = if call.req.is_node_call() {
            self.node.clone()
        } else {
            self.groups.get(call.group)
        };
        let Some(group) = service else {
            // Executed nothing: the caller tries the group's other replicas.
            return Ok(MetaReply {
                routing_version: 0,
                result: Err(MetaError::NotLeader { leader: None }),
            });
        };
        let op = call.req.op_name();
        let span = tracing::debug_span!("rpc.meta", otel.kind = "server", op, group = call.group);
        served("meta", op, traceparent, span, async move {
            let result = group.call(call.tag, call.req).await;
            MetaReply {
                routing_version: group.routing_version(),
                result,
            }
        })
        .await
    }
}

impl RpcServer {
    /// Serves `groups` (by group id), `coordinator` and `map`.
    pub fn new(
        groups: impl Into<ServedGroups>,
        coordinator: Arc<dyn CoordinatorService>,
        map: ClusterMap,
    ) -> Self {
        Self {
            handler: Arc::new(Handler {
                meta: MetaRouter {
                    groups: groups.into(),
                    node: None,
                },
                coordinator,
                map: Arc::new(map),
                chunks: None,
                raft: None,
                admin: None,
                tiers: None,
                closing: Arc::new(tokio::sync::watch::channel(false).0),
            }),
        }
    }

    /// The server with `set` applied to its handler (before it serves).
    fn with(self, set: impl FnOnce(&mut Handler)) -> Self {
        let mut handler = Arc::into_inner(self.handler).expect("not serving yet");
        set(&mut handler);
        Self {
            handler: Arc::new(handler),
        }
    }

    /// Also serves a chunkstore.
    pub fn with_chunks(self, chunks: Arc<dyn ChunkService>) -> Self {
        self.with(|h| h.chunks = Some(chunks))
    }

    /// Also takes the requests addressed to the node rather than a group
    /// ([`crate::MetaRequest::HostReplica`], [`crate::MetaRequest::DropReplica`]); without it they are
    /// refused.
    pub fn with_node(self, node: Arc<dyn MetaService>) -> Self {
        self.with(|h| h.meta.node = Some(node))
    }

    /// Also takes admin requests other nodes authorized and hand on ([`AdminService`]).
    pub fn with_admin(self, admin: Arc<dyn AdminService>) -> Self {
        self.with(|h| h.admin = Some(admin))
    }

    /// Also reads tiered versions through for callers without the tiers' keys
    /// ([`TierReadService`]; client credentials may ask).
    pub fn with_tier_reads(self, tiers: Arc<dyn TierReadService>) -> Self {
        self.with(|h| h.tiers = Some(tiers))
    }

    /// Serves the map `map` makes at each request instead of the fixed one.
    pub fn with_map(self, map: Arc<dyn MapSource>) -> Self {
        self.with(|h| h.map = map)
    }

    /// Also takes the raft traffic of this process's MNode replicas.
    pub fn with_raft(self, raft: Arc<dyn RaftService>) -> Self {
        self.with(|h| h.raft = Some(raft))
    }

    /// Serves connections from `listener` (HTTP/2 only, `TCP_NODELAY`) until the process ends.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        self.serve_with_shutdown(listener, std::future::pending())
            .await
    }

    /// Serves until `signal` completes, then waits for open connections to finish.
    pub async fn serve_with_shutdown(
        self,
        listener: TcpListener,
        signal: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let closing = self.handler.closing.clone();
        let signal = async move {
            signal.await;
            closing.send_replace(true);
        };
        let service = SakerServer::from_arc(self.handler)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        let Some(started) = crate::auth::process().filter(|p| p.kind() == Kind::Node) else {
            return Err(std::io::Error::other(
                "an RPC server needs this process's node credential (saker_rpc::auth::install)",
            ));
        };
        // Fails now, not at the first connection, if this credential cannot serve.
        started.server_tls().map_err(std::io::Error::other)?;
        let serving = started.clone();
        let service = tonic::service::interceptor::InterceptedService::new(service, move |r| {
            authenticate(&crate::auth::serving(&serving), check_version(r)?)
        });
        Server::builder()
            .tcp_nodelay(true)
            .http2_keepalive_interval(Some(KEEPALIVE))
            // Calls in flight per connection: a caller past it waits for one to finish.
            .max_concurrent_streams(Some(MAX_STREAMS))
            .serve_with_incoming_shutdown(service, incoming(listener, started), signal)
            .await
            .map_err(std::io::Error::other)
    }
}

/// Refuses a caller that speaks another wire version, with both versions in the status.
fn check_version(request: Request<()>) -> Result<Request<()>, Status> {
    let theirs = request
        .metadata()
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u8>().ok());
    match theirs {
        Some(v) if v == WIRE_VERSION => Ok(request),
        other => {
            let theirs = other.map_or("none".to_string(), |v| v.to_string());
            tracing::warn!(
                theirs,
                ours = WIRE_VERSION,
                "RPC from another wire version refused"
            );
            Err(Status::failed_precondition(format!(
                "incompatible saker versions: this node speaks wire version {WIRE_VERSION}, the \
                 caller {theirs}; run one wire version across the cluster"
            )))
        }
    }
}

/// Passes the kind a caller proved to the handler: over TLS the one its certificate names
/// (checked at the handshake, [`super::secure`]); on a plaintext connection (`--insecure-rpc`,
/// an upgrade's middle steps) the one its token proves, while the node serves plaintext at
/// all: once its upgrade is done, a plaintext request is refused whatever token it carries. A
/// token on a TLS connection is ignored, one is never enough there.
fn authenticate(serving: &Process, mut request: Request<()>) -> Result<Request<()>, Status> {
    let proved = request.extensions().get::<PeerInfo>().and_then(|p| p.kind);
    if let Some(kind) = proved {
        request.extensions_mut().insert(kind);
        return Ok(request);
    }
    let token = request
        .metadata()
        .get(crate::auth::AUTH_HEADER)
        .and_then(|v| v.to_str().ok());
    match serving.verify_plaintext(token) {
        Ok(kind) => {
            metrics::PLAINTEXT_REQUESTS.inc();
            request.extensions_mut().insert(kind);
            Ok(request)
        }
        Err(why) => {
            tracing::warn!(why, "plaintext RPC refused");
            Err(Status::unauthenticated(why))
        }
    }
}

/// Whether a plaintext data key may go to the caller of a connection: over TLS (whose
/// certificate proved its kind), or in plaintext from loopback only.
fn keys_may_travel(peer: Option<&PeerInfo>) -> bool {
    peer.is_some_and(|p| p.kind.is_some() || p.remote.is_some_and(|a| a.ip().is_loopback()))
}

/// The kind of credential a request proved (set by [`authenticate`]).
fn kind_of<T>(request: &Request<T>) -> Kind {
    // Only authenticated requests reach the handler; a missing kind is treated as the least.
    request
        .extensions()
        .get::<Kind>()
        .copied()
        .unwrap_or(Kind::Client)
}

/// Refuses a request a client credential may not send.
fn node_only<T>(request: &Request<T>, what: &str) -> Result<(), Status> {
    match kind_of(request) {
        Kind::Node => Ok(()),
        Kind::Client => Err(Status::permission_denied(format!(
            "a client credential may not send {what}"
        ))),
    }
}

fn frame(body: bytes::Bytes) -> Response<Frame> {
    Response::new(Frame { body })
}

/// Runs `fut` on its own task: a call runs to completion even if the caller goes away, so a
/// cancelled RPC never cuts a protocol (freeze ... unfreeze) in half.
async fn detached<T: Send + 'static>(
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, Status> {
    tokio::spawn(fut).await.map_err(|e| {
        tracing::error!(error = %e, "RPC handler task failed");
        Status::internal(format!("handler failed: {e}"))
    })
}

/// Runs one call's handler [`detached`], in `span` (whose parent is the caller's span, named
/// by its `traceparent`), and times it as `method`/`op`.
async fn served<T: Send + 'static>(
    method: &'static str,
    op: &'static str,
    traceparent: Option<&str>,
    span: tracing::Span,
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, Status> {
    if let Some(tp) = traceparent {
        trace_context::adopt_parent(&span, tp);
    }
    let start = Instant::now();
    let result = detached(fut.instrument(span)).await;
    metrics::SERVER_LATENCY
        .with_label_values(&[method, op])
        .observe(start.elapsed().as_secs_f64());
    result
}

#[tonic::async_trait]
impl Saker for Handler {
    async fn meta(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        let kind = kind_of(&request);
        let peer = request.extensions().get::<PeerInfo>().cloned();
        let (metadata, _, frame_in) = request.into_parts();
        let call: MetaCall =
            decode(&frame_in.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        if call.req.hands_out_keys() && !keys_may_travel(peer.as_ref()) {
            metrics::KEYS_REFUSED_PLAINTEXT.inc();
            return Err(Status::permission_denied(
                "data keys are handed out over mutual TLS only (or to a caller on loopback): \
                 this connection is plaintext",
            ));
        }
        let reply = self
            .meta
            .call(kind, call, trace_context::parent_of(&metadata))
            .await?;
        Ok(frame(encode(&reply)))
    }

    async fn remove_dir(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        node_only(&request, "coordinator calls")?;
        let (metadata, _, body) = request.into_parts();
        let call: RemoveDirCall =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let coordinator = self.coordinator.clone();
        let span = coordinator_span("remove_dir");
        let result = served(
            "coordinator",
            "remove_dir",
            trace_context::parent_of(&metadata),
            span,
            async move { coordinator.remove_dir(call.path, call.cond).await },
        )
        .await?;
        Ok(frame(encode(&result)))
    }

    async fn rename(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        node_only(&request, "coordinator calls")?;
        let (metadata, _, body) = request.into_parts();
        let call: RenameCall =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let coordinator = self.coordinator.clone();
        let span = coordinator_span("rename");
        let result = served(
            "coordinator",
            "rename",
            trace_context::parent_of(&metadata),
            span,
            async move {
                coordinator
                    .rename(
                        call.from,
                        call.to,
                        call.noreplace,
                        call.cred,
                        call.versioning,
                    )
                    .await
            },
        )
        .await?;
        Ok(frame(encode(&result)))
    }

    async fn set_dir_attr(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        node_only(&request, "coordinator calls")?;
        let (metadata, _, body) = request.into_parts();
        let call: SetDirAttrCall =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let coordinator = self.coordinator.clone();
        let span = coordinator_span("set_dir_attr");
        let result = served(
            "coordinator",
            "set_dir_attr",
            trace_context::parent_of(&metadata),
            span,
            async move { coordinator.set_dir_attr(call.set).await },
        )
        .await?;
        Ok(frame(encode(&result)))
    }

    async fn link(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        node_only(&request, "coordinator calls")?;
        let (metadata, _, body) = request.into_parts();
        let call: LinkCall =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let coordinator = self.coordinator.clone();
        let span = coordinator_span("link");
        let result = served(
            "coordinator",
            "link",
            trace_context::parent_of(&metadata),
            span,
            async move {
                coordinator
                    .link(call.from, call.to, call.expect, call.cred)
                    .await
            },
        )
        .await?;
        Ok(frame(encode(&result)))
    }

    async fn admin(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        node_only(&request, "admin requests")?;
        let call: AdminCall = decode(&request.into_inner().body)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let Some(admin) = self.admin.clone() else {
            return Err(Status::unimplemented("no admin API at this address"));
        };
        // On its own task: a caller that goes away does not cut a change short.
        let reply = tokio::spawn(async move { admin.admin(call).await })
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(frame(encode(&reply)))
    }

    async fn cluster_map(&self, _request: Request<Frame>) -> Result<Response<Frame>, Status> {
        Ok(frame(encode(&self.map.cluster_map().await)))
    }

    async fn raft(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        node_only(&request, "raft messages")?;
        let (metadata, _, body) = request.into_parts();
        let call: RaftCall =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let result = match &self.raft {
            Some(raft) => {
                let raft = raft.clone();
                let span =
                    tracing::debug_span!("rpc.raft", otel.kind = "server", group = call.group);
                served(
                    "raft",
                    "raft",
                    trace_context::parent_of(&metadata),
                    span,
                    async move { raft.raft(call.group, call.body).await },
                )
                .await?
            }
            None => Err("no MNode replica is served at this address".to_string()),
        };
        Ok(frame(encode(&result)))
    }

    type RaftPipeStream = super::pipe::Answers;

    async fn raft_pipe(
        &self,
        request: Request<tonic::Streaming<Frame>>,
    ) -> Result<Response<Self::RaftPipeStream>, Status> {
        let kind = kind_of(&request);
        Ok(super::pipe::serve(
            request.into_inner(),
            kind,
            super::pipe::Callee {
                raft: self.raft.clone(),
                meta: self.meta.clone(),
            },
            self.closing.subscribe(),
        ))
    }

    async fn tier_read(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        let kind = kind_of(&request);
        let (metadata, _, body) = request.into_parts();
        let call: TierReadCall =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        granted(
            kind,
            call.grant,
            crate::capability::tier_copy(&call.tier),
            "a tier copy",
        )?;
        if call.end < call.start || call.end - call.start > crate::MAX_TIER_READ {
            return Err(Status::invalid_argument(format!(
                "tier read of {}..{}: at most {} bytes, start before end",
                call.start,
                call.end,
                crate::MAX_TIER_READ
            )));
        }
        crate::check_tier_name(&call.tier.tier).map_err(Status::invalid_argument)?;
        let result = match self.tiers.clone() {
            Some(tiers) => {
                let span = tracing::debug_span!("rpc.tier_read", otel.kind = "server");
                served(
                    "tier",
                    "read",
                    trace_context::parent_of(&metadata),
                    span,
                    async move { tiers.read(call.tier, call.start, call.end).await },
                )
                .await?
            }
            None => Err("no tier reads are served at this address".to_string()),
        };
        Ok(frame(encode(&result)))
    }

    async fn chunk(&self, request: Request<Frame>) -> Result<Response<Frame>, Status> {
        let kind = kind_of(&request);
        let (metadata, _, body) = request.into_parts();
        let req: ChunkRequest =
            decode(&body.body).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let result = chunk_call(
            self.chunks.clone(),
            kind,
            req,
            trace_context::parent_of(&metadata),
        )
        .await?;
        Ok(frame(encode(&result)))
    }
}

/// Runs one chunkstore request from a caller that proved `kind` (on its own task, in a span
/// whose parent is `traceparent`). A status is a refusal: nothing ran.
async fn chunk_call(
    chunks: Option<Arc<dyn ChunkService>>,
    kind: Kind,
    req: ChunkRequest,
    traceparent: Option<&str>,
) -> Result<Result<ChunkReply, ChunkWireError>, Status> {
    if kind == Kind::Client && !req.client_allowed() {
        return Err(Status::permission_denied(
            "a client credential may not delete or list chunks, nor write shards",
        ));
    }
    match &req {
        ChunkRequest::Get { id, grant, .. } => {
            granted(kind, *grant, *id, &format!("chunk {id:032x}"))?
        }
        ChunkRequest::GetShard {
            chunk,
            index,
            grant,
            ..
        } => granted(
            kind,
            *grant,
            *chunk,
            &format!("shard {index} of chunk {chunk:032x}"),
        )?,
        ChunkRequest::GetCoded { read, grant } => granted(
            kind,
            *grant,
            read.chunk,
            &format!("chunk {:032x}", read.chunk),
        )?,
        _ => {}
    }
    let Some(chunks) = chunks else {
        return Ok(Err(ChunkWireError::Unavailable(
            crate::chunk::NO_CHUNKSTORE.into(),
        )));
    };
    let op = req.op_name();
    let span = tracing::debug_span!("rpc.chunk", otel.kind = "server", op);
    served("chunk", op, traceparent, span, async move {
        chunks.call(req).await
    })
    .await
}

/// `Ok` unless a client reads `what` (`id` in [`crate::capability`]'s terms) without a grant
/// from its MNode that allows it now.
fn granted(
    kind: Kind,
    grant: Option<crate::capability::ChunkGrant>,
    id: u128,
    what: &str,
) -> Result<(), Status> {
    if kind == Kind::Client && !grant.is_some_and(|g| g.allows(id)) {
        return Err(Status::permission_denied(format!(
            "{what}: a client reads it with a grant from its MNode (none, expired or not this \
             cluster's)"
        )));
    }
    Ok(())
}

fn coordinator_span(op: &'static str) -> tracing::Span {
    tracing::debug_span!("rpc.coordinator", otel.kind = "server", op)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_of_another_wire_version_are_refused_with_both_versions() {
        let mut ok = Request::new(());
        ok.metadata_mut().insert(
            VERSION_HEADER,
            tonic::metadata::MetadataValue::from(u32::from(WIRE_VERSION)),
        );
        assert!(check_version(ok).is_ok());
        let mut old = Request::new(());
        old.metadata_mut().insert(
            VERSION_HEADER,
            tonic::metadata::MetadataValue::from(u32::from(WIRE_VERSION - 1)),
        );
        let err = check_version(old).unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert!(err
            .message()
            .contains(&format!("the caller {}", WIRE_VERSION - 1)));
        let err = check_version(Request::new(())).unwrap_err();
        assert!(
            err.message().contains("the caller none"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn data_keys_travel_over_tls_or_from_loopback_only() {
        let at = |ip: &str| Some(std::net::SocketAddr::new(ip.parse().unwrap(), 4000));
        let tls = PeerInfo {
            remote: at("10.0.0.7"),
            kind: Some(Kind::Client),
        };
        assert!(keys_may_travel(Some(&tls)));
        let remote_plain = PeerInfo {
            remote: at("10.0.0.7"),
            kind: None,
        };
        assert!(!keys_may_travel(Some(&remote_plain)));
        let local_plain = PeerInfo {
            remote: at("127.0.0.1"),
            kind: None,
        };
        assert!(keys_may_travel(Some(&local_plain)));
        assert!(!keys_may_travel(Some(&PeerInfo::default())));
        assert!(!keys_may_travel(None));
    }
}
