//! `saker admin store migrate --to tikv`: moves an embedded namespace (redb or fjall) into a
//! TiKV keyspace ("spilling over" when local disks are outgrown).
//!
//! Offline: the server is stopped (the embedded store's lock refuses a second opener). Every
//! group is opened as the server opens it, so its raft log is replayed into its state first;
//! then, group by group, every state-machine record is copied in transactions of a page each
//! and verified: the record count and a CRC32C over every key and value, read back from TiKV,
//! must equal the source's (the walk and checksum of a raft snapshot). Only when every group verified is `cluster.json` switched to the
//! TiKV engine; the embedded files are left in place (delete them once the server runs on
//! TiKV). Chunks stay where they are.
//!
//! A replicated cluster moves through a backup instead (`--from-backup DIR`, from `saker admin
//! backup`): each group's backed-up tables are restored into the empty keyspace from this one
//! process, then read back and compared with the same restore into memory (count and CRC32C);
//! the nodes then start on fresh data directories with `--store tikv` and their chunks.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Subcommand;
use saker_mnode::keys::Keys;
use saker_mnode::raft::snapshot::{crc_pair, for_each_pair};
use saker_mnode::store::WriteBatch;
use saker_mnode::{LocalGroups, MemStore, MetaStore, MnodeConfig, TikvStore};

use crate::data_dir::{self, StoreEngine};

/// Records per copy transaction.
const PAGE: usize = 512;

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Move the namespace of a stopped server's data directory into TiKV, verified per group;
    /// then start the server with `--store tikv --pd …`.
    Migrate {
        /// The server's data directory.
        #[arg(
            long,
            required_unless_present = "from_backup",
            conflicts_with = "from_backup"
        )]
        data_dir: Option<PathBuf>,
        /// Instead: a backup of a cluster (`saker admin backup DIR`) to restore into TiKV.
        #[arg(long)]
        from_backup: Option<PathBuf>,
        /// The engine to move to (only `tikv`).
        #[arg(long, value_enum)]
        to: StoreEngine,
        /// PD endpoints of the TiKV cluster (`host:port`, comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        pd: Vec<String>,
        /// The keyspace to move into; it must be empty.
        #[arg(long, default_value = data_dir::DEFAULT_KEYSPACE)]
        tikv_keyspace: String,
    },
}

/// What one group's copy counted, on one side.
#[derive(Debug, Default, PartialEq, Eq)]
struct Digest {
    records: u64,
    crc: u32,
}

impl Digest {
    fn add(&mut self, key: &[u8], value: &[u8]) {
        self.records += 1;
        self.crc = crc_pair(self.crc, key, value);
    }
}

pub async fn run(command: StoreCommand) -> anyhow::Result<()> {
    let StoreCommand::Migrate {
        data_dir,
        from_backup,
        to,
        pd,
        tikv_keyspace,
    } = command;
    anyhow::ensure!(to == StoreEngine::Tikv, "only --to tikv is supported");
    let Some(data_dir) = data_dir else {
        let dir = from_backup.expect("clap requires one of the two");
        let target = empty_keyspace(&pd, &tikv_keyspace).await?;
        return restore_backup(&dir, target, &pd, &tikv_keyspace).await;
    };
    let recorded = data_dir::read_cluster_file(&data_dir)?;
    anyhow::ensure!(
        recorded.store() != StoreEngine::Tikv,
        "{} is on TiKV already",
        data_dir.display()
    );
    anyhow::ensure!(
        recorded.group().is_none(),
        "{} is one group of a multi-process cluster; migrate an all-in-one server's directory",
        data_dir.display()
    );
    let source = data_dir::open_store(
        &data_dir,
        &recorded,
        saker_rpc::Durability::Disk,
        &[],
        Default::default(),
    )
    .context("cannot open the embedded store (is the server still running?)")?
    .store;
    // Opening the groups replays every raft log into its state machine.
    let groups = LocalGroups::start_placed(
        source.clone(),
        recorded.mnodes,
        MnodeConfig::new(1),
        recorded.vnodes,
        crate::server::config::pathwalk_table(recorded.pathwalk()),
    )
    .await
    .context("cannot open the MNode groups")?;
    let target = empty_keyspace(&pd, &tikv_keyspace).await?;
    for g in 1..=recorded.mnodes {
        let (s, t) = (source.clone(), target.clone());
        let (copied, read_back) = tokio::task::spawn_blocking(move || {
            let copied = copy_group(s.as_ref(), t.as_ref(), Keys::new(g))?;
            let read_back = digest_group(t.as_ref(), Keys::new(g))?;
            anyhow::Ok((copied, read_back))
        })
        .await??;
        anyhow::ensure!(
            copied == read_back,
            "group {g}: copied {copied:?} but TiKV holds {read_back:?}; cluster.json unchanged"
        );
        println!(
            "group {g}: {} records, crc32c {:08x}, verified",
            copied.records, copied.crc
        );
    }
    for m in &groups.mnodes {
        m.shutdown().await;
    }
    data_dir::record_tikv(&data_dir, &tikv_keyspace)?;
    println!(
        "{} now keeps its metadata in TiKV keyspace {tikv_keyspace:?}: start it with \
         --store tikv --pd {} --tikv-keyspace {tikv_keyspace} (the embedded store files are \
         left in place)",
        data_dir.display(),
        pd.join(",")
    );
    Ok(())
}

