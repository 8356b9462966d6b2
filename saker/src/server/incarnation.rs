//! A node's raft id across lost disks (`node.json`): which incarnation of its position it is,
//! and the replicas it hosts.

use std::collections::BTreeMap;

use anyhow::Context;
use saker_rpc::ChannelPool;

use crate::hosting::{Hosted, Hosting};
use crate::server::config::{position_of, INCARNATION_STEP};

/// How long a node with a fresh data directory waits for a peer to tell it what it knows.
const PEER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// This node's raft id, kept in `node.json` in its data directory, and the replicas it hosts.
///
/// A node that ran before keeps its id and the replicas it recorded ([`Hosting::recorded`];
/// `placed`, where the cluster's creation put them, if it ran before that file). A fresh data
/// directory takes the node's position as its id and hosts `placed`, unless a peer counts an
/// id of this position among its groups' members already: then the disk was lost, and the
/// node comes back as its next incarnation (position + [`INCARNATION_STEP`]) with a replica of
/// each of those groups, which joins anew instead of voting under an id whose log it lost.
pub(crate) async fn hosted_groups(
    data_dir: &std::path::Path,
    position: u64,
    placement: &BTreeMap<u32, Vec<(u64, crate::server::config::Addr)>>,
    placed: Hosted,
    pool: &ChannelPool,
) -> anyhow::Result<(u64, Hosted)> {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct NodeFile {
        raft_id: u64,
    }
    let path = data_dir.join("node.json");
    match std::fs::read(&path) {
        Ok(bytes) => {
            let f: NodeFile = serde_json::from_slice(&bytes)
                .with_context(|| format!("cannot parse {}", path.display()))?;
            anyhow::ensure!(
                position_of(f.raft_id) == position,
                "{} belongs to node {}, not node {position}",
                data_dir.display(),
                position_of(f.raft_id)
            );
            let hosted = Hosting::recorded(data_dir)?.unwrap_or(placed);
            return Ok((f.raft_id, hosted));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
    // Every group that counts an incarnation of this position among its members, with them.
    // A node that hears from no peer cannot tell a first start from a lost disk: it waits a
    // little for one to answer.
    let deadline = std::time::Instant::now() + PEER_WAIT;
    let mut known: Hosted = BTreeMap::new();
    let peers: std::collections::BTreeSet<String> = placement
        .values()
        .flatten()
        .filter(|(id, _)| *id != position)
        .map(|(_, addr)| addr.to_string())
        .collect();
    loop {
        let mut answered = false;
        for &g in placement.keys() {
            for addr in &peers {
                let Ok(channel) = pool.get(addr) else {
                    continue;
                };
                let peer = channel.meta(g);
                let ask = saker_rpc::raft_status(&peer, std::time::Duration::from_secs(2));
                let Ok(s) = ask.await else { continue };
                answered = true;
                let members = crate::status::members(&s);
                if members.iter().any(|(id, _)| position_of(*id) == position) {
                    known.entry(g).or_insert(members);
                }
            }
        }
        if answered || std::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let last = known
        .values()
        .flatten()
        .map(|(id, _)| *id)
        .filter(|id| position_of(*id) == position)
        .max();
    let (id, hosted) = match last {
        Some(last) => {
            tracing::warn!(
                node = position,
                old_id = last,
                new_id = last + INCARNATION_STEP,
                groups = ?known.keys().collect::<Vec<_>>(),
                "this node's data is gone but its groups know it: joining them under a new raft id"
            );
            // Its chunkstore lost its chunks too: a full repair pass puts them back.
            saker_durable::replace_file(
                &data_dir.join(crate::admin::chunks::REPAIR_AFTER_LOSS),
                b"",
            )?;
            (last + INCARNATION_STEP, known)
        }
        None => (position, placed),
    };
    saker_durable::replace_file(&path, &serde_json::to_vec(&NodeFile { raft_id: id })?)?;
    Ok((id, hosted))
}
