//! An OTLP/gRPC trace sink for benchmarks: takes spans on `ADDR` (default 127.0.0.1:4317),
//! keeps nothing but their count, and prints it at SIGINT/SIGTERM (what the tracing-overhead
//! bench exports to; `compat_tests/bench/otel_overhead.sh`).
//!
//! `cargo run --release -p saker-compat-tests --example otlp_sink -- 127.0.0.1:4317`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::{Request, Response, Status};

struct Counter(Arc<AtomicU64>);

#[tonic::async_trait]
impl TraceService for Counter {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let n: usize = request
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.fetch_add(n as u64, Ordering::Relaxed);
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4317".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("OTLP sink on http://{addr}");
    let spans = Arc::new(AtomicU64::new(0));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let stop = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    };
    tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(
            TraceServiceServer::new(Counter(spans.clone())),
            tonic::transport::server::TcpIncoming::from(listener),
            stop,
        )
        .await?;
    println!("{}", spans.load(Ordering::Relaxed));
    Ok(())
}
