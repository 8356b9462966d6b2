//! Tier metrics: reads through (cache hits and misses), bytes moved to tiers, transitions
//! and remote copies deleted.

use std::sync::LazyLock;

use prometheus::{register_int_counter_vec, IntCounterVec};

/// Reads of tiered versions, by `result` (`hit`: from the local cache, `miss`: from the tier).
pub static READS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_tier_reads_total",
        "Reads of versions that live in a remote tier, by cache result",
        &["result"]
    )
    .expect("metric registers once")
});

/// Versions moved to a tier and bytes uploaded, by `what` (`objects`, `bytes`).
pub static TRANSITIONED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_tier_transitioned_total",
        "Versions moved to a remote tier (objects) and their bytes (bytes)",
        &["what"]
    )
    .expect("metric registers once")
});

/// Remote copies deleted after their version went (`released`) or found unreferenced by
/// the tier scrub (`orphans`).
pub static DELETED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_tier_deleted_total",
        "Remote tier copies deleted, by cause",
        &["cause"]
    )
    .expect("metric registers once")
});
