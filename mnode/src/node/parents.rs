//! Asynchronous parent updates at a directory's owner: the dirty set (which directories other
//! groups changed without pushing yet), rebuilt after an election, and the pulls that bring a
//! dirty directory up to date before it is read.

use std::sync::atomic::Ordering;
use std::time::Duration;

use saker_rpc::{InodeId, MetaRequest, MetaResponse};
use tracing::Instrument;

use super::{untagged, Mnode};
use crate::dirty::{DirtySet, Need};
use crate::metrics;

impl Mnode {
    /// Asks every other group which of this group's directories it holds change-log records
    /// for, until all have answered (a group that is down is asked again).
    pub(super) async fn rebuild_dirty_set(&self) {
        loop {
            let unreported = self.dirty.lock().unreported();
            if unreported.is_empty() {
                return;
            }
            for g in unreported {
                let Ok(peer) = self.peer(g) else { continue };
                let req = MetaRequest::PendingDirs {
                    owner: self.keys.group,
                };
                match peer.call(untagged(), req).await {
                    Ok(MetaResponse::Dirs(dirs)) => self.dirty.lock().reported(g, &dirs),
                    Ok(other) => {
                        tracing::warn!(group = g, "PendingDirs answered {other:?}");
                    }
                    Err(e) => tracing::debug!(group = g, error = %e, "PendingDirs failed"),
                }
            }
            if !self.dirty.lock().unreported().is_empty() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    /// Brings directory `dir`'s attributes up to date with every change acknowledged before
    /// this call (async mode): pulls from the groups that marked it dirty, then clears the
    /// mark. A group that does not answer leaves its changes for later (the attributes may lag,
    /// never break) and the mark stays.
    pub(super) async fn aggregate(&self, dir: InodeId) {
        let (sources, token) = match self.dirty.lock().check(dir) {
            Need::Clean => return,
            Need::Pull { sources, token } => (sources, Some(token)),
            Need::PullAll => (
                self.peers
                    .get()
                    .map(|p| {
                        p.keys()
                            .copied()
                            .filter(|g| *g != self.keys.group)
                            .collect()
                    })
                    .unwrap_or_default(),
                None,
            ),
        };
        let span = tracing::debug_span!(
            "mnode.change_pull",
            group = self.keys.group,
            sources = sources.len()
        );
        let calls = sources.iter().filter_map(|g| {
            let peer = self.peer(*g).ok()?;
            self.pulls.fetch_add(1, Ordering::Relaxed);
            Some(async move { peer.call(untagged(), MetaRequest::PushChanges).await })
        });
        let mut all_ok = true;
        for r in futures::future::join_all(calls).instrument(span).await {
            if let Err(e) = r {
                all_ok = false;
                tracing::warn!(error = %e, "a group did not push its changes");
            }
        }
        metrics::AGGREGATIONS.inc();
        if let (true, Some(token)) = (all_ok, token) {
            self.dirty.lock().clear(dir, token);
        }
    }

    /// Publishes the size of the dirty set.
    pub(super) fn dirty_gauge(&self, dirty: &DirtySet) {
        metrics::DIRTY_DIRS
            .with_label_values(&[&self.keys.group.to_string()])
            .set(dirty.len() as i64);
    }
}
