//! Cluster status: every MNode group's replicas as each reports itself (`/admin/status`,
//! `saker admin status`), and `/health` from it (200 only when every group has a leader that
//! serves, so a node answers requests of every kind).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use saker_rpc::{raft_status, ReplicaSet, ReplicaStatus};
use serde::{Deserialize, Serialize};

/// Every group of the cluster, as this process reaches it.
pub type Groups = Arc<BTreeMap<u32, Arc<ReplicaSet>>>;

/// How long one replica may take to report.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Serialize, Deserialize)]
pub struct GroupStatus {
    pub group: u32,
    /// The serving leader's raft node id and address, if a replica serves.
    pub leader: Option<u64>,
    pub leader_addr: Option<String>,
    pub term: u64,
    pub replicas: Vec<ReplicaView>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ReplicaView {
    pub addr: String,
    /// What the replica said, or why it said nothing.
    pub status: Option<ReplicaStatus>,
    pub error: Option<String>,
    /// Entries behind the leader's log (from the leader's view), where known.
    pub lag: Option<u64>,
}

/// Asks every replica of every group for its state, all at once.
pub async fn collect(groups: &Groups) -> Vec<GroupStatus> {
    let asks = groups
        .iter()
        .map(|(&g, set)| async move { group_status(g, ask_members(set).await) });
    futures::future::join_all(asks).await
}

/// Asks every replica of `set` for its state. Replicas the leader counts as members and the
/// set did not know are learned and asked too; replicas the leader does not count (removed
/// from the group) are left out.
async fn ask_members(set: &ReplicaSet) -> Vec<ReplicaView> {
    let mut views = ask(set, &[]).await;
    if leader_of(&views).is_none() {
        // Its leader may be at an address this set does not know yet (its node moved).
        let asked: Vec<String> = views.iter().map(|v| v.addr.clone()).collect();
        if learn_named(set, &views) {
            views.extend(ask(set, &asked).await);
        }
    }
    let Some(members) = leader_of(&views).map(members) else {
        return views;
    };
    let new: Vec<String> = members
        .iter()
        .filter(|(_, addr)| !views.iter().any(|v| v.addr == *addr))
        .map(|(_, addr)| addr.clone())
        .collect();
    if !new.is_empty() {
        for addr in &new {
            set.learn(addr);
        }
        let asked: Vec<String> = views.iter().map(|v| v.addr.clone()).collect();
        views.extend(ask(set, &asked).await);
    }
    views.retain(|v| members.iter().any(|(_, addr)| *addr == v.addr));
    views
}

/// Asks the replicas of `set` but those at `skip`.
async fn ask(set: &ReplicaSet, skip: &[String]) -> Vec<ReplicaView> {
    let replicas = set.replicas();
    let asks = replicas
        .iter()
        .filter(|r| !skip.contains(&r.addr))
        .map(|r| async move {
            let (status, error) = match raft_status(r.service.as_ref(), ASK_TIMEOUT).await {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(e.to_string())),
            };
            ReplicaView {
                addr: r.addr.clone(),
                status,
                error,
                lag: None,
            }
        });
    futures::future::join_all(asks).await
}

fn leader_of(views: &[ReplicaView]) -> Option<&ReplicaStatus> {
    views
        .iter()
        .filter_map(|v| v.status.as_ref())
        .find(|s| s.serving)
}

/// A group's voters and learners, as its leader reports them.
pub fn members(s: &ReplicaStatus) -> Vec<(u64, String)> {
    s.voters.iter().chain(&s.learners).cloned().collect()
}

/// The state of `set`'s serving leader, if one serves. A leader at an address the set does
/// not know (its node moved) is found through the members the other replicas name.
pub async fn leader_status(set: &ReplicaSet) -> Option<ReplicaStatus> {
    let mut views = ask(set, &[]).await;
    if leader_of(&views).is_none() {
        let asked: Vec<String> = views.iter().map(|v| v.addr.clone()).collect();
        if learn_named(set, &views) {
            views = ask(set, &asked).await;
        }
    }
    leader_of(&views).cloned()
}

