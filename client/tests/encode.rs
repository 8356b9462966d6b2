//! Erasure-coding a version (issue 63) against in-process MNodes and six in-memory chunkstores:
//! the version switches to its shards, its replicas are collected, the leak scrub keeps the
//! shards, reads come back byte-exact with any two stores wiped, and a version changed since
//! it was read is left alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use saker_chunkstore::ec::Layout as EcLayout;
use saker_chunkstore::{ChunkStore, MemChunkStore, Member, ReplicatedChunkStore};
use saker_client::{ChunkWriter, Cluster, ClusterConfig, Encoded, ReadRange};
use saker_rpc::{Layout, MetaRequest, MetaService, NewObject, Want};

const BUCKET: &str = "cold";

/// A cluster over `stores` (replicas 3), chunks of 64 KiB, GC grace 0.
async fn new_cluster(stores: &[Arc<MemChunkStore>]) -> Cluster {
    let meta: Arc<dyn saker_mnode::MetaStore> = Arc::new(saker_mnode::MemStore::new());
    let mut config = saker_mnode::MnodeConfig::new(1);
    config.gc_grace = Duration::ZERO;
    let local = saker_mnode::LocalGroups::start(meta, 2, config)
        .await
        .expect("start mnodes");
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = local.services();
    local.connect(Arc::new(saker_coordinator::NamespaceCoordinator::new(
        local.router.clone(),
        groups.clone(),
    )));
    let members = stores
        .iter()
        .enumerate()
        .map(|(i, s)| Member::placing(format!("store{i}"), s.clone() as Arc<dyn ChunkStore>, false))
        .collect();
    let chunks = Arc::new(ReplicatedChunkStore::new(members, 3));
    let config = ClusterConfig {
        chunk_size: 64 * 1024,
        ..Default::default()
    };
    let cluster = Cluster::new(local.router.clone(), groups, chunks, config);
    cluster
        .call(
            &[BUCKET.into()],
            MetaRequest::CreateBucket {
                name: BUCKET.into(),
                uid: 0,
                gid: 0,
            },
        )
        .await
        .expect("create bucket");
    cluster
}

async fn put(cluster: &Cluster, key: &str, data: &[u8]) {
    let mut w = ChunkWriter::new(cluster);
    w.write(data).await.unwrap();
    let written = w.finish().await.unwrap();
    let obj = NewObject {
        size: written.size,
        etag: "e".into(),
        layout: written.layout,
        inline: written.inline,
        ..Default::default()
    };
    cluster
        .put_object(&path(key), obj, false, None, Default::default())
        .await
        .unwrap();
}

fn path(key: &str) -> Vec<String> {
    vec![BUCKET.to_string(), key.to_string()]
}

async fn read(cluster: &Cluster, key: &str) -> Vec<u8> {
    let view = cluster.lookup(&path(key), Want::OBJECT).await.unwrap();
    let all = ReadRange {
        start: 0,
        end: view.attr.size,
    };
    cluster
        .read_bytes(&view.attr.layout, view.data.clone(), all)
        .await
        .unwrap()
}

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 10) as u8)
        .collect()
}

