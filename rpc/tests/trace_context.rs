//! W3C trace context over the RPC transport: the caller's `traceparent` arrives with the call
//! and becomes the parent of the span the call is served in. (The propagator and the
//! subscriber are process-wide: nextest runs each test in its own process.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use saker_rpc::trace_context::{install, Propagate};
use saker_rpc::{
    Attr, ClientTag, ClusterMap, CoordinatorService, Cred, MetaError, MetaRequest, MetaResponse,
    MetaService, RemoveCond, RpcChannel, RpcServer,
};
use tokio::net::TcpListener;

const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// Hands out `PARENT` as the current span's context while a call is made, and records what
/// the server side adopted (and for which span).
#[derive(Default)]
struct Recorder {
    adopted: Mutex<Vec<(String, String)>>,
}

impl Propagate for &'static Recorder {
    fn current(&self) -> Option<String> {
        Some(PARENT.to_string())
    }

    fn adopt(&self, span: &tracing::Span, traceparent: &str) {
        let name = span.metadata().map_or("?", |m| m.name()).to_string();
        self.adopted
            .lock()
            .unwrap()
            .push((name, traceparent.to_string()));
    }
}

struct Group;

#[async_trait]
impl MetaService for Group {
    async fn call(&self, _tag: ClientTag, _req: MetaRequest) -> Result<MetaResponse, MetaError> {
        Ok(MetaResponse::Done)
    }
}

struct NoCoordinator;

#[async_trait]
impl CoordinatorService for NoCoordinator {
    async fn remove_dir(&self, _: Vec<String>, _: RemoveCond) -> Result<(), MetaError> {
        Err(MetaError::Invalid("no coordinator".into()))
    }
    async fn rename(
        &self,
        _: Vec<String>,
        _: Vec<String>,
        _: bool,
        _: Cred,
        _: saker_rpc::RenameVersioning,
    ) -> Result<Attr, MetaError> {
        Err(MetaError::Invalid("no coordinator".into()))
    }
    async fn set_dir_attr(&self, _: MetaRequest) -> Result<Attr, MetaError> {
        Err(MetaError::Invalid("no coordinator".into()))
    }
    async fn link(
        &self,
        _: Vec<String>,
        _: Vec<String>,
        _: Option<saker_rpc::InodeId>,
        _: Cred,
    ) -> Result<Attr, MetaError> {
        Err(MetaError::Invalid("no coordinator".into()))
    }
}

/// Serves group 1 and returns a channel to it.
async fn served() -> RpcChannel {
    saker_rpc::auth::ensure_installed();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = [(1, Arc::new(Group) as _)].into();
    let map = ClusterMap {
        version: 1,
        groups: vec![1],
        vnodes: 16,
        exceptions: Default::default(),
        endpoints: Default::default(),
    };
    tokio::spawn(RpcServer::new(groups, Arc::new(NoCoordinator), map).serve(listener));
    RpcChannel::connect(&addr).await.unwrap()
}

/// Debug spans on, as `saker server --otlp-endpoint` has them.
fn spans_on() {
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::DEBUG),
    )
    .unwrap();
}

use tracing_subscriber::layer::SubscriberExt as _;

#[tokio::test]
async fn the_callers_traceparent_becomes_the_parent_of_the_served_span() {
    spans_on();
    let recorder: &'static Recorder = Box::leak(Box::default());
    assert!(install(Box::new(recorder)));
    let channel = served().await;
    let reply = channel
        .meta(1)
        .call(ClientTag { client: 1, seq: 1 }, MetaRequest::Counters)
        .await;
    assert_eq!(reply, Ok(MetaResponse::Done));
    assert_eq!(
        *recorder.adopted.lock().unwrap(),
        [("rpc.meta".to_string(), PARENT.to_string())]
    );
}
