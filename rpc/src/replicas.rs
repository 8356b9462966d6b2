//! [`ReplicaSet`]: a replicated MNode group as one [`MetaService`].
//!
//! A group has one replica per node it is placed on; only its raft leader serves (a follower
//! answers [`MetaError::NotLeader`] with the leader it knows of, having executed nothing). The
//! set remembers which replica answered last, follows not-leader hints, moves on from a
//! replica it cannot reach, and while no replica leads (an election) waits and asks again,
//! for at most [`FAILOVER_WAIT`]. A retry carries the caller's tag, so the group's dedupe table
//! answers a write the old leader committed with its first result instead of doing it twice.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;

use crate::error::MetaError;
use crate::meta::{ClientTag, MetaRequest, MetaResponse, ReplicaStatus};
use crate::service::MetaService;
use crate::transport::ChannelPool;

/// The longest a call waits for a group to elect a leader before it fails.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(20);
/// First and longest pause between two rounds over replicas none of which leads.
const PAUSE_MIN: Duration = Duration::from_millis(10);
const PAUSE_MAX: Duration = Duration::from_millis(250);

/// One replica: the RPC address of its node (as raft names it) and how to call it.
#[derive(Clone)]
pub struct Replica {
    pub addr: String,
    pub service: Arc<dyn MetaService>,
}

/// The replicas of one group, called as one service.
pub struct ReplicaSet {
    /// In placement order, then the ones learned since (a group's replicas move between
    /// nodes: a not-leader hint naming an address this set does not know adds it).
    replicas: RwLock<Vec<Replica>>,
    /// The replica that answered last (the leader, as far as this client knows).
    leader: AtomicUsize,
    /// How to reach a replica learned from a hint: the group and the pool to dial it with.
    dial: Option<(u32, ChannelPool)>,
}

impl ReplicaSet {
    /// A set of `replicas` (at least one).
    pub fn new(replicas: Vec<Replica>) -> Self {
        assert!(!replicas.is_empty(), "a group has at least one replica");
        Self {
            replicas: RwLock::new(replicas),
            leader: AtomicUsize::new(0),
            dial: None,
        }
    }

    /// The replicas of `group` at `addrs` (placement order): `local(addr)` where it gives one
    /// (a replica in this process), else reached through `pool`, like the replicas learned
    /// later.
    pub fn over<'a>(
        group: u32,
        addrs: impl IntoIterator<Item = &'a str>,
        pool: &ChannelPool,
        local: impl Fn(&str) -> Option<Arc<dyn MetaService>>,
    ) -> Result<Self, MetaError> {
        let mut replicas = Vec::new();
        for addr in addrs {
            let service = match local(addr) {
                Some(s) => s,
                None => Arc::new(pool.get(addr)?.meta(group)) as Arc<dyn MetaService>,
            };
            replicas.push(Replica {
                addr: addr.to_string(),
                service,
            });
        }
        let mut set = Self::new(replicas);
        set.dial = Some((group, pool.clone()));
        Ok(set)
    }

    /// The replicas this set knows, in placement order, then as learned.
    pub fn replicas(&self) -> Vec<Replica> {
        self.replicas.read().expect("replica set lock").clone()
    }

    /// The address of the replica the next call goes to first.
    pub fn leader_addr(&self) -> String {
        let replicas = self.replicas.read().expect("replica set lock");
        replicas[self.leader.load(Ordering::Relaxed) % replicas.len()]
            .addr
            .clone()
    }

    /// Adds the replica at `addr` if this set does not know it (and can dial it).
    pub fn learn(&self, addr: &str) {
        let _ = self.position(addr);
    }

    /// The position of the replica at `addr`, learning it if this set can dial it.
    fn position(&self, addr: &str) -> Option<usize> {
        let known = |replicas: &[Replica]| replicas.iter().position(|r| r.addr == addr);
        if let Some(i) = known(&self.replicas.read().expect("replica set lock")) {
            return Some(i);
        }
        let (group, pool) = self.dial.as_ref()?;
        let service = Arc::new(pool.get(addr).ok()?.meta(*group)) as Arc<dyn MetaService>;
        let mut replicas = self.replicas.write().expect("replica set lock");
        if let Some(i) = known(&replicas) {
            return Some(i);
        }
        tracing::info!(group, addr, "a replica learned from a leader hint");
        replicas.push(Replica {
            addr: addr.to_string(),
            service,
        });
        Some(replicas.len() - 1)
    }

    fn replica(&self, at: usize) -> (Arc<dyn MetaService>, usize) {
        let replicas = self.replicas.read().expect("replica set lock");
        (replicas[at].service.clone(), replicas.len())
    }
}

