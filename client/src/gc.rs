//! Chunk garbage collection (released chunks after their grace period, and leaked ones) and
//! repair (referenced chunks short of replicas).

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use saker_chunkstore::ec::Layout as EcLayout;
use saker_chunkstore::{ChunkId, CodedChunk, RepairReport, ScrubReport};
use saker_rpc::{MetaRequest, MetaResponse, MAX_LIST_PAGE};

use crate::cluster::Cluster;
use crate::error::ClientError;

/// What one collection pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Chunks released by metadata and deleted after their grace period.
    pub released: u64,
    /// Chunks no record references, older than the grace period, deleted by the scrub.
    pub leaked: u64,
}

pub use saker_durable::now_ns;

/// One pass: deletes chunks whose grace period ended, then (with `scrub`) chunks older than
/// `grace` that no inode, part or GC entry references.
pub async fn collect_garbage(
    cluster: &Cluster,
    grace: Duration,
    scrub: bool,
) -> Result<GcReport, ClientError> {
    let mut report = GcReport {
        released: release_due(cluster, now_ns()).await?,
        ..GcReport::default()
    };
    if scrub {
        // List candidates first: a chunk written after this point is newer than the cut-off.
        let cutoff = SystemTime::now() - grace;
        let candidates = cluster.chunks.list_older_than(cutoff).await?;
        if !candidates.is_empty() {
            let referenced = chunk_refs(cluster, true).await?;
            for id in candidates {
                if !referenced.contains(&id.0) {
                    cluster.chunks.delete(id).await?;
                    report.leaked += 1;
                }
            }
        }
        if let Ok(t) = cutoff.duration_since(SystemTime::UNIX_EPOCH) {
            crate::metrics::SCRUB_CUTOFF.set(t.as_secs_f64());
        }
    }
    Ok(report)
}

/// Deletes every chunk released by metadata now, grace period or not (`saker admin ec run
/// --free-now`: the replicas erasure coding replaced, freed before capacity is measured).
/// Answers how many.
pub async fn release_now(cluster: &Cluster) -> Result<u64, ClientError> {
    release_due(cluster, i64::MAX).await
}

/// Deletes the chunks released by metadata whose grace period ends by `by_ns`, group by
/// group; answers how many.
async fn release_due(cluster: &Cluster, by_ns: i64) -> Result<u64, ClientError> {
    let mut released = 0;
    let groups: Vec<_> = cluster.groups().map(|(g, _)| *g).collect();
    for &g in &groups {
        loop {
            let req = MetaRequest::GcDue {
                now_ns: by_ns,
                limit: 1000,
            };
            let due = match cluster.call_group(g, req).await? {
                MetaResponse::Gc(d) => d,
                other => return Err(ClientError::Protocol(format!("{other:?}"))),
            };
            if due.is_empty() {
                break;
            }
            let mut keys = Vec::with_capacity(due.len());
            for (key, chunk) in due {
                cluster.chunks.delete(ChunkId(chunk)).await?;
                keys.push(key);
                released += 1;
            }
            cluster.call_group(g, MetaRequest::GcDone { keys }).await?;
        }
    }
    Ok(released)
}

/// Every chunk stored as replicas that some inode, part or noncurrent version of any group
/// references: what repair and scrub keep whole (erasure-coded chunks are kept by their
/// shards).
pub async fn referenced_chunks(cluster: &Cluster) -> Result<HashSet<u128>, ClientError> {
    chunk_refs(cluster, false).await
}

/// The ids the groups reference ([`MetaRequest::ChunkRefs`], `leaks` as it says).
async fn chunk_refs(cluster: &Cluster, leaks: bool) -> Result<HashSet<u128>, ClientError> {
    let groups: Vec<_> = cluster.groups().map(|(g, _)| *g).collect();
    let mut referenced = HashSet::new();
    for g in groups {
        let mut after = None;
        loop {
            let req = MetaRequest::ChunkRefs {
                after,
                limit: MAX_LIST_PAGE,
                leaks,
            };
            let ids = match cluster.call_group(g, req).await? {
                MetaResponse::ChunkIds(ids) => ids,
                other => return Err(ClientError::Protocol(format!("{other:?}"))),
            };
            let next = saker_rpc::next_page(after, &ids);
            referenced.extend(ids);
            if next.is_none() {
                break;
            }
            after = next;
        }
    }
    Ok(referenced)
}

/// One scrub pass: every replica of every referenced chunk read whole (checking its CRC32C),
/// and every shard of every erasure-coded one with its parity, at most `rate` bytes per
/// second; bad ones rewritten from good ones.
pub async fn scrub_chunks(cluster: &Cluster, rate: u64) -> Result<ScrubReport, ClientError> {
    let referenced = referenced_chunks(cluster).await?;
    let mut report = cluster.chunks.scrub(&referenced, rate).await?;
    let coded = cluster
        .chunks
        .scrub_coded(&coded_chunks(cluster).await?, rate)
        .await;
    report.verified += coded.verified;
    report.bytes += coded.bytes;
    report.corrupt += coded.corrupt;
    report.missing += coded.missing;
    report.repaired += coded.repaired;
    Ok(report)
}

/// One repair pass: every referenced chunk is brought to all the replicas the cluster's
/// chunkstores place it on (copied from one that has it), and every erasure-coded one to all
/// its shards (rebuilt from the others), at most `rate` bytes per second (0: unpaced).
pub async fn repair_chunks(cluster: &Cluster, rate: u64) -> Result<RepairReport, ClientError> {
    let referenced = referenced_chunks(cluster).await?;
    let mut report = cluster.chunks.repair(&referenced, rate).await?;
    let coded = coded_chunks(cluster).await?;
    report.add(&cluster.chunks.repair_coded(&coded, rate).await);
    Ok(report)
}

/// Every erasure-coded chunk a record of any group references.
pub async fn coded_chunks(cluster: &Cluster) -> Result<Vec<CodedChunk>, ClientError> {
    let groups: Vec<_> = cluster.groups().map(|(g, _)| *g).collect();
    let mut out = Vec::new();
    for g in groups {
        let mut after = None;
        loop {
            let req = MetaRequest::CodedRefs {
                after,
                limit: MAX_LIST_PAGE,
            };
            let page = match cluster.call_group(g, req).await? {
                MetaResponse::CodedChunks(page) => page,
                other => return Err(ClientError::Protocol(format!("{other:?}"))),
            };
            let ids: Vec<u128> = page.iter().map(|c| c.0).collect();
            let next = saker_rpc::next_page(after, &ids);
            for (id, k, m, stored) in page {
                let layout = EcLayout::new(k, m).map_err(ClientError::from)?;
                out.push((ChunkId(id), layout, stored));
            }
            if next.is_none() {
                break;
            }
            after = next;
        }
    }
    count_coded(&out);
    Ok(out)
}

/// Sets [`crate::metrics::CODED`] to what `coded` holds.
fn count_coded(coded: &[CodedChunk]) {
    let mut by_layout: std::collections::BTreeMap<String, (i64, i64, i64)> = Default::default();
    for (_, layout, stored) in coded {
        let e = by_layout.entry(layout.to_string()).or_default();
        e.0 += 1;
        e.1 += *stored as i64;
        e.2 += (layout.shard_len(*stored) * layout.shards() as u64) as i64;
    }
    crate::metrics::CODED.reset();
    for (layout, (chunks, stored, raw)) in by_layout {
        for (what, v) in [("chunks", chunks), ("stored", stored), ("raw", raw)] {
            crate::metrics::CODED
                .with_label_values(&[layout.as_str(), what])
                .set(v);
        }
    }
}
