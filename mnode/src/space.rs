//! Whether this process's metadata store is short of disk space. The binary watches the file
//! system of the data directory ([`set_low`]); while space is below its reserve, the MNodes
//! refuse the writes that add data ([`MetaRequest::adds_data`]) before they reach the raft
//! log, so a full disk never fails an append or a state-machine apply (either would stop the
//! group). Deletes still pass, and writes are taken again as soon as space is back, without
//! a restart.
//!
//! A follower whose disk fills before its leader's cannot refuse requests: its leader sends
//! it entries. Below half the reserve ([`set_critical`]) its replicas refuse raft appends and
//! snapshots instead (the leader retries them, as for an unreachable peer), so the follower
//! lags rather than failing an append; it catches up once space is back. Half the reserve
//! leaves room for the deletes that free space, which every replica still takes above it.
//!
//! Each node's liveness pings tell its peers whether it is below half its reserve
//! ([`peer_heard`]). A group leader that counts fewer than a majority of its voters with room
//! (itself included) could commit nothing, not even a delete: it refuses every write at once
//! ([`quorum_refusal`], 507 / ENOSPC) instead of appending entries no majority takes, which
//! would leave the request waiting until space is back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use saker_rpc::{MetaError, MetaRequest};

static LOW: AtomicBool = AtomicBool::new(false);
static WHY: Mutex<String> = Mutex::new(String::new());

/// Space is short (`Some(why)`), or back (`None`).
pub fn set_low(why: Option<String>) {
    let mut w = WHY.lock();
    match why {
        Some(why) => {
            if !LOW.load(Ordering::Relaxed) {
                tracing::warn!(why = %why, "metadata writes refused until space is freed");
            }
            *w = why;
            LOW.store(true, Ordering::Release);
        }
        None => {
            if LOW.swap(false, Ordering::AcqRel) {
                tracing::info!("space freed: metadata writes taken again");
            }
            w.clear();
        }
    }
}

static CRITICAL: AtomicBool = AtomicBool::new(false);

/// Space is below half the reserve (`true`): this process's replicas take no raft entries.
pub fn set_critical(critical: bool) {
    if CRITICAL.swap(critical, Ordering::AcqRel) != critical {
        if critical {
            tracing::warn!("raft appends refused until space is freed (below half the reserve)");
        } else {
            tracing::info!("space freed: raft appends taken again");
        }
    }
}

/// Whether raft appends are refused here (see [`set_critical`]).
pub fn critical() -> bool {
    CRITICAL.load(Ordering::Acquire)
}

/// Why writes are refused, while they are.
pub fn low() -> Option<String> {
    LOW.load(Ordering::Acquire).then(|| WHY.lock().clone())
}

/// Refuses `req` if it adds data while space is short.
pub(crate) fn check(req: &MetaRequest) -> Result<(), MetaError> {
    if LOW.load(Ordering::Acquire) && req.adds_data() {
        if let Some(why) = low() {
            return Err(MetaError::NoSpace(why));
        }
    }
    Ok(())
}

/// Peer nodes (by RPC address) whose last ping said they take no raft entries, and when.
static PEERS_FULL: Mutex<Option<HashMap<String, Instant>>> = Mutex::new(None);
/// How many entries `PEERS_FULL` has: the fast path of [`quorum_refusal`].
static PEERS_FULL_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Whether this node or a peer takes no raft entries: cheap, checked before
/// [`quorum_refusal`] looks at a group's voters.
pub(crate) fn anyone_short() -> bool {
    critical() || PEERS_FULL_COUNT.load(Ordering::Acquire) > 0
}

/// Records what a ping at `at` said of peer `addr`'s space ([`critical`] there or not).
pub(crate) fn peer_heard(addr: &str, full: bool, at: Instant) {
    let mut peers = PEERS_FULL.lock();
    let peers = peers.get_or_insert_with(HashMap::new);
    let changed = match (full, peers.get(addr)) {
        (true, Some(&was)) if was >= at => false,
        (true, _) => peers.insert(addr.to_string(), at).is_none(),
        (false, Some(&was)) if was > at => false,
        (false, _) => peers.remove(addr).is_some(),
    };
    if changed {
        PEERS_FULL_COUNT.store(peers.len(), Ordering::Release);
        crate::metrics::PEERS_OUT_OF_SPACE.set(peers.len() as i64);
        if full {
            tracing::warn!(peer = %addr, "a peer node is below half its disk reserve");
        } else {
            tracing::info!(peer = %addr, "a peer node has disk space again");
        }
    }
}

/// The refusal of a write to a group whose voters are `voters` (raft ids and RPC addresses;
/// `me` is this replica's id) when fewer than a majority of them have room: nothing proposed
/// could commit. Peers count as full on pings heard within `fresh`.
pub(crate) fn quorum_refusal<'a>(
    group: u32,
    me: u64,
    voters: impl IntoIterator<Item = (u64, &'a str)>,
    fresh: Duration,
) -> Option<MetaError> {
    if !anyone_short() {
        return None;
    }
    let now = Instant::now();
    let peers = PEERS_FULL.lock();
    // A peer counts as full on a ping heard within `fresh`; one not heard from since counts as
    // having room: it is down or cut off, which space cannot tell.
    let peer_full = |addr: &str| {
        let at = peers.as_ref().and_then(|p| p.get(addr));
        at.is_some_and(|at| now.saturating_duration_since(*at) < fresh)
    };
    let (mut count, mut full) = (0, Vec::new());
    for (id, addr) in voters {
        count += 1;
        if (id == me && critical()) || (id != me && peer_full(addr)) {
            full.push(addr.to_string());
        }
    }
    drop(peers);
    (count > 0 && count - full.len() <= count / 2).then(|| {
        MetaError::NoSpace(format!(
            "disk full on {} of group {group}'s {count} replicas ({}: below half their \
             --meta-reserve), so the group can commit nothing until space is freed there",
            full.len(),
            full.join(", ")
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_refuses_writes_once_no_majority_of_its_voters_has_room() {
        let fresh = Duration::from_secs(1);
        let voters = [
            (1, "space-test-a:1"),
            (2, "space-test-b:1"),
            (3, "space-test-c:1"),
        ];
        let t0 = Instant::now();
        assert!(quorum_refusal(7, 1, voters, fresh).is_none());
        // One full peer: a majority has room.
        peer_heard("space-test-b:1", true, t0);
        assert!(quorum_refusal(7, 1, voters, fresh).is_none());
        // Two: nothing could commit.
        peer_heard("space-test-c:1", true, t0);
        let Some(MetaError::NoSpace(why)) = quorum_refusal(7, 1, voters, fresh) else {
            panic!("not refused")
        };
        assert!(
            why.contains("2 of group 7's 3") && why.contains("space-test-c:1"),
            "{why}"
        );
        // A peer of another group does not count; one not heard from lately neither.
        assert!(
            quorum_refusal(7, 1, [(1, "space-test-a:1"), (4, "space-test-d:1")], fresh).is_none()
        );
        assert!(quorum_refusal(7, 1, voters, Duration::ZERO).is_none());
        // An older ping does not undo a newer one; a newer one does.
        peer_heard("space-test-c:1", false, t0 - Duration::from_millis(1));
        assert!(quorum_refusal(7, 1, voters, fresh).is_some());
        peer_heard("space-test-c:1", false, t0 + Duration::from_millis(1));
        assert!(quorum_refusal(7, 1, voters, fresh).is_none());
        peer_heard("space-test-b:1", false, t0 + Duration::from_millis(1));
        assert_eq!(PEERS_FULL_COUNT.load(Ordering::Acquire), 0);
    }
}
