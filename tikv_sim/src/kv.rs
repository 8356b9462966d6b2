//! The TiKV service: the transactional RPCs over [`crate::mvcc`], each checked against the
//! region its context names (a stale epoch or a key outside the region is a region error,
//! which sends the client back to PD, as with a real TiKV).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::cluster::{Cluster, Region};
use crate::mvcc::{self, KeyError, Lock, Mutation, Op, TxnStatus};
use crate::pd::meta_region;
use crate::proto::{errorpb, kvrpcpb, metapb, tikvpb};

pub struct Kv {
    pub cluster: Arc<Cluster>,
}

type RegionResult = Result<Region, Box<errorpb::Error>>;

impl Kv {
    /// The region `ctx` names, if its epoch is current and it holds every key of `keys`.
    /// Also where injected faults strike.
    fn region<'a>(
        &self,
        ctx: &Option<kvrpcpb::Context>,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> RegionResult {
        let ctx = ctx.clone().unwrap_or_default();
        let Some(region) = self.cluster.region_by_id(ctx.region_id) else {
            return Err(Box::new(errorpb::Error {
                message: format!("region {} not found", ctx.region_id),
                region_not_found: Some(errorpb::RegionNotFound {
                    region_id: ctx.region_id,
                }),
                ..Default::default()
            }));
        };
        let version = ctx.region_epoch.map(|e| e.version).unwrap_or_default();
        if version != region.version {
            return Err(Box::new(self.epoch_not_match(&region)));
        }
        for key in keys {
            if !region.contains(key) {
                return Err(Box::new(errorpb::Error {
                    message: "key not in region".into(),
                    key_not_in_region: Some(errorpb::KeyNotInRegion {
                        key: key.to_vec(),
                        region_id: region.id,
                        start_key: region.start.clone(),
                        end_key: region.end.clone(),
                    }),
                    ..Default::default()
                }));
            }
        }
        if self.cluster.inject_error() {
            // A leader election in progress: the client reloads the region and retries.
            return Err(Box::new(errorpb::Error {
                message: "injected: no leader".into(),
                not_leader: Some(errorpb::NotLeader {
                    region_id: region.id,
                    leader: None,
                }),
                ..Default::default()
            }));
        }
        Ok(region)
    }

    fn epoch_not_match(&self, region: &Region) -> errorpb::Error {
        let current: Vec<metapb::Region> = self
            .cluster
            .regions()
            .iter()
            .filter(|r| {
                (region.end.is_empty() || r.start < region.end)
                    && (r.end.is_empty() || r.end > region.start)
            })
            .map(|r| meta_region(r).0)
            .collect();
        errorpb::Error {
            message: format!("epoch of region {} is stale", region.id),
            epoch_not_match: Some(errorpb::EpochNotMatch {
                current_regions: current,
            }),
            ..Default::default()
        }
    }

    /// After a write: splits what outgrew the configured size.
    fn after_write(&self) {
        self.cluster.split_full();
    }
}

fn op_of(op: i32) -> Result<Op, Status> {
    Ok(match kvrpcpb::Op::try_from(op) {
        Ok(kvrpcpb::Op::Put) => Op::Put,
        Ok(kvrpcpb::Op::Del) => Op::Del,
        Ok(kvrpcpb::Op::Lock) => Op::Lock,
        Ok(kvrpcpb::Op::Insert) => Op::Insert,
        Ok(kvrpcpb::Op::CheckNotExists) => Op::CheckNotExists,
        _ => return Err(Status::unimplemented(format!("mutation op {op}"))),
    })
}

fn lock_type(op: Op) -> kvrpcpb::Op {
    match op {
        Op::Put | Op::Insert => kvrpcpb::Op::Put,
        Op::Del => kvrpcpb::Op::Del,
        Op::Lock | Op::CheckNotExists => kvrpcpb::Op::Lock,
    }
}

fn lock_info(key: &[u8], lock: &Lock) -> kvrpcpb::LockInfo {
    kvrpcpb::LockInfo {
        primary_lock: lock.primary.clone(),
        lock_version: lock.start_ts,
        key: key.to_vec(),
        lock_ttl: lock.ttl,
        txn_size: lock.txn_size,
        lock_type: lock_type(lock.op) as i32,
        use_async_commit: lock.use_async_commit,
        min_commit_ts: lock.min_commit_ts,
        secondaries: lock.secondaries.clone(),
        ..Default::default()
    }
}

