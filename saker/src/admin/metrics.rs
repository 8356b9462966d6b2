//! `/metrics`: the Prometheus text of the process.

use std::sync::atomic::Ordering;

use axum::extract::State;

use crate::admin::state::AdminState;

pub(super) async fn metrics(State(st): State<AdminState>) -> String {
    render_metrics(Some(&*st.chunks))
}

/// Prometheus text: everything registered, plus the chunkstore's counters.
pub(super) fn render_metrics(chunks: Option<&dyn saker_chunkstore::ChunkStore>) -> String {
    let mut out = saker_gateway::metrics::render();
    out.push_str(&crate::admin::chunks::metrics());
    let name = "saker_sse_tag_failures_total";
    let failures = saker_client::sealed::packages::TAG_FAILURES.load(Ordering::Relaxed);
    out.push_str(&format!(
        "# HELP {name} Encrypted packages read whose authentication tag did not match\n\
         # TYPE {name} counter\n{name} {failures}\n"
    ));
    let Some(chunks) = chunks else {
        return out;
    };
    let c = chunks.stats();
    for (name, kind, help, value) in [
        (
            "saker_chunkstore_written_bytes_total",
            "counter",
            "Chunk bytes written",
            c.bytes_written,
        ),
        (
            "saker_chunkstore_read_bytes_total",
            "counter",
            "Chunk bytes read",
            c.bytes_read,
        ),
        (
            "saker_chunkstore_crc_failures_total",
            "counter",
            "Chunk reads that failed their CRC32C check",
            c.crc_failures,
        ),
        (
            "saker_chunkstore_chunks_put_total",
            "counter",
            "Chunks written",
            c.chunks_put,
        ),
        (
            "saker_chunkstore_chunks_deleted_total",
            "counter",
            "Chunks deleted",
            c.chunks_deleted,
        ),
        (
            "saker_chunkstore_volume_syncs_total",
            "counter",
            "fdatasyncs of chunk volumes (each makes a group of small-chunk puts durable)",
            c.volume_syncs,
        ),
        (
            "saker_chunkstore_volume_compactions_total",
            "counter",
            "Chunk volumes removed by compaction",
            c.volume_compactions,
        ),
        (
            "saker_chunkstore_volume_bytes",
            "gauge",
            "Bytes in chunk volume files",
            c.volume_bytes,
        ),
        (
            "saker_chunkstore_volume_live_bytes",
            "gauge",
            "Bytes of chunk volume files that live chunks use",
            c.volume_live_bytes,
        ),
        (
            "saker_chunk_degraded_writes_total",
            "counter",
            "Chunk replicas a write could not make (repair fills them in)",
            c.degraded_writes,
        ),
        (
            "saker_chunk_read_repairs_total",
            "counter",
            "Chunk replicas rewritten by reads that found them missing or corrupt",
            c.read_repairs,
        ),
        (
            "saker_chunk_degraded_reads_total",
            "counter",
            "Reads of erasure-coded chunks that rebuilt them from other shards (one they needed was missing, corrupt or unreachable)",
            c.degraded_reads,
        ),
        (
            "saker_chunk_repaired_total",
            "counter",
            "Chunk replicas re-created by repair passes",
            c.repaired,
        ),
        (
            "saker_chunk_under_replicated",
            "gauge",
            "Referenced chunks the last repair pass left short of replicas",
            c.under_replicated,
        ),
        (
            "saker_chunkstore_full",
            "gauge",
            "1 while the chunkstore refuses writes because its disk is full",
            u64::from(chunks.full().is_some()),
        ),
    ] {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
        ));
    }
    out
}
