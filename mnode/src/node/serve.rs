//! Serving a request for a name this group owns: reads from the applied state, writes
//! through the executor, and the retries either asks for (lookups, freezes, blocks, moves,
//! shared inodes, reaps).

use saker_rpc::{Attr, ClientTag, MetaError, MetaRequest, MetaResponse, RemoveCond};
use tokio::sync::oneshot;

use super::settings::{commit_of, with_receipt};
use super::{Mnode, MAX_ATTEMPTS};
use crate::dirty::Need;
use crate::executor::{ParentUpdates, Pending, Reply};
use crate::metrics;
use crate::read::apply_read;
use crate::tree::{Absence, Resolver, Retry, StoreView};

impl Mnode {
    pub(super) fn resolver(&self, writing: bool) -> Resolver<'_> {
        Resolver::new(
            &self.keys,
            self.router.get(),
            &self.replica,
            &self.frozen,
            writing,
        )
    }

    /// Serves a read from the applied state; `Err` asks for a retry (see [`Retry`]).
    pub(super) fn read(
        &self,
        req: &MetaRequest,
        absent: Vec<(u64, String, Absence)>,
    ) -> Result<Result<MetaResponse, MetaError>, Retry> {
        let r = self.resolver(false);
        r.set_absent(absent);
        let result = apply_read(&StoreView(self.store.as_ref()), &r, req);
        match r.take_retry() {
            Some(retry) => Err(retry),
            None => Ok(result),
        }
    }

    /// A request for a name this group owns (or a group-wide one); a commit's answer gets
    /// its receipt, a checked `Access`'s its grants.
    pub(super) async fn serve(
        &self,
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        if super::grants::wanted(&req) {
            return Ok(super::grants::add(self.serve_decided(tag, req).await?));
        }
        match commit_of(&req) {
            Some(id) => Ok(with_receipt(id, self.serve_decided(tag, req).await?)),
            None => self.serve_decided(tag, req).await,
        }
    }

    async fn serve_decided(
        &self,
        tag: ClientTag,
        req: MetaRequest,
    ) -> Result<MetaResponse, MetaError> {
        let path = match &req {
            // A client's listing resolves the directory's path.
            MetaRequest::Scan {
                reader: Some(r), ..
            } => r.entry_path(),
            _ => req.path().map(<[String]>::to_vec).unwrap_or_default(),
        };
        // A rename resolves its source path too.
        let also = match &req {
            MetaRequest::Rename { from, .. } | MetaRequest::RenameIn { from, .. } => {
                Some(from.clone())
            }
            _ => None,
        };
        let mut reaped = false;
        let mut fetched: Vec<Attr> = Vec::new();
        for _ in 0..MAX_ATTEMPTS {
            let mut absent = self.warm(&path).await?;
            if let Some(from) = &also {
                absent.extend(self.warm(from).await?);
            }
            if !req.is_write() {
                // Reads of a name whose inodes are moving wait for the move (writes wait in
                // the executor). A shared inode is addressed by its id and does not move.
                let by_id = matches!(req, MetaRequest::Shared { .. });
                if let Some(name) = self.frozen.blocked_name(&[&path]).filter(|_| !by_id) {
                    metrics::RETRIES.with_label_values(&["migrating"]).inc();
                    self.frozen.wait_name(&name).await?;
                    // The name may live elsewhere now.
                    if let Some(g) = self.misdirected(&req).await? {
                        return self.forward(g, tag, req).await;
                    }
                    continue;
                }
                match self.read(&req, absent) {
                    Err(Retry::Shared { home, id }) => {
                        return self.forward_shared(home, tag, id, req).await;
                    }
                    Err(_) => {
                        metrics::RETRIES.with_label_values(&["lookup"]).inc();
                        continue;
                    }
                    // A directory, or a file with hard links: the removals of its other
                    // names travel as change-log records too. (A file with one name has
                    // none pending that matters: one more removal would leave no name to
                    // reach it by.)
                    Ok(Ok(MetaResponse::Object(v)))
                        if (v.attr.is_dir()
                            || v.attr.nlink > 1
                            || matches!(req, MetaRequest::Shared { .. }))
                            && self.parent_updates == ParentUpdates::Async
                            && self.dirty.lock().check(v.attr.id) != Need::Clean =>
                    {
                        // Aggregate: the contributors push what they owe, then read again.
                        self.aggregate(v.attr.id).await;
                        let stale = MetaResponse::Object(v);
                        return match self.read(&req, Vec::new()) {
                            Ok(fresh) => fresh.or(Ok(stale)),
                            Err(_) => Ok(stale),
                        };
                    }
                    Ok(Ok(MetaResponse::Entries(entries)))
                        if entries.iter().any(|e| self.remote_link(&e.attr).is_some()) =>
                    {
                        return self.resolve_links(entries).await.map(MetaResponse::Entries);
                    }
                    Ok(other) => return other,
                }
            }
            let (reply, rx) = oneshot::channel();
            let (early, early_rx) = matches!(req, MetaRequest::Create { defer: true, .. })
                .then(oneshot::channel)
                .unzip();
            let pending = Pending {
                tag,
                req: req.clone(),
                reply,
                early,
                absent,
                reaped,
                fetched: fetched.clone(),
                span: tracing::Span::current(),
            };
            if self.queue.send(pending).is_err() {
                return Err(MetaError::Unavailable("executor stopped".into()));
            }
            // A deferred write is answered as evaluated; its ticket is final when the write
            // is. No early answer (the sender dropped) means the op is to be retried.
            if let Some(early_rx) = early_rx {
                if let Ok(early) = early_rx.await {
                    let resp = early?;
                    let ticket = self.tickets.open(rx);
                    return Ok(MetaResponse::Deferred {
                        resp: Box::new(resp),
                        group: self.keys.group,
                        ticket,
                    });
                }
            }
            let Ok(reply) = rx.await else {
                return Err(MetaError::Unavailable("executor stopped".into()));
            };
            match reply {
                Reply::Done { result, reap } => {
                    if let Some(dir) = reap {
                        self.reap(dir).await;
                    }
                    return result;
                }
                Reply::Retry(Retry::Lookup) => {
                    metrics::RETRIES.with_label_values(&["lookup"]).inc();
                }
                Reply::Retry(Retry::DirAttr) => {
                    return self
                        .coordinator()?
                        .set_dir_attr(req)
                        .await
                        .map(MetaResponse::Attr);
                }
                Reply::Retry(Retry::Frozen(id)) => {
                    metrics::RETRIES.with_label_values(&["frozen"]).inc();
                    self.frozen.wait(id).await?;
                }
                Reply::Retry(Retry::Blocked(path)) => {
                    metrics::RETRIES.with_label_values(&["blocked"]).inc();
                    self.frozen.wait_path(&path).await?;
                }
                Reply::Retry(Retry::NameBlocked(name)) => {
                    metrics::RETRIES.with_label_values(&["migrating"]).inc();
                    self.frozen.wait_name(&name).await?;
                    // The name may live elsewhere now.
                    if let Some(g) = self.misdirected(&req).await? {
                        return self.forward(g, tag, req).await;
                    }
                }
                Reply::Retry(Retry::Shared { home, id }) => {
                    return self.forward_shared(home, tag, id, req).await;
                }
                Reply::Retry(Retry::SharedAttr { home, id }) => {
                    let attrs = self.shared_attrs(home, vec![id]).await?;
                    if attrs.is_empty() {
                        // Gone meanwhile (no link left): said with a count of 0.
                        let mut gone = crate::tree::root_attr();
                        gone.id = id;
                        gone.nlink = 0;
                        fetched.push(gone);
                    }
                    fetched.extend(attrs);
                }
                Reply::Retry(Retry::Reap(dir)) => {
                    metrics::RETRIES.with_label_values(&["reap"]).inc();
                    self.reap(dir).await;
                    reaped = true;
                }
            }
        }
        Err(MetaError::Unavailable(format!(
            "{} retried {MAX_ATTEMPTS} times",
            req.op_name()
        )))
    }

    /// Asks the coordinator to remove `dir` if it is an empty implicit directory; a failed reap
    /// is not an error.
    async fn reap(&self, dir: Vec<String>) {
        let Ok(coordinator) = self.coordinator() else {
            return;
        };
        match coordinator.remove_dir(dir, RemoveCond::ImplicitEmpty).await {
            Ok(()) | Err(MetaError::NotEmpty | MetaError::NotFound) => {}
            Err(e) => tracing::debug!(error = %e, "reap failed"),
        }
    }
}
