//! The group's [`MetaService`]: every request enters through `call`, which answers it here
//! (coordinator controls, group-wide requests), forwards it to the owning group, or serves it.

use std::time::Instant;

use async_trait::async_trait;
use saker_rpc::{
    access, ClientTag, CostKind, FeedRequest, MetaError, MetaRequest, MetaResponse, MetaService,
    RemoveCond, SettingsRequest, Want,
};

use super::holds::Hold;
use super::Mnode;
use crate::capacity;
use crate::keys::EXCEPTIONS;
use crate::metrics;

#[async_trait]
impl MetaService for Mnode {
    async fn call(&self, tag: ClientTag, mut req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let op = req.op_name();
        if let MetaRequest::RaftStatus = req {
            if self.leadership.retired() {
                return Err(self.leadership.refusal());
            }
            return Ok(MetaResponse::Replica(self.raft_status()));
        }
        self.ready(!req.is_write()).await?;
        req.validate()?;
        self.decide(&mut req).await?;
        crate::space::check(&req)?;
        if req.is_write() {
            if let Some(refusal) = self.engine.short_of_space(self.keys.group) {
                return Err(refusal);
            }
        }
        if let Some(limit) = self.ops_limit.as_ref().filter(|_| capacity::costs(&req)) {
            limit.take().await;
        }
        let result = match req {
            MetaRequest::Rmdir { path, cred } => {
                // The caller's permission to remove the entry, checked by the owner.
                let check = MetaRequest::Access {
                    path: path.clone(),
                    mask: access::DELETE,
                    cred,
                    want: Want::ATTR,
                };
                self.call(tag, check).await?;
                self.coordinator()?
                    .remove_dir(path, RemoveCond::Empty)
                    .await
                    .map(|()| MetaResponse::Done)
            }
            MetaRequest::SseKey {
                path,
                id,
                cred,
                fresh,
            } => self.sse_key(tag, path, id, cred, fresh).await,
            MetaRequest::CoordinatedRename {
                from,
                to,
                noreplace,
                cred,
                versioning,
            } => self
                .coordinator()?
                .rename(from, to, noreplace, cred, versioning)
                .await
                .map(MetaResponse::Attr),
            MetaRequest::CoordinatedLink {
                from,
                to,
                expect,
                cred,
            } => self
                .coordinator()?
                .link(from, to, expect, cred)
                .await
                .map(MetaResponse::Attr),
            MetaRequest::DeleteBucket { name } => self
                .coordinator()?
                .remove_dir(vec![name], RemoveCond::Bucket)
                .await
                .map(|()| MetaResponse::Done),
            req @ MetaRequest::Freeze { .. } => match self.misdirected(&req).await {
                Err(e) => Err(e),
                Ok(Some(g)) => self.forward(g, tag, req).await,
                Ok(None) => match req {
                    MetaRequest::Freeze { path, coord } => self.freeze(&path, coord).await,
                    _ => unreachable!("matched above"),
                },
            },
            MetaRequest::Unfreeze { dir, coord } => self
                .release_hold(coord, Hold::Dir(dir))
                .await
                .map(|()| MetaResponse::Done),
            MetaRequest::ThawAll { coord } => {
                let held = self.release_all_holds(coord).await?;
                if held > 0 {
                    tracing::info!(held, "released the holds a stopped coordinator left");
                }
                Ok(MetaResponse::Done)
            }
            req @ (MetaRequest::BlockPath { .. } | MetaRequest::UnblockPath { .. }) => {
                match self.misdirected(&req).await {
                    Err(e) => Err(e),
                    Ok(Some(g)) => self.forward(g, tag, req).await,
                    Ok(None) => match req {
                        MetaRequest::BlockPath { path, coord } => {
                            self.hold_and_drain(coord, Hold::Path(path)).await
                        }
                        MetaRequest::UnblockPath { path, coord } => self
                            .release_hold(coord, Hold::Path(path))
                            .await
                            .map(|()| MetaResponse::Done),
                        _ => unreachable!("matched above"),
                    },
                }
            }
            MetaRequest::Invalidate { pid, name, dir } => self.invalidate(pid, &name, dir).await,
            req @ MetaRequest::LookupDentry { .. } => {
                let start = Instant::now();
                let result = self.lookup_dentry(&req).await;
                let micros = start.elapsed().as_micros() as u64;
                self.load
                    .record(CostKind::LookupServed, 1, None, None, micros);
                result
            }
            MetaRequest::Counters => self.counters().map(MetaResponse::Counters),
            MetaRequest::SyncToDisk => {
                let store = self.store.clone();
                tokio::task::spawn_blocking(move || store.sync_to_disk())
                    .await
                    .map_err(|e| MetaError::Internal(e.to_string()))?
                    .map_err(|e| MetaError::Unavailable(format!("sync to disk failed: {e}")))?;
                Ok(MetaResponse::Done)
            }
            MetaRequest::PushChanges => self.push_changes().await.map(|()| MetaResponse::Done),
            MetaRequest::MarkDirty { source, dirs, seq } => {
                let n = dirs.len() as u64;
                self.load.record(CostKind::DirtyMark, n, None, None, 0);
                let mut dirty = self.dirty.lock();
                for d in dirs {
                    dirty.mark(d, source, seq);
                }
                self.dirty_gauge(&dirty);
                Ok(MetaResponse::Done)
            }
            MetaRequest::PendingDirs { owner } => {
                self.changes.pending_dirs(owner).map(MetaResponse::Dirs)
            }
            // Writes of the name evaluated before the block are applied first.
            MetaRequest::BlockName { name, coord } => {
                self.hold_and_drain(coord, Hold::Name(name)).await
            }
            MetaRequest::UnblockName { name, coord } => self
                .release_hold(coord, Hold::Name(name))
                .await
                .map(|()| MetaResponse::Done),
            MetaRequest::SetExceptions { table } => {
                if self.router.get().exceptions_version() < table.version() {
                    // Through raft, so every replica (and a later leader) routes by it.
                    let mut mutations = crate::store::WriteBatch::default();
                    mutations.put(self.keys.single(EXCEPTIONS), crate::records::encode(&table));
                    self.engine
                        .write_control(self.keys.group, mutations, || self.leadership.refusal())
                        .await?;
                    if self.router.install(&table) {
                        tracing::info!(version = table.version(), "exception table installed");
                    }
                }
                Ok(MetaResponse::Done)
            }
            MetaRequest::Exceptions => Ok(MetaResponse::Exceptions(
                self.router.get().exceptions().clone(),
            )),
            MetaRequest::MigrateName { name, table } => self.migrate_name(&name, &table).await,
            MetaRequest::JoinGroup { id, addr } => {
                crate::membership::admit(self.raft()?, &self.membership, id, &addr)
                    .await
                    .map(|()| MetaResponse::Done)
            }
            MetaRequest::Backup { id, offset, len } => self.backup(id, offset, len).await,
            MetaRequest::LeaveGroup { id } => {
                crate::membership::leave(self.raft()?, &self.membership, id)
                    .await
                    .map(|()| MetaResponse::Done)
            }
            MetaRequest::CoordPut { term, key, value } => {
                crate::coord_records::put(
                    &self.engine,
                    &self.keys,
                    &self.leadership,
                    term,
                    &key,
                    value,
                )
                .await
            }
            MetaRequest::CoordScan { prefix } => {
                crate::coord_records::scan(self.store.as_ref(), &self.keys, &prefix)
            }
            MetaRequest::BucketVersioning { bucket } => {
                crate::coord_records::bucket_versioning(self.store.as_ref(), &self.keys, &bucket)
            }
            MetaRequest::BucketSettings(SettingsRequest::Get { bucket }) => {
                self.bucket_writes(&bucket)
            }
            MetaRequest::Feed(FeedRequest::Read {
                bucket,
                after,
                limit,
            }) => crate::ops::feed::read(
                &crate::tree::StoreView(self.store.as_ref()),
                &self.keys,
                &bucket,
                after,
                limit,
            )
            .map(MetaResponse::Feed),
            MetaRequest::Feed(FeedRequest::Wait { seen, wait_ms }) => {
                let wait = std::time::Duration::from_millis(wait_ms.into());
                Ok(MetaResponse::FeedClock(
                    self.feed_clock.wait(seen, wait).await,
                ))
            }
            MetaRequest::NameStats { top } => self.name_stats(top as usize),
            MetaRequest::LoadStats { top } => Ok(MetaResponse::Load(self.load.last(top as usize))),
            MetaRequest::Committed { ticket } => {
                self.tickets.wait(ticket).await.map(|()| MetaResponse::Done)
            }
            MetaRequest::ApplyChanges { source, records } => {
                let n = records.len() as u64;
                self.load.record(CostKind::ChangeApply, n, None, None, 0);
                let upto = records.last().map(|(seq, _)| *seq);
                let result = self
                    .serve(tag, MetaRequest::ApplyChanges { source, records })
                    .await;
                if let (Ok(_), Some(upto)) = (&result, upto) {
                    // Marks of these records are void now.
                    let mut dirty = self.dirty.lock();
                    dirty.applied(source, upto);
                    self.dirty_gauge(&dirty);
                }
                result
            }
            MetaRequest::HostReplica { .. } | MetaRequest::DropReplica { .. } => Err(
                MetaError::Invalid(format!("{op} is for a node, not a group's replica")),
            ),
            // Addressed to the shared inode's home, not to the owner of the path it carries.
            req @ MetaRequest::Shared { .. } => self.serve(tag, req).await,
            req => match self.misdirected(&req).await {
                Err(e) => Err(e),
                Ok(Some(g)) => self.forward(g, tag, req).await,
                Ok(None) => {
                    let version = self.router.get().exceptions_version();
                    let retry = req.clone();
                    let start = Instant::now();
                    let mut result = self.serve(tag, req).await;
                    if let Some(path) = retry.path() {
                        let kind = if retry.is_write() {
                            CostKind::Write
                        } else {
                            CostKind::Read
                        };
                        let micros = start.elapsed().as_micros() as u64;
                        self.load.record_path(kind, path, micros);
                    }
                    // The name's inodes moved to another group while this request was on its
                    // way: follow them.
                    if matches!(
                        result,
                        Err(MetaError::NotFound | MetaError::MissingParent { .. })
                    ) && self.router.get().exceptions_version() != version
                    {
                        if let Ok(Some(g)) = self.misdirected(&retry).await {
                            result = self.forward(g, tag, retry).await;
                        }
                    }
                    result
                }
            },
        };
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::OPS.with_label_values(&[op, outcome]).inc();
        result
    }

    fn routing_version(&self) -> u64 {
        self.router.get().exceptions_version()
    }
}
