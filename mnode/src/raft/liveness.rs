//! Node liveness: one ping per peer node replaces the raft heartbeats of idle groups.
//!
//! A raft heartbeat is one RPC per group and follower every heartbeat interval, so a node's
//! idle CPU grew with its groups (64 groups on 3 nodes: 640 RPCs a second). Instead, every
//! node pings each peer node every [`PING_EVERY`] with the groups it leads, and the answer
//! names the groups the peer leads. Then:
//! - a leader turns its group's heartbeats off once its log has not moved for [`QUIET_AFTER`]
//!   and every follower has it all (they learned the commit index from the heartbeats that
//!   ran meanwhile), and on again as soon as the log moves;
//! - a follower lets its replica stand for election only while no peer that answered within
//!   [`DEAD_AFTER`] claims the group. openraft's own timers and its vote lease still decide
//!   when an election happens; this only keeps a quiet group's followers from electing while
//!   its leader is up.
//!
//! Pings and their answers also say whether the node is below half its disk reserve
//! ([`crate::space`]), so that a leader knows when too few of its followers take entries.
//!
//! Reads need the leader lease, which heartbeats renewed; a read on a quiet leader renews it
//! with one heartbeat round first (`Mnode::ready`). The pings travel as raft messages to group
//! [`PING_GROUP`], which no replica has.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use openraft::ServerState;
use parking_lot::Mutex;
use saker_rpc::ChannelPool;
use serde::{Deserialize, Serialize};

use super::network::RaftPeers;
use super::Raft;

/// How often a node pings each peer node: the raft heartbeat interval of a replicated group.
pub const PING_EVERY: Duration = Duration::from_millis(200);
/// A peer not heard from for this long is presumed down: the minimum election timeout.
pub const DEAD_AFTER: Duration = Duration::from_millis(1000);
/// A leader whose log has not moved for this long stops its heartbeats.
pub const QUIET_AFTER: Duration = Duration::from_secs(2);
/// The transport's group id for pings (groups are 1..=65535).
pub const PING_GROUP: u32 = 0;

/// A ping: who sends it (its RPC address, as the groups' memberships name it), the groups it
/// leads, and whether it takes raft entries no more (its disk is below half its reserve). The
/// answer ([`Pong`]) says the same of the receiver.
#[derive(Serialize, Deserialize)]
pub(super) struct Ping {
    pub from: String,
    pub leads: Vec<u32>,
    pub full: bool,
}

/// The answer to a [`Ping`].
#[derive(Serialize, Deserialize)]
struct Pong {
    leads: Vec<u32>,
    full: bool,
}

/// The longest address a ping may carry.
const MAX_ADDR: usize = 256;

/// What was last heard from one peer node.
struct Heard {
    at: Instant,
    leads: BTreeSet<u32>,
}

/// The peer nodes heard from, by RPC address.
#[derive(Default)]
pub(super) struct Liveness {
    heard: Mutex<HashMap<String, Heard>>,
}

impl Liveness {
    /// Records that `from` was up at `at` and leads `leads`.
    /// Also tells [`crate::space`] whether `from` is `full`.
    pub fn heard(&self, from: String, at: Instant, leads: Vec<u32>, full: bool) {
        if from.len() > MAX_ADDR {
            return; // no membership could name it
        }
        crate::space::peer_heard(&from, full, at);
        let leads = leads.into_iter().collect();
        let mut heard = self.heard.lock();
        match heard.get_mut(&from) {
            Some(h) if h.at > at => {}
            Some(h) => *h = Heard { at, leads },
            None => {
                heard.insert(from, Heard { at, leads });
            }
        }
    }

    /// Whether a peer heard from within [`DEAD_AFTER`] leads `group`.
    fn led_elsewhere(&self, group: u32, now: Instant) -> bool {
        self.heard
            .lock()
            .values()
            .any(|h| now.duration_since(h.at) < DEAD_AFTER && h.leads.contains(&group))
    }
}

/// A leader's view of whether its group is quiet.
struct Quiet {
    last_log: Option<u64>,
    since: Instant,
    /// Heartbeats are off.
    off: bool,
}

