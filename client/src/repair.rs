//! Repair records: a write that leaves a chunk short of its replicas notes it in the
//! metadata ([`MetaRequest::RepairNote`], in the group the chunk id picks) before the write is
//! acknowledged, and a pass over the notes ([`repair_noted_chunks`]) brings those chunks to
//! all their replicas without listing every chunkstore; the full pass
//! ([`crate::repair_chunks`]) is for a lost disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use saker_chunkstore::{ChunkError, ChunkId, RepairLog, RepairReport};
use saker_namespace::GroupId;
use saker_rpc::{ClientTag, MetaRequest, MetaResponse, MetaService};

use crate::cluster::Cluster;
use crate::error::ClientError;

/// Notes per page of a pass.
const PAGE: u32 = 1000;

/// Notes short chunks in the cluster's groups (by chunk id).
pub struct GroupsRepairLog {
    groups: Vec<Arc<dyn MetaService>>,
    client: u128,
    seq: AtomicU64,
}

impl GroupsRepairLog {
    pub fn new(cluster: &Cluster) -> Self {
        Self {
            groups: cluster.groups().map(|(_, s)| s.clone()).collect(),
            client: rand::random::<u128>() | 1,
            seq: AtomicU64::new(0),
        }
    }
}

/// The group that keeps chunk `id`'s note, among `n`.
fn home(id: ChunkId, n: usize) -> usize {
    (id.0 % n as u128) as usize
}

#[async_trait]
impl RepairLog for GroupsRepairLog {
    async fn note(&self, id: ChunkId) -> Result<(), ChunkError> {
        let Some(group) = self.groups.get(home(id, self.groups.len().max(1))) else {
            return Err(ChunkError::Unavailable(
                "no group to note a repair in".into(),
            ));
        };
        let tag = ClientTag {
            client: self.client,
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        };
        let req = MetaRequest::RepairNote { chunks: vec![id.0] };
        match group.call(tag, req).await {
            Ok(_) => Ok(()),
            Err(e) => Err(ChunkError::Unavailable(e.to_string())),
        }
    }
}

/// Rebuilds the shards this process's degraded reads found missing from erasure-coded chunks
/// (noted in its memory, not in the metadata: a full pass finds what a restart forgets), at
/// most `rate` bytes per second.
pub async fn repair_degraded_chunks(cluster: &Cluster, rate: u64) -> RepairReport {
    cluster.chunks.repair_degraded(rate).await
}

/// One pass over the repair notes of every group: each noted chunk brought to all its
/// replicas at most `rate` bytes per second (0: unpaced), and its note dropped once no
/// replica lacks it. A note whose chunk cannot be repaired yet (a replica down) stays for the
/// next pass.
pub async fn repair_noted_chunks(
    cluster: &Cluster,
    rate: u64,
) -> Result<RepairReport, ClientError> {
    let groups: Vec<GroupId> = cluster.groups().map(|(g, _)| *g).collect();
    let mut total = RepairReport::default();
    for g in groups {
        loop {
            let due = match cluster
                .call_group(g, MetaRequest::RepairDue { limit: PAGE })
                .await?
            {
                MetaResponse::Gc(d) => d,
                other => return Err(ClientError::Protocol(format!("{other:?}"))),
            };
            let ids: Vec<ChunkId> = due.iter().map(|(_, c)| ChunkId(*c)).collect();
            let (report, settled) = cluster.chunks.repair_noted(&ids, rate).await;
            total.add(&report);
            let keys: Vec<Vec<u8>> = due
                .iter()
                .filter(|(_, c)| settled.contains(&ChunkId(*c)))
                .map(|(k, _)| k.clone())
                .collect();
            let all = keys.len() == due.len();
            if !keys.is_empty() {
                cluster
                    .call_group(g, MetaRequest::RepairDone { keys })
                    .await?;
            }
            // A page left with notes to keep is for the next pass.
            if !all || due.len() < PAGE as usize {
                break;
            }
        }
    }
    Ok(total)
}