/// The TiKV keyspace `keyspace`, which must be empty.
async fn empty_keyspace(pd: &[String], keyspace: &str) -> anyhow::Result<Arc<TikvStore>> {
    let (pd, name) = (pd.to_vec(), keyspace.to_string());
    let target =
        Arc::new(tokio::task::spawn_blocking(move || TikvStore::connect(&pd, &name)).await??);
    let t = target.clone();
    let any = tokio::task::spawn_blocking(move || t.scan(&[], None, 1)).await??;
    anyhow::ensure!(
        any.is_empty(),
        "TiKV keyspace {keyspace:?} is not empty: pick another --tikv-keyspace"
    );
    Ok(target)
}

/// Restores every group of the backup in `dir` into `target`, verified per group against the
/// same restore into memory (so it needs memory for the largest group's tables).
async fn restore_backup(
    dir: &std::path::Path,
    target: Arc<TikvStore>,
    pd: &[String],
    keyspace: &str,
) -> anyhow::Result<()> {
    for (g, path) in crate::backup::group_files(dir)? {
        let t = target.clone();
        let (restored, expected) = tokio::task::spawn_blocking(move || {
            let restore = |store: &dyn MetaStore| -> anyhow::Result<Digest> {
                let mut file = std::fs::File::open(&path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                saker_mnode::raft::snapshot::restore(store, Keys::new(g), &mut file)
                    .with_context(|| format!("cannot restore group {g} from {}", path.display()))?;
                digest_group(store, Keys::new(g))
            };
            anyhow::Ok((restore(t.as_ref())?, restore(&MemStore::default())?))
        })
        .await??;
        anyhow::ensure!(
            restored == expected,
            "group {g}: TiKV holds {restored:?}, the backup {expected:?}"
        );
        println!(
            "group {g}: {} records, crc32c {:08x}, verified",
            restored.records, restored.crc
        );
    }
    println!(
        "the backup is in TiKV keyspace {keyspace:?}: start every node on a fresh data \
         directory (its chunks/ copied over) with --store tikv --pd {} --tikv-keyspace {keyspace}",
        pd.join(",")
    );
    Ok(())
}

/// Copies every state-machine record of the group `keys` from `s` to `t`, a page per
/// transaction; the digest of what was read.
fn copy_group(s: &dyn MetaStore, t: &dyn MetaStore, keys: Keys) -> anyhow::Result<Digest> {
    let mut digest = Digest::default();
    let mut batch = WriteBatch::default();
    for_each_pair(s, keys, |k, v| {
        digest.add(k, v);
        batch.put(k.to_vec(), v.to_vec());
        if batch.ops.len() == PAGE {
            t.write(&std::mem::take(&mut batch), true)?;
        }
        Ok(())
    })?;
    if !batch.is_empty() {
        t.write(&batch, true)?;
    }
    Ok(digest)
}

/// The digest of the group `keys`'s state-machine records in `t`.
fn digest_group(t: &dyn MetaStore, keys: Keys) -> anyhow::Result<Digest> {
    let mut digest = Digest::default();
    for_each_pair(t, keys, |k, v| {
        digest.add(k, v);
        Ok(())
    })?;
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_sees_order_contents_and_boundaries() {
        let d = |pairs: &[(&[u8], &[u8])]| {
            let mut d = Digest::default();
            for (k, v) in pairs {
                d.add(k, v);
            }
            d
        };
        let a = d(&[(b"k1", b"v1"), (b"k2", b"v2")]);
        assert_eq!(a, d(&[(b"k1", b"v1"), (b"k2", b"v2")]));
        assert_ne!(a, d(&[(b"k2", b"v2"), (b"k1", b"v1")]), "order");
        assert_ne!(a, d(&[(b"k1", b"v1"), (b"k2", b"v3")]), "a value");
        assert_ne!(d(&[(b"ab", b"c")]), d(&[(b"a", b"bc")]), "where keys end");
        assert_eq!(a.records, 2);
    }
}