/// Pings the peers and sets each local replica's heartbeat and election switches, every
/// [`PING_EVERY`], for as long as `peers` lives.
pub(super) async fn run(peers: Weak<RaftPeers>, me: String, pool: Arc<ChannelPool>) {
    let mut tick = tokio::time::interval(PING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut quiet: BTreeMap<u32, Quiet> = BTreeMap::new();
    loop {
        tick.tick().await;
        let Some(peers) = peers.upgrade() else { return };
        let groups = peers.replicas();
        let leads = leading(&groups);
        let mut addrs = BTreeSet::new();
        for raft in groups.values() {
            let m = raft.metrics();
            let m = m.borrow();
            for (_, node) in m.membership_config.membership().nodes() {
                if node.addr != me {
                    addrs.insert(node.addr.clone());
                }
            }
        }
        let ping = postcard::to_allocvec(&Ping {
            from: me.clone(),
            leads: leads.clone(),
            full: crate::space::critical(),
        })
        .expect("pings encode");
        let calls = addrs
            .into_iter()
            .map(|addr| ping_one(&peers.liveness, &pool, addr, ping.clone()));
        futures::future::join_all(calls).await;

        let now = Instant::now();
        quiet.retain(|g, _| leads.contains(g));
        let mut off = 0;
        for (group, raft) in &groups {
            let m = raft.metrics();
            let m = m.borrow();
            match m.state {
                ServerState::Leader => {
                    let q = quiet.entry(*group).or_insert(Quiet {
                        last_log: m.last_log_index,
                        since: now,
                        off: false,
                    });
                    if q.last_log != m.last_log_index {
                        q.last_log = m.last_log_index;
                        q.since = now;
                        if q.off {
                            q.off = false;
                            raft.runtime_config().heartbeat(true);
                        }
                    } else if !q.off
                        && now.duration_since(q.since) >= QUIET_AFTER
                        && followers_have(&m, m.last_log_index)
                    {
                        q.off = true;
                        raft.runtime_config().heartbeat(false);
                    }
                    off += q.off as i64;
                }
                ServerState::Follower | ServerState::Candidate => {
                    let led = peers.liveness.led_elsewhere(*group, now);
                    raft.runtime_config().elect(!led);
                }
                ServerState::Learner | ServerState::Shutdown => {}
            }
        }
        crate::metrics::QUIET_GROUPS.set(off);
    }
}

/// Whether every follower and learner has the leader's log through `last`.
fn followers_have(m: &openraft::RaftMetrics<u64, openraft::BasicNode>, last: Option<u64>) -> bool {
    m.replication.as_ref().is_some_and(|r| {
        r.iter()
            .filter(|(id, _)| **id != m.id)
            .all(|(_, matched)| matched.map(|l| l.index) >= last)
    })
}

/// Pings one peer and records its answer.
async fn ping_one(liveness: &Liveness, pool: &ChannelPool, addr: String, ping: Vec<u8>) {
    let sent = Instant::now();
    let Ok(channel) = pool.get(&addr) else { return };
    let Ok(reply) = channel.raft(PING_GROUP, ping.into(), DEAD_AFTER).await else {
        return;
    };
    match postcard::from_bytes::<Pong>(&reply) {
        Ok(pong) => liveness.heard(addr, sent, pong.leads, pong.full),
        Err(e) => tracing::debug!(peer = %addr, error = %e, "undecodable ping answer"),
    }
}

/// The groups `replicas` lead, for a ping's answer.
pub(super) fn leading(replicas: &BTreeMap<u32, Raft>) -> Vec<u32> {
    replicas
        .iter()
        .filter(|(_, r)| r.metrics().borrow().state == ServerState::Leader)
        .map(|(g, _)| *g)
        .collect()
}

/// Answers a ping: records the sender, returns the groups `replicas` lead and whether this
/// node takes raft entries no more.
pub(super) fn answer(
    liveness: &Liveness,
    replicas: &BTreeMap<u32, Raft>,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let ping: Ping = postcard::from_bytes(body).map_err(|e| format!("undecodable ping: {e}"))?;
    liveness.heard(ping.from, Instant::now(), ping.leads, ping.full);
    let pong = Pong {
        leads: leading(replicas),
        full: crate::space::critical(),
    };
    Ok(postcard::to_allocvec(&pong).expect("ping answers encode"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_led_elsewhere_only_by_a_peer_heard_from_lately() {
        let l = Liveness::default();
        let now = Instant::now();
        l.heard("a:1".into(), now, vec![3, 4], false);
        assert!(l.led_elsewhere(3, now));
        assert!(!l.led_elsewhere(5, now));
        assert!(!l.led_elsewhere(3, now + DEAD_AFTER));
        // An older answer does not replace a newer one; a newer one does.
        l.heard("a:1".into(), now - Duration::from_millis(5), vec![], false);
        assert!(l.led_elsewhere(4, now));
        l.heard("a:1".into(), now + Duration::from_millis(5), vec![], false);
        assert!(!l.led_elsewhere(4, now + Duration::from_millis(5)));
        // An address no membership could name is not kept.
        l.heard("x".repeat(MAX_ADDR + 1), now, vec![9], false);
        assert!(!l.led_elsewhere(9, now));
    }
}
