//! The cluster handle: routing to MNode groups and the parent-creation retry loop.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use saker_chunkstore::ChunkStore;
use saker_namespace::{GroupId, Route, Router};
use saker_rpc::{
    Attr, ClientTag, MetaError, MetaRequest, MetaResponse, MetaService, NewObject, ObjectView, Want,
};

use crate::error::ClientError;

/// Tunables of the data path.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Objects up to this size live inside the MNode.
    pub inline_threshold: usize,
    /// Larger objects are split into chunks of this size.
    pub chunk_size: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            inline_threshold: 16 * 1024,
            chunk_size: 8 * 1024 * 1024,
        }
    }
}

/// Routes full-path operations to MNode groups; shared by all requests of a front end.
pub struct Cluster {
    router: Router,
    groups: BTreeMap<GroupId, Arc<dyn MetaService>>,
    pub(crate) chunks: Arc<dyn ChunkStore>,
    pub(crate) config: ClusterConfig,
    client_id: u128,
    seq: AtomicU64,
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
            router,
            groups,
            chunks,
            config,
            client_id,
            seq: AtomicU64::new(0),
        }
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
            Some(name) => match self.router.route_name(name) {
                Route::Group(g) => g,
                // Path-walk names are resolved by any group, which forwards (multi-node work).
                Route::PathWalk => first,
            },
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

    /// Sends one request to the owner of `path`.
    pub async fn call(&self, path: &[String], req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let tag = self.next_tag();
        self.group(self.owner(path))?.call(tag, req).await
    }

    /// Sends one request to a given group.
    pub async fn call_group(
        &self,
        g: GroupId,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        let tag = self.next_tag();
        self.group(g)?.call(tag, req).await
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
        for _ in 0..max_rounds {
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
            match self.call(target, req).await {
                Ok(resp) => {
                    if pending.pop().is_none() {
                        return Ok(resp);
                    }
                }
                Err(MetaError::MissingParent { depth })
                    if depth >= 1 && pending.last().is_none_or(|&d| depth < d) =>
                {
                    pending.push(depth);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ClientError::TooManyRetries(max_rounds))
    }

    /// Stores a file (or, for `dir_marker`, a directory marker) at `path`.
    pub async fn put_object(
        &self,
        path: &[String],
        obj: NewObject,
        dir_marker: bool,
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
