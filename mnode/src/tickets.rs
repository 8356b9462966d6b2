//! Deferred writes' outcomes. A `Create { defer: true }` is answered as soon as it is
//! evaluated, with a ticket; the executor's final answer for it (durable and acknowledged, or
//! failed) waits here under that ticket until a `Committed { ticket }` takes it. Nothing runs
//! in between: the executor answers the asker directly.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use saker_rpc::MetaError;
use tokio::sync::oneshot;

use crate::executor::Reply;

/// Tickets nobody took are kept for the newest this many (a client that never asks, e.g. an
/// open(2) interrupted between the kernel's MKNOD and OPEN, leaks none).
const KEPT: usize = 65_536;

#[derive(Default)]
struct Table {
    answers: HashMap<u64, oneshot::Receiver<Reply>>,
    /// Tickets in the order they were opened.
    order: VecDeque<u64>,
}

#[derive(Default)]
pub(crate) struct Tickets {
    next: AtomicU64,
    table: Mutex<Table>,
}

impl Tickets {
    /// A ticket for the final answer `rx` will carry.
    pub fn open(&self, rx: oneshot::Receiver<Reply>) -> u64 {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut t = self.table.lock();
        t.answers.insert(ticket, rx);
        t.order.push_back(ticket);
        while t.order.len() > KEPT {
            if let Some(old) = t.order.pop_front() {
                t.answers.remove(&old);
            }
        }
        ticket
    }

    /// Waits for the outcome of `ticket`'s write; a ticket is answered once.
    pub async fn wait(&self, ticket: u64) -> Result<(), MetaError> {
        let rx = self.table.lock().answers.remove(&ticket);
        // Test hook: every ticket is unknown here, as at a leader elected since the create.
        let lost = saker_rpc::fail_point::armed("lose_tickets");
        let rx = rx.filter(|_| !lost).ok_or_else(|| {
            MetaError::Unavailable(format!("no deferred write with ticket {ticket} here"))
        })?;
        match rx.await {
            Ok(Reply::Done { result, .. }) => result.map(|_| ()),
            Ok(Reply::Retry(_)) => Err(MetaError::Internal(
                "a deferred write was sent back for a retry after its answer".into(),
            )),
            Err(_) => Err(MetaError::Unavailable("executor stopped".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use saker_rpc::MetaResponse;

    use super::*;

    fn done(result: Result<MetaResponse, MetaError>) -> Reply {
        Reply::Done { result, reap: None }
    }

    #[tokio::test]
    async fn an_outcome_reaches_an_asker_before_or_after_it_is_final() {
        let tickets = Tickets::default();
        let (tx, rx) = oneshot::channel();
        let early = tickets.open(rx);
        assert!(tx.send(done(Ok(MetaResponse::Done))).is_ok());
        assert!(tickets.wait(early).await.is_ok());
        // Answered once: the ticket is gone after.
        assert!(matches!(
            tickets.wait(early).await,
            Err(MetaError::Unavailable(_))
        ));
        let (tx, rx) = oneshot::channel();
        let late = tickets.open(rx);
        let waiter = async { tickets.wait(late).await };
        let finisher = async {
            tokio::task::yield_now().await;
            assert!(tx.send(done(Err(MetaError::Exists))).is_ok());
        };
        let (outcome, ()) = tokio::join!(waiter, finisher);
        assert!(matches!(outcome, Err(MetaError::Exists)));
        // An executor that went away answers Unavailable.
        let (tx, rx) = oneshot::channel::<Reply>();
        let gone = tickets.open(rx);
        drop(tx);
        assert!(matches!(
            tickets.wait(gone).await,
            Err(MetaError::Unavailable(_))
        ));
    }

    #[test]
    fn tickets_nobody_takes_are_bounded() {
        let tickets = Tickets::default();
        let mut senders = Vec::new();
        for _ in 0..KEPT + 10 {
            let (tx, rx) = oneshot::channel();
            senders.push(tx);
            tickets.open(rx);
        }
        assert_eq!(tickets.table.lock().answers.len(), KEPT);
        // The oldest went first.
        assert!(!tickets.table.lock().answers.contains_key(&1));
    }
}
