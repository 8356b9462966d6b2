//! link(2) through the coordinator (SwitchFS §5.5 hard links, made crash-safe): the new name
//! and the file's link count usually live in different MNode groups, so the link is a logged
//! intent of idempotent steps, finished after a crash.
//!
//! 1. Lock both paths (as a rename does), check the source is a file the caller reaches and
//!    the new name is free, and log the intent: the file's inode id and a random token.
//! 2. `LinkSource` at the file's home counts one more name, once per token (the token stays
//!    with the file as a mark until step 4), for that inode only; its answer, the reference to
//!    store, is logged with the intent.
//! 3. `LinkTarget` stores the reference at the new name and records there that the token did
//!    (a replay is answered from that record, whatever the name holds by then).
//! 4. `SettleLink` drops the mark, taking the count back if the name was not stored.
//! 5. `ForgetLink` drops step 3's record; then the intent goes.
//!
//! A replay starts from the first step whose outcome is not logged. One with the reference
//! logged first asks the home whether the mark is still there: if not, the link was settled
//! (its answer was lost), and only step 5 is left. One without it repeats step 2, which the
//! mark keeps from counting twice; if the file is gone by then, every group is told to settle
//! the token as not kept (only the home holds its mark), so no count is left behind.

use saker_rpc::{Attr, Cred, InodeId, MetaError, MetaRequest, MetaResponse, Want};

use crate::calls::{fail_point, tag};
use crate::intents::LinkIntent;
use crate::namespace::NamespaceCoordinator;

/// The home group of the shared inode `reference` refers to.
fn home_of(reference: &Attr) -> Result<u32, MetaError> {
    reference
        .layout
        .shared_home()
        .ok_or_else(|| MetaError::Invalid(format!("LinkSource answered {:?}", reference.layout)))
}

/// Whether a step may succeed when tried again: its MNode did not answer. (Any answer, an
/// error included, is final: a link stuck on one would keep the coordinator from starting.)
fn unanswered(e: &MetaError) -> bool {
    matches!(e, MetaError::Unavailable(_) | MetaError::NotLeader { .. })
}

impl NamespaceCoordinator {
    /// The link protocol (module docs).
    pub(crate) async fn link_protocol(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        expect: Option<InodeId>,
        cred: Cred,
    ) -> Result<Attr, MetaError> {
        if from.len() < 2 || to.len() < 2 {
            return Err(MetaError::NotPermitted);
        }
        let _held = self.locks.lock(&[&from, &to]).await;
        let source = self.checked(&from, 0, Some(&cred), Want::ATTR).await?;
        if source.attr.is_dir() {
            return Err(MetaError::NotPermitted);
        }
        if expect.is_some_and(|id| id != source.attr.id) {
            return Err(MetaError::NotFound);
        }
        match self.checked(&to, 0, None, Want::ATTR).await {
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
            id: source.attr.id,
            token,
            reference: None,
        };
        let seq = self.links.log(&intent).await?;
        fail_point("link_logged");
        match self.finish_link(seq, intent).await {
            Err(e) if unanswered(&e) => {
                tracing::warn!(error = %e, "link left to the resolver");
                Err(e)
            }
            result => {
                self.links.done(seq).await;
                result
            }
        }
    }

