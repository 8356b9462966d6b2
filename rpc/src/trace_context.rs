//! W3C trace context across RPCs: a caller sends the `traceparent` of its current span as
//! gRPC metadata, and the server makes it the parent of the span the call runs in, so one S3
//! request is one trace across processes.
//!
//! This crate does not depend on OpenTelemetry: the binary installs a [`Propagate`] once
//! (`saker server --otlp-endpoint`). Without one nothing is sent or read, and the spans are
//! plain `tracing` spans at debug level, which the default log filter disables: tracing off
//! costs one atomic load per call. A peer that sends no header (an older one) starts a new
//! trace; one that does not know the header ignores it, so the wire version is unchanged.

use std::sync::OnceLock;

use tonic::metadata::MetadataMap;

/// The metadata key (lower case, as HTTP/2 requires).
pub const TRACEPARENT: &str = "traceparent";

/// Reads and writes the trace context of `tracing` spans (implemented over OpenTelemetry by
/// the binary).
pub trait Propagate: Send + Sync + 'static {
    /// The `traceparent` of the current span, if it is part of a trace.
    fn current(&self) -> Option<String>;
    /// Makes the remote span named by `traceparent` the parent of `span` (not yet entered).
    fn adopt(&self, span: &tracing::Span, traceparent: &str);
}

static PROPAGATOR: OnceLock<Box<dyn Propagate>> = OnceLock::new();

/// Installs the process's propagator; a second call is ignored (returns false).
pub fn install(propagator: Box<dyn Propagate>) -> bool {
    PROPAGATOR.set(propagator).is_ok()
}

/// Adds the current span's `traceparent` to an outgoing call's metadata.
pub(crate) fn inject(metadata: &mut MetadataMap) {
    let Some(p) = PROPAGATOR.get() else {
        return;
    };
    if let Some(v) = p.current().and_then(|tp| tp.parse().ok()) {
        metadata.insert(TRACEPARENT, v);
    }
}

/// The `traceparent` of the current span, to carry to work that runs outside it (a raft
/// entry's journal write); None when tracing is off or the span is not traced.
pub fn current() -> Option<String> {
    PROPAGATOR.get().and_then(|p| p.current())
}

/// Makes the span named by `traceparent` (from [`current`]) the parent of `span`.
pub fn adopt_parent(span: &tracing::Span, traceparent: &str) {
    if let Some(p) = PROPAGATOR.get() {
        if !span.is_disabled() {
            p.adopt(span, traceparent);
        }
    }
}

/// The caller's `traceparent`, from an incoming call's metadata.
pub(crate) fn parent_of(metadata: &MetadataMap) -> Option<&str> {
    PROPAGATOR.get()?;
    metadata.get(TRACEPARENT).and_then(|v| v.to_str().ok())
}
