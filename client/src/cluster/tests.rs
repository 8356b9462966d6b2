use bytes::Bytes;
use saker_chunkstore::MemChunkStore;
use saker_mnode::{LocalGroups, MemStore, MetaStore, MnodeConfig, LOCAL_VNODES};
use saker_rpc::{ClusterMap, CoordinatorService, Layout, RpcServer};
use tokio::net::TcpListener;

use super::*;
use crate::list::{ListItem, Lister};

fn path(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| s.to_string()).collect()
}

fn object(data: &'static [u8]) -> NewObject {
    NewObject {
        size: data.len() as u64,
        etag: format!("etag-{}", data.len()),
        layout: Layout::Inline,
        inline: Some(Bytes::from_static(data)),
        ..Default::default()
    }
}

/// Three in-process groups, served over RPC on 127.0.0.1:0; returns the in-process cluster
/// and the address.
async fn served_groups(chunks: Arc<dyn ChunkStore>) -> (Cluster, String) {
    let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
    let local = LocalGroups::start(store, 3, MnodeConfig::new(1))
        .await
        .unwrap();
    let groups = local.services();
    let coordinator: Arc<dyn CoordinatorService> = Arc::new(
        saker_coordinator::NamespaceCoordinator::new(local.router.clone(), groups.clone()),
    );
    local.connect(coordinator.clone());
    let map = ClusterMap {
        version: 1,
        groups: groups.keys().copied().collect(),
        vnodes: LOCAL_VNODES,
        exceptions: local.router.exceptions().clone(),
        endpoints: Default::default(),
    };
    assert_eq!(map.router().unwrap(), local.router);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    saker_rpc::auth::ensure_installed();
    tokio::spawn(RpcServer::new(groups.clone(), coordinator, map).serve(listener));
    let cluster = Cluster::new(local.router.clone(), groups, chunks, Default::default());
    (cluster, addr)
}

#[tokio::test]
async fn a_connected_cluster_sees_what_the_in_process_one_wrote_and_back() {
    let chunks: Arc<dyn ChunkStore> = Arc::new(MemChunkStore::new());
    let (local, addr) = served_groups(chunks.clone()).await;
    let remote = Cluster::connect(&addr, chunks, Default::default())
        .await
        .unwrap();
    assert_eq!(
        remote.groups().map(|(g, _)| *g).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for name in ["b", "x", "photo.jpg", "0001", "a-much-longer-name"] {
        assert_eq!(
            remote.owner(&path(&["b", name])),
            local.owner(&path(&["b", name]))
        );
    }

    remote
        .call(
            &path(&["b"]),
            MetaRequest::CreateBucket {
                name: "b".into(),
                uid: 0,
                gid: 0,
            },
        )
        .await
        .unwrap();
    // Parents are created over the network (MissingParent, then MkdirImplicit, retry).
    let attr = remote
        .put_object(
            &path(&["b", "x", "y", "one"]),
            object(b"first"),
            false,
            None,
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(attr.size, 5);
    let view = local
        .lookup(&path(&["b", "x", "y", "one"]), Want::OBJECT)
        .await
        .unwrap();
    assert_eq!(view.data.as_deref(), Some(&b"first"[..]));
    assert_eq!(view.attr.etag, "etag-5");
    assert_eq!(view.attr.id, attr.id);

    local
        .put_object(
            &path(&["b", "x", "two"]),
            object(b"second!"),
            false,
            None,
            Default::default(),
        )
        .await
        .unwrap();
    let view = remote
        .lookup(&path(&["b", "x", "two"]), Want::OBJECT)
        .await
        .unwrap();
    assert_eq!(view.data.as_deref(), Some(&b"second!"[..]));

    // A listing fans out to every group through the endpoint.
    let mut lister = Lister::new(&remote, "b").await.unwrap();
    let (items, more) = lister.page("", None, "", 100).await.unwrap();
    let keys: Vec<String> = items
        .into_iter()
        .map(|i| match i {
            ListItem::Object { key, .. } => key,
            ListItem::CommonPrefix(p) => p,
        })
        .collect();
    assert_eq!(keys, vec!["x/two", "x/y/one"]);
    assert!(!more);

    // Errors come back as themselves.
    assert_eq!(
        remote.lookup(&path(&["b", "nope"]), Want::ATTR).await,
        Err(MetaError::NotFound)
    );
    assert!(matches!(
        remote
            .call(
                &path(&["b"]),
                MetaRequest::DeleteBucket { name: "b".into() }
            )
            .await,
        Err(MetaError::NotEmpty)
    ));
}

#[tokio::test]
async fn connecting_to_nothing_is_unavailable() {
    saker_rpc::auth::ensure_installed();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let r = Cluster::connect(&addr, Arc::new(MemChunkStore::new()), Default::default()).await;
    assert!(
        matches!(r, Err(ClientError::Meta(MetaError::Unavailable(_)))),
        "{:?}",
        r.err()
    );
}
