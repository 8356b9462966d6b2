//! Backups of a group (`saker admin backup`): the leader writes its state-machine tables, as
//! they stand with no batch in flight, into an unnamed snapshot file (the format of raft
//! snapshots, [`crate::raft::snapshot`]) and hands it out piece by piece. A backup is kept
//! until it is read to its end, at most [`KEEP`] at a time (the oldest is dropped first).

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use saker_rpc::{MetaError, MetaResponse};

use super::Mnode;
use crate::raft::snapshot;

/// Backups kept open at once.
const KEEP: usize = 8;
/// The largest piece handed out at once.
const MAX_PIECE: u32 = 1 << 20;

/// The backups being read: id, file, size.
#[derive(Default)]
pub(crate) struct Backups {
    open: Mutex<VecDeque<(u64, Arc<File>, u64)>>,
    next: AtomicU64,
}

fn failed(e: impl std::fmt::Display) -> MetaError {
    MetaError::Internal(format!("backup: {e}"))
}

impl Mnode {
    /// Answers [`saker_rpc::MetaRequest::Backup`].
    pub(crate) async fn backup(
        &self,
        id: u64,
        offset: u64,
        len: u32,
    ) -> Result<MetaResponse, MetaError> {
        let (id, file, size) = if id == 0 {
            self.new_backup().await?
        } else {
            let open = self.backups.open.lock();
            let found = open.iter().find(|(i, _, _)| *i == id).cloned();
            found.ok_or_else(|| MetaError::Invalid(format!("no backup {id} here")))?
        };
        let len = u64::from(len.min(MAX_PIECE)).min(size.saturating_sub(offset));
        let piece = file.clone();
        let data = tokio::task::spawn_blocking(move || {
            let mut buf = vec![0; len as usize];
            piece.read_exact_at(&mut buf, offset).map(|()| buf)
        })
        .await
        .map_err(failed)?
        .map_err(failed)?;
        if offset + len >= size {
            self.backups.open.lock().retain(|(i, _, _)| *i != id);
        }
        Ok(MetaResponse::BackupPiece { id, size, data })
    }

    /// Writes a new backup file while no batch is between evaluation and apply.
    async fn new_backup(&self) -> Result<(u64, Arc<File>, u64), MetaError> {
        let _all = self
            .permits
            .acquire_many(self.pipeline_depth)
            .await
            .map_err(|_| MetaError::Unavailable("executor stopped".into()))?;
        let (store, keys, dir) = (self.store.clone(), self.keys, self.snapshot_dir.clone());
        let (file, size) = tokio::task::spawn_blocking(move || {
            let mut file = snapshot::unnamed_file(&dir, "backup")?;
            snapshot::write(store.as_ref(), keys, &mut file)?;
            let size = file.metadata()?.len();
            Ok::<_, snapshot::SnapshotError>((file, size))
        })
        .await
        .map_err(failed)?
        .map_err(failed)?;
        let id = self.backups.next.fetch_add(1, Ordering::Relaxed) + 1;
        let file = Arc::new(file);
        let mut open = self.backups.open.lock();
        if open.len() >= KEEP {
            open.pop_front();
        }
        open.push_back((id, file.clone(), size));
        tracing::info!(group = keys.group, id, size, "backup written");
        Ok((id, file, size))
    }
}
