//! Clients of a remote [`RpcServer`](super::RpcServer): [`RemoteMeta`], [`RemoteCoordinator`]
//! and [`fetch_cluster_map`], all over one shared HTTP/2 connection ([`RpcChannel`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

use bytes::Bytes;

use super::pb::saker_client::SakerClient;
use super::pb::Frame;
use super::pipe::{Pipe, PipeError, Piped, Unanswered};
use super::secure::Connector;
use super::wire::WIRE_VERSION;
use super::wire::{
    decode, encode, LinkCall, MetaCall, MetaReply, RaftCall, RemoveDirCall, RenameCall,
    SetDirAttrCall, TierReadCall,
};
use super::{MAX_MESSAGE, VERSION_HEADER};
use crate::attr::Attr;
use crate::chunk::{ChunkReply, ChunkRequest, ChunkWireError};
use crate::cluster_map::ClusterMap;
use crate::error::MetaError;
use crate::meta::{ClientTag, Cred, MetaRequest, MetaResponse, RemoveCond, RenameVersioning};
use crate::replicas::ReplicaSet;
use crate::service::{CoordinatorService, MetaService};

/// How long establishing a connection may take before a call fails as `Unavailable`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings, also on idle connections, so a dead server is noticed: a ping goes out once
/// nothing was read for `KEEPALIVE`, and the connection is dropped (its calls fail as
/// `Unavailable`, the next call dials again) unless answered within `KEEPALIVE_TIMEOUT`. Meta
/// calls have no deadline of their own (chunk calls do), so this bounds how long a peer that went silent without
/// closing its connections (a network partition, not a crash) holds every call sent to it: a
/// client keeps calling the group leader it knew, and before it gives up on it no other
/// replica is asked.
const KEEPALIVE: Duration = Duration::from_secs(2);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection to one RPC endpoint, shared by every handle made from it (calls are
/// multiplexed on one HTTP/2 connection, re-established after a failure). Cheap to clone.
///
/// The connection is made with the process's credential as it was when the channel was made
/// ([`crate::auth`]); once that changes (a node reloads its credential during an online
/// upgrade or CA rotation), the next call dials a new connection with the new one, shared by
/// every clone, while calls already under way finish on the old one, which closes after them.
#[derive(Clone, Debug)]
pub struct RpcChannel {
    addr: String,
    conn: Arc<std::sync::RwLock<Conn>>,
    /// The base of every chunk call's deadline ([`ChunkRequest::deadline`]).
    chunk_deadline: Duration,
}

/// One connection of an [`RpcChannel`], made under credential `generation`.
#[derive(Debug)]
struct Conn {
    generation: u64,
    client: SakerClient<Channel>,
    /// The stream that carries raft messages and Meta calls to this endpoint
    /// ([`super::pipe`]).
    pipe: Arc<Pipe>,
}

impl Conn {
    fn new(generation: u64, channel: Channel) -> Self {
        Self {
            generation,
            client: SakerClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
            pipe: Arc::default(),
        }
    }
}

impl RpcChannel {
    /// Connects to `addr` (`host:port`, or a `http://` URI), failing with `Unavailable` if the
    /// endpoint cannot be reached.
    pub async fn connect(addr: &str) -> Result<Self, MetaError> {
        let generation = crate::auth::generation();
        let (endpoint, connector) = endpoint(addr)?;
        let channel = endpoint
            .connect_with_connector(connector)
            .await
            .map_err(|e| unavailable(addr, &error_chain(&e)))?;
        Ok(Self::new(addr, Conn::new(generation, channel)))
    }

    /// A channel that connects at its first call (must be made inside a tokio runtime).
    pub fn lazy(addr: &str) -> Result<Self, MetaError> {
        Ok(Self::new(addr, lazy_conn(addr)?))
    }

    fn new(addr: &str, conn: Conn) -> Self {
        Self {
            addr: addr.to_string(),
            conn: Arc::new(std::sync::RwLock::new(conn)),
            chunk_deadline: crate::chunk::CHUNK_DEADLINE,
        }
    }

    /// The client and pipe a call goes on: the current connection, or, if the process's
    /// credential changed since it was made, a new one (made lazily, under the new one).
    fn current(&self) -> (SakerClient<Channel>, Arc<Pipe>) {
        let generation = crate::auth::generation();
        {
            let conn = self.conn.read().expect("channel lock");
            if conn.generation == generation {
                return (conn.client.clone(), conn.pipe.clone());
            }
        }
        let mut conn = self.conn.write().expect("channel lock");
        if conn.generation != generation {
            match lazy_conn(&self.addr) {
                Ok(new) => *conn = new,
                // Keep the old connection: the call fails or not as it would have.
                Err(e) => tracing::warn!(addr = %self.addr, error = %e, "cannot redial"),
            }
        }
        (conn.client.clone(), conn.pipe.clone())
    }

    fn client(&self) -> SakerClient<Channel> {
        self.current().0
    }

    /// The same channel with chunk calls given `base` beyond their transfer
    /// ([`ChunkRequest::deadline`]; [`crate::chunk::CHUNK_DEADLINE`] by default).
    pub fn with_chunk_deadline(mut self, base: Duration) -> Self {
        self.chunk_deadline = base;
        self
    }

    /// The address this channel was made for.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// MNode group `group` behind this endpoint.
    pub fn meta(&self, group: u32) -> RemoteMeta {
        RemoteMeta {
            group,
            channel: self.clone(),
            routing_version: Arc::default(),
        }
    }

    /// The coordinator behind this endpoint.
    pub fn coordinator(&self) -> RemoteCoordinator {
        RemoteCoordinator {
            channel: self.clone(),
        }
    }

    /// The endpoint's cluster map.
    pub async fn cluster_map(&self) -> Result<ClusterMap, MetaError> {
        let reply = self.client().cluster_map(frame(&())).await;
        self.reply(reply)
    }

    /// Hands an admin request this process authorized to the node behind this endpoint
    /// ([`crate::AdminService`]; a node credential's).
    pub async fn admin(&self, call: &crate::AdminCall) -> Result<crate::AdminReply, MetaError> {
        let reply = self.client().admin(frame(call)).await;
        self.reply(reply)
    }

    /// One call to the chunkstore behind this endpoint; a transport failure is `Unavailable`.
    /// Unary, not on the pipe: chunk data is large, and one stream's flow-control window would
    /// hold every other message on the pipe behind it.
    /// A call that outlives its deadline ([`ChunkRequest::deadline`]) is `Unavailable` too.
    pub async fn chunk(&self, req: ChunkRequest) -> Result<ChunkReply, ChunkWireError> {
        let deadline = req.deadline(self.chunk_deadline);
        let mut request = frame(&req);
        // The server stops working on it then too.
        request.set_timeout(deadline);
        let mut client = self.client();
        let reply = tokio::time::timeout(deadline, client.chunk(request))
            .await
            .map_err(|_| {
                ChunkWireError::Unavailable(format!(
                    "{} did not answer a chunk {} within {:.1} s",
                    self.addr,
                    req.op_name(),
                    deadline.as_secs_f64()
                ))
            })?;
        let body = reply
            .map_err(|s| chunk_error(status_error(&self.addr, &s)))?
            .into_inner()
            .body;
        decode::<Result<ChunkReply, ChunkWireError>>(&body)
            .map_err(|e| ChunkWireError::Protocol(format!("reply from {}: {e}", self.addr)))?
    }

    /// Bytes `start..end` (at most [`crate::MAX_TIER_READ`]) of the tiered version `tier`, read
    /// through by the node behind this endpoint ([`crate::TierReadService`]). What the node
    /// could not read is `Unavailable` with its reason; a call that outlives the chunk
    /// deadline for as many bytes is too.
    pub async fn tier_read(
        &self,
        tier: &crate::TierRef,
        start: u64,
        end: u64,
    ) -> Result<Bytes, MetaError> {
        let deadline =
            crate::chunk::transfer_deadline(self.chunk_deadline, end.saturating_sub(start));
        let mut request = frame(&TierReadCall {
            tier: tier.clone(),
            start,
            end,
            grant: crate::capability::held(crate::capability::tier_copy(tier)),
        });
        request.set_timeout(deadline);
        let reply = tokio::time::timeout(deadline, self.client().tier_read(request))
            .await
            .map_err(|_| unavailable(&self.addr, "no answer to a tier read in time"))?;
        self.reply::<Result<Bytes, String>>(reply)?
            .map_err(|e| unavailable(&self.addr, &e))
    }

    /// One raft message to group `group`'s replica behind this endpoint, given up after
    /// `timeout`. `Unavailable` if it did not arrive or the replica could not take it.
    pub async fn raft(
        &self,
        group: u32,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, MetaError> {
        let msg = Piped::Raft {
            group,
            body: body.clone(),
        };
        let (client, pipe) = self.current();
        match pipe.call(&client, &self.addr, msg, Some(timeout)).await {
            Ok(answer) => return answer.map_err(|e| self.unanswered(e)),
            Err(PipeError::Failed(e)) => return Err(e),
            Err(PipeError::Unsupported(_)) => {}
        }
        let mut request = frame(&RaftCall { group, body });
        request.set_timeout(timeout);
        let reply = self.client().raft(request).await;
        self.reply::<Result<Bytes, String>>(reply)?
            .map_err(|e| unavailable(&self.addr, &e))
    }

    /// A `Meta` call on the pipe; gives the call back if the peer has no pipe.
    async fn pipe_meta(&self, call: MetaCall) -> Result<MetaReply, MetaCall> {
        let msg = Piped::Meta {
            call: Box::new(call),
            traceparent: crate::trace_context::current(),
        };
        let (client, pipe) = self.current();
        let answer = match pipe.call(&client, &self.addr, msg, None).await {
            Ok(answer) => answer,
            Err(PipeError::Failed(e)) => return Ok(failed_reply(e)),
            Err(PipeError::Unsupported(Piped::Meta { call, .. })) => return Err(*call),
            Err(PipeError::Unsupported(_)) => unreachable!("the pipe gives back what it got"),
        };
        Ok(match answer {
            Ok(body) => decode::<MetaReply>(&body).unwrap_or_else(|e| {
                failed_reply(MetaError::Internal(format!(
                    "reply from {}: {e}",
                    self.addr
                )))
            }),
            Err(e) => failed_reply(self.unanswered(e)),
        })
    }

    /// A message the peer did not answer, as the unary call's status would have said it.
    fn unanswered(&self, why: Unanswered) -> MetaError {
        match why {
            Unanswered::Refused(m) => {
                MetaError::Unauthenticated(format!("RPC to {}: {m}", self.addr))
            }
            Unanswered::Failed(e) => unavailable(&self.addr, &e),
        }
    }

    /// Decodes a reply; a failed call is `Unavailable`, an undecodable body `Internal`.
    fn reply<T: DeserializeOwned>(
        &self,
        reply: Result<tonic::Response<Frame>, Status>,
    ) -> Result<T, MetaError> {
        let body = reply
            .map_err(|s| status_error(&self.addr, &s))?
            .into_inner()
            .body;
        decode(&body).map_err(|e| MetaError::Internal(format!("reply from {}: {e}", self.addr)))
    }
}

/// One lazily connected [`RpcChannel`] per address, shared by everything a process sends
/// there (every group's raft traffic and calls to one peer share one HTTP/2 connection).
/// Clones share the channels.
#[derive(Clone, Debug, Default)]
pub struct ChannelPool(Arc<std::sync::Mutex<std::collections::BTreeMap<String, RpcChannel>>>);

impl ChannelPool {
    /// A pool holding `channel` already.
    pub fn with(channel: RpcChannel) -> Self {
        let pool = Self::default();
        pool.0
            .lock()
            .expect("channel pool lock")
            .insert(channel.addr.clone(), channel);
        pool
    }

    /// The channel to `addr`, made at the first call (inside a tokio runtime).
    pub fn get(&self, addr: &str) -> Result<RpcChannel, MetaError> {
        let mut map = self.0.lock().expect("channel pool lock");
        if let Some(c) = map.get(addr) {
            return Ok(c.clone());
        }
        let c = RpcChannel::lazy(addr)?;
        map.insert(addr.to_string(), c.clone());
        Ok(c)
    }
}

/// Every group of `map` as one service ([`ReplicaSet`]): each replica is `local(group, addr)`
/// where that gives one (a replica in this process), else reached through `pool`. A group
/// the map places nowhere is behind `here` (the address the map came from).
pub fn replica_sets(
    map: &ClusterMap,
    here: &str,
    pool: &ChannelPool,
    local: impl Fn(u32, &str) -> Option<Arc<dyn MetaService>>,
) -> Result<std::collections::BTreeMap<u32, Arc<ReplicaSet>>, MetaError> {
    map.groups
        .iter()
        .map(|&g| {
            let set = ReplicaSet::over(g, map.endpoints.mnode(g, here), pool, |a| local(g, a))?;
            Ok((g, Arc::new(set)))
        })
        .collect()
}

/// [`replica_sets`] as plain services.
pub fn group_services(
    map: &ClusterMap,
    here: &str,
    pool: &ChannelPool,
    local: impl Fn(u32, &str) -> Option<Arc<dyn MetaService>>,
) -> Result<std::collections::BTreeMap<u32, Arc<dyn MetaService>>, MetaError> {
    Ok(replica_sets(map, here, pool, local)?
        .into_iter()
        .map(|(g, s)| (g, s as Arc<dyn MetaService>))
        .collect())
}

/// Fetches the cluster map from the endpoint at `addr`.
pub async fn fetch_cluster_map(addr: &str) -> Result<ClusterMap, MetaError> {
    RpcChannel::connect(addr).await?.cluster_map().await
}

/// An MNode group reached over the network.
#[derive(Clone, Debug)]
pub struct RemoteMeta {
    group: u32,
    channel: RpcChannel,
    /// The highest exception-table version the group's replies carried.
    routing_version: Arc<AtomicU64>,
}

impl RemoteMeta {
    pub fn new(channel: &RpcChannel, group: u32) -> Self {
        channel.meta(group)
    }

    pub fn group(&self) -> u32 {
        self.group
    }
}

#[async_trait]
impl MetaService for RemoteMeta {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let call = MetaCall {
            group: self.group,
            tag,
            req,
        };
        let reply = match self.channel.pipe_meta(call).await {
            Ok(reply) => reply,
            Err(call) => {
                let reply = self.channel.client().meta(frame(&call)).await;
                self.channel.reply::<MetaReply>(reply)?
            }
        };
        self.routing_version
            .fetch_max(reply.routing_version, Ordering::Relaxed);
        reply.result
    }

    fn routing_version(&self) -> u64 {
        self.routing_version.load(Ordering::Relaxed)
    }
}

/// The coordinator reached over the network.
#[derive(Clone, Debug)]
pub struct RemoteCoordinator {
    channel: RpcChannel,
}

impl RemoteCoordinator {
    pub fn new(channel: &RpcChannel) -> Self {
        channel.coordinator()
    }
}

#[async_trait]
impl CoordinatorService for RemoteCoordinator {
    async fn remove_dir(&self, path: Vec<String>, cond: RemoveCond) -> Result<(), MetaError> {
        let call = RemoveDirCall { path, cond };
        let reply = self.channel.client().remove_dir(frame(&call)).await;
        self.channel.reply::<Result<(), MetaError>>(reply)?
    }

    async fn rename(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        versioning: RenameVersioning,
    ) -> Result<Attr, MetaError> {
        let call = RenameCall {
            from,
            to,
            noreplace,
            cred,
            versioning,
        };
        let reply = self.channel.client().rename(frame(&call)).await;
        self.channel.reply::<Result<Attr, MetaError>>(reply)?
    }

    async fn set_dir_attr(&self, set: MetaRequest) -> Result<Attr, MetaError> {
        let call = SetDirAttrCall { set };
        let reply = self.channel.client().set_dir_attr(frame(&call)).await;
        self.channel.reply::<Result<Attr, MetaError>>(reply)?
    }

    async fn link(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<crate::InodeId>,
        cred: Cred,
    ) -> Result<Attr, MetaError> {
        let call = LinkCall {
            from,
            to,
            expect,
            cred,
        };
        let reply = self.channel.client().link(frame(&call)).await;
        self.channel.reply::<Result<Attr, MetaError>>(reply)?
    }
}

fn frame<T: serde::Serialize>(value: &T) -> Request<Frame> {
    let mut request = Request::new(Frame {
        body: encode(value),
    });
    stamp(request.metadata_mut());
    request
}

/// The headers every call carries: the wire version, the caller's trace context and this
/// process's cluster token.
pub(super) fn stamp(metadata: &mut tonic::metadata::MetadataMap) {
    metadata.insert(
        VERSION_HEADER,
        tonic::metadata::MetadataValue::from(u32::from(WIRE_VERSION)),
    );
    crate::trace_context::inject(metadata);
    if let Some(v) = crate::auth::request_token().and_then(|t| t.parse().ok()) {
        metadata.insert(crate::auth::AUTH_HEADER, v);
    }
}

/// A transport failure of a chunkstore request: a refused credential is `Refused`, anything
/// else `Unavailable`.
fn chunk_error(e: MetaError) -> ChunkWireError {
    match e {
        MetaError::Unauthenticated(m) => ChunkWireError::Refused(m),
        e => ChunkWireError::Unavailable(e.to_string()),
    }
}

fn failed_reply(e: MetaError) -> MetaReply {
    MetaReply {
        routing_version: 0,
        result: Err(e),
    }
}

/// A connection to `addr` made at its first call, under the process's credential now.
fn lazy_conn(addr: &str) -> Result<Conn, MetaError> {
    let generation = crate::auth::generation();
    let (endpoint, connector) = endpoint(addr)?;
    Ok(Conn::new(
        generation,
        endpoint.connect_with_connector_lazy(connector),
    ))
}

/// An endpoint for `addr` and the dialer its connections are made with: mutual TLS, or
/// plaintext under `--insecure-rpc` ([`super::secure`]).
fn endpoint(addr: &str) -> Result<(Endpoint, Connector), MetaError> {
    let tls = crate::auth::client_tls().map_err(MetaError::Unauthenticated)?;
    let host = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    let bad =
        |e: &dyn std::fmt::Display| MetaError::Invalid(format!("bad RPC address '{addr}': {e}"));
    // The scheme is plain HTTP/2 to tonic: TLS, if any, is the connector's.
    let endpoint = Endpoint::from_shared(format!("http://{host}")).map_err(|e| bad(&e))?;
    let endpoint = endpoint
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true);
    Ok((endpoint, Connector { tls }))
}

