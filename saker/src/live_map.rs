//! The cluster map a node of a replicated cluster serves: the configured one, with each
//! group's members as the group has them now. `node add` and `node remove` move replicas, so
//! a client that starts after them (a mount, a library client) is sent where the groups are,
//! not to the nodes the configuration first named.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use saker_rpc::{raft_status, ClusterMap, MapSource, MetaService};

/// How long a group may take to say who its members are; one that does not answer keeps
/// the configured list.
const ASK: Duration = Duration::from_secs(1);

pub struct LiveMap {
    base: ClusterMap,
    /// Every group as one service (its replicas here and elsewhere).
    groups: BTreeMap<u32, Arc<dyn MetaService>>,
}

impl LiveMap {
    pub fn new(base: ClusterMap, groups: BTreeMap<u32, Arc<dyn MetaService>>) -> Self {
        Self { base, groups }
    }
}

#[async_trait]
impl MapSource for LiveMap {
    async fn cluster_map(&self) -> ClusterMap {
        let mut map = self.base.clone();
        let asks = self
            .groups
            .iter()
            .map(|(g, group)| async move { (*g, raft_status(group.as_ref(), ASK).await) });
        for (g, status) in join_all(asks).await {
            match status {
                Ok(s) => {
                    let members: Vec<String> = s
                        .voters
                        .into_iter()
                        .chain(s.learners)
                        .map(|(_, addr)| addr)
                        .collect();
                    if !members.is_empty() {
                        map.endpoints.mnodes.insert(g, members);
                    }
                }
                Err(e) => {
                    tracing::debug!(group = g, error = %e, "the map keeps the configured members")
                }
            }
        }
        map
    }
}
