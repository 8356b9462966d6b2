//! Whether this replica may serve its group, from openraft's metrics.
//!
//! Only the leader serves, and only once it has applied its whole log, through an entry of
//! its term (the blank entry of an election): batches are physical mutations computed from
//! local state, so a leader must see every committed write first. Everything else answers [`MetaError::NotLeader`] with the
//! leader's RPC address, having executed nothing.
//!
//! Reads of a replicated group are linearizable by a leader lease: the leader serves them
//! from its applied state only while a quorum acknowledged it within [`Leadership::lease`],
//! half the minimum election timeout. Followers do not time out and elect another leader
//! before a full election timeout without hearing from this one, and the acknowledgement
//! time openraft reports is when the acknowledged request was sent, so no other leader can
//! have committed a write while the lease holds (the processes share one clock: no drift).
//! A quiet group's leader sends no heartbeats (`raft::liveness`): a read that finds its lease
//! run out first renews it with one heartbeat round (`Mnode::ready`).

use std::time::{Duration, Instant};

use openraft::{RaftMetrics, ServerState};
use parking_lot::Mutex;
use saker_rpc::MetaError;

/// What the latest metrics said.
#[derive(Default)]
struct Seen {
    /// The term this replica serves in; 0 while it does not.
    ready_term: u64,
    /// The RPC address of the leader, as far as this replica knows.
    leader: Option<String>,
    /// When a quorum last acknowledged this leader (a replicated group's leader only).
    quorum_acked: Option<Instant>,
    /// More than one voter: reads need the lease.
    replicated: bool,
    /// The replica left its group: it serves nothing again.
    retired: bool,
}

/// One replica's view of its group's leadership.
pub(crate) struct Leadership {
    node_id: u64,
    lease: Duration,
    seen: Mutex<Seen>,
    /// The serving term (0: not serving), for whoever follows it (the coordinator).
    serving: tokio::sync::watch::Sender<u64>,
}

/// What an update found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    None,
    /// This replica leads term `0` and has caught up: rebuild what lives in memory, then
    /// [`Leadership::serve`].
    Elected(u64),
}

