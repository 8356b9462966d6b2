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
use saker_chunkstore::{ChunkServer, ChunkStore, DiskChunkStore, ReplicatedChunkStore};
use saker_client::Cluster;
use saker_coordinator::{AccessKeyStore, NamespaceCoordinator};
use saker_rpc::{replica_sets, ChannelPool, CoordinatorService, MetaService, RpcServer};
use tokio::net::TcpListener;

use crate::admin::{self, AdminState};
use crate::coordinator_host::{CoordinatorHost, CoordinatorRoute};
use crate::data_dir::{cluster_file, open_store};
use crate::hosting::{Hosting, LocalReplica};
use crate::server::args::ServerArgs;
use crate::server::config::{ProcessConfig, Role};
use crate::server::incarnation::hosted_groups;
use crate::server::loops::{spawn_passes, Active};
use crate::server::secrets::env_root_key;
use crate::signal::shutdown_signal;

pub async fn run(cfg: ProcessConfig, args: ServerArgs) -> anyhow::Result<()> {
    if !cfg.cluster.nodes.is_empty() && env_root_key().is_none() {
        // Every node's gateway must accept the same root key; none may make up its own.
        eprintln!(
            "a replicated cluster needs SAKER_ACCESS_KEY and SAKER_SECRET_KEY (the root key, \
             the same on every node)"
        );
        std::process::exit(2);
    }
    std::fs::create_dir_all(&cfg.data_dir)
        .with_context(|| format!("cannot create data dir {}", cfg.data_dir.display()))?;
    crate::disk_space::watch(&cfg.data_dir);
    crate::disk_space::keep_reserve(&cfg.data_dir, args.meta_reserve);
    crate::cluster_credential::install_node(&cfg.cluster.credential, false, args.insecure_rpc)?;
    let map = cfg.cluster_map();
    let router = map.router()?;
    let channels = Arc::new(ChannelPool::default());

    // MNode: a replica of each group this node hosts, all on this process's store.
    let (node_id, placed) = cfg.hosted();
    let mut hosting = None;
    // The TiKV engine, if the MNode runs on it: its service safe point goes at shutdown.
    let mut tikv = None;
    if cfg.has(Role::Mnode) {
        let n = map.groups.len() as u32;
        let one_group = cfg.group;
        let recorded = cluster_file(
            &cfg.data_dir,
            n,
            args.store(),
            one_group,
            &cfg.cluster.pathwalk,
            args.tikv().1,
        )?;
        let opened = open_store(
            &cfg.data_dir,
            &recorded,
            args.durability(),
            args.tikv().0,
            args.tikv_gc(),
        )?;
        let store = opened.store;
        tikv = opened.tikv.clone();
        let placement = cfg.cluster.placement();
        let (node_id, hosted) = if cfg.cluster.nodes.is_empty() {
            let hosted = placed.iter().map(|g| (*g, vec![])).collect();
            (node_id, hosted)
        } else {
            let addrs = |g: &u32| -> Vec<(u64, String)> {
                placement[g]
                    .iter()
                    .map(|(id, addr)| (*id, addr.to_string()))
                    .collect()
            };
            let placed = placed.iter().map(|g| (*g, addrs(g))).collect();
            hosted_groups(&cfg.data_dir, node_id, &placement, placed, &channels).await?
        };
        if let Some(dir) = &args.restore {
            let hosted: Vec<u32> = hosted.keys().copied().collect();
            let install = crate::backup::created_here(&hosted, &placement, node_id);
            let state_dir = cfg.has(Role::Coordinator).then_some(cfg.data_dir.as_path());
            // A replicated cluster's coordinator keeps its records in group 1.
            let state_dir = state_dir.filter(|_| cfg.cluster.nodes.is_empty());
            crate::backup::restore(dir, &store, &map.groups, &install, state_dir).await?;
        }
        let mut template = args.mnode_config(0, opened.tikv.clone());
        template.router = router.clone();
        template.node_id = node_id;
        template.pool = Some(channels.clone());
        template.addr = cfg
            .rpc_addr
            .as_ref()
            .map(|a| a.to_string())
            .unwrap_or_default();
        template.snapshot_dir = cfg.data_dir.join("snapshots");
        template.sse_keys = crate::server::secrets::sse_keys(args.master_keys(&cfg.data_dir)?);
        let h = Hosting::open(store, template, map.groups.clone(), &cfg.data_dir, hosted).await?;
        hosting = Some(Arc::new(h));
    }
    // Every group as one service: its replicas here and elsewhere, calls going to the leader.
    let here = cfg.rpc_addr.as_ref().map(|a| a.to_string());
    // This node's replica of a group is whichever it hosts at the time (replicas come and go).
    // The map names a node that moved at the address it was created at.
    let created_at = cfg.created_at();
    let is_here = |addr: &str| here.as_deref() == Some(addr) || created_at.as_deref() == Some(addr);
    let sets: crate::status::Groups = Arc::new(replica_sets(&map, "", &channels, |g, addr| {
        let h = hosting.as_ref().filter(|_| is_here(addr))?;
        Some(Arc::new(LocalReplica::new(h, g)) as Arc<dyn MetaService>)
    })?);
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = sets
        .iter()
        .map(|(g, s)| (*g, s.clone() as Arc<dyn MetaService>))
        .collect();
    let replicated = !cfg.cluster.nodes.is_empty();
    let mut active = None;
    let mut host = None;
    // What this process's gateway and MNodes call, and what it serves to other nodes.
    let (coordinator, served_coordinator): (
        Arc<dyn CoordinatorService>,
        Arc<dyn CoordinatorService>,
    ) = if replicated {
        // A replica of the coordinator, active while this node leads group 1 (its home, the
        // first group; it follows this node's replica of it, [`Hosting::connect`]).
        let h = CoordinatorHost::new(
            router.clone(),
            groups.clone(),
            here.clone().unwrap_or_default(),
            channels.clone(),
            args.balance(),
        )?;
        active = Some(h.active());
        host = Some(h.clone());
        (
            Arc::new(CoordinatorRoute::follow(h.clone())),
            Arc::new(CoordinatorRoute::here(h)),
        )
    } else if cfg.has(Role::Coordinator) {
        let namespace = Arc::new(
            NamespaceCoordinator::persistent(router.clone(), groups.clone(), &cfg.data_dir).await?,
        );
        // The exception table is installed at the MNodes, and what a crash (or an MNode
        // that stopped answering) left half done is finished, once they answer.
        tokio::spawn({
            let namespace = namespace.clone();
            async move {
                namespace.resolve_pending().await;
                namespace.run_resolver().await
            }
        });
        active = Some(Active::fixed(namespace.clone()));
        tokio::spawn(crate::server::loops::balance_loop(
            namespace.clone(),
            args.balance(),
        ));
        (namespace.clone(), namespace)
    } else {
        let remote = Arc::new(channels.get(map.endpoints.coordinator(""))?.coordinator());
        (remote.clone(), remote)
    };
    if let Some(h) = &hosting {
        let home = host.clone().filter(|_| cfg.has(Role::Coordinator));
        h.connect(groups.clone(), coordinator.clone(), home);
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
    let forward = crate::admin::forward::Shared::default();
    let tier_reads = Arc::new(LateTierReads::default());
    if let Some(addr) = cfg.rpc_bind() {
        // Serves this process's group (if any), the coordinator (a proxy unless it runs here),
        // the chunkstore (if it runs here), the cluster map and admin requests other nodes
        // hand here.
        let mut rpc = match &hosting {
            Some(h) => RpcServer::new(h.served(), served_coordinator, map.clone())
                .with_raft(h.raft_peers())
                .with_node(h.clone()),
            None => RpcServer::new(BTreeMap::new(), served_coordinator, map.clone()),
        };
        if let Some(chunks) = &local_chunks {
            rpc = rpc.with_chunks(Arc::new(ChunkServer(chunks.clone())));
        }
        if replicated {
            let live = crate::live_map::LiveMap::new(map.clone(), groups.clone());
            rpc = rpc.with_map(Arc::new(live));
        }
        rpc = rpc.with_admin(forward.clone());
        // Served once the gateway below made its tier clients (every node of a replicated
        // cluster runs one).
        rpc = rpc.with_tier_reads(tier_reads.clone());
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
        // Every chunk on `chunk_replicas` of the cluster's chunkstores (this node's among them,
        // under the id its data directory keeps).
        let me = match (&local_chunks, &here) {
            (Some(_), Some(addr)) => Some(crate::chunk_members::Me {
                id: crate::chunk_members::local_id(&cfg.data_dir, addr)?,
                addr: addr.clone(),
                zone: cfg.zone(),
                configured: cfg.configured_chunkstores(),
            }),
            _ => None,
        };
        let local = local_chunks
            .clone()
            .zip(me.as_ref())
            .map(|(c, me)| (me.id.as_str(), c));
        let placed = Arc::new(ReplicatedChunkStore::over(
            &cfg.configured_chunkstores().list(),
            map.endpoints.chunk_replicas,
            &channels,
            local,
        )?);
        let chunks: Arc<dyn ChunkStore> = placed.clone();
        // Which chunkstores take chunks follows the record node changes keep, and this node
        // keeps its address and zone there.
        let chunk_state = host.as_ref().map(|h| h.shared_state());
        if let Some(state) = &chunk_state {
            let follow = crate::chunk_members::follow(state.clone(), placed.clone(), me.clone());
            tokio::spawn(follow);
        }
        let key_file = cfg.data_dir.join("access-keys.json");
        if replicated {
            // The root key of a replicated cluster is the one it was created with.
            let recorded = AccessKeyStore::recorded_root(&key_file)?;
            if let (Some(old), Some((ak, sk))) = (recorded, env_root_key()) {
                if old.access_key != ak || old.secret_key != sk {
                    eprintln!(
                        "SAKER_ACCESS_KEY/SAKER_SECRET_KEY differ from the root key this node \
                         was created with (access key {}): the root key is fixed at bootstrap",
                        old.access_key
                    );
                    std::process::exit(2);
                }
            }
        }
        let keys = match (&host, env_root_key()) {
            (Some(host), Some(root)) => {
                let keys = Arc::new(AccessKeyStore::replicated(
                    &key_file,
                    root,
                    host.shared_state(),
                )?);
                tokio::spawn(keys.clone().follow());
                tokio::spawn(check_root(keys.clone()));
                keys
            }
            _ => Arc::new(AccessKeyStore::open(&key_file, env_root_key())?),
        };
        let cluster = Arc::new(Cluster::new(
            router.clone(),
            groups.clone(),
            chunks.clone(),
            args.client_config(&cfg.data_dir)?,
        ));
        if replicated {
            // A write that leaves a chunk short of replicas notes it for the repair passes.
            placed.set_repair_log(Arc::new(saker_client::GroupsRepairLog::new(&cluster)));
        }
        let gateway = args.gateway(cluster.clone(), keys.clone(), &cfg.data_dir)?;
        let _ = tier_reads.0.set(gateway.tiers().clone());
        let s3 = gateway
            .clone()
            .into_front(args.domain())
            .map_err(|e| anyhow::anyhow!("bad --domain: {e}"))?;
        let listener = TcpListener::bind(s3_addr)
            .await
            .with_context(|| format!("cannot listen on {s3_addr}"))?;
        let tls = args.tls()?;
        lines.push(format!(
            "  S3 endpoint:  {}://{}",
            crate::server::listeners::scheme(&tls),
            listener.local_addr()?
        ));
        lines.push(format!("  access key:   {}", keys.root().access_key));
        if env_root_key().is_none() {
            let shown =
                crate::server::secrets::shown_secret(&keys.root().secret_key, &cfg.data_dir);
            lines.push(format!("  secret key:   {shown}"));
        }
        tokio::spawn(crate::server::listeners::serve_s3(
            listener,
            tls,
            args.limits.connections(),
            s3,
            args.access_log()?,
        ));
        admin_app = Some(admin::router(AdminState {
            keys,
            chunks,
            cluster: cluster.clone(),
            nonces: Default::default(),
            nodes: replicated.then(|| {
                let nodes = crate::nodes::Nodes::new(sets.clone(), (*channels).clone());
                Arc::new(match &chunk_state {
                    Some(state) => nodes.with_chunks(crate::node_chunks::ChunkMoves::new(
                        cluster.clone(),
                        placed.clone(),
                        state.clone(),
                        (*channels).clone(),
                        args.repair_rate << 20,
                    )),
                    None => nodes,
                })
            }),
            namespace: active.clone().unwrap_or_default(),
            groups: sets.clone(),
            gateway: Some(gateway.clone()),
            forward: forward.clone(),
            plain_public: admin::plain_public(args.tls_cert.is_some(), cfg.admin_addr),
        }));
        // The passes run once per cluster: with the active coordinator in a replicated
        // cluster (every node has a gateway), in the one gateway process otherwise.
        let only_active = active.clone().filter(|_| replicated);
        spawn_passes(&cluster, gateway, args.passes(), only_active, replicated);
    }
    let lost = cfg.data_dir.join(crate::admin::chunks::REPAIR_AFTER_LOSS);
    if replicated && lost.exists() {
        tokio::spawn(crate::admin::chunks::repair_after_loss(sets.clone(), lost));
    }
    if let Some(addr) = cfg.admin_addr {
        let app =
            admin_app.unwrap_or_else(|| admin::health_router(local_chunks.clone(), sets.clone()));
        forward.serve(app.clone());
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let tls = args.tls()?;
        lines.push(format!(
            "  admin:        {}://{}",
            crate::server::listeners::scheme(&tls),
            listener.local_addr()?
        ));
        tokio::spawn(crate::server::listeners::serve_router(listener, tls, app));
    }
    if let Some(h) = &hosting {
        let list: Vec<String> = h.replicas().keys().map(|g| g.to_string()).collect();
        lines.push(format!("  MNode groups: {}", list.join(", ")));
    }
    lines.push(format!("  data dir:     {}", cfg.data_dir.display()));
    println!("{}", lines.join("\n"));

    shutdown_signal().await;
    tracing::info!("shutting down");
    for m in hosting.iter().flat_map(|h| h.replicas().into_values()) {
        m.shutdown().await;
    }
    crate::data_dir::leave_tikv_gc(tikv.as_ref());
    Ok(())
}

/// Checks that the cluster's root key is this node's (recording it at bootstrap) once group 1
/// answers; exits 2 if it is another.
async fn check_root(keys: Arc<AccessKeyStore>) {
    loop {
        match keys.check_root().await {
            Ok(()) => return,
            Err(saker_coordinator::KeyError::Invalid(m)) => {
                eprintln!("{m}");
                std::process::exit(2);
            }
            Err(e) => {
                tracing::debug!(error = %e, "the cluster's root key is not known yet");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}

/// The tier reads of a node whose gateway (and with it its tier clients) is made after its
/// RPC listener starts: refused until then, and for good on a node without a gateway.
#[derive(Default)]
struct LateTierReads(std::sync::OnceLock<Arc<saker_tier::Tiers>>);

#[async_trait::async_trait]
impl saker_rpc::TierReadService for LateTierReads {
    async fn read(
        &self,
        tier: saker_rpc::TierRef,
        start: u64,
        end: u64,
    ) -> Result<bytes::Bytes, String> {
        match self.0.get() {
            Some(tiers) => saker_rpc::TierReadService::read(&**tiers, tier, start, end).await,
            None => Err("this node runs no gateway, so it reads no tiers".into()),
        }
    }
}
