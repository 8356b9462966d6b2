//! The MNode executor: queue -> batch -> one raft entry.
//!
//! One worker drains whatever is queued (no timer: a lone request goes at once), evaluates each
//! op against one batch transaction (so later ops see earlier ones), and proposes the resulting
//! physical mutations plus per-op results as a single raft entry. The next batch is evaluated
//! only after this one is applied, so the worker holding the batch is the lock on every
//! (pid, name) it touched until apply. Writes carry a (client, seq) tag; the dedupe table in
//! raft state returns the first result of a retried write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use saker_rpc::{ClientTag, MetaError, MetaRequest, MetaResponse};
use tokio::sync::{mpsc, oneshot};

use crate::keys::Keys;
use crate::metrics;
use crate::ops::{apply_write, Ctx};
use crate::raft::{BatchEntry, Raft};
use crate::records::{decode, encode};
use crate::store::MetaStore;
use crate::txn::Txn;

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
}

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default()
}

impl Executor {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Pending>) {
        let mut batch = Vec::with_capacity(self.max_batch);
        while let Some(first) = rx.recv().await {
            batch.push(first);
            while batch.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            self.run_batch(&mut batch).await;
        }
    }

    async fn run_batch(&self, batch: &mut Vec<Pending>) {
        metrics::BATCH_SIZE.observe(batch.len() as f64);
        let mut txn = Txn::new(self.store.as_ref());
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
        let entry = BatchEntry {
            mutations: txn.into_batch(),
            results,
            id_high_water: ctx.next_id - 1,
        };
        let outcome = self.raft.client_write(entry).await;
        match outcome {
            Ok(resp) => {
                self.next_id.store(ctx.next_id, Ordering::SeqCst);
                for (p, r) in batch.drain(..).zip(resp.data.results) {
                    let _ = p.reply.send(r);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "raft write failed; batch rejected");
                for p in batch.drain(..) {
                    let _ = p.reply.send(Err(MetaError::Unavailable(e.to_string())));
                }
            }
        }
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