/// Learns the members that the replicas in `views` name and `set` does not know; whether
/// there was one.
fn learn_named(set: &ReplicaSet, views: &[ReplicaView]) -> bool {
    let mut learned = false;
    for s in views.iter().filter_map(|v| v.status.as_ref()) {
        for (_, addr) in members(s) {
            if !views.iter().any(|v| v.addr == addr) {
                set.learn(&addr);
                learned = true;
            }
        }
    }
    learned
}

fn group_status(group: u32, mut replicas: Vec<ReplicaView>) -> GroupStatus {
    let leader = replicas
        .iter()
        .filter_map(|r| r.status.as_ref().map(|s| (r, s)))
        .find(|(_, s)| s.serving)
        .map(|(r, s)| {
            (
                s.node_id,
                r.addr.clone(),
                s.term,
                s.last_log,
                s.matched.clone(),
            )
        });
    if let Some((_, _, _, last_log, matched)) = &leader {
        for r in &mut replicas {
            let Some(s) = &r.status else { continue };
            r.lag = matched
                .iter()
                .find(|(id, _)| *id == s.node_id)
                .map(|(_, m)| last_log.saturating_sub(*m));
        }
    }
    let term = replicas
        .iter()
        .filter_map(|r| r.status.as_ref().map(|s| s.term))
        .max()
        .unwrap_or(0);
    GroupStatus {
        group,
        leader: leader.as_ref().map(|l| l.0),
        leader_addr: leader.map(|l| l.1),
        term,
        replicas,
    }
}

/// `/health`: 200 when every group has a serving leader, this node's chunkstore (`chunks`)
/// and metadata store have room and (on TiKV) its lease rounds reach TiKV, else 503 naming
/// what is wrong.
pub async fn health(
    groups: &Groups,
    chunks: Option<&dyn saker_chunkstore::ChunkStore>,
) -> Response {
    let mut missing: Vec<String> = collect(groups)
        .await
        .into_iter()
        .filter(|g| g.leader.is_none())
        .map(|g| format!("group {}: no leader serves", g.group))
        .collect();
    missing.extend(chunks.and_then(|c| c.full()));
    missing.extend(saker_mnode::space::low());
    missing.extend(saker_mnode::tikv_health::unreachable());
    if missing.is_empty() {
        let mut warnings: Vec<String> = saker_rpc::auth::warning().into_iter().collect();
        warnings.extend(notifications_dropped());
        match warnings.is_empty() {
            true => "ok\n".into_response(),
            false => format!("ok\n{}\n", warnings.join("\n")).into_response(),
        }
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", missing.join("\n")),
        )
            .into_response()
    }
}

/// A line per bucket whose change feed dropped notifications at its cap (where the
/// notification consumer runs): lost events are never silent.
fn notifications_dropped() -> Vec<String> {
    let Some(n) = crate::server::loops::NOTIFIER.get() else {
        return Vec::new();
    };
    n.dropped()
        .into_iter()
        .map(|(bucket, count)| {
            format!("bucket {bucket}: {count} notifications dropped at the change feed's cap")
        })
        .collect()
}

/// The human-readable table of `saker admin status`.
pub fn render(groups: &[GroupStatus]) -> String {
    let mut out = String::from("group\tleader\tterm\treplica\tstate\tlog\tapplied\tlag\n");
    for g in groups {
        for r in &g.replicas {
            let (state, log, applied) = match &r.status {
                Some(s) => (
                    format!("{} (node {})", s.state, s.node_id),
                    s.last_log.to_string(),
                    s.applied.to_string(),
                ),
                None => (
                    format!("down: {}", r.error.as_deref().unwrap_or("?")),
                    "-".into(),
                    "-".into(),
                ),
            };
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
                g.group,
                g.leader.map_or("none".into(), |l| format!("node {l}")),
                g.term,
                r.addr,
                state,
                log,
                applied,
                r.lag.map_or("-".into(), |l| l.to_string()),
            ));
        }
    }
    out
}
