//! `saker archive BUCKET/PREFIX --tier NAME`: everything under a prefix moved to a tier now,
//! as a server-side job with the lifecycle's machinery ([`saker_tier::transition`]), then
//! verified: every object under the prefix must live in the tier and its remote copy must
//! read back with the CRC32C recorded when it moved.
//!
//! A job keeps no state of its own: a rerun walks the prefix again, and what already moved
//! counts as such at the cost of a listing, so a job cut short by a crash resumes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use saker_client::Lister;
use saker_rpc::Attr;
use saker_tier::transition::{self, Moved};
use serde::Serialize;

use crate::Gateway;

/// Objects moved at once.
const CONCURRENCY: usize = 8;

/// What a job did so far (read while it runs).
#[derive(Debug, Default)]
pub struct Progress {
    /// Objects under the prefix and their bytes (known after the first walk).
    pub total_objects: AtomicU64,
    pub total_bytes: AtomicU64,
    /// Objects done (moved, already there, skipped or failed) and their bytes.
    pub done_objects: AtomicU64,
    pub done_bytes: AtomicU64,
    pub moved: AtomicU64,
    pub moved_bytes: AtomicU64,
    pub already: AtomicU64,
    pub skipped: AtomicU64,
    pub errors: AtomicU64,
    /// Verification: remote copies that read back right, and those that did not (or
    /// objects not in the tier).
    pub verified: AtomicU64,
    pub mismatched: AtomicU64,
    /// How long the walks that counted and moved took (ms; 0 until they ended).
    pub move_ms: AtomicU64,
}

/// A snapshot of [`Progress`].
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Report {
    pub total_objects: u64,
    pub total_bytes: u64,
    pub done_objects: u64,
    pub done_bytes: u64,
    pub moved: u64,
    pub moved_bytes: u64,
    pub already: u64,
    pub skipped: u64,
    pub errors: u64,
    pub verified: u64,
    pub mismatched: u64,
    pub move_ms: u64,
}

