//! Gateway metrics (Prometheus, default registry) and the `/metrics` text encoder.

use std::future::Future;
use std::sync::LazyLock;
use std::time::Instant;

use prometheus::{
    register_histogram_vec, register_int_counter_vec, Encoder, HistogramVec, IntCounterVec,
    TextEncoder,
};
use s3s::S3Result;
use tracing::Instrument;

pub static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_gateway_requests_total",
        "S3 requests by operation and outcome",
        &["op", "outcome"]
    )
    .expect("metric registers once")
});

pub static LATENCY: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "saker_gateway_request_duration_seconds",
        "S3 request latency by operation (until the response head)",
        &["op"],
        vec![
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 10.0
        ]
    )
    .expect("metric registers once")
});

/// What lifecycle passes did, by action.
pub static LIFECYCLE: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_lifecycle_actions_total",
        "Lifecycle pass work by kind: objects looked at, objects and noncurrent versions \
         expired, delete markers removed, uploads aborted, actions that failed, passes",
        &["kind"]
    )
    .expect("metric registers once")
});

/// Runs one S3 operation, counting it and timing it.
pub async fn timed<T>(op: &'static str, fut: impl Future<Output = S3Result<T>>) -> S3Result<T> {
    let start = Instant::now();
    let span = tracing::debug_span!("s3.request", otel.kind = "server", op);
    let result = fut.instrument(span).await;
    LATENCY
        .with_label_values(&[op])
        .observe(start.elapsed().as_secs_f64());
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) => e.code().as_str(),
    };
    REQUESTS.with_label_values(&[op, outcome]).inc();
    result
}

/// Everything registered in the process, as Prometheus text.
pub fn render() -> String {
    let mut buf = Vec::new();
    // Encoding into a Vec only fails on invalid metric families, which we never register.
    let _ = TextEncoder::new().encode(&prometheus::gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}
