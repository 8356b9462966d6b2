//! Several MNode groups in one process on one store (the all-in-one server and tests).
//!
//! The groups reach each other through the same [`MetaService`] trait a network client would
//! implement, so the in-process cluster runs the code paths of a distributed one.

use std::sync::Arc;

use saker_namespace::{ExceptionTable, Ring, Router};
use saker_rpc::{CoordinatorService, MetaService};

use crate::changes::Peers;
use crate::error::MnodeError;
use crate::node::{Mnode, MnodeConfig};
use crate::store::MetaStore;

/// Virtual nodes per group on the rings of namespaces created before the count was recorded
/// (and of [`LocalGroups::start`]).
pub const LOCAL_VNODES: u32 = 64;

/// Virtual nodes per group on the ring of a new namespace: with 16 groups, the largest share
/// of unique names is 7.0% at 256 against 7.9% at 64 (`saker bench balance`).
pub const RING_VNODES: u32 = 256;

pub struct LocalGroups {
    pub mnodes: Vec<Arc<Mnode>>,
    pub router: Router,
}

impl LocalGroups {
    /// Starts groups `1..=n` on `store`, each configured like `template` (its group and router
    /// are replaced).
    pub async fn start(
        store: Arc<dyn MetaStore>,
        n: u32,
        template: MnodeConfig,
    ) -> Result<Self, MnodeError> {
        Self::start_placed(store, n, template, LOCAL_VNODES, ExceptionTable::new()).await
    }

    /// [`LocalGroups::start`] on a ring of `vnodes` virtual nodes per group, with names placed
    /// by `exceptions`. Both are fixed for the life of the namespace (moving inodes whose
    /// placement changes is not implemented).
    pub async fn start_placed(
        store: Arc<dyn MetaStore>,
        n: u32,
        template: MnodeConfig,
        vnodes: u32,
        exceptions: ExceptionTable,
    ) -> Result<Self, MnodeError> {
        if n == 0 {
            return Err(MnodeError::Config("at least one MNode group".into()));
        }
        let ids: Vec<u32> = (1..=n).collect();
        let router = Router::new(Ring::new(&ids, vnodes), exceptions);
        let mut mnodes = Vec::with_capacity(ids.len());
        for &g in &ids {
            let mut cfg = template.clone();
            cfg.group = g;
            cfg.router = router.clone();
            mnodes.push(Mnode::start(store.clone(), cfg).await?);
        }
        Ok(Self { mnodes, router })
    }

    /// Every group as a service, by id.
    pub fn services(&self) -> Peers {
        self.mnodes
            .iter()
            .map(|m| (m.group(), m.clone() as Arc<dyn MetaService>))
            .collect()
    }

    /// Introduces the groups to each other and to the coordinator.
    pub fn connect(&self, coordinator: Arc<dyn CoordinatorService>) {
        let peers = self.services();
        for m in &self.mnodes {
            m.connect(peers.clone(), coordinator.clone());
        }
    }

    pub async fn shutdown(&self) {
        for m in &self.mnodes {
            m.shutdown().await;
        }
    }
}
