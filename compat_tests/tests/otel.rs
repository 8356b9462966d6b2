//! OpenTelemetry export end to end: real `saker server` processes send their spans over
//! OTLP/gRPC to an in-test collector ([`common::otlp_sink`]). One S3 PUT of a chunked object
//! is one trace: the gateway's request span, the MNode's and the chunkstore's spans share its
//! trace id, across processes, each child naming a parent the trace holds; a write through a
//! FUSE mount is one trace from the kernel's request to the chunk; and what is buffered at
//! SIGTERM is flushed before the process ends. The FUSE test needs /dev/fuse and root (as CI
//! has); it fails loudly without.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::fuse::Mounted;
use common::multiproc::LocalCluster;
use common::otlp_sink::{OtlpSink, SpanRecord};
use common::*;

/// Larger than the default inline threshold (16 KiB): the object goes to a chunkstore.
const SIZE: usize = 100 * 1024;

/// The trace of the (one) PutObject among `spans`, if its request span arrived.
fn put_trace(spans: &[SpanRecord]) -> Option<Vec<SpanRecord>> {
    let root = spans.iter().find(|s| {
        s.name == "s3.request" && s.attrs.get("op").map(String::as_str) == Some("PutObject")
    })?;
    Some(
        spans
            .iter()
            .filter(|s| s.trace_id == root.trace_id)
            .cloned()
            .collect(),
    )
}

fn names(trace: &[SpanRecord]) -> BTreeSet<String> {
    trace.iter().map(|s| s.name.clone()).collect()
}

