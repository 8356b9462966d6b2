//! An OTLP/gRPC trace sink on loopback for the tests: a tonic server implementing the
//! OpenTelemetry collector's `TraceService`, keeping every span it is sent with the resource
//! of the process that sent it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// One exported span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_id: String,
    pub name: String,
    /// The span's attributes, values as text.
    pub attrs: BTreeMap<String, String>,
    /// The sending process's resource attributes (`service.name`, `service.instance.id`,
    /// `saker.roles`).
    pub resource: BTreeMap<String, String>,
}

/// The sink; it stops when dropped.
pub struct OtlpSink {
    /// `http://127.0.0.1:PORT`, for `--otlp-endpoint`.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<SpanRecord>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

struct Collector(Arc<Mutex<Vec<SpanRecord>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut got = Vec::new();
        for rs in request.into_inner().resource_spans {
            let resource = rs.resource.map(|r| text(&r.attributes)).unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(SpanRecord {
                        trace_id: hex::encode(&s.trace_id),
                        span_id: hex::encode(&s.span_id),
                        parent_id: hex::encode(&s.parent_span_id),
                        name: s.name,
                        attrs: text(&s.attributes),
                        resource: resource.clone(),
                    });
                }
            }
        }
        self.0.lock().unwrap().extend(got);
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

fn text(attrs: &[KeyValue]) -> BTreeMap<String, String> {
    attrs
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

impl OtlpSink {
    /// Serves on a free loopback port (inside a tokio runtime).
    pub async fn start() -> OtlpSink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service = TraceServiceServer::new(Collector(spans.clone()));
        tokio::spawn(
            tonic::transport::Server::builder().serve_with_incoming_shutdown(
                service,
                TcpIncoming::from(listener),
                async {
                    let _ = stopped.await;
                },
            ),
        );
        OtlpSink {
            endpoint,
            spans,
            _stop: stop,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<SpanRecord> {
        self.spans.lock().unwrap().clone()
    }
}
