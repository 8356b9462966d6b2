//! The cluster map: which MNode groups exist and how names are placed on them.

use std::collections::BTreeMap;

use saker_namespace::{ExceptionTable, GroupId, Ring, Router};
use serde::{Deserialize, Serialize};

use crate::error::MetaError;

/// What a client needs to route full-path operations: the groups, the ring's shape and the
/// exception table. Served by every RPC endpoint ([`crate::transport::fetch_cluster_map`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    /// Bumped whenever the set of groups changes.
    pub version: u64,
    /// The MNode group ids, ascending.
    pub groups: Vec<GroupId>,
    /// Virtual nodes per group on the ring.
    pub vnodes: u32,
    pub exceptions: ExceptionTable,
    /// Where the roles run. Empty for the all-in-one server: everything is behind the endpoint
    /// the map came from.
    pub endpoints: Endpoints,
}

/// RPC addresses (`host:port`) of the processes of a multi-process cluster. A role with no
/// address here is served by the endpoint the map was fetched from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    /// The processes hosting each MNode group's replicas (one per replica; any of them
    /// answers a request or names the group's leader).
    pub mnodes: BTreeMap<GroupId, Vec<String>>,
    pub coordinator: Option<String>,
    /// Chunkstores: each chunk goes to `chunk_replicas` of them, placed by rendezvous
    /// hashing of its id over these addresses.
    pub chunkstores: Vec<String>,
    /// Copies of each chunk (0 is 1).
    pub chunk_replicas: u32,
}

impl Endpoints {
    /// The addresses of group `g`'s replicas, or `[here]`.
    pub fn mnode<'a>(&'a self, g: GroupId, here: &'a str) -> Vec<&'a str> {
        match self.mnodes.get(&g) {
            Some(addrs) if !addrs.is_empty() => addrs.iter().map(String::as_str).collect(),
            _ => vec![here],
        }
    }

    /// The coordinator's address, or `here`.
    pub fn coordinator<'a>(&'a self, here: &'a str) -> &'a str {
        self.coordinator.as_deref().unwrap_or(here)
    }

    /// The chunkstores, or `[here]`.
    pub fn chunkstores<'a>(&'a self, here: &'a str) -> Vec<&'a str> {
        if self.chunkstores.is_empty() {
            vec![here]
        } else {
            self.chunkstores.iter().map(String::as_str).collect()
        }
    }
}

/// Where an RPC server gets the map it serves: a fixed one, or (a node of a replicated
/// cluster) one whose groups list the members they have now, which `node add` and `node
/// remove` change.
#[async_trait::async_trait]
pub trait MapSource: Send + Sync + 'static {
    async fn cluster_map(&self) -> ClusterMap;
}

#[async_trait::async_trait]
impl MapSource for ClusterMap {
    async fn cluster_map(&self) -> ClusterMap {
        self.clone()
    }
}

impl ClusterMap {
    /// The router this map describes. `Invalid` for a map without groups or virtual nodes (it
    /// may come from the network, so it is checked rather than trusted).
    pub fn router(&self) -> Result<Router, MetaError> {
        if self.groups.is_empty() {
            return Err(MetaError::Invalid("cluster map without groups".into()));
        }
        if self.vnodes == 0 {
            return Err(MetaError::Invalid(
                "cluster map without virtual nodes".into(),
            ));
        }
        Ok(Router::new(
            Ring::new(&self.groups, self.vnodes),
            self.exceptions.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use saker_namespace::{Exception, Route};

    use super::*;

    fn map() -> ClusterMap {
        let mut exceptions = ExceptionTable::new();
        exceptions.set("train", Exception::PathWalk);
        exceptions.set("pinned", Exception::Override(3));
        ClusterMap {
            version: 1,
            groups: vec![1, 2, 3, 4],
            vnodes: 64,
            exceptions,
            endpoints: Endpoints::default(),
        }
    }

    #[test]
    fn router_matches_the_one_it_was_made_from() {
        let m = map();
        let expected = Router::new(Ring::new(&[1, 2, 3, 4], 64), m.exceptions.clone());
        let r = m.router().unwrap();
        assert_eq!(r, expected);
        assert_eq!(r.route_name("train"), Route::PathWalk);
        assert_eq!(r.route_name("pinned"), Route::Group(3));
        for name in ["a", "b", "bucket", "x.jpg"] {
            assert_eq!(r.route_name(name), expected.route_name(name));
        }
    }

    #[test]
    fn empty_maps_are_rejected() {
        let mut m = map();
        m.vnodes = 0;
        assert!(matches!(m.router(), Err(MetaError::Invalid(_))));
        m.vnodes = 64;
        m.groups.clear();
        assert!(matches!(m.router(), Err(MetaError::Invalid(_))));
    }
}