fn key_error(e: KeyError) -> kvrpcpb::KeyError {
    match e {
        KeyError::Locked { key, lock } => kvrpcpb::KeyError {
            locked: Some(lock_info(&key, &lock)),
            ..Default::default()
        },
        KeyError::Conflict {
            key,
            start_ts,
            conflict_start_ts,
            conflict_commit_ts,
            primary,
        } => kvrpcpb::KeyError {
            conflict: Some(kvrpcpb::WriteConflict {
                start_ts,
                conflict_ts: conflict_start_ts,
                key,
                primary,
                conflict_commit_ts,
                reason: kvrpcpb::write_conflict::Reason::Optimistic as i32,
            }),
            ..Default::default()
        },
        KeyError::AlreadyExist { key } => kvrpcpb::KeyError {
            already_exist: Some(kvrpcpb::AlreadyExist { key }),
            ..Default::default()
        },
        KeyError::Abort(message) => kvrpcpb::KeyError {
            abort: message,
            ..Default::default()
        },
        KeyError::TxnLockNotFound { key, start_ts } => kvrpcpb::KeyError {
            retryable: format!(
                "TxnLockNotFound: txn {start_ts} has no lock on key {key:?}; it was rolled back"
            ),
            ..Default::default()
        },
        KeyError::CommitTsExpired {
            key,
            start_ts,
            commit_ts,
            min_commit_ts,
        } => kvrpcpb::KeyError {
            commit_ts_expired: Some(kvrpcpb::CommitTsExpired {
                start_ts,
                attempted_commit_ts: commit_ts,
                key,
                min_commit_ts,
            }),
            ..Default::default()
        },
        KeyError::TxnNotFound { primary, start_ts } => kvrpcpb::KeyError {
            txn_not_found: Some(kvrpcpb::TxnNotFound {
                start_ts,
                primary_key: primary,
            }),
            ..Default::default()
        },
    }
}

fn resolved(ctx: &Option<kvrpcpb::Context>) -> Vec<u64> {
    ctx.as_ref()
        .map(|c| {
            let mut v = c.resolved_locks.clone();
            v.extend(&c.committed_locks);
            v
        })
        .unwrap_or_default()
}

/// Answers `$resp` with only its region error set when the region check fails.
macro_rules! region_or_return {
    ($self:ident, $ctx:expr, $keys:expr, $resp:ty) => {
        match $self.region($ctx, $keys) {
            Ok(r) => r,
            Err(e) => {
                return Ok(Response::new(<$resp>::default_with_region_error(*e)));
            }
        }
    };
}

/// Responses that carry a region error.
trait RegionErrorResponse: Default {
    fn set_region_error(&mut self, e: errorpb::Error);
    fn default_with_region_error(e: errorpb::Error) -> Self {
        let mut r = Self::default();
        r.set_region_error(e);
        r
    }
}

macro_rules! region_error_responses {
    ($($t:ty),*) => {$(
        impl RegionErrorResponse for $t {
            fn set_region_error(&mut self, e: errorpb::Error) {
                self.region_error = Some(e);
            }
        }
    )*};
}

