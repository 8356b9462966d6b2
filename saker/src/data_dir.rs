//! What a data directory was created with (`cluster.json`: the number of MNode groups, the
//! store engine and, on TiKV, the keyspace, fixed at the first start) and opening its
//! metadata store.

use std::sync::Arc;

use anyhow::Context;
use saker_mnode::{FjallStore, MetaStore, RedbStore, TikvStore, LOCAL_VNODES, RING_VNODES};

/// An open metadata store; on the TiKV engine also the engine itself (the MNode groups'
/// commit path needs it).
pub(crate) struct OpenStore {
    pub store: Arc<dyn MetaStore>,
    pub tikv: Option<Arc<TikvStore>>,
}

/// Opens the metadata store of `data_dir` (on TiKV: the keyspace `cluster.json` records, at
/// the PD endpoints `pd`, taking part in TiKV's GC as `gc` says).
pub(crate) fn open_store(
    data_dir: &std::path::Path,
    recorded: &ClusterFile,
    durability: saker_rpc::Durability,
    pd: &[String],
    gc: saker_mnode::GcPart,
) -> anyhow::Result<OpenStore> {
    let store: Arc<dyn MetaStore> = match recorded.store {
        StoreEngine::Redb => Arc::new(
            RedbStore::open(&data_dir.join("meta.redb"))
                .context("cannot open the metadata store")?,
        ),
        StoreEngine::Fjall => Arc::new(
            FjallStore::open_with_durability(&data_dir.join("meta.fjall"), durability)
                .context("cannot open the metadata store")?,
        ),
        StoreEngine::Tikv => {
            anyhow::ensure!(
                !pd.is_empty(),
                "{} keeps its metadata in TiKV: give the PD endpoints (--pd HOST:PORT[,...])",
                data_dir.display()
            );
            let keyspace = recorded
                .tikv_keyspace
                .as_deref()
                .unwrap_or(DEFAULT_KEYSPACE);
            let tikv = Arc::new(
                TikvStore::connect(pd, keyspace)
                    .with_context(|| {
                        format!("cannot open the metadata store (TiKV keyspace {keyspace:?})")
                    })?
                    // Each group's keys have one writer at a time: the lease holder.
                    .single_writer(),
            );
            if gc.global {
                tracing::warn!(
                    "--tikv-gc global: this process acts as the TiKV cluster's GC worker, \
                     resolving locks over the whole key space and moving the GC safe point; \
                     only for a TiKV cluster dedicated to saker (no other GC worker, such as \
                     TiDB's, may run)"
                );
            }
            let (service, taken) = tikv
                .take_part_in_gc(gc)
                .context("cannot register a PD service safe point")?;
            tracing::info!(
                service = %service,
                taken,
                every = ?gc.every,
                "TiKV: PD service safe point kept"
            );
            return Ok(OpenStore {
                store: tikv.clone(),
                tikv: Some(tikv),
            });
        }
    };
    Ok(OpenStore { store, tikv: None })
}

/// The metadata store engine.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StoreEngine {
    /// B-tree (redb): faster reads, slower commits.
    Redb,
    /// LSM (fjall): faster raft commits, slower scans.
    Fjall,
    /// A TiKV cluster (`--pd`), for namespaces past one machine's disks: TiKV replicates,
    /// each MNode group is served under a lease in it.
    Tikv,
}

/// How saker takes part in TiKV's GC (`--tikv-gc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TikvGc {
    /// A PD service safe point per node; the cluster's own GC worker collects.
    Tenant,
    /// Also act as the cluster's GC worker (a cluster dedicated to saker only).
    Global,
}

/// The TiKV keyspace (key prefix `saker/NAME/`) when none is given.
pub(crate) const DEFAULT_KEYSPACE: &str = "default";

fn legacy_engine() -> StoreEngine {
    StoreEngine::Redb
}

/// What a data directory was created with: recorded at the first start; asking for another
/// is an error (moving a namespace between group counts or engines is not supported yet).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct ClusterFile {
    version: u32,
    pub mnodes: u32,
    /// Absent in files written before the engine was recorded: those are redb.
    #[serde(default = "legacy_engine")]
    store: StoreEngine,
    /// The one group an MNode process of a multi-process cluster hosts (absent: groups
    /// `1..=mnodes`, all in this process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group: Option<u32>,
    /// Names placed by hash(parent id, name) (path-walk exceptions), fixed at creation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pathwalk: Vec<String>,
    /// Virtual nodes per group on the ring; absent in files written before it was recorded.
    #[serde(default = "legacy_vnodes")]
    pub vnodes: u32,
    /// On TiKV: the keyspace the namespace lives in (so that clusters share one TiKV).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tikv_keyspace: Option<String>,
}

impl ClusterFile {
    pub fn store(&self) -> StoreEngine {
        self.store
    }

    pub fn group(&self) -> Option<u32> {
        self.group
    }

    pub fn pathwalk(&self) -> &[String] {
        &self.pathwalk
    }
}

/// The `cluster.json` of an existing data directory.
pub(crate) fn read_cluster_file(data_dir: &std::path::Path) -> anyhow::Result<ClusterFile> {
    let path = data_dir.join("cluster.json");
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("cannot parse {}", path.display()))
}

