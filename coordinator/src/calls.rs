//! How the coordinator's protocols call the MNode groups: each call tagged as a client's
//! (so a resend after a failover is applied once), which errors are worth a retry and how
//! often, and the fail points crash tests stop them at.

use std::time::Duration;

use saker_rpc::{ClientTag, MetaError};

/// How often unresolved intents are retried while an MNode does not answer.
pub(crate) const RETRY_EVERY: Duration = Duration::from_millis(500);

/// A tag for one call of the coordinator's to an MNode group: the coordinator is a client like
/// any other (a random id per process, a counter), so a call its group resends to a new leader
/// after a failover is applied once.
pub(crate) fn tag() -> ClientTag {
    static CLIENT: std::sync::LazyLock<u128> =
        std::sync::LazyLock::new(|| rand::random::<u128>() | 1);
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    ClientTag {
        client: *CLIENT,
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    }
}

/// Test hook: aborts the process at fail point `name` ([`saker_rpc::fail_point`]), so crash
/// tests can stop it between two durable steps.
pub(crate) fn fail_point(name: &str) {
    saker_rpc::fail_point::abort_at(name);
}

/// Whether an error may go away by retrying (an MNode that did not answer).
pub(crate) fn transient(e: &MetaError) -> bool {
    matches!(
        e,
        MetaError::Unavailable(_) | MetaError::NotLeader { .. } | MetaError::Internal(_)
    )
}
