//! The tiers this process knows: their S3 clients (made from the definitions in the
//! coordinator's state at first use) and the read-through of tiered versions, with the local
//! cache.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;
use saker_client::{channel_stream, ClientError, DataStream, ReadRange, TierReader};
use saker_coordinator::StateStore;
use saker_rpc::TierRef;
use tokio::sync::mpsc;

use crate::cache::Cache;
use crate::{config, Remote, TierError};

/// Tier clients by name, the cluster id and the read cache.
pub struct Tiers {
    me: std::sync::Weak<Tiers>,
    state: Arc<dyn StateStore>,
    remotes: RwLock<HashMap<String, Remote>>,
    /// Read from the state (made there) at first use; it never changes.
    cluster: tokio::sync::OnceCell<String>,
    cache: Cache,
}

impl Tiers {
    pub fn new(state: Arc<dyn StateStore>, cache: Cache) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            state,
            remotes: RwLock::default(),
            cluster: tokio::sync::OnceCell::new(),
            cache,
        })
    }

    pub fn state(&self) -> &Arc<dyn StateStore> {
        &self.state
    }

    /// The cluster's id, under which its copies live in a tier's bucket.
    pub async fn cluster_id(&self) -> Result<&str, TierError> {
        let id = self
            .cluster
            .get_or_try_init(|| config::cluster_id(&self.state))
            .await?;
        Ok(id)
    }

    /// The client of tier `name` (with its definition).
    pub async fn remote(&self, name: &str) -> Result<Remote, TierError> {
        if let Some(r) = self.remotes.read().get(name) {
            return Ok(r.clone());
        }
        let cfg = config::get(&self.state, name).await?;
        let r = Remote::new(&cfg);
        self.remotes.write().insert(name.to_string(), r.clone());
        Ok(r)
    }

    /// Forgets the client of tier `name` (after its definition changed or went).
    pub fn forget(&self, name: &str) {
        self.remotes.write().remove(name);
    }

    /// Sends `range` of `t` into `tx`: from the cache, else the whole object fetched,
    /// checked and kept (when small enough to keep), else streamed from the tier (checked
    /// against the version's CRC32C when the range is the whole object). A range past the
    /// version's data reads what follows it in the copy (an encrypted version's records,
    /// which their tags authenticate), straight from the tier.
    async fn send(
        &self,
        t: &TierRef,
        range: ReadRange,
        tx: &mpsc::Sender<Result<Bytes, ClientError>>,
    ) -> Result<(), TierError> {
        if range.start >= t.size {
            return self.send_after(t, range, tx).await;
        }
        let end = range.end.min(t.size);
        let start = range.start.min(end);
        if let Some(pieces) = self.cache.read(&t.tier, &t.key, start, end) {
            crate::metrics::READS.with_label_values(&["hit"]).inc();
            for p in pieces {
                if tx.send(Ok(p)).await.is_err() {
                    break;
                }
            }
            return Ok(());
        }
        crate::metrics::READS.with_label_values(&["miss"]).inc();
        let remote = self.remote(&t.tier).await?;
        let corrupt = || TierError::Corrupt {
            tier: t.tier.clone(),
            key: t.key.clone(),
        };
        if t.size <= self.cache.max_object() {
            // The data only: an encrypted version's records follow it.
            let data = (t.size > 0).then_some((0, t.size));
            let mut body = remote.get(&t.key, data).await?;
            let mut all = Vec::with_capacity(t.size as usize);
            while let Some(b) = body.next().await {
                all.extend_from_slice(&b.map_err(|e| remote_err(t, e))?);
            }
            if all.len() as u64 != t.size || crc32c::crc32c(&all) != t.crc32c {
                return Err(corrupt());
            }
            self.cache.insert(&t.tier, &t.key, &all)?;
            let _ = tx
                .send(Ok(Bytes::from(all).slice(start as usize..end as usize)))
                .await;
            return Ok(());
        }
        if start == end {
            return Ok(());
        }
        let whole = start == 0 && end == t.size;
        let mut body = remote.get(&t.key, Some((start, end))).await?;
        let (mut crc, mut got) = (0u32, 0u64);
        while let Some(b) = body.next().await {
            let b = b.map_err(|e| remote_err(t, e))?;
            got += b.len() as u64;
            if whole {
                crc = crc32c::crc32c_append(crc, &b);
            }
            // The last piece is checked before it is sent: a client never gets bad bytes
            // as a complete body.
            if whole && got == t.size && crc != t.crc32c {
                return Err(corrupt());
            }
            if tx.send(Ok(b)).await.is_err() {
                return Ok(());
            }
        }
        if got != end - start {
            return Err(remote_err(t, format!("{got} bytes of {}", end - start)));
        }
        Ok(())
    }
}

impl Tiers {
    /// Sends `range` (at or past `t.size`) of the tier copy `t` into `tx`.
    async fn send_after(
        &self,
        t: &TierRef,
        range: ReadRange,
        tx: &mpsc::Sender<Result<Bytes, ClientError>>,
    ) -> Result<(), TierError> {
        if range.end <= range.start {
            return Ok(());
        }
        let remote = self.remote(&t.tier).await?;
        let mut body = remote.get(&t.key, Some((range.start, range.end))).await?;
        let mut got = 0u64;
        while let Some(b) = body.next().await {
            let b = b.map_err(|e| remote_err(t, e))?;
            got += b.len() as u64;
            if tx.send(Ok(b)).await.is_err() {
                return Ok(());
            }
        }
        if got != range.end - range.start {
            let want = range.end - range.start;
            return Err(remote_err(
                t,
                format!("{got} bytes of {want} past its data"),
            ));
        }
        Ok(())
    }
}

fn remote_err(t: &TierRef, e: impl std::fmt::Display) -> TierError {
    TierError::Remote {
        tier: t.tier.clone(),
        msg: format!("{}: {e}", t.key),
    }
}

/// Reads through for a node's callers without tier keys (library mounts). A caller names any
/// key it likes, so only this cluster's keys in a tier are read: a client credential may read
/// any chunk of this cluster, and with this any tiered version of it, but nothing else in the
/// tier's bucket.
#[async_trait::async_trait]
impl saker_rpc::TierReadService for Tiers {
    async fn read(&self, t: TierRef, start: u64, end: u64) -> Result<Bytes, String> {
        let ours = async {
            let remote = self.remote(&t.tier).await?;
            let prefix = remote.config().cluster_prefix(self.cluster_id().await?);
            Ok::<_, TierError>(t.key.starts_with(&prefix) && !t.key.contains("/../"))
        };
        match ours.await {
            Ok(true) => {}
            Ok(false) => return Err(format!("{} is not a key of this cluster", t.key)),
            Err(e) => return Err(e.to_string()),
        }
        let stream = TierReader::read(self, &t, ReadRange { start, end });
        let all = saker_client::collect(stream)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Bytes::from(all))
    }
}

impl TierReader for Tiers {
    fn read(&self, t: &TierRef, range: ReadRange) -> DataStream {
        let (tx, rx) = mpsc::channel(2);
        let (t, me) = (
            t.clone(),
            self.me.upgrade().expect("a reader is used through its Arc"),
        );
        tokio::spawn(async move {
            if let Err(e) = me.send(&t, range, &tx).await {
                tracing::warn!(tier = %t.tier, key = %t.key, error = %e, "tier read failed");
                let _ = tx.send(Err(ClientError::Tier(e.to_string()))).await;
            }
        });
        channel_stream(rx)
    }
}