/// Asks one replica for its raft state ([`MetaRequest::RaftStatus`]), giving up after
/// `timeout` (`Unavailable`).
pub async fn raft_status(
    replica: &dyn MetaService,
    timeout: Duration,
) -> Result<ReplicaStatus, MetaError> {
    let tag = ClientTag { client: 0, seq: 0 };
    match tokio::time::timeout(timeout, replica.call(tag, MetaRequest::RaftStatus)).await {
        Ok(Ok(MetaResponse::Replica(s))) => Ok(s),
        Ok(Ok(other)) => Err(MetaError::Internal(format!(
            "unexpected answer to RaftStatus: {other:?}"
        ))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(MetaError::Unavailable(format!(
            "no answer within {} s",
            timeout.as_secs_f64()
        ))),
    }
}

/// Whether a failed call may be sent again (to the same or another replica): a not-leader
/// answer executed nothing; a transport failure may have, so only a tagged write (deduped by
/// the group) or an idempotent request (a read) is resent.
fn retryable(e: &MetaError, tag: ClientTag, req: &MetaRequest) -> bool {
    match e {
        MetaError::NotLeader { .. } => true,
        MetaError::Unavailable(_) => tag.client != 0 || req.is_idempotent(),
        _ => false,
    }
}

#[async_trait]
impl MetaService for ReplicaSet {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let (first, n) = self.replica(0);
        if n == 1 {
            return first.call(tag, req).await;
        }
        let deadline = tokio::time::Instant::now() + FAILOVER_WAIT;
        let mut at = self.leader.load(Ordering::Relaxed) % n;
        let mut asked = 0;
        let mut pause = PAUSE_MIN;
        loop {
            let (service, n) = self.replica(at);
            let result = service.call(tag, req.clone()).await;
            let next = match &result {
                Err(e) if retryable(e, tag, &req) => match e {
                    MetaError::NotLeader {
                        leader: Some(addr), ..
                    } => self.position(addr).filter(|&i| i != at),
                    _ => None,
                }
                .unwrap_or((at + 1) % n),
                _ => {
                    self.leader.store(at, Ordering::Relaxed);
                    return result;
                }
            };
            asked += 1;
            let n = self.replicas.read().expect("replica set lock").len();
            if asked >= n {
                // A whole round without a leader: an election is under way (or the group
                // lost its majority). Wait a little and ask again, up to the deadline.
                if tokio::time::Instant::now() + pause > deadline {
                    return result;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(PAUSE_MAX);
                asked = 0;
            }
            at = next;
        }
    }

    fn routing_version(&self) -> u64 {
        self.replicas()
            .iter()
            .map(|r| r.service.routing_version())
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use parking_lot::Mutex;

    use super::*;

    /// A replica that leads once `leads_after` calls have reached it (counting all replicas'
    /// calls), else names `hint`.
    struct Fake {
        me: usize,
        state: Arc<Mutex<State>>,
    }

    struct State {
        leader: Option<usize>,
        hint: Option<usize>,
        calls: Vec<usize>,
        down: Vec<usize>,
        elect_after: usize,
        executed: AtomicU64,
    }

    #[async_trait]
    impl MetaService for Fake {
        async fn call(
            &self,
            _tag: ClientTag,
            _req: MetaRequest,
        ) -> Result<MetaResponse, MetaError> {
            let mut s = self.state.lock();
            s.calls.push(self.me);
            if s.down.contains(&self.me) {
                return Err(MetaError::Unavailable("connection refused".into()));
            }
            if s.leader.is_none() && s.calls.len() > s.elect_after {
                s.leader = Some(2);
            }
            if s.leader == Some(self.me) {
                s.executed.fetch_add(1, Ordering::Relaxed);
                return Ok(MetaResponse::Done);
            }
            Err(MetaError::NotLeader {
                leader: s.hint.map(|h| format!("n{h}")),
            })
        }
    }

    fn set(state: &Arc<Mutex<State>>) -> ReplicaSet {
        ReplicaSet::new(
            (0..3)
                .map(|me| Replica {
                    addr: format!("n{me}"),
                    service: Arc::new(Fake {
                        me,
                        state: state.clone(),
                    }),
                })
                .collect(),
        )
    }

    fn state(leader: Option<usize>, hint: Option<usize>, elect_after: usize) -> Arc<Mutex<State>> {
        Arc::new(Mutex::new(State {
            leader,
            hint,
            calls: vec![],
            down: vec![],
            elect_after,
            executed: AtomicU64::new(0),
        }))
    }

    fn write() -> MetaRequest {
        MetaRequest::Mkdir {
            path: vec!["b".into(), "d".into()],
            mode: 0o755,
            uid: 0,
            gid: 0,
            cred: crate::Cred::ROOT,
        }
    }

    const TAG: ClientTag = ClientTag { client: 7, seq: 1 };

    #[tokio::test]
    async fn a_hint_is_followed_and_the_leader_remembered() {
        let st = state(Some(2), Some(2), 0);
        let group = set(&st);
        group.call(TAG, write()).await.unwrap();
        assert_eq!(
            st.lock().calls,
            vec![0, 2],
            "asked 0, followed its hint to 2"
        );
        assert_eq!(group.leader_addr(), "n2");
        group.call(TAG, write()).await.unwrap();
        assert_eq!(
            st.lock().calls,
            vec![0, 2, 2],
            "the next call goes to 2 directly"
        );
    }

    #[tokio::test]
    async fn a_call_waits_out_an_election_and_skips_a_dead_replica() {
        let st = state(None, None, 7);
        st.lock().down.push(1);
        let group = set(&st);
        group.call(TAG, write()).await.unwrap();
        let s = st.lock();
        assert!(
            s.calls.len() > 7,
            "asked in rounds until elected: {:?}",
            s.calls
        );
        assert_eq!(s.calls.last(), Some(&2));
        assert_eq!(s.executed.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn an_untagged_write_is_not_resent_after_a_transport_failure() {
        let st = state(Some(2), None, 0);
        st.lock().down.push(0);
        let group = set(&st);
        let untagged = ClientTag { client: 0, seq: 0 };
        let err = group.call(untagged, write()).await.unwrap_err();
        assert!(matches!(err, MetaError::Unavailable(_)), "{err:?}");
        assert_eq!(st.lock().calls, vec![0]);
        // A tagged one is: the group's dedupe makes the resend safe.
        group.call(TAG, write()).await.unwrap();
        assert_eq!(st.lock().calls, vec![0, 0, 1, 2]);
    }
}
