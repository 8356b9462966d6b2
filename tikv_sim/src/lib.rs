//! A PD + TiKV test server for saker's TiKV engine: one process, one port, both services,
//! speaking the kvproto gRPC that `tikv-client` speaks to a real cluster. The keyspace is a
//! Percolator MVCC over ordered maps in memory ([`mvcc`]); PD hands out monotonic timestamps
//! and the regions, which split as they grow and can answer injected region errors
//! ([`Faults`]). PD keeps GC safe points as PD does (service safe points with TTLs, a GC
//! safe point that only moves forward); the cluster's own GC worker (TiDB's, in a shared
//! cluster) runs if it is given a life time, and versions below the GC safe point are
//! collected. A stats page (HTTP, `GET /stats?prefix=HEX`) tells the safe points and how many
//! versions the keys under a prefix hold. What it does not do: replicate, persist, or enforce
//! a real TiKV's limits.

pub mod cluster;
mod kv;
pub mod mvcc;
mod pd;
pub mod safe_points;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use cluster::{Advertised, Cluster, Faults};

/// How a test server is started.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The PD client URL PD hands out (`host:port`; `None`: where it listens).
    pub advertise_pd: Option<String>,
    /// The TiKV store address PD hands out (`None`: where it listens).
    pub advertise_store: Option<String>,
    pub faults: Faults,
    /// The cluster's own GC worker's life time (`None`: no GC worker runs).
    pub gc_life_time: Option<Duration>,
    /// How often GC runs (`ZERO`: every second).
    pub gc_every: Duration,
}

/// Largest gRPC message either side may send (a real TiKV's default is far above the
/// client's 4 MiB decode limit too).
const MAX_MESSAGE: usize = 64 << 20;

/// A running test server.
pub struct Sim {
    pub addr: SocketAddr,
    /// Where the stats page listens.
    pub stats: SocketAddr,
    pub cluster: Arc<Cluster>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    /// GC rounds and the stats page, stopped on drop.
    background: Vec<tokio::task::JoinHandle<()>>,
}

impl Sim {
    /// Serves PD and TiKV on `listen` (port 0: any free port) until dropped.
    pub async fn start(listen: SocketAddr, faults: Faults) -> std::io::Result<Self> {
        let options = Options {
            faults,
            ..Default::default()
        };
        Self::start_with(listen, options).await
    }

    /// As [`Sim::start`], with all the [`Options`]. The stats page listens on the same
    /// address, another port.
    pub async fn start_with(listen: SocketAddr, options: Options) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let stats_listener = tokio::net::TcpListener::bind((listen.ip(), 0)).await?;
        let stats = stats_listener.local_addr()?;
        let advertised = Advertised {
            pd: options.advertise_pd.unwrap_or_else(|| addr.to_string()),
            store: options.advertise_store.unwrap_or_else(|| addr.to_string()),
        };
        let cluster_id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        let cluster = Arc::new(Cluster::new(
            cluster_id,
            advertised,
            options.faults,
            options.gc_life_time,
        ));
        let pd = proto::pdpb::pd_server::PdServer::new(pd::Pd {
            cluster: cluster.clone(),
        })
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
        let kv = proto::tikvpb::tikv_server::TikvServer::new(kv::Kv {
            cluster: cluster.clone(),
        })
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        // As a real TiKV does (and `Server::serve` would): without it, small answers wait
        // for the client's delayed ACK (Nagle), 40 ms each.
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let task = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(pd)
                .add_service(kv)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = rx.await;
                }),
        );
        let every = if options.gc_every.is_zero() {
            Duration::from_secs(1)
        } else {
            options.gc_every
        };
        let background = vec![
            tokio::spawn(gc(cluster.clone(), every)),
            tokio::spawn(serve_stats(cluster.clone(), stats_listener)),
        ];
        Ok(Self {
            addr,
            stats,
            cluster,
            shutdown: Some(tx),
            task,
            background,
        })
    }

    /// Serves until the server fails (it does not stop on its own).
    pub async fn wait(mut self) -> Result<(), tonic::transport::Error> {
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => panic!("server task failed: {e}"),
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        for t in &self.background {
            t.abort();
        }
    }
}

/// Runs a GC round every `every`.
async fn gc(cluster: Arc<Cluster>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let removed = cluster.gc_round();
        if removed > 0 {
            tracing::debug!(removed, "versions collected");
        }
    }
}

/// Serves `GET /stats?prefix=HEX` ([`Cluster::stats`]).
async fn serve_stats(cluster: Arc<Cluster>, listener: tokio::net::TcpListener) {
    let app = axum::Router::new()
        .route(
            "/stats",
            axum::routing::get(
                |axum::extract::State(cluster): axum::extract::State<Arc<Cluster>>,
                 axum::extract::RawQuery(query): axum::extract::RawQuery| async move {
                    let prefix = query
                        .as_deref()
                        .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("prefix=")))
                        .map(hex::decode)
                        .unwrap_or(Ok(Vec::new()));
                    match prefix {
                        Ok(p) => Ok(cluster.stats(&p)),
                        Err(e) => Err((
                            axum::http::StatusCode::BAD_REQUEST,
                            format!("prefix is not hex: {e}\n"),
                        )),
                    }
                },
            ),
        )
        .with_state(cluster);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "stats page stopped");
    }
}

#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod proto {
    //! The kvproto messages and server traits, generated by the build script.
    pub mod coprocessor {
        tonic::include_proto!("coprocessor");
    }
    pub mod deadlock {
        tonic::include_proto!("deadlock");
    }
    pub mod disaggregated {
        tonic::include_proto!("disaggregated");
    }
    pub mod disk_usage {
        tonic::include_proto!("disk_usage");
    }
    pub mod encryptionpb {
        tonic::include_proto!("encryptionpb");
    }
    pub mod eraftpb {
        tonic::include_proto!("eraftpb");
    }
    pub mod errorpb {
        tonic::include_proto!("errorpb");
    }
    pub mod kvrpcpb {
        tonic::include_proto!("kvrpcpb");
    }
    pub mod metapb {
        tonic::include_proto!("metapb");
    }
    pub mod mpp {
        tonic::include_proto!("mpp");
    }
    pub mod pdpb {
        tonic::include_proto!("pdpb");
    }
    pub mod raft_serverpb {
        tonic::include_proto!("raft_serverpb");
    }
    pub mod replication_modepb {
        tonic::include_proto!("replication_modepb");
    }
    pub mod resource_manager {
        tonic::include_proto!("resource_manager");
    }
    pub mod tikvpb {
        tonic::include_proto!("tikvpb");
    }
    pub mod tracepb {
        tonic::include_proto!("tracepb");
    }
}