region_error_responses!(
    kvrpcpb::GetResponse,
    kvrpcpb::ScanResponse,
    kvrpcpb::BatchGetResponse,
    kvrpcpb::PrewriteResponse,
    kvrpcpb::CommitResponse,
    kvrpcpb::BatchRollbackResponse,
    kvrpcpb::CleanupResponse,
    kvrpcpb::CheckTxnStatusResponse,
    kvrpcpb::ResolveLockResponse,
    kvrpcpb::ScanLockResponse,
    kvrpcpb::TxnHeartBeatResponse,
    kvrpcpb::CheckSecondaryLocksResponse
);

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl tikvpb::tikv_server::Tikv for Kv {
    async fn kv_get(&self, request: Request<kvrpcpb::GetRequest>) -> Reply<kvrpcpb::GetResponse> {
        let req = request.into_inner();
        region_or_return!(
            self,
            &req.context,
            [req.key.as_slice()],
            kvrpcpb::GetResponse
        );
        let got = self
            .cluster
            .mvcc
            .lock()
            .get(&req.key, req.version, &resolved(&req.context));
        Ok(Response::new(match got {
            Ok(Some(value)) => kvrpcpb::GetResponse {
                value,
                ..Default::default()
            },
            Ok(None) => kvrpcpb::GetResponse {
                not_found: true,
                ..Default::default()
            },
            Err(e) => kvrpcpb::GetResponse {
                error: Some(key_error(e)),
                ..Default::default()
            },
        }))
    }

    async fn kv_batch_get(
        &self,
        request: Request<kvrpcpb::BatchGetRequest>,
    ) -> Reply<kvrpcpb::BatchGetResponse> {
        let req = request.into_inner();
        let keys = req.keys.iter().map(Vec::as_slice);
        region_or_return!(self, &req.context, keys, kvrpcpb::BatchGetResponse);
        let resolved = resolved(&req.context);
        let mvcc = self.cluster.mvcc.lock();
        let mut pairs = Vec::new();
        for key in req.keys {
            match mvcc.get(&key, req.version, &resolved) {
                Ok(Some(value)) => pairs.push(kvrpcpb::KvPair {
                    key,
                    value,
                    error: None,
                }),
                Ok(None) => {}
                Err(e) => pairs.push(kvrpcpb::KvPair {
                    key,
                    value: Vec::new(),
                    error: Some(key_error(e)),
                }),
            }
        }
        Ok(Response::new(kvrpcpb::BatchGetResponse {
            pairs,
            ..Default::default()
        }))
    }

    async fn kv_scan(
        &self,
        request: Request<kvrpcpb::ScanRequest>,
    ) -> Reply<kvrpcpb::ScanResponse> {
        let req = request.into_inner();
        // Reversed, `start_key` is the (exclusive) upper bound and `end_key` the lower one.
        let (lo, hi) = if req.reverse {
            (req.end_key.clone(), req.start_key.clone())
        } else {
            (req.start_key.clone(), req.end_key.clone())
        };
        let probe: Vec<&[u8]> = if req.reverse {
            vec![]
        } else {
            vec![lo.as_slice()]
        };
        let region = region_or_return!(self, &req.context, probe, kvrpcpb::ScanResponse);
        // A scan stays inside its region.
        let lo = lo.max(region.start.clone());
        let hi = match (hi.is_empty(), region.end.is_empty()) {
            (true, _) => region.end.clone(),
            (false, true) => hi,
            (false, false) => hi.min(region.end.clone()),
        };
        let limit = if req.limit == 0 {
            usize::MAX
        } else {
            req.limit as usize
        };
        let found = self.cluster.mvcc.lock().scan(
            &lo,
            &hi,
            limit,
            req.version,
            req.reverse,
            &resolved(&req.context),
        );
        let pairs = found
            .into_iter()
            .map(|p| match p {
                Ok((key, value)) => kvrpcpb::KvPair {
                    key,
                    value: if req.key_only { Vec::new() } else { value },
                    error: None,
                },
                Err(e) => {
                    let key = match &e {
                        KeyError::Locked { key, .. } => key.clone(),
                        _ => Vec::new(),
                    };
                    kvrpcpb::KvPair {
                        key,
                        value: Vec::new(),
                        error: Some(key_error(e)),
                    }
                }
            })
            .collect();
        Ok(Response::new(kvrpcpb::ScanResponse {
            pairs,
            ..Default::default()
        }))
    }

    async fn kv_prewrite(
        &self,
        request: Request<kvrpcpb::PrewriteRequest>,
    ) -> Reply<kvrpcpb::PrewriteResponse> {
        let req = request.into_inner();
        let keys = req.mutations.iter().map(|m| m.key.as_slice());
        region_or_return!(self, &req.context, keys, kvrpcpb::PrewriteResponse);
        let mut mutations = Vec::with_capacity(req.mutations.len());
        for m in req.mutations {
            mutations.push(Mutation {
                op: op_of(m.op)?,
                key: m.key,
                value: m.value,
            });
        }
        // Async commit: the locks promise a commit ts above every read ts served so far.
        let async_commit = req.use_async_commit.then(|| {
            let min = req.min_commit_ts.max(self.cluster.timestamps(1));
            (min, req.secondaries.clone())
        });
        let errors = self.cluster.mvcc.lock().prewrite(
            &mutations,
            &req.primary_lock,
            req.start_version,
            req.lock_ttl,
            req.txn_size,
            async_commit.clone(),
        );
        let ok = errors.is_empty();
        self.after_write();
        Ok(Response::new(kvrpcpb::PrewriteResponse {
            errors: errors.into_iter().map(key_error).collect(),
            // Async commit: the commit ts the locks promise (one-phase commit is not offered).
            min_commit_ts: async_commit
                .filter(|_| ok)
                .map(|(m, _)| m)
                .unwrap_or_default(),
            one_pc_commit_ts: 0,
            ..Default::default()
        }))
    }

    async fn kv_commit(
        &self,
        request: Request<kvrpcpb::CommitRequest>,
    ) -> Reply<kvrpcpb::CommitResponse> {
        let req = request.into_inner();
        let keys = req.keys.iter().map(Vec::as_slice);
        region_or_return!(self, &req.context, keys, kvrpcpb::CommitResponse);
        let done =
            self.cluster
                .mvcc
                .lock()
                .commit(&req.keys, req.start_version, req.commit_version);
        self.after_write();
        Ok(Response::new(match done {
            Ok(()) => kvrpcpb::CommitResponse {
                commit_version: req.commit_version,
                ..Default::default()
            },
            Err(e) => kvrpcpb::CommitResponse {
                error: Some(key_error(e)),
                ..Default::default()
            },
        }))
    }

    async fn kv_batch_rollback(
        &self,
        request: Request<kvrpcpb::BatchRollbackRequest>,
    ) -> Reply<kvrpcpb::BatchRollbackResponse> {
        let req = request.into_inner();
        let keys = req.keys.iter().map(Vec::as_slice);
        region_or_return!(self, &req.context, keys, kvrpcpb::BatchRollbackResponse);
        let done = self
            .cluster
            .mvcc
            .lock()
            .rollback(&req.keys, req.start_version);
        Ok(Response::new(kvrpcpb::BatchRollbackResponse {
            error: done.err().map(key_error),
            ..Default::default()
        }))
    }

    async fn kv_cleanup(
        &self,
        request: Request<kvrpcpb::CleanupRequest>,
    ) -> Reply<kvrpcpb::CleanupResponse> {
        let req = request.into_inner();
        region_or_return!(
            self,
            &req.context,
            [req.key.as_slice()],
            kvrpcpb::CleanupResponse
        );
        let status = self.cluster.mvcc.lock().check_txn_status(
            &req.key,
            req.start_version,
            u64::MAX,
            req.current_ts,
        );
        Ok(Response::new(match status {
            Ok((TxnStatus::Committed { commit_ts }, _)) => kvrpcpb::CleanupResponse {
                commit_version: commit_ts,
                ..Default::default()
            },
            Ok((TxnStatus::RolledBack, _)) => kvrpcpb::CleanupResponse::default(),
            Ok((TxnStatus::Locked { lock, .. }, _)) => kvrpcpb::CleanupResponse {
                error: Some(key_error(KeyError::Locked {
                    key: req.key.clone(),
                    lock: Box::new(lock),
                })),
                ..Default::default()
            },
            Err(e) => kvrpcpb::CleanupResponse {
                error: Some(key_error(e)),
                ..Default::default()
            },
        }))
    }

    async fn kv_check_txn_status(
        &self,
        request: Request<kvrpcpb::CheckTxnStatusRequest>,
    ) -> Reply<kvrpcpb::CheckTxnStatusResponse> {
        let req = request.into_inner();
        let key = [req.primary_key.as_slice()];
        region_or_return!(self, &req.context, key, kvrpcpb::CheckTxnStatusResponse);
        let status = self.cluster.mvcc.lock().check_txn_status(
            &req.primary_key,
            req.lock_ts,
            req.caller_start_ts,
            req.current_ts,
        );
        let action = |a: mvcc::Action| match a {
            mvcc::Action::NoAction => kvrpcpb::Action::NoAction,
            mvcc::Action::TtlExpireRollback => kvrpcpb::Action::TtlExpireRollback,
            mvcc::Action::LockNotExistRollback => kvrpcpb::Action::LockNotExistRollback,
            mvcc::Action::MinCommitTsPushed => kvrpcpb::Action::MinCommitTsPushed,
        } as i32;
        Ok(Response::new(match status {
            // (A live lock must report a ttl, or the client takes it for a commit record.)
            Ok((TxnStatus::Locked { ttl, lock }, a)) => kvrpcpb::CheckTxnStatusResponse {
                lock_ttl: ttl.max(1),
                action: action(a),
                lock_info: Some(lock_info(&req.primary_key, &lock)),
                ..Default::default()
            },
            Ok((TxnStatus::Committed { commit_ts }, a)) => kvrpcpb::CheckTxnStatusResponse {
                commit_version: commit_ts,
                action: action(a),
                ..Default::default()
            },
            Ok((TxnStatus::RolledBack, a)) => kvrpcpb::CheckTxnStatusResponse {
                action: action(a),
                ..Default::default()
            },
            Err(e) => kvrpcpb::CheckTxnStatusResponse {
                error: Some(key_error(e)),
                ..Default::default()
            },
        }))
    }

    async fn kv_resolve_lock(
        &self,
        request: Request<kvrpcpb::ResolveLockRequest>,
    ) -> Reply<kvrpcpb::ResolveLockResponse> {
        let req = request.into_inner();
        let keys = req.keys.iter().map(Vec::as_slice);
        let region = region_or_return!(self, &req.context, keys, kvrpcpb::ResolveLockResponse);
        let mut txns: Vec<(u64, u64)> = req.txn_infos.iter().map(|t| (t.txn, t.status)).collect();
        if txns.is_empty() {
            txns.push((req.start_version, req.commit_version));
        }
        let mut mvcc = self.cluster.mvcc.lock();
        let mut error = None;
        for (start, commit) in txns {
            if let Err(e) = mvcc.resolve(start, commit, &req.keys, &region.start, &region.end) {
                error = Some(key_error(e));
                break;
            }
        }
        Ok(Response::new(kvrpcpb::ResolveLockResponse {
            error,
            ..Default::default()
        }))
    }

    async fn kv_scan_lock(
        &self,
        request: Request<kvrpcpb::ScanLockRequest>,
    ) -> Reply<kvrpcpb::ScanLockResponse> {
        let req = request.into_inner();
        self.cluster.scan_lock_calls.fetch_add(1, Ordering::Relaxed);
        let region = region_or_return!(
            self,
            &req.context,
            [req.start_key.as_slice()],
            kvrpcpb::ScanLockResponse
        );
        let end = if req.end_key.is_empty() || (!region.end.is_empty() && req.end_key > region.end)
        {
            region.end.clone()
        } else {
            req.end_key.clone()
        };
        let locks = self
            .cluster
            .mvcc
            .lock()
            .scan_locks(&req.start_key, &end, req.max_version, req.limit as usize)
            .into_iter()
            .map(|(k, l)| lock_info(&k, &l))
            .collect();
        Ok(Response::new(kvrpcpb::ScanLockResponse {
            locks,
            ..Default::default()
        }))
    }

    async fn kv_txn_heart_beat(
        &self,
        request: Request<kvrpcpb::TxnHeartBeatRequest>,
    ) -> Reply<kvrpcpb::TxnHeartBeatResponse> {
        let req = request.into_inner();
        let key = [req.primary_lock.as_slice()];
        region_or_return!(self, &req.context, key, kvrpcpb::TxnHeartBeatResponse);
        let done = self.cluster.mvcc.lock().heart_beat(
            &req.primary_lock,
            req.start_version,
            req.advise_lock_ttl,
        );
        Ok(Response::new(match done {
            Ok(ttl) => kvrpcpb::TxnHeartBeatResponse {
                lock_ttl: ttl,
                ..Default::default()
            },
            Err(e) => kvrpcpb::TxnHeartBeatResponse {
                error: Some(key_error(e)),
                ..Default::default()
            },
        }))
    }

    async fn kv_check_secondary_locks(
        &self,
        request: Request<kvrpcpb::CheckSecondaryLocksRequest>,
    ) -> Reply<kvrpcpb::CheckSecondaryLocksResponse> {
        let req = request.into_inner();
        let keys = req.keys.iter().map(Vec::as_slice);
        region_or_return!(
            self,
            &req.context,
            keys,
            kvrpcpb::CheckSecondaryLocksResponse
        );
        let found = self
            .cluster
            .mvcc
            .lock()
            .check_secondaries(&req.keys, req.start_version);
        Ok(Response::new(match found {
            Ok((locks, commit_ts)) => kvrpcpb::CheckSecondaryLocksResponse {
                locks: locks.iter().map(|(k, l)| lock_info(k, l)).collect(),
                commit_ts,
                ..Default::default()
            },
            Err(e) => kvrpcpb::CheckSecondaryLocksResponse {
                error: Some(key_error(e)),
                ..Default::default()
            },
        }))
    }
}
