//! One process of a multi-process cluster: starts the roles a [`ProcessConfig`] names and wires
//! them to the others over the RPC transport.
//!
//! Every role talks to the others through the service traits (`MetaService`,
//! `CoordinatorService`, `ChunkStore`), with a local object for the roles of this process and a
//! network handle for the rest, so the code paths are those of the all-in-one server. Peers are
//! dialled lazily: processes may start in any order, and a process that is down fails only the
//! requests it would serve (503 to S3 clients) until it is back.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use saker_chunkstore::{ChunkServer, ChunkStore, DiskChunkStore, RemoteChunkStore};
use saker_client::Cluster;
use saker_coordinator::{AccessKeyStore, NamespaceCoordinator};
use saker_gateway::Gateway;
use saker_mnode::{Mnode, RaftPeers};
use saker_rpc::{group_services, ChannelPool, CoordinatorService, MetaService, RpcServer};
use tokio::net::TcpListener;

use crate::admin::{self, AdminState};
use crate::process_config::{ProcessConfig, Role};
use crate::server::{
    cluster_file, env_root_key, gc_loop, open_store, serve_s3, shutdown_signal, ServerArgs,
};

pub async fn run(cfg: ProcessConfig, args: ServerArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("cannot create data dir {}", cfg.data_dir.display()))?;
    let map = cfg.cluster_map();
    let router = map.router()?;
    let channels = Arc::new(ChannelPool::default());

    // MNode: a replica of each group placed on this node, all on this process's store.
    let (node_id, hosted) = cfg.hosted();
    let raft_peers = Arc::new(RaftPeers::default());
    let mut mnodes: BTreeMap<u32, Arc<Mnode>> = BTreeMap::new();
    if !hosted.is_empty() {
        let n = map.groups.len() as u32;
        let one_group = cfg.group;
        cluster_file(
            &cfg.data_dir,
            n,
            args.store(),
            one_group,
            &cfg.cluster.pathwalk,
        )?;
        let store = open_store(&cfg.data_dir, args.store(), args.durability())?;
        let placement = cfg.cluster.placement();
        for g in hosted {
            let mut mcfg = args.mnode_config(g);
            mcfg.router = router.clone();
            mcfg.node_id = node_id;
            mcfg.voters = placement[&g]
                .iter()
                .map(|(id, addr)| (*id, addr.to_string()))
                .collect();
            mcfg.pool = Some(channels.clone());
            mcfg.snapshot_dir = cfg.data_dir.join("snapshots");
            let m = Mnode::start(store.clone(), mcfg).await?;
            raft_peers.register(g, m.raft_handle());
            mnodes.insert(g, m);
        }
    }
    // Every group as one service: its replicas here and elsewhere, calls going to the leader.
    let here = cfg.rpc_addr.map(|a| a.to_string());
    let groups = group_services(&map, "", &channels, |g, addr| {
        let m = mnodes.get(&g).filter(|_| here.as_deref() == Some(addr))?;
        Some(m.clone() as Arc<dyn MetaService>)
    })?;
    let mut namespace_here = None;
    let coordinator: Arc<dyn CoordinatorService> = if cfg.has(Role::Coordinator) {
        let namespace = Arc::new(NamespaceCoordinator::persistent(
            router.clone(),
            groups.clone(),
            &cfg.data_dir,
        )?);
        // The exception table is installed at the MNodes, and what a crash (or an MNode that
        // stopped answering) left half done is finished, once they answer.
        tokio::spawn({
            let namespace = namespace.clone();
            async move {
                namespace.resolve_pending().await;
                namespace.run_resolver().await
            }
        });
        namespace_here = Some(namespace.clone());
        tokio::spawn(crate::server::balance_loop(
            namespace.clone(),
            args.balance_every,
            args.balance_epsilon,
        ));
        namespace
    } else {
        Arc::new(channels.get(map.endpoints.coordinator(""))?.coordinator())
    };
    for m in mnodes.values() {
        m.connect(groups.clone(), coordinator.clone());
    }
    let local_chunks: Option<Arc<dyn ChunkStore>> = if cfg.has(Role::Chunkstore) {
        Some(Arc::new(DiskChunkStore::open_with_durability(
            &cfg.data_dir.join("chunks"),
            args.durability(),
        )?))
    } else {
        None
    };

    let mut lines = vec![format!(
        "saker process ready: {}",
        cfg.roles
            .iter()
            .map(|r| format!("{r:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(", ")
    )];
    if let Some(addr) = cfg.rpc_addr {
        // Serves this process's group (if any), the coordinator (a proxy unless it runs here),
        // the chunkstore (if it runs here) and the cluster map.
        let served: BTreeMap<u32, Arc<dyn MetaService>> = mnodes
            .iter()
            .map(|(g, m)| (*g, m.clone() as Arc<dyn MetaService>))
            .collect();
        let mut rpc =
            RpcServer::new(served, coordinator.clone(), map.clone()).with_raft(raft_peers.clone());
        if let Some(chunks) = &local_chunks {
            rpc = rpc.with_chunks(Arc::new(ChunkServer(chunks.clone())));
        }
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        lines.push(format!("  RPC:          {}", listener.local_addr()?));
        tokio::spawn(async move {
            if let Err(e) = rpc.serve(listener).await {
                tracing::error!(error = %e, "RPC listener failed");
            }
        });
    }

    let mut admin_app = None;
    if let (true, Some(s3_addr)) = (cfg.has(Role::Gateway), cfg.s3_addr) {
        let chunks: Arc<dyn ChunkStore> = match &local_chunks {
            Some(c) => c.clone(),
            None => Arc::new(RemoteChunkStore::new(
                channels.get(map.endpoints.chunkstore(""))?,
            )),
        };
        let keys = Arc::new(AccessKeyStore::open(
            &cfg.data_dir.join("access-keys.json"),
            env_root_key(),
        )?);
        let cluster = Arc::new(Cluster::new(
            router.clone(),
            groups.clone(),
            chunks.clone(),
            args.client_config(),
        ));
        let s3 = Gateway::new(cluster.clone(), keys.clone())
            .into_service(args.domain())
            .map_err(|e| anyhow::anyhow!("bad --domain: {e}"))?;
        let listener = TcpListener::bind(s3_addr)
            .await
            .with_context(|| format!("cannot listen on {s3_addr}"))?;
        lines.push(format!("  S3 endpoint:  http://{}", listener.local_addr()?));
        lines.push(format!("  access key:   {}", keys.root().access_key));
        if env_root_key().is_none() {
            lines.push(format!("  secret key:   {}", keys.root().secret_key));
        }
        tokio::spawn(serve_s3(listener, s3));
        let (scrub_age, interval) = args.gc();
        tokio::spawn(gc_loop(cluster, scrub_age, interval));
        admin_app = Some(admin::router(AdminState {
            keys,
            chunks,
            namespace: namespace_here.clone(),
        }));
    }
    if let Some(addr) = cfg.admin_addr {
        let app = admin_app.unwrap_or_else(|| admin::health_router(local_chunks.clone()));
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        lines.push(format!("  admin:        http://{}", listener.local_addr()?));
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "admin listener failed");
            }
        });
    }
    if !mnodes.is_empty() {
        let list: Vec<String> = mnodes.keys().map(|g| g.to_string()).collect();
        lines.push(format!("  MNode groups: {}", list.join(", ")));
    }
    lines.push(format!("  data dir:     {}", cfg.data_dir.display()));
    println!("{}", lines.join("\n"));

    shutdown_signal().await;
    tracing::info!("shutting down");
    for m in mnodes.values() {
        m.shutdown().await;
    }
    Ok(())
}