fn stored(stores: &[Arc<MemChunkStore>]) -> usize {
    stores.iter().map(|s| s.len()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coded_version_reads_back_with_two_stores_lost_and_its_replicas_are_collected() {
    let stores: Vec<Arc<MemChunkStore>> = (0..6).map(|_| Arc::new(MemChunkStore::new())).collect();
    let cluster = new_cluster(&stores).await;
    let layout: EcLayout = "4+2".parse().unwrap();
    let big = data(300_000, 1); // 5 chunks of 64 KiB
    put(&cluster, "big", &big).await;
    put(&cluster, "small", b"inline bytes").await;
    assert_eq!(stored(&stores), 5 * 3, "3 replicas of 5 chunks");

    let seen = cluster
        .lookup(&path("big"), Want::OBJECT)
        .await
        .unwrap()
        .attr;
    let done = cluster
        .encode_version(&path("big"), &seen, false, layout)
        .await
        .unwrap();
    assert_eq!(done, Encoded::Coded(300_000));
    let now = cluster
        .lookup(&path("big"), Want::OBJECT)
        .await
        .unwrap()
        .attr;
    let coded = now.layout.coded().expect("a coded layout");
    assert_eq!((coded.data, coded.parity), (4, 2));
    assert_eq!(coded.chunks, seen.layout.chunks());
    // Coding again, or an inline object, does nothing.
    assert_eq!(
        cluster
            .encode_version(&path("big"), &now, false, layout)
            .await
            .unwrap(),
        Encoded::Nothing
    );
    let small = cluster
        .lookup(&path("small"), Want::OBJECT)
        .await
        .unwrap()
        .attr;
    assert_eq!(
        cluster
            .encode_version(&path("small"), &small, false, layout)
            .await
            .unwrap(),
        Encoded::Nothing
    );
    assert_eq!(read(&cluster, "big").await, big);

    // The replicas go with the GC (grace 0); the leak scrub keeps every shard.
    let report = saker_client::collect_garbage(&cluster, Duration::ZERO, true)
        .await
        .unwrap();
    assert_eq!(report.released, 5, "{report:?}");
    assert_eq!(report.leaked, 0, "{report:?}");
    assert_eq!(stored(&stores), 5 * 6, "6 shards of 5 chunks, no replica");
    assert_eq!(read(&cluster, "big").await, big);
    // Repair and scrub neither copy shards as replicas nor miss the replicas gone.
    let repair = saker_client::repair_chunks(&cluster, 0).await.unwrap();
    assert_eq!(
        (repair.scanned, repair.lost, repair.repaired),
        (5, 0, 0),
        "{repair:?}"
    );
    let scrub = saker_client::scrub_chunks(&cluster, 0).await.unwrap();
    assert_eq!(
        (scrub.verified, scrub.missing, scrub.corrupt),
        (30, 0, 0),
        "{scrub:?}"
    );
    assert_eq!(stored(&stores), 5 * 6, "repair copied no shard");

    // A store's disk lost: repair rebuilds its shards from the others, then a scrub finds all.
    let lost = stores[4].len();
    assert!(lost > 0);
    stores[4].clear();
    let repair = saker_client::repair_chunks(&cluster, 0).await.unwrap();
    assert_eq!(repair.repaired as usize, lost, "{repair:?}");
    assert_eq!(stored(&stores), 5 * 6);
    let scrub = saker_client::scrub_chunks(&cluster, 0).await.unwrap();
    assert_eq!(
        (scrub.verified, scrub.missing, scrub.corrupt),
        (30, 0, 0),
        "{scrub:?}"
    );
    // A shard whose bytes changed (with a store that cannot tell): the scrub finds the one
    // out of step by the parity and rewrites it.
    let (id, bytes) = stores[1].contents().into_iter().next().unwrap();
    let mut flipped = bytes.to_vec();
    flipped[3] ^= 0x10;
    stores[1].delete(id).await.unwrap();
    stores[1].put(id, flipped.into()).await.unwrap();
    let scrub = saker_client::scrub_chunks(&cluster, 0).await.unwrap();
    assert_eq!((scrub.corrupt, scrub.repaired), (1, 1), "{scrub:?}");
    assert_eq!(stores[1].get(id, 0, u64::MAX).await.unwrap(), bytes);
    assert_eq!(read(&cluster, "big").await, big);

    // Any two stores lost: every byte still reads.
    for (a, b) in [(0, 1), (2, 5), (3, 4)] {
        let saved: Vec<_> = [a, b].iter().map(|&i| snapshot(&stores[i])).collect();
        stores[a].clear();
        stores[b].clear();
        assert_eq!(read(&cluster, "big").await, big, "stores {a} and {b} lost");
        for (&i, s) in [a, b].iter().zip(saved) {
            restore(&stores[i], s).await;
        }
    }

    // Deleting the object queues every shard; the GC removes them all.
    cluster
        .call(
            &path("big"),
            MetaRequest::Unlink {
                path: path("big"),
                cred: saker_rpc::Cred::ROOT,
                versioning: Default::default(),
            },
        )
        .await
        .unwrap();
    saker_client::collect_garbage(&cluster, Duration::ZERO, false)
        .await
        .unwrap();
    assert_eq!(stored(&stores), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_overwritten_since_it_was_read_is_not_switched() {
    let stores: Vec<Arc<MemChunkStore>> = (0..6).map(|_| Arc::new(MemChunkStore::new())).collect();
    let cluster = new_cluster(&stores).await;
    let layout: EcLayout = "4+2".parse().unwrap();
    put(&cluster, "k", &data(200_000, 2)).await;
    let seen = cluster.lookup(&path("k"), Want::OBJECT).await.unwrap().attr;
    let newer = data(150_000, 3);
    put(&cluster, "k", &newer).await;
    assert_eq!(
        cluster
            .encode_version(&path("k"), &seen, false, layout)
            .await
            .unwrap(),
        Encoded::Changed
    );
    let now = cluster.lookup(&path("k"), Want::OBJECT).await.unwrap().attr;
    assert!(matches!(now.layout, Layout::Chunks(_)));
    assert_eq!(read(&cluster, "k").await, newer);
    // A layout that does not fit the six stores is refused before anything is switched.
    let wide: EcLayout = "8+3".parse().unwrap();
    assert!(cluster
        .encode_version(&path("k"), &now, false, wide)
        .await
        .is_err());
    assert!(matches!(
        cluster
            .lookup(&path("k"), Want::OBJECT)
            .await
            .unwrap()
            .attr
            .layout,
        Layout::Chunks(_)
    ));
}

/// Everything `store` holds.
fn snapshot(store: &MemChunkStore) -> Vec<(saker_chunkstore::ChunkId, bytes::Bytes)> {
    store.contents()
}

async fn restore(store: &MemChunkStore, chunks: Vec<(saker_chunkstore::ChunkId, bytes::Bytes)>) {
    for (id, data) in chunks {
        store.put(id, data).await.unwrap();
    }
}
