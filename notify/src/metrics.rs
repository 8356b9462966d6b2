//! Notification metrics: per target, the event records delivered, the deliveries that
//! failed, the records waiting in the feeds that route to it and how old the oldest is; per
//! bucket, the records its feed dropped at its cap.

use std::sync::LazyLock;

use prometheus::{register_int_counter_vec, register_int_gauge_vec, IntCounterVec, IntGaugeVec};

/// Event records a target took (a 2xx answer to their batch).
pub static DELIVERED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_notify_delivered_total",
        "Event records delivered to a notification target",
        &["target"]
    )
    .expect("metric registers once")
});

/// Deliveries (batches) that failed and will be retried.
pub static FAILED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_notify_failed_total",
        "Failed deliveries of a batch of event records to a notification target (retried)",
        &["target"]
    )
    .expect("metric registers once")
});

/// Feed records not delivered yet in the buckets whose configurations name the target.
pub static QUEUE_DEPTH: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "saker_notify_queue_depth",
        "Change-feed records waiting for delivery, by notification target",
        &["target"]
    )
    .expect("metric registers once")
});

/// How old the oldest undelivered record for the target is.
pub static LAG: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "saker_notify_lag_seconds",
        "Age of the oldest change-feed record not yet delivered, by notification target",
        &["target"]
    )
    .expect("metric registers once")
});

/// Records a bucket's feed dropped at its cap (all groups, ever): lost notifications.
pub static DROPPED: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "saker_notify_feed_dropped_records",
        "Change-feed records dropped because the bucket's feed reached its cap, by bucket",
        &["bucket"]
    )
    .expect("metric registers once")
});
