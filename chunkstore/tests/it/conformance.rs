//! Runs the conformance suite against every [`ChunkStore`] implementation.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use saker_chunkstore::{
    conformance, ChunkError, ChunkId, ChunkServer, ChunkStore, DiskChunkStore, MemChunkStore,
    RemoteChunkStore,
};
use saker_rpc::{ClusterMap, CoordinatorService, MetaError, RemoveCond, RpcChannel, RpcServer};
use tokio::net::TcpListener;

#[tokio::test]
async fn mem_store_conforms() {
    conformance::run_all(&MemChunkStore::new()).await;
    conformance::run_shards(&MemChunkStore::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskChunkStore::open(dir.path()).unwrap();
    conformance::run_all(&store).await;
    conformance::run_shards(&store).await;
}

/// Shards written in the shard format read back after the store reopens, and name their chunk
/// in their header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_store_reads_its_shards_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let layout: saker_chunkstore::ec::Layout = "6+3".parse().unwrap();
    let mut written = Vec::new();
    {
        let store = DiskChunkStore::open(dir.path()).unwrap();
        for len in [5000usize, 2 << 20] {
            let chunk = ChunkId::random();
            let data = conformance::pattern(len as u64, len);
            for (i, shard) in layout.encode(&data).unwrap().into_iter().enumerate() {
                let of = saker_chunkstore::format::ShardOf {
                    chunk,
                    index: i as u8,
                    layout,
                    chunk_len: len as u64,
                };
                store.put_shard(of, shard.clone()).await.unwrap();
                written.push((chunk, i as u8, shard));
            }
        }
    }
    let store = DiskChunkStore::open(dir.path()).unwrap();
    let mut files = 0;
    for (chunk, i, shard) in written {
        assert_eq!(
            store
                .get_shard(chunk, layout, i, 0, u64::MAX)
                .await
                .unwrap(),
            shard
        );
        let id = saker_chunkstore::ec::shard_id(chunk, layout, i);
        let info = store.verify(id).await.unwrap();
        assert_eq!(info.crc32c, crc32c::crc32c(&shard));
        // A large shard is a file of its own: its header names the chunk.
        let path = store.chunk_path(id);
        if let Ok(bytes) = std::fs::read(&path) {
            let header = saker_chunkstore::format::Header::decode(id, &bytes).unwrap();
            let of = header.shard.expect("a shard header");
            assert_eq!((of.chunk, of.index, of.layout), (chunk, i, layout));
            files += 1;
        }
    }
    assert_eq!(files, 9, "the large chunk's shards are files of their own");
}

/// A disk store served over the RPC transport, used through [`RemoteChunkStore`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let served: Arc<dyn ChunkStore> = Arc::new(DiskChunkStore::open(dir.path()).unwrap());
    let addr = serve(served.clone()).await;
    let remote = RemoteChunkStore::new(RpcChannel::connect(&addr).await.unwrap());
    conformance::run_all(&remote).await;
    conformance::run_shards(&remote).await;

    // Errors keep their kind across the wire.
    let missing = ChunkId::random();
    assert!(matches!(
        remote.get(missing, 0, 1).await,
        Err(ChunkError::NotFound(id)) if id == missing
    ));
    let id = ChunkId::random();
    remote.put(id, Bytes::from_static(b"once")).await.unwrap();
    assert!(matches!(
        remote.put(id, Bytes::from_static(b"twice")).await,
        Err(ChunkError::AlreadyExists(_))
    ));
    // What the remote handle wrote is in the served store.
    assert_eq!(&served.get(id, 0, 100).await.unwrap()[..], b"once");

    // An fsync's sync reaches a served store that acknowledges puts before they are on disk.
    let dir = tempfile::tempdir().unwrap();
    let served: Arc<dyn ChunkStore> = Arc::new(
        DiskChunkStore::open_with_durability(dir.path(), saker_rpc::Durability::Process).unwrap(),
    );
    let remote = RemoteChunkStore::new(
        RpcChannel::connect(&serve(served.clone()).await)
            .await
            .unwrap(),
    );
    remote
        .put(ChunkId::random(), Bytes::from_static(b"x"))
        .await
        .unwrap();
    let before = served.stats().volume_syncs;
    remote.sync_to_disk().await.unwrap();
    assert!(
        served.stats().volume_syncs > before,
        "the served store synced"
    );
}

