//! link(2) through the coordinator (SwitchFS §5.5 hard links, made crash-safe): the new name
//! and the file's link count usually live in different MNode groups, so the link is a logged
//! intent of three idempotent steps, finished after a crash.
//!
//! 1. Lock both paths (as a rename does), check the source is a file the caller reaches and
//!    the new name is free, and log the intent with a random token.
//! 2. `LinkSource` at the file's home counts one more name, once per token (the token stays
//!    with the file as a mark); the answer, the reference to store, is logged with the intent.
//! 3. `LinkTarget` stores the reference at the new name (a replay finding it there is
//!    success).
//! 4. `SettleLink` drops the mark, taking the count back if the name was not stored; then
//!    the intent goes.
//!
//! A crash between any two steps is resolved by replaying from the first unlogged outcome:
//! the count is never taken twice (the mark) nor left for a name that was not stored. One gap
//! remains: if the source name is removed between the crash and the replay, and the count was
//! taken but not logged, the replay cannot find the file again, and its count stays one too
//! high (the file is kept, never lost).

use saker_rpc::{Attr, Cred, InodeId, MetaError, MetaRequest, MetaResponse, Want};
use serde::{Deserialize, Serialize};

use crate::journal::Journal;
use crate::rename::{fail_point, transient};
use crate::rmdir::{untagged, NamespaceCoordinator};

/// A link between its steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkIntent {
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub cred: Option<Cred>,
    /// Counts the link once at the file's home, however often step 2 runs.
    pub token: u128,
    /// Step 2's answer, once logged: the reference the new name gets.
    pub reference: Option<Attr>,
}

/// Logged links (`link-<seq>.json`).
pub type LinkJournal = Journal<LinkIntent>;

/// File name prefix of logged links.
pub const LINKS: &str = "link";

impl NamespaceCoordinator {
    /// The link protocol (module docs).
    pub(crate) async fn link_protocol(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<InodeId>,
        cred: Option<Cred>,
    ) -> Result<Attr, MetaError> {
        if from.len() < 2 || to.len() < 2 {
            return Err(MetaError::NotPermitted);
        }
        let _held = self.locks.lock(&[&from, &to]).await;
        let source = self.checked(&from, 0, &cred, Want::ATTR).await?;
        if source.attr.is_dir() {
            return Err(MetaError::NotPermitted);
        }
        if expect.is_some_and(|id| id != source.attr.id) {
            return Err(MetaError::NotFound);
        }
        match self.checked(&to, 0, &None, Want::ATTR).await {
            Err(MetaError::NotFound) => {}
            Err(e) => return Err(e),
            Ok(_) => return Err(MetaError::Exists),
        }
        let token = loop {
            let t: u128 = rand::random();
            if t != 0 {
                break t;
            }
        };
        let intent = LinkIntent {
            from,
            to,
            cred,
            token,
            reference: None,
        };
        let seq = self.links.log(&intent)?;
        fail_point("link_logged");
        match self.finish_link(seq, intent).await {
            Err(e) if transient(&e) => {
                tracing::warn!(error = %e, "link left to the resolver");
                Err(e)
            }
            result => {
                self.links.done(seq);
                result
            }
        }
    }

    /// Steps 2 to 4 of a logged intent, skipping what its log says is done. A definite
    /// failure ends the link (after its count is settled); a transient one leaves it logged.
    async fn finish_link(&self, seq: u64, mut intent: LinkIntent) -> Result<Attr, MetaError> {
        let reference = match &intent.reference {
            Some(r) => r.clone(),
            None => {
                let count = MetaRequest::LinkSource {
                    path: intent.from.clone(),
                    cred: intent.cred.clone(),
                    token: intent.token,
                };
                let r = match self.call_owner(&intent.from, count).await? {
                    MetaResponse::Attr(a) => a,
                    other => {
                        return Err(MetaError::Internal(format!(
                            "LinkSource answered {other:?}"
                        )))
                    }
                };
                fail_point("link_counted_unlogged");
                intent.reference = Some(r.clone());
                self.links.rewrite(seq, &intent)?;
                fail_point("link_counted");
                r
            }
        };
        let home = reference.layout.shared_home().ok_or_else(|| {
            MetaError::Internal(format!("LinkSource answered {:?}", reference.layout))
        })?;
        let store = MetaRequest::LinkTarget {
            path: intent.to.clone(),
            attr: Box::new(reference.clone()),
            cred: intent.cred.clone(),
        };
        let stored = match self.call_owner(&intent.to, store).await {
            Err(e) if transient(&e) => return Err(e),
            other => other,
        };
        fail_point("link_stored");
        let settle = MetaRequest::SettleLink {
            id: reference.id,
            token: intent.token,
            kept: stored.is_ok(),
        };
        let group = self
            .groups
            .get(&home)
            .ok_or_else(|| MetaError::Internal(format!("no group {home}")))?;
        group.call(untagged(), settle).await?;
        stored.map(|_| reference)
    }

    /// Finishes the links a previous run logged (or this one could not finish), retrying
    /// while MNodes do not answer. Returns once none is left.
    pub async fn resolve_links(&self) {
        loop {
            let pending = self.links.pending();
            if pending.is_empty() {
                return;
            }
            for (seq, intent) in pending {
                let _held = self.locks.lock(&[&intent.from, &intent.to]).await;
                if !self.links.is_pending(seq) {
                    continue;
                }
                match self.finish_link(seq, intent.clone()).await {
                    Err(e) if transient(&e) => {
                        tracing::debug!(error = %e, "logged link waits for its MNodes");
                    }
                    result => {
                        tracing::info!(from = ?intent.from, to = ?intent.to, ok = result.is_ok(), "logged link finished");
                        self.links.done(seq);
                    }
                }
            }
            if !self.links.pending().is_empty() {
                tokio::time::sleep(crate::rename::RETRY_EVERY).await;
            }
        }
    }
}
