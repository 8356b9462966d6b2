//! Remote copies no version needs any more: those a dropped version queued (deleted once
//! their grace period ends, like chunks) and orphans of transitions that never committed
//! (the tier scrub: keys of this cluster no record references, older than the grace period).

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use saker_client::{now_ns, ClientError, Cluster};
use saker_rpc::{MetaRequest, MetaResponse};

use crate::{config, metrics, TierError, Tiers};

fn unexpected(r: MetaResponse) -> TierError {
    ClientError::Protocol(format!("{r:?}")).into()
}

/// Deletes the remote copies whose grace period ended; answers how many.
pub async fn collect(cluster: &Cluster, tiers: &Tiers) -> Result<u64, TierError> {
    let mut deleted = 0;
    let groups: Vec<_> = cluster.groups().map(|(g, _)| *g).collect();
    for g in groups {
        loop {
            let req = MetaRequest::TierGcDue {
                now_ns: now_ns(),
                limit: 500,
            };
            let due = match cluster.call_group(g, req).await? {
                MetaResponse::TierGc(d) => d,
                other => return Err(unexpected(other)),
            };
            if due.is_empty() {
                break;
            }
            let mut done = Vec::with_capacity(due.len());
            for (key, t) in due {
                tiers.remote(&t.tier).await?.delete(&t.key).await?;
                metrics::DELETED.with_label_values(&["released"]).inc();
                done.push(key);
                deleted += 1;
            }
            cluster
                .call_group(g, MetaRequest::GcDone { keys: done })
                .await?;
        }
    }
    Ok(deleted)
}

/// The keys of tier `tier` that some record (or the GC queue) references.
pub async fn referenced(cluster: &Cluster, tier: &str) -> Result<HashSet<String>, TierError> {
    let mut keys = HashSet::new();
    let groups: Vec<_> = cluster.groups().map(|(g, _)| *g).collect();
    for g in groups {
        let req = MetaRequest::TierRefs {
            tier: tier.to_string(),
        };
        match cluster.call_group(g, req).await? {
            MetaResponse::TierKeys(k) => keys.extend(k),
            other => return Err(unexpected(other)),
        }
    }
    Ok(keys)
}

/// Deletes this cluster's keys in every tier that nothing references and that are older
/// than `grace` (younger ones may belong to a transition not committed yet); answers how
/// many.
pub async fn scrub(cluster: &Cluster, tiers: &Tiers, grace: Duration) -> Result<u64, TierError> {
    let cid = tiers.cluster_id().await?;
    let mut deleted = 0;
    for cfg in config::list(tiers.state()).await? {
        let remote = tiers.remote(&cfg.name).await?;
        // Keys listed before the references are read: a copy committed after this listing
        // is either younger than the cut-off or already in the references.
        let cutoff = SystemTime::now() - grace;
        let prefix = cfg.cluster_prefix(cid);
        let mut candidates = Vec::new();
        let mut token = None;
        loop {
            let (page, next) = remote.list_page(&prefix, token).await?;
            candidates.extend(
                page.into_iter()
                    .filter(|(_, t)| *t < cutoff)
                    .map(|(k, _)| k),
            );
            match next {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        if candidates.is_empty() {
            continue;
        }
        let live = referenced(cluster, &cfg.name).await?;
        for key in candidates.into_iter().filter(|k| !live.contains(k)) {
            remote.delete(&key).await?;
            metrics::DELETED.with_label_values(&["orphans"]).inc();
            deleted += 1;
        }
    }
    Ok(deleted)
}
