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

/// A group whose rounds fail: since when, through which PD endpoints, the last error.
struct Failing {
    since: Instant,
    pd: String,
    error: String,
}

static FAILING: Mutex<BTreeMap<u32, Failing>> = Mutex::new(BTreeMap::new());

/// `group`'s lease round through PD `pd` failed with `error`.
pub(crate) fn round_failed(group: u32, pd: &str, error: String) {
    let mut failing = FAILING.lock();
    if failing.is_empty() {
        tracing::warn!(pd, error = %error, "TiKV unreachable: not ready until it answers");
    }
    let f = failing.entry(group).or_insert_with(|| Failing {
        since: Instant::now(),
        pd: pd.to_string(),
        error: String::new(),
    });
    f.error = error;
}

/// `group`'s lease round was answered by TiKV (whatever it said about the lease).
pub(crate) fn round_answered(group: u32) {
    let mut failing = FAILING.lock();
    if failing.remove(&group).is_some() && failing.is_empty() {
        tracing::info!("TiKV answers again");
    }
}

/// Why this process is not ready on TiKV's account, while its lease rounds fail.
pub fn unreachable() -> Option<String> {
    let failing = FAILING.lock();
    let (_, first) = failing.iter().min_by_key(|(_, f)| f.since)?;
    let groups: Vec<String> = failing.keys().map(u32::to_string).collect();
    Some(format!(
        "metadata store: TiKV (PD {}) not answering for {}s (lease rounds of group {} fail): {}",
        first.pd,
        first.since.elapsed().as_secs(),
        groups.join(", "),
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