/// A failed connection or call: `Unauthenticated` when the TLS handshake refused either side
/// (another cluster's CA, an expired or missing certificate: no retry helps), else
/// `Unavailable`.
fn unavailable(addr: &str, why: &str) -> MetaError {
    const REFUSALS: [&str; 3] = [
        "received fatal alert",
        "invalid peer certificate",
        "peer sent no certificates",
    ];
    if REFUSALS.iter().any(|r| why.contains(r)) {
        return MetaError::Unauthenticated(format!(
            "RPC to {addr}: the TLS handshake failed (not this cluster's credential, or an \
             expired one?): {why}"
        ));
    }
    MetaError::Unavailable(format!("RPC to {addr}: {why}"))
}

/// A transport failure as a [`MetaError`]: a refused credential is `Unauthenticated` (no
/// retry helps), anything else `Unavailable`.
pub(super) fn status_error(addr: &str, s: &Status) -> MetaError {
    match s.code() {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            MetaError::Unauthenticated(format!("RPC to {addr}: {}", s.message()))
        }
        _ => unavailable(addr, &status_text(s)),
    }
}

fn status_text(s: &Status) -> String {
    use std::error::Error;
    let mut text = format!("{:?}: {}", s.code(), s.message());
    let mut source = s.source();
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(e) = source {
        text.push_str(&format!(": {e}"));
        source = e.source();
    }
    text
}
