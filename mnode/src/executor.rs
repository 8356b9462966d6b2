//! The MNode executor: queue -> batch -> one raft entry.
//!
//! One worker drains whatever is queued (no timer: a lone request goes at once), evaluates each
//! op against one batch transaction (so later ops see earlier ones), and proposes the resulting
//! physical mutations plus per-op results as a single raft entry. Evaluation is serial, and each
//! batch is evaluated on top of the proposed-but-unapplied writes of earlier ones (a bounded
//! pipeline): every (pid, name) is serialized exactly as by locks held until apply, while the
//! fsync of one batch overlaps the evaluation of the next. Writes carry a (client, seq) tag; the
//! dedupe table in raft state returns the first result of a retried write.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use saker_namespace::{DentryReplica, GroupId};
use saker_rpc::{ClientTag, DirChange, InodeId, MetaError, MetaRequest, MetaResponse};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tracing::Instrument;

use crate::changes::ChangeLog;
use crate::engine::Engine;
use crate::frozen::FrozenDirs;
use crate::keys::{Keys, CHANGE_SEQ};
use crate::leadership::Leadership;
use crate::metrics;
use crate::ops::{apply_write, Ctx};
use crate::raft::BatchEntry;
use crate::records::{decode, encode, SmMeta};
use crate::store::{MetaStore, StoreError, WriteBatch};
use crate::tree::{Absence, Resolver, Retry};
use crate::txn::{Overlay, Txn};
use saker_namespace::SharedRouter;

/// How many recent results per client the dedupe table keeps.
pub const DEDUPE_WINDOW: u64 = 4096;

pub(crate) struct Pending {
    pub tag: ClientTag,
    pub req: MetaRequest,
    pub reply: oneshot::Sender<Reply>,
    /// For a deferred write: its result as soon as it is evaluated (before the raft commit;
    /// `reply` still answers after it). Dropped unsent if the op is to be retried.
    pub early: Option<oneshot::Sender<Result<MetaResponse, MetaError>>>,
    /// What remote lookups for this op found missing on the path.
    pub absent: Vec<(InodeId, String, Absence)>,
    /// An implicit directory in the way was already reaped (or found not empty).
    pub reaped: bool,
    /// Shared inodes of other groups the op asked for (`Retry::SharedAttr`).
    pub fetched: Vec<saker_rpc::Attr>,
    /// The request's span: the batch that carries the op joins its trace.
    pub span: tracing::Span,
}

/// The executor's answer to one op.
pub(crate) enum Reply {
    /// Committed (or failed on its own); `reap` names a directory the op may have left empty.
    Done {
        result: Result<MetaResponse, MetaError>,
        reap: Option<Vec<String>>,
    },
    /// Not executed: the MNode must do something first, then submit it again.
    Retry(Retry),
}

pub(crate) struct Executor {
    pub keys: Keys,
    pub store: Arc<dyn MetaStore>,
    pub engine: Engine,
    pub next_id: Arc<AtomicU64>,
    pub gc_grace: Duration,
    pub max_batch: usize,
    /// Held by each batch from evaluation until apply; `pipeline_depth` of them.
    pub permits: Arc<Semaphore>,
    pub router: SharedRouter,
    pub replica: Arc<Mutex<DentryReplica>>,
    pub frozen: Arc<FrozenDirs>,
    pub changes: Arc<ChangeLog>,
    pub parent_updates: ParentUpdates,
    /// Batches evaluated and the ops in them, since start (mean batch size for benchmarks).
    pub batch_counts: Arc<BatchCounts>,
    /// Per client, the seq below which its dedupe entries are deleted (since start).
    pub dedupe_trimmed: Mutex<std::collections::HashMap<u128, u64>>,
    /// Whether (and in which term) this replica leads its group.
    pub leadership: Arc<Leadership>,
    /// The number of `permits`.
    pub pipeline_depth: u32,
    /// Raised when a batch that wrote change-feed records is applied.
    pub feed_clock: Arc<crate::feed_clock::FeedClock>,
}

/// Dedupe entries one write deletes at most (a client's backlog after a restart goes over
/// several writes), and the seqs of a client between two trims.
const DEDUPE_TRIM_BATCH: usize = 64;

/// How many batches the executor ran and how many ops they held.
#[derive(Default)]
pub struct BatchCounts {
    pub batches: AtomicU64,
    pub ops: AtomicU64,
}

/// When an op that changed another group's directory is answered (SwitchFS §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParentUpdates {
    /// After the directory's owner has applied the change.
    Sync,
    /// At once; the change is pushed right after, and the owner pulls pending changes before
    /// it answers with a directory's attributes.
    Async,
}

pub(crate) use saker_durable::now_ns;

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