/// A process without a chunkstore says so instead of failing obscurely.
#[tokio::test]
async fn an_endpoint_without_a_chunkstore_is_unavailable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    saker_rpc::auth::ensure_installed();
    tokio::spawn(RpcServer::new(BTreeMap::new(), Arc::new(NoCoordinator), map()).serve(listener));
    let remote = RemoteChunkStore::new(RpcChannel::connect(&addr).await.unwrap());
    match remote.get(ChunkId::random(), 0, 1).await {
        Err(ChunkError::Unavailable(why)) => assert!(why.contains("no chunkstore"), "{why}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// A store that took the connection but never answers (a dying disk): each call gives up at
/// its deadline, as `Unavailable`, instead of holding its caller for ever.
#[tokio::test]
async fn a_store_that_hangs_is_given_up_at_the_calls_deadline() {
    struct Hung;
    #[async_trait::async_trait]
    impl saker_rpc::ChunkService for Hung {
        async fn call(
            &self,
            _: saker_rpc::ChunkRequest,
        ) -> Result<saker_rpc::ChunkReply, saker_rpc::ChunkWireError> {
            std::future::pending().await
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    saker_rpc::auth::ensure_installed();
    let server =
        RpcServer::new(BTreeMap::new(), Arc::new(NoCoordinator), map()).with_chunks(Arc::new(Hung));
    tokio::spawn(server.serve(listener));
    let base = std::time::Duration::from_millis(300);
    let channel = RpcChannel::connect(&addr).await.unwrap();
    let remote = RemoteChunkStore::new(channel.with_chunk_deadline(base));
    let started = std::time::Instant::now();
    // (Whichever side's timer fires first: the server cancels the call at the deadline too.)
    match remote.sync_to_disk().await {
        Err(ChunkError::Unavailable(why)) => {
            assert!(why.contains("imeout") || why.contains("within"), "{why}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(waited >= base, "gave up after {waited:?}");
    // A put's deadline grows with its data: 1 MiB gets a second more.
    let started = std::time::Instant::now();
    let put = remote.put(ChunkId::random(), Bytes::from(vec![7u8; 1 << 20]));
    assert!(matches!(put.await, Err(ChunkError::Unavailable(_))));
    let waited = started.elapsed();
    assert!(
        waited >= base + std::time::Duration::from_secs(1),
        "{waited:?}"
    );
}

async fn serve(store: Arc<dyn ChunkStore>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // Server and client share this process's credential.
    saker_rpc::auth::ensure_installed();
    let server = RpcServer::new(BTreeMap::new(), Arc::new(NoCoordinator), map())
        .with_chunks(Arc::new(ChunkServer(store)));
    tokio::spawn(server.serve(listener));
    addr
}

fn map() -> ClusterMap {
    ClusterMap {
        version: 1,
        groups: vec![1],
        vnodes: 1,
        exceptions: Default::default(),
        endpoints: Default::default(),
    }
}

struct NoCoordinator;

#[async_trait::async_trait]
impl CoordinatorService for NoCoordinator {
    async fn remove_dir(&self, _: Vec<String>, _: RemoveCond) -> Result<(), MetaError> {
        Err(MetaError::NotPermitted)
    }

    async fn rename(
        &self,
        _: Vec<String>,
        _: Vec<String>,
        _: bool,
        _: saker_rpc::Cred,
        _: saker_rpc::RenameVersioning,
    ) -> Result<saker_rpc::Attr, MetaError> {
        Err(MetaError::NotPermitted)
    }

    async fn set_dir_attr(&self, _: saker_rpc::MetaRequest) -> Result<saker_rpc::Attr, MetaError> {
        Err(MetaError::NotPermitted)
    }

    async fn link(
        &self,
        _: Vec<String>,
        _: Vec<String>,
        _: Option<u64>,
        _: saker_rpc::Cred,
    ) -> Result<saker_rpc::Attr, MetaError> {
        Err(MetaError::NotPermitted)
    }
}
