//! The MNode executor: queue -> batch -> one raft entry.
//!
//! One worker drains whatever is queued (no timer: a lone request goes at once), evaluates each
//! op against one batch transaction (so later ops see earlier ones), and proposes the resulting
//! physical mutations plus per-op results as a single raft entry. Evaluation is serial, and each
//! batch is evaluated on top of the proposed-but-unapplied writes of earlier ones (a bounded
//! pipeline): every (pid, name) is serialized exactly as by locks held until apply, while the
//! fsync of one batch overlaps the evaluation of the next. Writes carry a (client, seq) tag; the
//! dedupe table in raft state returns the first result of a retried write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::collections::VecDeque;

use parking_lot::Mutex;
use saker_rpc::{ClientTag, MetaError, MetaRequest, MetaResponse};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::keys::Keys;
use crate::metrics;
use crate::ops::{apply_write, Ctx};
use crate::raft::{BatchEntry, Raft};
use crate::records::{decode, encode};
use crate::store::MetaStore;
use crate::store::WriteBatch;
use crate::txn::{Overlay, Txn};

/// How many recent results per client the dedupe table keeps.
pub const DEDUPE_WINDOW: u64 = 4096;

pub(crate) struct Pending {
    pub tag: ClientTag,
    pub req: MetaRequest,
    pub reply: oneshot::Sender<Result<MetaResponse, MetaError>>,
}

pub(crate) struct Executor {
    pub keys: Keys,
    pub store: Arc<dyn MetaStore>,
    pub raft: Raft,
    pub next_id: Arc<AtomicU64>,
    pub gc_grace: Duration,
    pub max_batch: usize,
    /// Batches proposed but not yet applied, at most.
    pub pipeline_depth: usize,
}

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default()
}

/// Batches proposed to raft and not yet applied, and their writes merged (later wins). The next
/// batch is evaluated on top of them, so evaluation overlaps the commit of earlier batches; its
/// ops are acknowledged only after its own apply, which follows theirs in the log.
#[derive(Default)]
struct InFlight {
    batches: VecDeque<(u64, Arc<WriteBatch>)>,
    merged: Arc<Overlay>,
}

impl InFlight {
    fn push(&mut self, seq: u64, batch: Arc<WriteBatch>) {
        let mut merged = (*self.merged).clone();
        merged.extend(batch.ops.iter().cloned());
        self.merged = Arc::new(merged);
        self.batches.push_back((seq, batch));
    }

    fn remove(&mut self, seq: u64) {
        self.batches.retain(|(s, _)| *s != seq);
        let mut merged = Overlay::new();
        for (_, b) in &self.batches {
            merged.extend(b.ops.iter().cloned());
        }
        self.merged = Arc::new(merged);
    }
}

impl Executor {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Pending>) {
        let inflight = Arc::new(Mutex::new(InFlight::default()));
        let permits = Arc::new(Semaphore::new(self.pipeline_depth.max(1)));
        let mut seq = 0u64;
        while let Some(first) = rx.recv().await {
            let mut batch = Vec::with_capacity(self.max_batch);
            batch.push(first);
            let Ok(permit) = permits.clone().acquire_owned().await else {
                break;
            };
            // Everything queued meanwhile joins this batch.
            while batch.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            seq += 1;
            self.propose(seq, batch, &inflight, permit).await;
        }
    }

    async fn propose(
        &self,
        seq: u64,
        batch: Vec<Pending>,
        inflight: &Arc<Mutex<InFlight>>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) {
        metrics::BATCH_SIZE.observe(batch.len() as f64);
        let pending = inflight.lock().merged.clone();
        let mut txn = Txn::on_pending(self.store.as_ref(), pending);
        let mut ctx = Ctx {
            keys: &self.keys,
            now_ns: now_ns(),
            gc_grace_ns: self.gc_grace.as_nanos() as i64,
            next_id: self.next_id.load(Ordering::SeqCst),
        };
        let mut results = Vec::with_capacity(batch.len());
        for p in batch.iter() {
            results.push(self.eval(&mut txn, &mut ctx, p));
        }
        self.next_id.store(ctx.next_id, Ordering::SeqCst);
        let mutations = txn.into_batch();
        inflight.lock().push(seq, Arc::new(mutations.clone()));
        let entry = BatchEntry {
            mutations,
            results,
            id_high_water: ctx.next_id - 1,
        };
        let rx = self.raft.client_write_ff(entry).await;
        let inflight = inflight.clone();
        tokio::spawn(async move {
            let outcome = match rx {
                Ok(rx) => match rx.await {
                    Ok(Ok(resp)) => Ok(resp.data.results),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
                Err(e) => Err(e.to_string()),
            };
            inflight.lock().remove(seq);
            drop(permit);
            match outcome {
                Ok(results) => {
                    for (p, r) in batch.into_iter().zip(results) {
                        let _ = p.reply.send(r);
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "raft write failed; batch rejected");
                    for p in batch {
                        let _ = p.reply.send(Err(MetaError::Unavailable(e.clone())));
                    }
                }
            }
        });
    }

    fn eval(
        &self,
        txn: &mut Txn<'_>,
        ctx: &mut Ctx<'_>,
        p: &Pending,
    ) -> Result<MetaResponse, MetaError> {
        let dedupe = p.tag.client != 0;
        let dkey = self.keys.dedupe(p.tag.client, p.tag.seq);
        if dedupe {
            match txn.get(&dkey) {
                Ok(Some(prev)) => {
                    return decode(&prev)
                        .unwrap_or_else(|e| Err(MetaError::Internal(e.to_string())));
                }
                Ok(None) => {}
                Err(e) => return Err(MetaError::Internal(e.to_string())),
            }
        }
        let sp = txn.savepoint();
        let ids_before = ctx.next_id;
        let result = apply_write(txn, ctx, &p.req);
        if result.is_err() {
            txn.rollback(sp);
            ctx.next_id = ids_before;
        }
        if dedupe {
            txn.put(dkey, encode(&result));
            if p.tag.seq > DEDUPE_WINDOW {
                txn.delete(self.keys.dedupe(p.tag.client, p.tag.seq - DEDUPE_WINDOW));
            }
        }
        result
    }
}