/// A batch ready to propose.
struct Evaluated {
    entry: BatchEntry,
    /// The ops in the entry, in order.
    batch: Vec<Pending>,
    /// Per op, a directory to reap after the commit.
    reaps: Vec<Option<Vec<String>>>,
    /// Per op, whether its answer waits for the change-log push or the dirty marks (it changed
    /// a directory that another group owns).
    waits: Vec<bool>,
    /// The highest change-log seq the entry writes.
    last_change: Option<u64>,
    /// The other groups' directories the entry changes, by owner (the dirty marks).
    dirty: BTreeMap<GroupId, Vec<InodeId>>,
    /// The entry writes change-feed records.
    fed: bool,
}

impl Executor {
    pub async fn run(self, mut rx: mpsc::UnboundedReceiver<Pending>) {
        let inflight = Arc::new(Mutex::new(InFlight::default()));
        let permits = self.permits.clone();
        // Read from the store before the first batch (as at every new term).
        let mut change_seq = 0;
        let mut term = 0;
        let mut seq = 0u64;
        while let Some(first) = rx.recv().await {
            let mut batch = Vec::with_capacity(self.max_batch);
            batch.push(first);
            let Ok(mut permit) = permits.clone().acquire_owned().await else {
                break;
            };
            // Everything queued meanwhile joins this batch.
            while batch.len() < self.max_batch {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let now = self.leadership.ready_term();
            if now == 0 {
                // Leadership moved while these were queued: nothing is executed.
                for p in batch {
                    let _ = p.reply.send(Reply::Done {
                        result: Err(self.leadership.refusal()),
                        reap: None,
                    });
                }
                continue;
            }
            if now != term {
                // A new term: the batches of an older one finish (or fail) first, then the
                // state kept in memory is read again from what raft applied.
                drop(permit);
                let Ok(all) = permits
                    .clone()
                    .acquire_many_owned(self.pipeline_depth)
                    .await
                else {
                    break;
                };
                drop(all);
                let Ok(p) = permits.clone().acquire_owned().await else {
                    break;
                };
                permit = p;
                // (Every batch removed itself from `inflight` before it gave back its permit.)
                match self.load_state() {
                    Ok((seq, first_id)) => {
                        change_seq = seq;
                        self.next_id.fetch_max(first_id, Ordering::SeqCst);
                    }
                    Err(e) => {
                        // Evaluating without them would hand out ids and change-log seqs
                        // already used: the batch is refused, and the next one reads again.
                        tracing::error!(group = self.keys.group, error = %e, "group state unreadable; batch refused");
                        for p in batch {
                            let _ = p.reply.send(Reply::Done {
                                result: Err(MetaError::Unavailable(format!(
                                    "group state unreadable: {e}"
                                ))),
                                reap: None,
                            });
                        }
                        continue;
                    }
                }
                term = now;
            }
            seq += 1;
            self.propose(seq, batch, &inflight, permit, &mut change_seq)
                .await;
        }
    }

    /// The change-log seq and the first free inode id, from what raft applied.
    fn load_state(&self) -> Result<(u64, u64), StoreError> {
        let seq = match self.store.get(&self.keys.single(CHANGE_SEQ))? {
            Some(v) => decode(&v)?,
            None => 0,
        };
        let sm = SmMeta::load(self.store.as_ref(), self.keys)?;
        Ok((seq, crate::node::first_free_id(self.keys.group, &sm)))
    }

    /// Evaluates a batch into one raft entry; ops that need a retry are answered at once.
    fn evaluate(
        &self,
        seq: u64,
        batch: Vec<Pending>,
        inflight: &Arc<Mutex<InFlight>>,
        change_seq: &mut u64,
    ) -> Option<Evaluated> {
        metrics::BATCH_SIZE.observe(batch.len() as f64);
        self.batch_counts.batches.fetch_add(1, Ordering::Relaxed);
        self.batch_counts
            .ops
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let pending = inflight.lock().merged.clone();
        let mut txn = Txn::on_pending(self.store.as_ref(), pending);
        for key in self.changes.take_trimmed() {
            txn.delete(key);
        }
        let resolver = Resolver::new(
            &self.keys,
            self.router.get(),
            &self.replica,
            &self.frozen,
            true,
        );
        let mut ctx = Ctx {
            keys: &self.keys,
            ns: &resolver,
            now_ns: now_ns(),
            gc_grace_ns: self.gc_grace.as_nanos() as i64,
            next_id: self.next_id.load(Ordering::SeqCst),
            changes: Vec::new(),
            reap: None,
            reaped: false,
            fed: false,
        };
        // Parent changes for other groups, merged per (owner, directory).
        let mut remote: BTreeMap<GroupId, BTreeMap<InodeId, DirChange>> = BTreeMap::new();
        let mut results = Vec::with_capacity(batch.len());
        let mut reaps = Vec::with_capacity(batch.len());
        let mut waits = Vec::with_capacity(batch.len());
        let mut kept = Vec::with_capacity(batch.len());
        for mut p in batch.into_iter() {
            resolver.set_absent(std::mem::take(&mut p.absent));
            resolver.set_fetched(std::mem::take(&mut p.fetched));
            ctx.reaped = p.reaped;
            match self.eval(&mut txn, &mut ctx, &p) {
                Err(retry) => {
                    let _ = p.reply.send(Reply::Retry(retry));
                }
                Ok(result) => {
                    if let Some(early) = p.early.take() {
                        let _ = early.send(result.clone());
                    }
                    waits.push(!ctx.changes.is_empty());
                    for (owner, c) in ctx.changes.drain(..) {
                        let merged =
                            remote
                                .entry(owner)
                                .or_default()
                                .entry(c.dir)
                                .or_insert(DirChange {
                                    dir: c.dir,
                                    entries: 0,
                                    links: 0,
                                    mtime_ns: 0,
                                });
                        merged.entries += c.entries;
                        merged.links += c.links;
                        merged.mtime_ns = merged.mtime_ns.max(c.mtime_ns);
                    }
                    reaps.push(ctx.reap.take());
                    results.push(result);
                    kept.push(p);
                }
            }
        }
        if kept.is_empty() {
            return None;
        }
        let mut last_change = None;
        let dirty = remote
            .iter()
            .map(|(owner, dirs)| (*owner, dirs.keys().copied().collect()))
            .collect();
        for (owner, dirs) in remote {
            *change_seq += 1;
            let changes: Vec<DirChange> = dirs.into_values().collect();
            txn.put(self.keys.change(*change_seq, owner), encode(&changes));
            last_change = Some(*change_seq);
        }
        if last_change.is_some() {
            txn.put(self.keys.single(CHANGE_SEQ), encode(&*change_seq));
        }
        self.next_id.store(ctx.next_id, Ordering::SeqCst);
        let mutations = Arc::new(txn.into_batch());
        inflight.lock().push(seq, mutations.clone());
        let entry = BatchEntry {
            mutations,
            results: Arc::new(results),
            id_high_water: ctx.next_id - 1,
            trace: None,
        };
        Some(Evaluated {
            entry,
            batch: kept,
            reaps,
            waits,
            last_change,
            dirty,
            fed: ctx.fed,
        })
    }

    async fn propose(
        &self,
        seq: u64,
        batch: Vec<Pending>,
        inflight: &Arc<Mutex<InFlight>>,
        permit: tokio::sync::OwnedSemaphorePermit,
        change_seq: &mut u64,
    ) {
        // In the trace of the batch's first request, linked from the others' (its ops come
        // from many requests): evaluation, the raft commit and the answers.
        let span = batch_span(self.keys.group, &batch);
        let evaluated = span.in_scope(|| self.evaluate(seq, batch, inflight, change_seq));
        let Some(Evaluated {
            mut entry,
            batch,
            reaps,
            waits,
            last_change,
            dirty,
            fed,
        }) = evaluated
        else {
            return;
        };
        // From the proposal until the entry is applied here (a majority has it on disk).
        let commit = tracing::debug_span!(parent: &span, "raft.commit", group = self.keys.group);
        entry.trace = commit.in_scope(saker_rpc::trace_context::current);
        let started = std::time::Instant::now();
        let committed = self.engine.propose(entry).instrument(commit.clone()).await;
        let inflight = inflight.clone();
        let change_log = self.changes.clone();
        let sync = self.parent_updates == ParentUpdates::Sync;
        let feed_clock = self.feed_clock.clone();
        tokio::spawn(async move {
            let outcome = committed.instrument(commit).await;
            if outcome.is_ok() {
                metrics::RAFT_COMMIT.observe(started.elapsed().as_secs_f64());
                if fed {
                    feed_clock.bump();
                }
            }
            inflight.lock().remove(seq);
            drop(permit);
            match outcome {
                Ok(results) => {
                    // Ops that changed no other group's directory are answered at once: an
                    // `ApplyChanges` must never wait for this group's own pushes, or two
                    // groups pushing to each other would wait on each other. The others wait
                    // for the push (sync) or the dirty marks (async).
                    let mut later = Vec::new();
                    for (((p, result), reap), wait) in
                        batch.into_iter().zip(results).zip(reaps).zip(waits)
                    {
                        if wait {
                            later.push((p, result, reap));
                        } else {
                            let _ = p.reply.send(Reply::Done { result, reap });
                        }
                    }
                    if let Some(upto) = last_change {
                        change_log.written(upto);
                        if sync {
                            // The owners have the changes before anyone hears back.
                            if let Err(e) = change_log.push_upto(upto).await {
                                tracing::warn!(error = %e, "parent-directory changes not pushed yet");
                            }
                        } else {
                            // The owners know the directories are dirty before anyone hears
                            // back; the records follow shortly. An owner that did not take
                            // its mark gets the records now instead (sync fallback).
                            if change_log.mark_dirty(&dirty, upto).await.is_err() {
                                if let Err(e) = change_log.push_upto(upto).await {
                                    tracing::warn!(error = %e, "parent-directory changes neither marked nor pushed");
                                }
                            }
                            change_log.push_soon();
                        }
                    }
                    for (p, result, reap) in later {
                        let _ = p.reply.send(Reply::Done { result, reap });
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "raft write failed; batch rejected");
                    for p in batch {
                        let _ = p.reply.send(Reply::Done {
                            result: Err(MetaError::Unavailable(e.clone())),
                            reap: None,
                        });
                    }
                }
            }
                }.instrument(span));
    }

    /// Evaluates one op; `Err` asks the MNode to retry it (nothing was written).
    fn eval(
        &self,
        txn: &mut Txn<'_>,
        ctx: &mut Ctx<'_>,
        p: &Pending,
    ) -> Result<Result<MetaResponse, MetaError>, Retry> {
        let dedupe = p.tag.client != 0;
        let dkey = self.keys.dedupe(p.tag.client, p.tag.seq);
        if dedupe {
            match txn.get(&dkey) {
                Ok(Some(prev)) => {
                    return Ok(
                        decode(&prev).unwrap_or_else(|e| Err(MetaError::Internal(e.to_string())))
                    );
                }
                Ok(None) => {}
                Err(e) => return Ok(Err(crate::tree::internal(e))),
            }
        }
        // After the block was set, every write to the path waits (the block drains what was
        // evaluated before it).
        let written = p.req.written_paths();
        if let Some(path) = self.frozen.blocked(&written) {
            return Err(Retry::Blocked(path));
        }
        if let Some(name) = self.frozen.blocked_name(&written) {
            return Err(Retry::NameBlocked(name));
        }
        let sp = txn.savepoint();
        let ids_before = ctx.next_id;
        let result = apply_write(txn, ctx, &p.req);
        let retry = ctx.ns.take_retry();
        if result.is_err() || retry.is_some() {
            txn.rollback(sp);
            ctx.next_id = ids_before;
            ctx.changes.clear();
            ctx.reap = None;
        }
        if let Some(retry) = retry {
            return Err(retry);
        }
        crate::ops::abandon(txn, ctx, &p.req, &result);
        // A write refused for settings that changed wrote nothing: its sender decides it
        // anew and may resend it with the same tag.
        let refused = matches!(result, Err(MetaError::SettingsChanged { .. }));
        if dedupe && !refused {
            txn.put(dkey, encode(&result));
            if p.tag.seq > DEDUPE_WINDOW {
                self.trim_dedupe(txn, p.tag.client, p.tag.seq - DEDUPE_WINDOW);
            }
        }
        Ok(result)
    }

    /// Deletes `client`'s dedupe entries with a seq up to `upto`. A client numbers all its
    /// requests with one counter, so the seqs one group sees from it are sparse (the others
    /// went to other groups, or were reads): deleting only the entry exactly a window behind
    /// would keep most of them forever. The scan starts where the last one stopped, past the
    /// deleted entries.
    fn trim_dedupe(&self, txn: &mut Txn<'_>, client: u128, upto: u64) {
        let mut trimmed = self.dedupe_trimmed.lock();
        let from = trimmed.get(&client).copied().unwrap_or(0);
        // One scan per DEDUPE_TRIM_BATCH seqs of the client, not one per write.
        if upto < from.saturating_add(DEDUPE_TRIM_BATCH as u64) {
            return;
        }
        let start = self.keys.dedupe(client, from);
        let end = self.keys.dedupe(client, upto.saturating_add(1));
        let Ok(old) = txn.scan(&start, &end, DEDUPE_TRIM_BATCH) else {
            // Left for a later write.
            return;
        };
        let next = if old.len() < DEDUPE_TRIM_BATCH {
            upto.saturating_add(1)
        } else {
            old.last()
                .and_then(|(k, _)| k.get(k.len() - 8..))
                .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")) + 1)
                .unwrap_or(from)
        };
        for (k, _) in old {
            txn.delete(k);
        }
        trimmed.insert(client, next);
    }
}

/// The span of one batch: a child of its first op's request span, with links to the others'
/// (a link is the OpenTelemetry way to show work done for many traces at once).
fn batch_span(group: GroupId, batch: &[Pending]) -> tracing::Span {
    let Some(first) = batch.first() else {
        return tracing::Span::none();
    };
    let span = tracing::debug_span!(parent: &first.span, "mnode.batch", group, size = batch.len());
    if !span.is_disabled() {
        for p in &batch[1..] {
            span.follows_from(&p.span);
        }
    }
    span
}
