//! MNode metrics (Prometheus, default registry).

use std::sync::LazyLock;

use prometheus::{register_histogram, register_int_counter_vec, Histogram, IntCounterVec};

pub static BATCH_SIZE: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "saker_mnode_batch_size_ops",
        "Operations per executor batch (one raft entry)",
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
    )
    .expect("metric registers once")
});

pub static OPS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_mnode_ops_total",
        "MNode operations by op and outcome",
        &["op", "outcome"]
    )
    .expect("metric registers once")
});