/// Switches the data directory's namespace to TiKV keyspace `keyspace` (after a verified
/// migration).
pub(crate) fn record_tikv(data_dir: &std::path::Path, keyspace: &str) -> anyhow::Result<()> {
    let mut f = read_cluster_file(data_dir)?;
    f.store = StoreEngine::Tikv;
    f.tikv_keyspace = Some(keyspace.to_string());
    saker_durable::replace_file(
        &data_dir.join("cluster.json"),
        &serde_json::to_vec_pretty(&f)?,
    )?;
    Ok(())
}

fn legacy_vnodes() -> u32 {
    LOCAL_VNODES
}

pub(crate) fn cluster_file(
    data_dir: &std::path::Path,
    mnodes: u32,
    store: StoreEngine,
    group: Option<u32>,
    pathwalk: &[String],
    tikv_keyspace: Option<&str>,
) -> anyhow::Result<ClusterFile> {
    let tikv_keyspace =
        (store == StoreEngine::Tikv).then(|| tikv_keyspace.unwrap_or(DEFAULT_KEYSPACE).to_string());
    if let Some(k) = &tikv_keyspace {
        anyhow::ensure!(
            !k.is_empty()
                && k.len() <= 64
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "--tikv-keyspace must be 1 to 64 of [A-Za-z0-9_-]"
        );
    }
    anyhow::ensure!((1..=256).contains(&mnodes), "--mnodes must be 1..=256");
    for name in pathwalk {
        saker_namespace::Name::new(name)
            .map_err(|e| anyhow::anyhow!("path-walk name {name:?}: {e}"))?;
    }
    let path = data_dir.join("cluster.json");
    let recorded = match std::fs::read(&path) {
        Ok(bytes) => {
            let f: ClusterFile = serde_json::from_slice(&bytes)
                .with_context(|| format!("cannot parse {}", path.display()))?;
            anyhow::ensure!(
                f.version == 1,
                "{}: unknown version {}",
                path.display(),
                f.version
            );
            f
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A data directory from before anything was recorded: one group on redb.
            let legacy = data_dir.join("meta.redb").exists();
            let f = ClusterFile {
                version: 1,
                mnodes: if legacy { 1 } else { mnodes },
                store: if legacy { StoreEngine::Redb } else { store },
                group,
                pathwalk: pathwalk.to_vec(),
                vnodes: RING_VNODES,
                tikv_keyspace: tikv_keyspace.clone(),
            };
            saker_durable::replace_file(&path, &serde_json::to_vec_pretty(&f)?)?;
            f
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    anyhow::ensure!(
        recorded.group == group,
        "{} holds {}, not {}",
        data_dir.display(),
        describe_group(recorded.group),
        describe_group(group)
    );
    anyhow::ensure!(
        recorded.pathwalk == pathwalk,
        "{} places {:?} by path walk, not {:?}: path-walk names are fixed when the namespace is \
         created",
        data_dir.display(),
        recorded.pathwalk,
        pathwalk
    );
    anyhow::ensure!(
        recorded.mnodes == mnodes && recorded.store == store,
        "{} holds a namespace of {} MNode groups on {:?}; start it with --mnodes {} --store {}",
        data_dir.display(),
        recorded.mnodes,
        recorded.store,
        recorded.mnodes,
        format!("{:?}", recorded.store).to_lowercase()
    );
    anyhow::ensure!(
        recorded.tikv_keyspace == tikv_keyspace,
        "{} holds a namespace in TiKV keyspace {:?}; start it with --tikv-keyspace {}",
        data_dir.display(),
        recorded.tikv_keyspace,
        recorded.tikv_keyspace.as_deref().unwrap_or("")
    );
    Ok(recorded)
}

fn describe_group(group: Option<u32>) -> String {
    match group {
        Some(g) => format!("MNode group {g} of a multi-process cluster"),
        None => "the MNode groups of an all-in-one server".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_file_without_a_ring_size_is_an_old_namespace_on_64_vnodes() {
        let old: ClusterFile =
            serde_json::from_str(r#"{"version":1,"mnodes":4,"store":"fjall"}"#).unwrap();
        assert_eq!(old.vnodes, LOCAL_VNODES);
        let dir = tempfile_dir();
        let new = cluster_file(&dir, 4, StoreEngine::Fjall, None, &[], None).unwrap();
        assert_eq!(new.vnodes, RING_VNODES);
        // Recorded: the next start reads the same.
        let again = cluster_file(&dir, 4, StoreEngine::Fjall, None, &[], None).unwrap();
        assert_eq!(again.vnodes, RING_VNODES);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_tikv_keyspace_is_fixed_at_creation() {
        let dir = tempfile_dir();
        let f = cluster_file(&dir, 2, StoreEngine::Tikv, None, &[], Some("lake-1")).unwrap();
        assert_eq!(f.tikv_keyspace.as_deref(), Some("lake-1"));
        assert!(cluster_file(&dir, 2, StoreEngine::Tikv, None, &[], Some("other")).is_err());
        assert!(cluster_file(&dir, 2, StoreEngine::Fjall, None, &[], None).is_err());
        cluster_file(&dir, 2, StoreEngine::Tikv, None, &[], Some("lake-1")).unwrap();
        let bad = tempfile_dir();
        assert!(cluster_file(&bad, 2, StoreEngine::Tikv, None, &[], Some("a/b")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&bad).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("saker-clusterfile-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