impl Progress {
    pub fn report(&self) -> Report {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Report {
            total_objects: g(&self.total_objects),
            total_bytes: g(&self.total_bytes),
            done_objects: g(&self.done_objects),
            done_bytes: g(&self.done_bytes),
            moved: g(&self.moved),
            moved_bytes: g(&self.moved_bytes),
            already: g(&self.already),
            skipped: g(&self.skipped),
            errors: g(&self.errors),
            verified: g(&self.verified),
            mismatched: g(&self.mismatched),
            move_ms: g(&self.move_ms),
        }
    }
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// Objects handed to the work of a walk at once (a walk holds no more than this in memory).
const BATCH: usize = 256;

/// Calls `f` on the objects under `prefix` of `bucket` (directory markers left out), in key
/// order, [`BATCH`] at a time.
pub(crate) async fn walk<F, Fut>(
    gw: &Gateway,
    bucket: &str,
    prefix: &str,
    mut f: F,
) -> Result<(), String>
where
    F: FnMut(Vec<(String, Attr)>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut lister = Lister::new(&gw.cluster, bucket)
        .await
        .map_err(|e| e.to_string())?;
    lister.start(prefix, "").await.map_err(|e| e.to_string())?;
    let mut batch = Vec::with_capacity(BATCH);
    while let Some((key, attr)) = lister.next_key().await.map_err(|e| e.to_string())? {
        // Keys come in order: the first past the prefix ends it.
        if !key.starts_with(prefix) {
            break;
        }
        if !key.ends_with('/') {
            batch.push((key, attr));
        }
        if batch.len() == BATCH {
            f(std::mem::take(&mut batch)).await;
        }
    }
    if !batch.is_empty() {
        f(batch).await;
    }
    Ok(())
}

impl Gateway {
    /// What an archive of `bucket`/`prefix` would move (objects not in a tier yet).
    pub async fn archive_candidates(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<(String, u64)>, String> {
        let mut out = Vec::new();
        walk(self, bucket, prefix, |b| {
            out.extend(
                b.into_iter()
                    .filter(|(_, a)| a.layout.tiered().is_none())
                    .map(|(k, a)| (k, a.size)),
            );
            async {}
        })
        .await?;
        Ok(out)
    }

    /// Moves everything under `prefix` of `bucket` to `tier`, then verifies it, counting in
    /// `p`; answers whether every object lives in the tier with a good remote copy.
    pub async fn archive(
        &self,
        bucket: &str,
        prefix: &str,
        tier: &str,
        p: Arc<Progress>,
    ) -> Result<bool, String> {
        let started = std::time::Instant::now();
        // A first walk counts (for the progress's ETA), the second moves.
        walk(self, bucket, prefix, |b| {
            add(&p.total_objects, b.len() as u64);
            add(&p.total_bytes, b.iter().map(|(_, a)| a.size).sum());
            async {}
        })
        .await?;
        walk(self, bucket, prefix, |b| {
            self.archive_batch(b, bucket, tier, p.clone())
        })
        .await?;
        let ms = started.elapsed().as_millis().max(1) as u64;
        p.move_ms.store(ms, Ordering::Relaxed);
        self.archive_verify(bucket, prefix, tier, &p).await?;
        let r = p.report();
        Ok(r.errors == 0 && r.mismatched == 0)
    }

    async fn archive_batch(
        &self,
        batch: Vec<(String, Attr)>,
        bucket: &str,
        tier: &str,
        p: Arc<Progress>,
    ) {
        let moves = batch.into_iter().map(|(key, attr)| {
            let p = p.clone();
            async move {
                let r = match crate::keys::map_key(bucket, &key) {
                    Ok(kp) => transition::transition(
                        &self.cluster,
                        &self.tiers,
                        tier,
                        &kp.path,
                        &attr,
                        None,
                    )
                    .await
                    .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match r {
                    Ok(Moved::Moved(n)) => {
                        add(&p.moved, 1);
                        add(&p.moved_bytes, n);
                    }
                    Ok(Moved::Already) => add(&p.already, 1),
                    Ok(Moved::Changed | Moved::Skipped(_)) => add(&p.skipped, 1),
                    Err(e) => {
                        add(&p.errors, 1);
                        // Object keys are user data: named at debug only.
                        tracing::warn!(bucket, error = %e, "archive of an object failed");
                        tracing::debug!(bucket, key = %key, "the object not archived");
                    }
                }
                add(&p.done_objects, 1);
                add(&p.done_bytes, attr.size);
            }
        });
        futures::stream::iter(moves)
            .buffer_unordered(CONCURRENCY)
            .collect::<()>()
            .await;
    }

    /// Every object under the prefix now: in `tier`, its remote copy read back whole and
    /// compared with the recorded size and CRC32C.
    async fn archive_verify(
        &self,
        bucket: &str,
        prefix: &str,
        tier: &str,
        p: &Arc<Progress>,
    ) -> Result<(), String> {
        walk(self, bucket, prefix, |b| self.verify_batch(b, tier, p)).await
    }

    async fn verify_batch(&self, batch: Vec<(String, Attr)>, tier: &str, p: &Arc<Progress>) {
        let checks = batch.into_iter().map(|(key, attr)| async move {
            let ok = match attr.layout.tiered() {
                Some(t) if t.tier == tier => match transition::verify(&self.tiers, t).await {
                    Ok(ok) => ok,
                    Err(e) => {
                        tracing::warn!(error = %e, "archive verification failed");
                        tracing::debug!(key = %key, "the object not verified");
                        false
                    }
                },
                _ => false,
            };
            add(if ok { &p.verified } else { &p.mismatched }, 1);
        });
        futures::stream::iter(checks)
            .buffer_unordered(CONCURRENCY)
            .collect::<()>()
            .await;
    }
}
