//! Metadata backups: their format, and the restore of `saker server --restore DIR` (taking
//! one: [`crate::admin::backup`]).
//!
//! A backup is a directory: `group-G.snap` per MNode group (the group's state-machine tables
//! as its leader held them with no batch in flight, in the raft snapshot format, CRC-checked),
//! `coordinator.json` (the coordinator's records: exception table and journals; in a
//! replicated cluster they are in group 1's tables too) and `backup.json` (the groups). Each
//! group is consistent in itself; groups are taken one after another. File data (chunks) is
//! not in it: a restore expects the chunkstores as they were (keep them, or copy
//! `DATA_DIR/chunks`).
//!
//! A restore starts a cluster from a backup on empty data directories: each group is created
//! afresh around its backed-up tables (no raft history), by the node that creates the group;
//! the other replicas are sent snapshots as they join.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use saker_mnode::MetaStore;
use serde::{Deserialize, Serialize};

pub(crate) const MANIFEST: &str = "backup.json";
pub(crate) const COORDINATOR: &str = "coordinator.json";

#[derive(Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) groups: Vec<u32>,
    /// When the backup was taken (Unix seconds).
    pub(crate) created: u64,
}

pub(crate) fn group_file(g: u32) -> String {
    format!("group-{g}.snap")
}

/// The groups of the backup in `dir`, and the path of each one's tables.
pub fn group_files(dir: &Path) -> anyhow::Result<Vec<(u32, std::path::PathBuf)>> {
    let manifest: Manifest = serde_json::from_slice(
        &std::fs::read(dir.join(MANIFEST))
            .with_context(|| format!("no backup in {} ({MANIFEST})", dir.display()))?,
    )
    .with_context(|| format!("cannot parse {}", dir.join(MANIFEST).display()))?;
    Ok(manifest
        .groups
        .iter()
        .map(|&g| (g, dir.join(group_file(g))))
        .collect())
}

/// Installs the backup in `dir` before the groups start: the tables of each group in
/// `install` (those this process creates) into `store`, and the coordinator's records into
/// `coordinator_dir` (a coordinator keeping its state in files). `groups` are the cluster's
/// groups, which must be the backup's.
pub async fn restore(
    dir: &Path,
    store: &Arc<dyn MetaStore>,
    groups: &[u32],
    install: &[u32],
    coordinator_dir: Option<&Path>,
) -> anyhow::Result<()> {
    let files = group_files(dir)?;
    let backed_up: Vec<u32> = files.iter().map(|(g, _)| *g).collect();
    if backed_up != groups {
        bail!(
            "the backup has groups {backed_up:?}, this cluster {groups:?}: restore into a \
             cluster of the same shape"
        );
    }
    for &g in install {
        let path = dir.join(group_file(g));
        let mut file = std::fs::File::open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let keys = saker_mnode::keys::Keys::new(g);
        let pairs = saker_mnode::raft::snapshot::restore(store.as_ref(), keys, &mut file)
            .with_context(|| format!("cannot restore group {g} from {}", path.display()))?;
        println!("restored group {g}: {pairs} records");
    }
    let records = dir.join(COORDINATOR);
    if let (Some(state_dir), true) = (coordinator_dir, records.exists()) {
        let records: Vec<(String, Vec<u8>)> = serde_json::from_slice(&std::fs::read(&records)?)
            .with_context(|| format!("cannot parse {}", records.display()))?;
        let state = saker_coordinator::DirState::new(state_dir);
        for (k, v) in &records {
            saker_coordinator::StateStore::put(&state, k, Some(v.clone())).await?;
        }
        println!("restored {} coordinator records", records.len());
    }
    Ok(())
}

/// The groups the backup restores into this process: `hosted`, each by its creator (the
/// first of its voters in `placement`, or this process alone).
pub fn created_here(
    hosted: &[u32],
    placement: &BTreeMap<u32, Vec<(u64, crate::server::config::Addr)>>,
    node_id: u64,
) -> Vec<u32> {
    hosted
        .iter()
        .copied()
        .filter(|g| {
            placement
                .get(g)
                .and_then(|v| v.first())
                .is_none_or(|(id, _)| *id == node_id)
        })
        .collect()
}
