//! The all-in-one server: every role in this process on the embedded store of `--data-dir`,
//! its MNode groups in-process ([`saker_mnode::LocalGroups`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;

use saker_chunkstore::{ChunkServer, ChunkStore, DiskChunkStore, Member, ReplicatedChunkStore};
use saker_client::Cluster;
use saker_coordinator::{AccessKeyStore, NamespaceCoordinator};
use saker_mnode::LocalGroups;
use saker_rpc::{ClusterMap, CoordinatorService, MetaService, RpcServer};
use tokio::net::TcpListener;

use crate::admin::{self, AdminState};
use crate::data_dir::{cluster_file, open_store};
use crate::server::args::ServerArgs;
use crate::server::config::pathwalk_table;
use crate::server::loops::Active;
use crate::server::loops::{balance_loop, spawn_passes};
use crate::server::secrets::{env_root_key, shown_secret, sse_keys};
use crate::signal::shutdown_signal;

/// Runs every role in this process on the embedded store of `--data-dir`.
pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("cannot create data dir {}", args.data_dir.display()))?;
    crate::disk_space::watch(&args.data_dir);
    crate::disk_space::keep_reserve(&args.data_dir, args.meta_reserve);
    // The RPC listener serves holders of this cluster's credential only.
    crate::cluster_credential::install_node(
        &args.data_dir.join(crate::cluster_credential::FILE_NAME),
        true,
        args.insecure_rpc,
    )?;
    let env_root = env_root_key();
    let root_from_env = env_root.is_some();
    let keys = Arc::new(AccessKeyStore::open(
        &args.data_dir.join("access-keys.json"),
        env_root,
    )?);
    let recorded = cluster_file(
        &args.data_dir,
        args.mnodes,
        args.store,
        None,
        &args.pathwalk,
        args.tikv_keyspace.as_deref(),
    )?;
    let mnodes = recorded.mnodes;
    let opened = open_store(
        &args.data_dir,
        &recorded,
        args.durability,
        &args.pd,
        args.tikv_gc(),
    )?;
    let store = opened.store;
    if let Some(dir) = &args.restore {
        let groups: Vec<u32> = (1..=mnodes).collect();
        crate::backup::restore(dir, &store, &groups, &groups, Some(&args.data_dir)).await?;
    }
    let chunks = chunk_store(&args)?;
    let tikv = opened.tikv.clone();
    let mut mnode_config = args.mnode_config(1, opened.tikv);
    mnode_config.sse_keys = sse_keys(args.master_keys(&args.data_dir)?);
    let local = LocalGroups::start_placed(
        store,
        mnodes,
        mnode_config,
        recorded.vnodes,
        pathwalk_table(&args.pathwalk),
    )
    .await?;
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = local.services();
    let namespace = Arc::new(
        NamespaceCoordinator::persistent(local.router.clone(), groups.clone(), &args.data_dir)
            .await?,
    );
    let coordinator: Arc<dyn CoordinatorService> = namespace.clone();
    local.connect(coordinator.clone());
    // Renames a crash left half done are finished before serving (or, if an MNode keeps
    // failing them, in the background, as are renames whose MNodes stop answering later).
    let resolving = tokio::spawn({
        let namespace = namespace.clone();
        async move { namespace.resolve_pending().await }
    });
    if tokio::time::timeout(std::time::Duration::from_secs(10), resolving)
        .await
        .is_err()
    {
        tracing::warn!("logged renames are still unresolved; retrying in the background");
    }
    tokio::spawn(namespace.clone().run_resolver());
    tokio::spawn(balance_loop(namespace.clone(), args.balance()));
    let map = ClusterMap {
        version: 1,
        groups: local.router.ring().groups().to_vec(),
        vnodes: recorded.vnodes,
        exceptions: local.router.exceptions().clone(),
        endpoints: Default::default(),
    };
    anyhow::ensure!(
        map.router()? == local.router,
        "the cluster map does not describe the in-process groups"
    );
    let cluster = Arc::new(Cluster::new(
        local.router.clone(),
        groups.clone(),
        chunks.clone(),
        args.client_config(&args.data_dir)?,
    ));

    let gateway = args.gateway(cluster.clone(), keys.clone(), &args.data_dir)?;
    // Library mounts read tiered versions through this node, which holds the tiers' keys.
    let rpc = RpcServer::new(groups.clone(), coordinator, map)
        .with_chunks(Arc::new(ChunkServer(chunks.clone())))
        .with_tier_reads(gateway.tiers().clone());
    let s3 = gateway
        .clone()
        .into_front(args.domain.as_deref())
        .map_err(|e| anyhow::anyhow!("bad --domain: {e}"))?;
    let s3_listener = TcpListener::bind(args.s3_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.s3_addr))?;
    let admin_listener = TcpListener::bind(args.admin_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.admin_addr))?;
    let rpc_listener = TcpListener::bind(args.rpc_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.rpc_addr))?;
    let s3_addr = s3_listener.local_addr()?;
    let admin_addr = admin_listener.local_addr()?;
    let rpc_addr = rpc_listener.local_addr()?;

    let tls = args.tls()?;
    let scheme = crate::server::listeners::scheme(&tls);
    tokio::spawn(crate::server::listeners::serve_s3(
        s3_listener,
        tls.clone(),
        args.limits.connections(),
        s3,
        args.access_log()?,
    ));
    let sets = local
        .mnodes
        .iter()
        .map(|m| {
            let replica = saker_rpc::Replica {
                addr: "local".into(),
                service: m.clone(),
            };
            (
                m.group(),
                Arc::new(saker_rpc::ReplicaSet::new(vec![replica])),
            )
        })
        .collect();
    let admin_app = admin::router(AdminState {
        keys: keys.clone(),
        chunks,
        cluster: cluster.clone(),
        nonces: Default::default(),
        nodes: None,
        namespace: Active::fixed(namespace.clone()),
        groups: Arc::new(sets),
        gateway: Some(gateway.clone()),
        forward: Default::default(),
        plain_public: admin::plain_public(tls.is_some(), Some(admin_addr)),
    });
    tokio::spawn(crate::server::listeners::serve_router(
        admin_listener,
        tls,
        admin_app,
    ));
    tokio::spawn(async move {
        if let Err(e) = rpc.serve(rpc_listener).await {
            tracing::error!(error = %e, "RPC listener failed");
        }
    });
    spawn_passes(&cluster, gateway, args.passes(), None, false);

    let fuse = match &args.mount {
        Some(path) => Some(crate::mount::spawn(
            cluster.clone(),
            path,
            &args.fuse,
            args.durability,
        )?),
        None => None,
    };

    let root = keys.root();
    println!("saker is ready");
    println!("  S3 endpoint:  {scheme}://{s3_addr}");
    println!("  admin:        {scheme}://{admin_addr}  (/health, /metrics)");
    println!("  RPC (library clients): {rpc_addr}");
    println!("  data dir:     {}", args.data_dir.display());
    println!("  MNode groups: {mnodes}");
    if let Some(path) = &args.mount {
        println!("  mounted at:   {}", path.display());
    }
    println!("  access key:   {}", root.access_key);
    if root_from_env {
        println!("  secret key:   (from SAKER_SECRET_KEY)");
    } else {
        println!(
            "  secret key:   {}",
            shown_secret(&root.secret_key, &args.data_dir)
        );
    }
    println!("  try: AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY=... aws --endpoint-url {scheme}://{s3_addr} s3 ls", root.access_key);

    shutdown_signal().await;
    tracing::info!("shutting down");
    if let (Some((session, guard)), Some(path)) = (fuse, &args.mount) {
        crate::mount::unmount(path);
        // Wait for the session's threads, so every op's span has ended before telemetry's
        // last flush; a lazy unmount with files still open keeps them, so not for long.
        let served = tokio::task::spawn_blocking(move || session.join());
        match tokio::time::timeout(std::time::Duration::from_secs(5), served).await {
            Ok(Ok(Ok(()))) => {}
            Ok(r) => tracing::warn!(?r, "the FUSE session ended badly"),
            Err(_) => {
                tracing::warn!("the FUSE session is still open (files held open); leaving it")
            }
        }
        drop(guard);
    }
    local.shutdown().await;
    crate::data_dir::leave_tikv_gc(tikv.as_ref());
    Ok(())
}

/// The server's chunkstore: DATA_DIR/chunks, or one per `--chunk-dirs` directory, each chunk
/// on min(3, N) of them (their paths are their ids in placement).
fn chunk_store(args: &ServerArgs) -> anyhow::Result<Arc<dyn ChunkStore>> {
    if args.chunk_dirs.is_empty() {
        let dir = args.data_dir.join("chunks");
        return Ok(Arc::new(DiskChunkStore::open_with_durability(
            &dir,
            args.durability,
        )?));
    }
    let mut members = Vec::with_capacity(args.chunk_dirs.len());
    for (i, dir) in args.chunk_dirs.iter().enumerate() {
        anyhow::ensure!(
            !args.chunk_dirs[..i].contains(dir),
            "--chunk-dirs names {} twice",
            dir.display()
        );
        let store = DiskChunkStore::open_with_durability(dir, args.durability)
            .with_context(|| format!("chunk directory {}", dir.display()))?;
        crate::disk_space::watch(dir);
        let id = dir.display().to_string();
        members.push(Member::placing(
            id,
            Arc::new(store) as Arc<dyn ChunkStore>,
            false,
        ));
    }
    let copies = members.len().min(3);
    Ok(Arc::new(ReplicatedChunkStore::new(members, copies)))
}
