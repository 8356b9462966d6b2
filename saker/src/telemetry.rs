//! Logs and traces: the `tracing` subscriber of the process, and (with `--otlp-endpoint` or
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) the export of its spans to an OpenTelemetry collector over
//! OTLP/gRPC.
//!
//! Spans (S3 request, RPC, client call, MNode batch, chunk read/write) are `tracing` spans at
//! debug level. The log output keeps its own filter (`SAKER_LOG`, info by default), so
//! without an endpoint they are disabled at their call sites and cost nothing; with one, a
//! second layer with its own filter turns the spans of the saker crates (and warnings and
//! errors inside them, as span events) into OpenTelemetry spans. The W3C `traceparent` of the
//! current span travels in every RPC's metadata ([`saker_rpc::trace_context`]), so one S3
//! request is one trace across processes. Span attributes carry operation names, groups and
//! sizes, never object keys or credentials.

use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::{Level, Metadata};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{filter, Layer as _};

/// How long the flush at shutdown may take before the process ends anyway.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the spans of `saker server` and `saker mount` go.
#[derive(clap::Args, Clone, Debug)]
pub struct OtlpArgs {
    /// Export traces over OTLP/gRPC to this collector (e.g. `http://127.0.0.1:4317`: Jaeger,
    /// the OpenTelemetry Collector). Off when unset, at no cost.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// The share of traces exported (0 to 1), decided where a trace starts (the S3 request);
    /// the other processes follow that decision.
    #[arg(long, env = "SAKER_OTLP_SAMPLE_RATIO", default_value_t = 0.01, value_parser = ratio)]
    pub otlp_sample_ratio: f64,
}

fn ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("a sample ratio is a number from 0 to 1, not '{s}'")),
    }
}

/// Who exports: the resource attributes of every span of this process.
pub struct Exporting {
    pub args: OtlpArgs,
    /// `service.instance.id`: the node id or the RPC address.
    pub node: String,
    /// The roles the process runs (`gateway,mnode,…`).
    pub roles: String,
}

/// The installed pipeline; [`Telemetry::shutdown`] flushes what is not exported yet.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the process's subscriber: logs to stderr (`SAKER_LOG`), and spans to the OTLP
/// endpoint when `exporting` names one. Must run inside the tokio runtime (the exporter's
/// gRPC connection lives on it).
pub fn init(exporting: Option<Exporting>) -> anyhow::Result<Telemetry> {
    let logs = log_filter(std::env::var("SAKER_LOG").ok().as_deref());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(logs);
    let exporting = exporting.filter(|e| e.args.otlp_endpoint.is_some());
    let Some(exporting) = exporting else {
        tracing_subscriber::registry().with(fmt).init();
        return Ok(Telemetry { provider: None });
    };
    let endpoint = exporting.args.otlp_endpoint.clone().unwrap_or_default();
    let provider = provider(&endpoint, &exporting)?;
    // No busy/idle timing (two clock reads per poll of every instrumented future), no
    // OpenTelemetry context made current on each enter (the RPC propagation reads the
    // span's own context), no thread or source location attributes: they cost CPU on every
    // span whether its trace is sampled or not.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("saker"))
        .with_tracked_inactivity(false)
        .with_context_activation(false)
        .with_threads(false)
        .with_location(false)
        .with_filter(filter::filter_fn(exported));
    tracing_subscriber::registry().with(fmt).with(otel).init();
    saker_rpc::trace_context::install(Box::new(W3c));
    tracing::info!(
        endpoint = %endpoint,
        ratio = exporting.args.otlp_sample_ratio,
        "exporting traces over OTLP"
    );
    Ok(Telemetry {
        provider: Some(provider),
    })
}

/// The log filter: `SAKER_LOG` (`spec`) or the default, with s3s's own target off unless the
/// spec names it. s3s logs every failed request at ERROR, a client's mistakes too, with the
/// request echoed (a malformed body's bytes, signatures at debug); the gateway logs each
/// failure once in its own words (`saker_gateway::http::request_log`).
fn log_filter(spec: Option<&str>) -> filter::EnvFilter {
    // openraft reports every failed heartbeat to a peer that is down (several a second per
    // group); the MNodes log what matters to an operator (leadership, a stopped group).
    const DEFAULT: &str = "warn,saker=info,openraft=off";
    let spec = spec.filter(|s| !s.trim().is_empty());
    let mut spec = spec
        .filter(|s| filter::EnvFilter::try_new(s).is_ok())
        .unwrap_or(DEFAULT)
        .to_string();
    if !spec.contains("s3s") {
        spec.push_str(",s3s=off");
    }
    filter::EnvFilter::try_new(&spec).unwrap_or_else(|_| DEFAULT.into())
}

