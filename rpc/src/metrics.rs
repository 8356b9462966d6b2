//! RPC metrics (Prometheus, default registry): what the server side of every call costs.

use std::sync::LazyLock;

use prometheus::{register_histogram_vec, HistogramVec};

/// Server-side latency of every call by method (`meta`, `chunk`, `raft`, `coordinator`) and
/// request kind (the MNode op, the chunk op, the coordinator protocol).
pub static SERVER_LATENCY: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "saker_rpc_server_duration_seconds",
        "RPC server latency by method and request kind (decoded request to reply)",
        &["method", "op"],
        vec![
            0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
            0.5, 1.0, 2.5, 10.0
        ]
    )
    .expect("metric registers once")
});

/// RPC requests served in plaintext with a token (`--insecure-rpc`, an online upgrade's middle
/// steps): once every node calls over TLS, this stops growing, and the upgrade can be done.
pub static PLAINTEXT_REQUESTS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    prometheus::register_int_counter!(
        "saker_rpc_plaintext_requests_total",
        "RPC requests served in plaintext with a token"
    )
    .expect("metric registers once")
});

/// Data key requests refused because they came in plaintext from another host.
pub static KEYS_REFUSED_PLAINTEXT: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    prometheus::register_int_counter!(
        "saker_rpc_sse_keys_refused_plaintext_total",
        "Data key requests refused because they came in plaintext from another host"
    )
    .expect("metric registers once")
});

/// RPC connections refused at the TLS handshake (no certificate, another CA's, an expired
/// one, a plaintext caller, or one that never finished).
pub static HANDSHAKES_REFUSED: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    prometheus::register_int_counter!(
        "saker_rpc_handshakes_refused_total",
        "RPC connections refused at the TLS handshake"
    )
    .expect("metric registers once")
});