/// Polls the sink until `done` holds for the PUT's trace, failing with what arrived after
/// `deadline`.
async fn wait_for_trace(
    sink: &OtlpSink,
    deadline: Duration,
    done: impl Fn(&[SpanRecord]) -> bool,
) -> Vec<SpanRecord> {
    let end = Instant::now() + deadline;
    loop {
        let spans = sink.spans();
        if let Some(trace) = put_trace(&spans).filter(|t| done(t)) {
            return trace;
        }
        assert!(
            Instant::now() < end,
            "no complete PutObject trace after {deadline:?}; spans received: {:#?}",
            spans
                .iter()
                .map(|s| (&s.name, &s.trace_id, s.resource.get("saker.roles")))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every span but the root (named `root`) names a parent that is in the trace: the context
/// travelled.
fn assert_connected(trace: &[SpanRecord], root: &str) {
    let ids: BTreeSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
    for s in trace {
        if s.name == root {
            assert!(
                s.parent_id.is_empty(),
                "the request span is the root: {s:?}"
            );
        } else {
            assert!(
                ids.contains(s.parent_id.as_str()),
                "span {} has a parent outside its trace: {s:?}",
                s.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_put_across_six_processes_is_one_trace() {
    let sink = OtlpSink::start().await;
    let cluster = LocalCluster::start_with_env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint.as_str()),
        ("SAKER_OTLP_SAMPLE_RATIO", "1"),
        // Export every 100 ms instead of every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    let s3 = cluster.client(true);
    eventually("create the bucket", || {
        s3.create_bucket().bucket("traced").send()
    })
    .await;
    let data = random_bytes(SIZE);
    put(&s3, "traced", "d/object.bin", &data).await;

    let roles_of = |trace: &[SpanRecord], name: &str| -> BTreeSet<String> {
        trace
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| s.resource.get("saker.roles").cloned())
            .collect()
    };
    let trace = wait_for_trace(&sink, Duration::from_secs(30), |t| {
        let n = names(t);
        [
            "s3.request",
            "client.meta",
            "rpc.meta",
            "client.chunk_put",
            "rpc.chunk",
            "chunk.write",
            "mnode.batch",
            "raft.commit",
            "raft.append",
        ]
        .iter()
        .all(|want| n.contains(*want))
    })
    .await;
    // One trace, three processes: the gateway's request, the owner MNode's execution of
    // the PutObject, the chunkstore's write of the chunk.
    assert_eq!(
        roles_of(&trace, "s3.request"),
        BTreeSet::from(["gateway".to_string()])
    );
    assert_eq!(
        roles_of(&trace, "rpc.meta"),
        BTreeSet::from(["mnode".to_string()])
    );
    assert_eq!(
        roles_of(&trace, "chunk.write"),
        BTreeSet::from(["chunkstore".to_string()])
    );
    let ops: BTreeSet<&str> = trace
        .iter()
        .filter(|s| s.name == "rpc.meta")
        .filter_map(|s| s.attrs.get("op").map(String::as_str))
        .collect();
    assert!(
        ops.contains("put_object"),
        "MNode ops in the trace: {ops:?}"
    );
    // The batch that carried the PutObject is in the request's trace, and so are its raft
    // commit and the leader's journal append, in the MNode's process.
    for name in ["mnode.batch", "raft.commit", "raft.append"] {
        assert_eq!(
            roles_of(&trace, name),
            BTreeSet::from(["mnode".to_string()]),
            "{name}"
        );
    }
    let by_id = |id: &str| trace.iter().find(|s| s.span_id == id).unwrap();
    let append = trace.iter().find(|s| s.name == "raft.append").unwrap();
    assert_eq!(by_id(&append.parent_id).name, "raft.commit");
    assert_eq!(
        by_id(&by_id(&append.parent_id).parent_id).name,
        "mnode.batch"
    );
    // Applying entries is traced too (its own traces: the state machine reads them back).
    let applies: Vec<SpanRecord> = sink
        .spans()
        .into_iter()
        .filter(|s| s.name == "raft.apply")
        .collect();
    assert!(
        applies
            .iter()
            .any(|s| s.attrs.contains_key("group") && s.attrs["entries"] != "0"),
        "{applies:?}"
    );
    let write = trace.iter().find(|s| s.name == "chunk.write").unwrap();
    assert_eq!(write.attrs.get("len").map(String::as_str), Some("102400"));
    for s in &trace {
        assert_eq!(
            s.resource.get("service.name").map(String::as_str),
            Some("saker")
        );
        assert!(s.resource.contains_key("service.instance.id"), "{s:?}");
    }
    assert_connected(&trace, "s3.request");
    // No credential or object key in any span of any process.
    for s in sink.spans() {
        for v in s.attrs.values() {
            assert!(!v.contains(ROOT_SK) && !v.contains("object.bin"), "{s:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spans_buffered_at_sigterm_are_flushed_and_batches_carry_their_size() {
    let sink = OtlpSink::start().await;
    // The default export delay (5 s) holds the spans back: only the flush at SIGTERM sends
    // them within this test's wait.
    let mut server = Server::start(
        Opts::default()
            .arg("--otlp-endpoint", &sink.endpoint)
            .arg("--otlp-sample-ratio", "1"),
    );
    let s3 = server.client();
    create_bucket(&s3, "flushed").await;
    let data = random_bytes(SIZE);
    put(&s3, "flushed", "object.bin", &data).await;
    assert!(server.terminate().success(), "{}", server.stderr_tail());

    let spans = sink.spans();
    let trace = put_trace(&spans).unwrap_or_else(|| panic!("no PutObject trace: {spans:#?}"));
    let n = names(&trace);
    for want in [
        "s3.request",
        "client.meta",
        "client.chunk_put",
        "chunk.write",
    ] {
        assert!(
            n.contains(want),
            "{want} missing from the PUT's trace: {n:?}"
        );
    }
    assert_connected(&trace, "s3.request");
    let batches: Vec<&SpanRecord> = spans.iter().filter(|s| s.name == "mnode.batch").collect();
    assert!(!batches.is_empty(), "no MNode batch span");
    for b in batches {
        let size: usize = b.attrs["size"].parse().unwrap();
        assert!(size >= 1, "{b:?}");
        assert!(b.attrs.contains_key("group"), "{b:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_through_the_mount_is_one_trace_from_the_fuse_op_to_the_chunk() {
    let sink = OtlpSink::start().await;
    let endpoint = sink.endpoint.clone();
    let mut mounted = tokio::task::spawn_blocking(move || {
        Mounted::start(
            Opts::default()
                .arg("--otlp-endpoint", &endpoint)
                .arg("--otlp-sample-ratio", "1"),
        )
    })
    .await
    .unwrap();
    let root = mounted.root.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir(root.join("fusetraced")).unwrap();
        std::fs::write(root.join("fusetraced/file.bin"), random_bytes(SIZE)).unwrap();
    })
    .await
    .unwrap();
    // The flush at SIGTERM sends what the exporter still holds.
    assert!(mounted.srv.terminate().success());

    let spans = sink.spans();
    let write = spans
        .iter()
        .find(|s| s.name == "chunk.write")
        .unwrap_or_else(|| panic!("no chunk.write span: {spans:#?}"));
    let trace: Vec<SpanRecord> = spans
        .iter()
        .filter(|s| s.trace_id == write.trace_id)
        .cloned()
        .collect();
    let roots: Vec<&SpanRecord> = trace.iter().filter(|s| s.parent_id.is_empty()).collect();
    assert_eq!(roots.len(), 1, "{trace:#?}");
    assert_eq!(roots[0].name, "fuse.op", "{trace:#?}");
    assert!(names(&trace).contains("client.chunk_put"), "{trace:#?}");
    assert_connected(&trace, "fuse.op");
}
