//! Whether this process reaches its metadata store's TiKV, as its groups' lease rounds see
//! it. On the TiKV engine every group of the process runs a lease round each
//! [`crate::lease::RENEW_EVERY`] (a timestamp from PD, a read and a write in TiKV), whether it
//! holds the group or not, so the rounds are the process's heartbeat to TiKV: each records
//! its outcome here ([`round_failed`], [`round_answered`]), and `/health` reports
//! [`unreachable`] (not ready, with the reason) from the first failed round until one of the
//! failing groups' rounds succeeds again; nothing needs a restart.

use std::collections::BTreeMap;
use std::time::Instant;

use parking_lot::Mutex;

/// A group's rounds, as far as TiKV's answers go.
#[derive(Default)]
struct Rounds {
    /// When a round of it was last answered.
    answered: Option<Instant>,
    /// While its rounds fail: since when, through which PD endpoints, the last error.
    failing: Option<Failing>,
}

struct Failing {
    since: Instant,
    pd: String,
    error: String,
}

static GROUPS: Mutex<BTreeMap<u32, Rounds>> = Mutex::new(BTreeMap::new());

fn any_failing(groups: &BTreeMap<u32, Rounds>) -> bool {
    groups.values().any(|r| r.failing.is_some())
}

/// `group`'s lease round through PD `pd` failed with `error`.
pub(crate) fn round_failed(group: u32, pd: &str, error: String) {
    let mut groups = GROUPS.lock();
    if !any_failing(&groups) {
        tracing::warn!(pd, error = %error, "TiKV unreachable: not ready until it answers");
    }
    let rounds = groups.entry(group).or_default();
    // Not answering since the last answer (a round that fails on a silent TiKV takes its
    // whole deadline to say so).
    let since = rounds.answered.unwrap_or_else(Instant::now);
    let failing = rounds.failing.get_or_insert_with(|| Failing {
        since,
        pd: pd.to_string(),
        error: String::new(),
    });
    failing.error = error;
}

/// `group`'s lease round was answered by TiKV (whatever it said about the lease).
pub(crate) fn round_answered(group: u32) {
    let mut groups = GROUPS.lock();
    let rounds = groups.entry(group).or_default();
    rounds.answered = Some(Instant::now());
    if rounds.failing.take().is_some() && !any_failing(&groups) {
        tracing::info!("TiKV answers again");
    }
}

/// Why this process is not ready on TiKV's account, while its lease rounds fail.
pub fn unreachable() -> Option<String> {
    let groups = GROUPS.lock();
    let failing: Vec<(u32, &Failing)> = groups
        .iter()
        .filter_map(|(g, r)| Some((*g, r.failing.as_ref()?)))
        .collect();
    let (_, first) = failing.iter().min_by_key(|(_, f)| f.since)?;
    let names: Vec<String> = failing.iter().map(|(g, _)| g.to_string()).collect();
    Some(format!(
        "metadata store: TiKV (PD {}) not answering for {}s (lease rounds of group {} fail): {}",
        first.pd,
        first.since.elapsed().as_secs(),
        names.join(", "),
        first.error
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_rounds_are_reported_until_answered() {
        // Groups no other test of this crate's process uses (the state is process-wide).
        round_failed(9001, "127.0.0.1:1", "tikv: no answer within 8s".into());
        round_failed(9002, "127.0.0.1:1", "tikv: no answer within 8s".into());
        let why = unreachable().expect("not ready");
        assert!(why.contains("PD 127.0.0.1:1"), "{why}");
        assert!(why.contains("9001, 9002"), "{why}");
        assert!(why.contains("no answer within 8s"), "{why}");
        round_answered(9001);
        assert!(unreachable().is_some_and(|w| !w.contains("9001")));
        round_answered(9002);
        assert!(unreachable().is_none_or(|w| !w.contains("9002")));
    }
}
