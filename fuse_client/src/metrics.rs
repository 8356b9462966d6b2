//! FUSE metrics (Prometheus, default registry): every kernel request by op, its latency and
//! its failures; and the span each runs in.

use std::sync::LazyLock;
use std::time::Instant;

use prometheus::{
    register_histogram_vec, register_int_counter, register_int_counter_vec, HistogramVec,
    IntCounter, IntCounterVec,
};

/// Latency of each kernel request by op (its count is the number of requests).
pub static OPS: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "saker_fuse_op_duration_seconds",
        "FUSE requests by op: latency from the kernel's request to the reply",
        &["op"],
        vec![
            0.00002, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
            0.1, 0.25, 1.0, 10.0
        ]
    )
    .expect("metric registers once")
});

/// Kernel requests answered with an error, by op and whether the error is expected (ENOENT
/// of a lookup) or not.
pub static ERRORS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_fuse_errors_total",
        "FUSE requests answered with an error, by op and kind (expected: ENOENT, EEXIST, ...)",
        &["op", "kind"]
    )
    .expect("metric registers once")
});

/// Creates sent again after their `Committed` found no ticket (a failover of their group).
pub static CREATE_RESENDS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "saker_fuse_create_resends_total",
        "Deferred creates sent again under their tag after their group's leader changed"
    )
    .expect("metric registers once")
});

/// One kernel request in flight: its span is entered (the client's spans nest under it) and
/// its latency is recorded when it is dropped.
pub struct Op {
    op: &'static str,
    start: Instant,
    _span: tracing::span::EnteredSpan,
}

impl Op {
    pub fn start(op: &'static str) -> Self {
        Self {
            op,
            start: Instant::now(),
            _span: tracing::debug_span!("fuse.op", op).entered(),
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        OPS.with_label_values(&[self.op])
            .observe(self.start.elapsed().as_secs_f64());
    }
}
