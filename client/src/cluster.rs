//! The cluster handle: routing to MNode groups and the parent-creation retry loop.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use saker_chunkstore::{ChunkStore, MemberInfo, ReplicatedChunkStore};
use saker_namespace::{GroupId, Route, Router, SharedRouter};
use saker_rpc::{
    group_services, Attr, ChannelPool, ClientTag, ClusterMap, Decided, MetaError, MetaRequest,
    MetaResponse, MetaService, NewObject, ObjectView, RpcChannel, Want, WriteCond,
};

use tracing::Instrument;

use crate::error::ClientError;
use crate::metrics::{MNODE_REQUESTS_PER_OP, ROUTING_REFRESHES};

/// Tunables of the data path.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Objects up to this size live inside the MNode.
    pub inline_threshold: usize,
    /// Larger objects are split into chunks of this size.
    pub chunk_size: usize,
    /// The master keys of SSE-S3 (none: SSE-S3 is refused, and its objects cannot be read,
    /// except by a library mount, which asks a node for data keys).
    pub master_key: Option<std::sync::Arc<crate::master_keys::MasterKeys>>,
    /// The keys of SSE-KMS, by id (none: SSE-KMS is refused).
    pub kms_keys: Option<std::sync::Arc<crate::sealed::Keyring>>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            inline_threshold: 16 * 1024,
            chunk_size: 8 * 1024 * 1024,
            master_key: None,
            kms_keys: None,
        }
    }
}

/// One connection per RPC address (the first one already connected; the others connect at
/// their first call, so a process that is down fails only the requests it would serve).
/// Routes full-path operations to MNode groups; shared by all requests of a front end.
pub struct Cluster {
    /// The ring and the exception table; the table is replaced when a reply shows a newer one
    /// (lazy refresh: FalconFS clients fetch the table when told theirs is stale).
    router: SharedRouter,
    groups: BTreeMap<GroupId, Arc<dyn MetaService>>,
    pub(crate) chunks: Arc<dyn ChunkStore>,
    pub(crate) config: ClusterConfig,
    client_id: u128,
    seq: AtomicU64,
    /// Reads of versions that live in a remote tier (none: such reads fail).
    pub(crate) tiers: std::sync::RwLock<Option<Arc<dyn crate::TierReader>>>,
}

impl Cluster {
    pub fn new(
        router: Router,
        groups: BTreeMap<GroupId, Arc<dyn MetaService>>,
        chunks: Arc<dyn ChunkStore>,
        config: ClusterConfig,
    ) -> Self {
        let client_id = loop {
            let id: u128 = rand::random();
            if id != 0 {
                break id;
            }
        };
        Self {
            router: SharedRouter::new(router),
            groups,
            chunks,
            config,
            client_id,
            seq: AtomicU64::new(0),
            tiers: std::sync::RwLock::new(None),
        }
    }

    /// Reads of tiered versions go to `reader` from now on.
    pub fn set_tier_reader(&self, reader: Arc<dyn crate::TierReader>) {
        *self.tiers.write().unwrap_or_else(|e| e.into_inner()) = Some(reader);
    }

    /// Connects to the cluster behind the RPC endpoint `addr` (`host:port`): fetches its
    /// cluster map and reaches every MNode group where the map says it runs (behind `addr`
    /// itself for the all-in-one server), one connection per process. File data goes to the
    /// cluster's chunkstores (each chunk to as many as the map says).
    pub async fn connect_all(addr: &str, config: ClusterConfig) -> Result<Self, ClientError> {
        let (map, channels) = Self::dial(addr).await?;
        let chunks = Arc::new(chunk_stores(&map, addr, &channels)?);
        Self::from_map(&map, addr, &channels, chunks, config)
    }

    /// Like [`Cluster::connect_all`], but file data goes to `chunks`.
    pub async fn connect(
        addr: &str,
        chunks: Arc<dyn ChunkStore>,
        config: ClusterConfig,
    ) -> Result<Self, ClientError> {
        let (map, channels) = Self::dial(addr).await?;
        Self::from_map(&map, addr, &channels, chunks, config)
    }

    async fn dial(addr: &str) -> Result<(ClusterMap, ChannelPool), ClientError> {
        let first = RpcChannel::connect(addr).await?;
        let map = first.cluster_map().await?;
        Ok((map, ChannelPool::with(first)))
    }