    /// Steps 2 to 5 of a logged intent, skipping what its log says is done. A definite
    /// failure ends the link (after its count is settled); a transient one leaves it logged.
    async fn finish_link(&self, seq: u64, mut intent: LinkIntent) -> Result<Attr, MetaError> {
        let reference = match &intent.reference {
            Some(r) => {
                let ask = MetaRequest::LinkPending {
                    id: intent.id,
                    token: intent.token,
                };
                match self.group(home_of(r)?)?.call(tag(), ask).await? {
                    MetaResponse::Flag(true) => {}
                    // Settled already: only the record of step 3 is left to drop.
                    MetaResponse::Flag(false) => {
                        self.forget_link(&intent).await?;
                        return Ok(r.clone());
                    }
                    other => {
                        return Err(MetaError::Invalid(format!(
                            "LinkPending answered {other:?}"
                        )))
                    }
                }
                r.clone()
            }
            None => {
                let count = MetaRequest::LinkSource {
                    path: intent.from.clone(),
                    cred: intent.cred.clone(),
                    expect: Some(intent.id),
                    token: intent.token,
                };
                let r = match self.call_owner(&intent.from, count).await {
                    Ok(MetaResponse::Attr(a)) => a,
                    Err(e) if unanswered(&e) => return Err(e),
                    failed => {
                        // Counted by an earlier try whose answer was lost, maybe: wherever
                        // the mark is, it goes with the count.
                        self.settle_everywhere(&intent).await?;
                        return Err(match failed {
                            Err(e) => e,
                            Ok(other) => {
                                MetaError::Invalid(format!("LinkSource answered {other:?}"))
                            }
                        });
                    }
                };
                fail_point("link_counted_unlogged");
                intent.reference = Some(r.clone());
                self.links.rewrite(seq, &intent).await?;
                fail_point("link_counted");
                r
            }
        };
        let home = home_of(&reference)?;
        let store = MetaRequest::LinkTarget {
            path: intent.to.clone(),
            attr: Box::new(reference.clone()),
            cred: intent.cred.clone(),
            token: intent.token,
        };
        let stored = match self.call_owner(&intent.to, store).await {
            Err(e) if unanswered(&e) => return Err(e),
            other => other,
        };
        fail_point("link_stored");
        let settle = MetaRequest::SettleLink {
            id: reference.id,
            token: intent.token,
            kept: stored.is_ok(),
        };
        self.group(home)?.call(tag(), settle).await?;
        fail_point("link_settled");
        self.forget_link(&intent).await?;
        stored.map(|_| reference)
    }

    fn group(&self, g: u32) -> Result<&std::sync::Arc<dyn saker_rpc::MetaService>, MetaError> {
        self.groups
            .get(&g)
            .ok_or_else(|| MetaError::Invalid(format!("no MNode group {g}")))
    }

    /// Step 5: the new name's owner forgets that the token stored it.
    async fn forget_link(&self, intent: &LinkIntent) -> Result<(), MetaError> {
        let forget = MetaRequest::ForgetLink {
            token: intent.token,
        };
        self.call_owner(&intent.to, forget).await.map(|_| ())
    }

    /// Takes back the count of a link whose source is gone, at whichever group holds its
    /// mark (none, if it was never counted).
    async fn settle_everywhere(&self, intent: &LinkIntent) -> Result<(), MetaError> {
        for g in self.groups.values() {
            let settle = MetaRequest::SettleLink {
                id: intent.id,
                token: intent.token,
                kept: false,
            };
            g.call(tag(), settle).await?;
        }
        Ok(())
    }

    /// Finishes the links a previous run logged (or this one could not finish), retrying
    /// while MNodes do not answer. Returns once none is left.
    pub async fn resolve_links(&self) {
        while !self.resolve_links_once().await {
            tokio::time::sleep(crate::calls::RETRY_EVERY).await;
        }
    }

    /// One try at every logged link; answers whether none is left.
    pub(crate) async fn resolve_links_once(&self) -> bool {
        for (seq, intent) in self.links.pending() {
            let _held = self.locks.lock(&[&intent.from, &intent.to]).await;
            // As logged now: the protocol may have logged a step while we waited.
            let Some(intent) = self.links.get(seq) else {
                continue;
            };
            match self.finish_link(seq, intent.clone()).await {
                Err(e) if unanswered(&e) => {
                    tracing::debug!(error = %e, "logged link waits for its MNodes");
                }
                result => {
                    tracing::info!(from = ?intent.from, to = ?intent.to, ok = result.is_ok(), "logged link finished");
                    self.links.done(seq).await;
                }
            }
        }
        self.links.pending().is_empty()
    }
}