impl Telemetry {
    /// Exports the spans still buffered and stops the exporter (at SIGTERM, after the
    /// server stopped).
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        // The SDK's shutdown blocks until its export thread is done; the export itself runs
        // on this runtime, so it must not block a worker.
        let done =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT));
        match done.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("saker: flushing traces failed: {e}"),
            Err(e) => eprintln!("saker: flushing traces failed: {e}"),
        }
    }
}

fn provider(endpoint: &str, exporting: &Exporting) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .with_context(|| format!("OTLP exporter for {endpoint}"))?;
    let resource = Resource::builder()
        .with_service_name("saker")
        .with_attributes([
            KeyValue::new("service.instance.id", exporting.node.clone()),
            KeyValue::new("saker.roles", exporting.roles.clone()),
        ])
        .build();
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
        exporting.args.otlp_sample_ratio,
    )));
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler)
        .with_resource(resource)
        .build())
}

/// What becomes OpenTelemetry data: the spans of the saker crates (debug and up), and
/// warnings and errors inside them (as span events).
fn exported(meta: &Metadata<'_>) -> bool {
    meta.target().starts_with("saker")
        && if meta.is_span() {
            *meta.level() <= Level::DEBUG
        } else {
            *meta.level() <= Level::WARN
        }
}

/// `traceparent` of `tracing` spans, through their OpenTelemetry context.
struct W3c;

impl saker_rpc::trace_context::Propagate for W3c {
    fn current(&self) -> Option<String> {
        let cx = tracing::Span::current().context();
        let span = cx.span();
        let sc = span.span_context();
        sc.is_valid().then(|| {
            format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            )
        })
    }

    fn adopt(&self, span: &tracing::Span, traceparent: &str) {
        use opentelemetry::propagation::TextMapPropagator as _;
        let carrier =
            std::collections::HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
        let cx = opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        if cx.span().span_context().is_remote() {
            let _ = span.set_parent(cx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_ratios_outside_zero_to_one_are_refused() {
        assert_eq!(ratio("1"), Ok(1.0));
        assert_eq!(ratio("0.25"), Ok(0.25));
        assert!(ratio("1.5").is_err());
        assert!(ratio("-0.1").is_err());
        assert!(ratio("all").is_err());
    }

    #[test]
    fn s3s_logs_only_where_the_filter_names_it() {
        let shown = |spec| log_filter(spec).to_string();
        assert!(shown(None).contains("s3s=off"), "{}", shown(None));
        assert!(shown(Some("debug")).contains("s3s=off"));
        assert!(shown(Some("not a filter ===")).contains("s3s=off"));
        assert!(!shown(Some("info,s3s=debug")).contains("s3s=off"));
        assert!(shown(Some("info,s3s=debug")).contains("s3s=debug"));
    }

    #[test]
    fn only_saker_spans_and_warnings_are_exported() {
        use tracing::callsite::Identifier;
        use tracing::field::FieldSet;
        use tracing::metadata::Kind;
        struct Site;
        impl tracing::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unreachable!()
            }
        }
        static SITE: Site = Site;
        let meta = |target, level, kind| {
            Metadata::new(
                "m",
                target,
                level,
                None,
                None,
                None,
                FieldSet::new(&[], Identifier(&SITE)),
                kind,
            )
        };
        assert!(exported(&meta(
            "saker_mnode::executor",
            Level::DEBUG,
            Kind::SPAN
        )));
        assert!(!exported(&meta(
            "saker_mnode::executor",
            Level::TRACE,
            Kind::SPAN
        )));
        assert!(!exported(&meta("h2::codec", Level::DEBUG, Kind::SPAN)));
        assert!(exported(&meta("saker_gateway", Level::WARN, Kind::EVENT)));
        assert!(!exported(&meta("saker_gateway", Level::INFO, Kind::EVENT)));
    }
}