    /// The cluster `map` describes (fetched from `addr`), reached over `channels`, its file
    /// data going to `chunks`: what [`Cluster::connect`] makes once it has the map, for a
    /// caller that fetched it already.
    pub fn from_map(
        map: &ClusterMap,
        addr: &str,
        channels: &ChannelPool,
        chunks: Arc<dyn ChunkStore>,
        config: ClusterConfig,
    ) -> Result<Self, ClientError> {
        let router = map.router()?;
        let groups = group_services(map, addr, channels, |_, _| None)?;
        Ok(Self::new(router, groups, chunks, config))
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn chunk_store(&self) -> &Arc<dyn ChunkStore> {
        &self.chunks
    }

    pub fn groups(&self) -> impl Iterator<Item = (&GroupId, &Arc<dyn MetaService>)> {
        self.groups.iter()
    }

    /// The group owning `path` (by its last component; the root goes to the first group).
    pub fn owner(&self, path: &[String]) -> GroupId {
        let first = *self
            .groups
            .keys()
            .next()
            .expect("a cluster has at least one group");
        match path.last() {
            None => first,
            Some(name) => {
                let router = self.router.get();
                match router.route_name(name) {
                    Route::Group(g) => g,
                    // A path-walked name is resolved by any group, which forwards it to the
                    // owner: the group is picked by the parent path, so the forwarding work
                    // of a hot name is spread and each directory's walk stays warm in one
                    // group's dentry replica.
                    Route::PathWalk => {
                        let parent = path[..path.len() - 1].join("/");
                        router
                            .ring()
                            .owner(saker_namespace::name_hash(parent.as_bytes()))
                    }
                }
            }
        }
    }

    fn group(&self, g: GroupId) -> Result<&Arc<dyn MetaService>, MetaError> {
        self.groups
            .get(&g)
            .ok_or_else(|| MetaError::Unavailable(format!("no route to group {g}")))
    }

    fn next_tag(&self) -> ClientTag {
        ClientTag {
            client: self.client_id,
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// A new tag for [`Cluster::call_tagged`].
    pub fn new_tag(&self) -> ClientTag {
        self.next_tag()
    }

    /// Sends one request to the owner of `path` under a tag of the caller's: sent again with
    /// the same tag, a write answers its first result (the MNodes' dedupe table) instead of
    /// running twice.
    pub async fn call_tagged(
        &self,
        path: &[String],
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        MNODE_REQUESTS_PER_OP.observe(1.0);
        self.send_tagged(self.owner(path), tag, req).await
    }

    /// Sends one request to the owner of `path`.
    pub async fn call(&self, path: &[String], req: MetaRequest) -> Result<MetaResponse, MetaError> {
        MNODE_REQUESTS_PER_OP.observe(1.0);
        self.send(path, req).await
    }

    async fn send(&self, path: &[String], req: MetaRequest) -> Result<MetaResponse, MetaError> {
        self.send_to(self.owner(path), req).await
    }

    /// One request to group `g`, then the exception table refreshed if its reply showed ours
    /// is stale.
    async fn send_to(&self, g: GroupId, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        self.send_tagged(g, self.next_tag(), req).await
    }

    async fn send_tagged(
        &self,
        g: GroupId,
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        let group = self.group(g)?;
        let span = tracing::debug_span!("client.meta", op = req.op_name(), group = g);
        let result = group.call(tag, req).instrument(span).await;
        self.refresh_if_stale(group).await;
        result
    }

    /// The router requests are sent by (a snapshot).
    pub fn router(&self) -> Arc<Router> {
        self.router.get()
    }

    /// Fetches `group`'s exception table if its last reply carried a newer version than ours
    /// (a request routed by a stale table was forwarded by the MNode; the next one goes
    /// straight to the owner). A failed fetch is retried after a later reply.
    async fn refresh_if_stale(&self, group: &Arc<dyn MetaService>) {
        let seen = group.routing_version();
        if seen <= self.router.get().exceptions_version() {
            return;
        }
        match group.call(self.next_tag(), MetaRequest::Exceptions).await {
            Ok(MetaResponse::Exceptions(table)) => {
                if self.router.install(&table) {
                    tracing::debug!(version = table.version(), "exception table refreshed");
                    ROUTING_REFRESHES.inc();
                }
            }
            Ok(other) => tracing::warn!(?other, "unexpected answer to Exceptions"),
            Err(e) => tracing::debug!(error = %e, "exception table fetch failed; retried later"),
        }
    }

    /// Makes every write acknowledged so far durable on disk where the servers acknowledge
    /// writes before they are (`saker_rpc::Durability::Process`): fsync(2) through a mount.
    /// The chunkstore syncs first, then every MNode group (groups of one process share one
    /// journal and one sync); with `Durability::Disk` each answers at once.
    pub async fn sync_to_disk(&self) -> Result<(), ClientError> {
        self.chunks.sync_to_disk().await?;
        let calls = self
            .groups
            .keys()
            .map(|&g| self.send_to(g, MetaRequest::SyncToDisk));
        for answer in futures::future::join_all(calls).await {
            answer?;
        }
        Ok(())
    }

    /// Sends one request to a given group.
    pub async fn call_group(
        &self,
        g: GroupId,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        MNODE_REQUESTS_PER_OP.observe(1.0);
        self.send_to(g, req).await
    }

    /// Runs a write that needs its parents, creating missing ones as implicit directories on
    /// their owners and retrying, as S3 expects (a parent never reports ENOENT to S3).
    pub async fn call_creating_parents(
        &self,
        path: &[String],
        uid: u32,
        gid: u32,
        make: impl Fn() -> MetaRequest,
    ) -> Result<MetaResponse, ClientError> {
        // Every parent level may need one creation and one retry, plus a few races.
        let max_rounds = 2 * path.len() + 4;
        // Directories (prefixes of `path`) waiting to be created, deepest last.
        let mut pending: Vec<usize> = Vec::new();
        for round in 0..max_rounds {
            let (target, req) = match pending.last() {
                Some(&depth) => (
                    &path[..=depth],
                    MetaRequest::MkdirImplicit {
                        path: path[..=depth].to_vec(),
                        uid,
                        gid,
                    },
                ),
                None => (path, make()),
            };
            let sent = (round + 1) as f64;
            match self.send(target, req).await {
                Ok(resp) => {
                    if pending.pop().is_none() {
                        MNODE_REQUESTS_PER_OP.observe(sent);
                        return Ok(resp);
                    }
                }
                Err(MetaError::MissingParent { depth })
                    if depth >= 1 && pending.last().is_none_or(|&d| depth < d) =>
                {
                    pending.push(depth);
                }
                Err(e) => {
                    MNODE_REQUESTS_PER_OP.observe(sent);
                    return Err(e.into());
                }
            }
        }
        MNODE_REQUESTS_PER_OP.observe(max_rounds as f64);
        Err(ClientError::TooManyRetries(max_rounds))
    }

    /// Stores a file (or, for `dir_marker`, a directory marker) at `path`; a file only if
    /// `cond` holds of the object there (checked by the MNode in the batch that writes it),
    /// keeping the file it replaces as a version as `versioning` says (refused,
    /// `SettingsChanged`, if the bucket's settings are no longer those it was decided under).
    pub async fn put_object(
        &self,
        path: &[String],
        obj: NewObject,
        dir_marker: bool,
        cond: Option<WriteCond>,
        versioning: Decided,
    ) -> Result<Attr, ClientError> {
        let (uid, gid) = (obj.uid, obj.gid);
        let resp = self
            .call_creating_parents(path, uid, gid, || {
                if dir_marker {
                    MetaRequest::PutDirMarker {
                        path: path.to_vec(),
                        obj: obj.clone(),
                    }
                } else {
                    MetaRequest::PutObject {
                        path: path.to_vec(),
                        obj: obj.clone(),
                        cond: cond.clone(),
                        versioning,
                    }
                }
            })
            .await?;
        match resp {
            MetaResponse::Attr(a) => Ok(a),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Looks up `path` with the wanted payloads: one MNode request.
    pub async fn lookup(&self, path: &[String], want: Want) -> Result<ObjectView, MetaError> {
        match self
            .call(
                path,
                MetaRequest::Lookup {
                    path: path.to_vec(),
                    want,
                },
            )
            .await?
        {
            MetaResponse::Object(v) => Ok(*v),
            other => Err(MetaError::Internal(format!("lookup answered {other:?}"))),
        }
    }
}

/// The chunkstores of `map` (behind `addr` if it names none) as one store, reached through
/// `pool`.
pub fn chunk_stores(
    map: &ClusterMap,
    addr: &str,
    pool: &ChannelPool,
) -> Result<ReplicatedChunkStore, ClientError> {
    let list: Vec<MemberInfo> = map
        .endpoints
        .chunkstores(addr)
        .into_iter()
        .map(MemberInfo::at)
        .collect();
    Ok(ReplicatedChunkStore::over(
        &list,
        map.endpoints.chunk_replicas,
        pool,
        None,
    )?)
}

#[cfg(test)]
mod tests;