impl Leadership {
    pub fn new(node_id: u64, election_timeout_min: Duration) -> Self {
        Self {
            node_id,
            lease: election_timeout_min / 2,
            seen: Mutex::default(),
            serving: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Takes new metrics. Stops serving at once when this replica no longer leads; reports
    /// a new term it leads (and has caught up in) without serving in it yet.
    pub fn update(&self, m: &RaftMetrics<u64, openraft::BasicNode>) -> Change {
        let membership = m.membership_config.membership();
        let leads = m.state == ServerState::Leader && m.current_leader == Some(self.node_id);
        let caught_up = caught_up(m);
        let mut s = self.seen.lock();
        if s.retired {
            return Change::None;
        }
        s.replicated = membership.voter_ids().count() > 1;
        s.leader = m
            .current_leader
            .and_then(|id| membership.get_node(&id))
            .map(|n| n.addr.clone());
        let acked = m
            .millis_since_quorum_ack
            .and_then(|ms| Instant::now().checked_sub(Duration::from_millis(ms)));
        s.quorum_acked = s.quorum_acked.max(acked);
        if !leads {
            s.ready_term = 0;
            self.serving.send_if_modified(|t| std::mem::take(t) != 0);
            return Change::None;
        }
        if caught_up && s.ready_term != m.current_term {
            s.ready_term = 0;
            self.serving.send_if_modified(|t| std::mem::take(t) != 0);
            return Change::Elected(m.current_term);
        }
        Change::None
    }

    /// Records that a quorum acknowledged this leader in answer to a request sent at `sent`
    /// (a lease renewed by a heartbeat round).
    pub fn acked(&self, sent: Instant) {
        let mut s = self.seen.lock();
        s.quorum_acked = s.quorum_acked.max(Some(sent));
    }

    /// Stops serving for good (the replica left its group).
    pub fn retire(&self) {
        let mut s = self.seen.lock();
        s.retired = true;
        s.ready_term = 0;
        self.serving.send_if_modified(|t| std::mem::take(t) != 0);
    }

    pub fn retired(&self) -> bool {
        self.seen.lock().retired
    }

    /// Starts serving in `term` (after the rebuild), unless leadership moved meanwhile.
    pub fn serve(&self, term: u64, m: &RaftMetrics<u64, openraft::BasicNode>) {
        let mut s = self.seen.lock();
        if !s.retired && m.state == ServerState::Leader && m.current_term == term {
            s.ready_term = term;
            self.serving.send_replace(term);
        }
    }

    /// Follows the serving term (0 while this replica does not serve).
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.serving.subscribe()
    }

    /// The RPC address of the leader as far as this replica knows.
    pub fn leader(&self) -> Option<String> {
        self.seen.lock().leader.clone()
    }

    /// The term this replica serves in, 0 if it does not.
    pub fn ready_term(&self) -> u64 {
        self.seen.lock().ready_term
    }

    /// The answer to a request this replica does not serve.
    pub fn refusal(&self) -> MetaError {
        MetaError::NotLeader {
            leader: self.seen.lock().leader.clone(),
        }
    }

    /// Whether a request may be served here now: a write needs a caught-up leader, a read of a
    /// replicated group also a valid lease.
    pub fn check(&self, read: bool) -> Result<(), MetaError> {
        let s = self.seen.lock();
        if s.ready_term == 0 {
            return Err(MetaError::NotLeader {
                leader: s.leader.clone(),
            });
        }
        if read && s.replicated {
            match s.quorum_acked {
                Some(at) if at.elapsed() < self.lease => {}
                // Still leader, but not sure of it: let the caller try again (or elsewhere).
                _ => return Err(MetaError::NotLeader { leader: None }),
            }
        }
        Ok(())
    }

    /// The TiKV engine's lease was won in `epoch` (by this process, at `addr`): like an
    /// election, it is served once the rebuild is done ([`Leadership::lease_serve`]); reads
    /// while a renewal was [`Leadership::acked`] within the lease.
    pub fn lease_won(&self, epoch: u64, addr: Option<String>) -> Change {
        let mut s = self.seen.lock();
        if s.retired {
            return Change::None;
        }
        s.leader = addr;
        // Reads need a recent renewal, as a raft leader's need a recent quorum.
        s.replicated = true;
        s.ready_term = 0;
        self.serving.send_if_modified(|t| std::mem::take(t) != 0);
        Change::Elected(epoch)
    }

    /// Serves in `epoch`, unless the lease was lost meanwhile (`held` is the epoch the lease
    /// holds now).
    pub fn lease_serve(&self, epoch: u64, held: u64) {
        let mut s = self.seen.lock();
        if !s.retired && held == epoch {
            s.ready_term = epoch;
            self.serving.send_replace(epoch);
        }
    }

    /// The lease is another process's (at `holder`, if known), or lapsed: stops serving.
    pub fn lease_lost(&self, holder: Option<String>) {
        let mut s = self.seen.lock();
        s.leader = holder;
        s.ready_term = 0;
        self.serving.send_if_modified(|t| std::mem::take(t) != 0);
    }
}

/// Whether a leader has applied an entry of its term and every entry in its log. A leader
/// restored at startup (openraft restarts a node that led as the leader of the same term,
/// with no new blank entry) may have applied an entry of its term before the crash and still
/// have entries after it to apply again: evaluating on that state would hand out inode ids
/// those entries used, and miss the records they write.
pub(crate) fn caught_up(m: &RaftMetrics<u64, openraft::BasicNode>) -> bool {
    m.last_applied.map(|l| l.leader_id.term) == Some(m.current_term)
        && m.last_applied.map(|l| l.index) >= m.last_log_index
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, LogId};

    fn leader(term: u64, applied: u64, last_log: u64) -> RaftMetrics<u64, openraft::BasicNode> {
        let mut m = RaftMetrics::new_initial(1);
        m.state = ServerState::Leader;
        m.current_leader = Some(1);
        m.current_term = term;
        m.last_applied = Some(LogId::new(CommittedLeaderId::new(term, 1), applied));
        m.last_log_index = Some(last_log);
        m
    }

    #[test]
    fn a_leader_restored_at_startup_serves_once_its_whole_log_is_applied() {
        let l = Leadership::new(1, Duration::from_millis(300));
        // Restarted as the leader of term 2: an entry of term 2 applied, two more to apply.
        assert_eq!(l.update(&leader(2, 10, 12)), Change::None);
        assert_eq!(l.ready_term(), 0);
        assert_eq!(l.update(&leader(2, 12, 12)), Change::Elected(2));
    }
}
