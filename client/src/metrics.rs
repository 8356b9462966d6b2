//! Client-side metrics: MNode requests per client operation (the hops ARCHITECTURE.md counts).

use std::sync::LazyLock;

use prometheus::{
    register_gauge, register_histogram, register_int_counter, register_int_gauge_vec, Gauge,
    Histogram, IntCounter, IntGaugeVec,
};

/// MNode requests one library operation sent: 1 for a lookup or a write whose parents exist,
/// more when implicit parents had to be created first.
pub static MNODE_REQUESTS_PER_OP: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "saker_client_mnode_requests_per_op",
        "MNode requests sent per client operation (hops)",
        vec![1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0]
    )
    .expect("metric registers once")
});

/// Exception tables fetched because a reply carried a newer version than the client's.
pub static ROUTING_REFRESHES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "saker_client_routing_refreshes_total",
        "Exception tables a client fetched after a reply showed its own was stale"
    )
    .expect("metric registers once")
});

/// The cut-off of the last finished leak scrub (Unix seconds): every chunk written before it
/// was checked against the records that reference chunks.
pub static SCRUB_CUTOFF: LazyLock<Gauge> = LazyLock::new(|| {
    register_gauge!(
        "saker_gc_scrub_cutoff_seconds",
        "Chunks written before this time (Unix seconds) were checked by the last leak scrub"
    )
    .expect("metric registers once")
});

/// The erasure-coded chunks the metadata references, by layout (`4+2`), as the last repair or
/// scrub pass listed them: `chunks`, their `stored` bytes, and the bytes their shards take on
/// the chunkstores (`raw`, headers and checksums aside).
pub static CODED: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "saker_ec_coded",
        "Erasure-coded chunks referenced, by layout: chunks, stored bytes and shard bytes (raw), as the last repair or scrub listed them",
        &["layout", "what"]
    )
    .expect("metric registers once")
});
