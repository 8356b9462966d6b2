//! The chunk side of `saker admin node add` and `node remove`.
//!
//! Add: if the new node runs a chunkstore, it is recorded as a member
//! ([`crate::chunk_members`]); it takes its share of new chunks as soon as the processes have
//! read the record, and a repair pass at the repair rate copies it its share of the old ones
//! and drops the copies it replaces (a rebalance).
//!
//! Remove: the node's chunkstore is recorded as leaving (it takes no new chunk), then repair
//! passes copy every referenced chunk it holds to the chunk's placement among the others and
//! drop its copies; only once it holds no referenced chunk (or it is down and every chunk has
//! its copies elsewhere) is it removed from the record. A removal that cannot finish leaves
//! the node recorded as leaving, and says so.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use saker_chunkstore::{ChunkStore, RemoteChunkStore, RepairReport, ReplicatedChunkStore};
use saker_client::Cluster;
use saker_coordinator::StateStore;
use saker_rpc::{ChannelPool, NO_CHUNKSTORE};
use serde::{Deserialize, Serialize};

use crate::chunk_members::{self, Entry, Membership, REFRESH};
use crate::nodes::NodeError;

/// Drain passes before a removal gives up.
const DRAIN_PASSES: usize = 5;

/// What a node change did to the chunkstores.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ChunkReport {
    /// The chunkstores after the change (a leaving one marked so).
    pub members: Vec<Entry>,
    /// The repair passes run: the rebalance after an add, the drain before a remove.
    pub passes: Vec<RepairReport>,
}

/// Moves chunks when nodes come and go (module docs).
pub struct ChunkMoves {
    cluster: Arc<Cluster>,
    chunks: Arc<ReplicatedChunkStore>,
    state: Arc<dyn StateStore>,
    pool: ChannelPool,
    /// Bytes per second of a pass.
    rate: u64,
}

fn refused(e: impl std::fmt::Display) -> NodeError {
    NodeError::Refused(e.to_string())
}

impl ChunkMoves {
    pub fn new(
        cluster: Arc<Cluster>,
        chunks: Arc<ReplicatedChunkStore>,
        state: Arc<dyn StateStore>,
        pool: ChannelPool,
        rate: u64,
    ) -> Self {
        Self {
            cluster,
            chunks,
            state,
            pool,
            rate,
        }
    }

    /// Copies per chunk asked for.
    pub fn copies(&self) -> usize {
        self.chunks.replicas_asked()
    }

    /// The recorded members, or this process's list before any change was recorded.
    pub async fn membership(&self) -> Result<Membership, NodeError> {
        match chunk_members::load(self.state.as_ref()).await {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Ok(Membership::of(&self.chunks)),
            Err(e) => Err(refused(format!("cannot read the chunkstore record: {e:#}"))),
        }
    }

    /// Records `m`, uses it here, and waits until every process has read it.
    async fn record(&self, m: &Membership) -> Result<(), NodeError> {
        chunk_members::store(self.state.as_ref(), m)
            .await
            .map_err(|e| refused(format!("cannot record the chunkstores: {e:#}")))?;
        self.chunks.set_members(&m.list()).map_err(refused)?;
        // Every process reads the record every REFRESH: after two, none places by the old one.
        tokio::time::sleep(2 * REFRESH).await;
        Ok(())
    }

    async fn pass(&self) -> Result<(RepairReport, HashSet<u128>), NodeError> {
        let referenced = saker_client::referenced_chunks(&self.cluster)
            .await
            .map_err(|e| refused(format!("cannot list the referenced chunks: {e}")))?;
        let report = self
            .chunks
            .repair(&referenced, self.rate)
            .await
            .map_err(refused)?;
        Ok((report, referenced))
    }

    /// Makes the chunkstore at `addr`, if the node there runs one, a member (in `zone`, if
    /// given; a new member's id is its address), and moves it its share of the chunks, and
    /// every chunk a copy in the zones it lacked. `None`: it runs none.
    pub async fn add(
        &self,
        addr: &str,
        zone: Option<&str>,
    ) -> Result<Option<ChunkReport>, NodeError> {
        let store = RemoteChunkStore::new(self.pool.get(addr)?);
        if let Err(e) = store.list_older_than(SystemTime::UNIX_EPOCH).await {
            if e.to_string().contains(NO_CHUNKSTORE) {
                return Ok(None);
            }
            return Err(refused(format!(
                "cannot reach the chunkstore at {addr}: {e}"
            )));
        }
        let mut m = self.membership().await?;
        match m.position(addr) {
            Some(i) => {
                m.members[i].leaving = false;
                if let Some(z) = zone {
                    m.members[i].zone = z.to_string();
                }
            }
            None => m.members.push(Entry {
                id: addr.to_string(),
                addr: addr.to_string(),
                zone: zone.unwrap_or_default().to_string(),
                leaving: false,
            }),
        }
        self.record(&m).await?;
        let (report, _) = self.pass().await?;
        tracing::info!(
            addr,
            copied = report.repaired,
            dropped = report.dropped,
            "chunks rebalanced onto a new node"
        );
        Ok(Some(ChunkReport {
            members: m.members,
            passes: vec![report],
        }))
    }

    /// Whether removing `addrs`' chunkstores leaves enough to hold every chunk's copies.
    pub async fn check_remove(&self, addrs: &[String]) -> Result<(), NodeError> {
        let m = self.membership().await?;
        let left = m
            .placing()
            .iter()
            .filter(|a| !addrs.iter().any(|r| r == *a))
            .count();
        let want = self.chunks.replicas_asked();
        if left < want && m.placing().iter().any(|a| addrs.iter().any(|r| r == a)) {
            return Err(NodeError::Refused(format!(
                "{left} chunkstores would be left for {want} copies of each chunk: add a node \
                 first"
            )));
        }
        Ok(())
    }

    /// Drains the chunkstore at `addr` (if it is a member) and removes it (module docs).
    pub async fn remove(&self, addr: &str) -> Result<Option<ChunkReport>, NodeError> {
        let mut m = self.membership().await?;
        let Some(i) = m.position(addr) else {
            return Ok(None);
        };
        if !m.members[i].leaving {
            m.members[i].leaving = true;
            self.record(&m).await?;
        }
        let leaving = RemoteChunkStore::new(self.pool.get(addr)?);
        let mut passes = Vec::new();
        for _ in 0..DRAIN_PASSES {
            let (report, referenced) = self.pass().await?;
            passes.push(report);
            let copied = report.failed == 0 && report.lost == 0;
            // The leaving store down counts as one store not listed; any other must be up.
            let still = still_held(&leaving, &referenced).await;
            let drained = match still {
                Ok(n) => n == 0 && report.unreachable == 0,
                Err(_) => report.unreachable == 1,
            };
            tracing::info!(addr, ?report, ?still, "drain pass");
            if copied && drained {
                m.members.remove(i);
                self.record(&m).await?;
                return Ok(Some(ChunkReport {
                    members: m.members,
                    passes,
                }));
            }
        }
        Err(NodeError::Refused(format!(
            "the chunkstore at {addr} was not drained after {DRAIN_PASSES} passes (the last: \
             {:?}); it takes no new chunk: run node remove again",
            passes.last()
        )))
    }
}

/// How many of `referenced` `store` still holds.
async fn still_held(
    store: &RemoteChunkStore,
    referenced: &HashSet<u128>,
) -> Result<usize, saker_chunkstore::ChunkError> {
    let later = SystemTime::now() + Duration::from_secs(24 * 3600);
    let held = store.list_older_than(later).await?;
    Ok(held.iter().filter(|c| referenced.contains(&c.0)).count())
}
