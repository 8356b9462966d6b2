//! [`ReplicatedChunkStore`]: the conformance suite, quorum writes, read repair, repair passes
//! and deletes, over in-memory members some of which the tests take down.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use saker_chunkstore::{
    conformance, ChunkError, ChunkId, ChunkStore, Member, ReplicatedChunkStore,
};

use crate::flaky::{cluster, Flaky};

#[tokio::test]
async fn replicated_stores_conform() {
    conformance::run_all(&cluster(3, 3).1).await;
    conformance::run_all(&cluster(4, 2).1).await;
    conformance::run_all(&cluster(1, 3).1).await;
}

#[tokio::test]
async fn placement_is_stable_and_spread() {
    let (_, a) = cluster(3, 2);
    let (_, b) = cluster(3, 2);
    let mut first = [0usize; 3];
    for _ in 0..3000 {
        let id = ChunkId::random();
        assert_eq!(a.placement(id), b.placement(id));
        first[a.placement(id)[0]] += 1;
    }
    assert!(first.iter().all(|&n| n > 800), "{first:?}");
}

#[tokio::test]
async fn a_write_needs_a_majority_and_a_read_any_copy() {
    let (flaky, store) = cluster(3, 3);
    flaky[1].down.store(true, Ordering::Relaxed);
    let data = conformance::pattern(7, 100_000);
    let id = ChunkId::random();
    store
        .put(id, data.clone())
        .await
        .expect("two of three is a majority");
    for _ in 0..1000 {
        if store.stats().degraded_writes == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(store.stats().degraded_writes, 1);
    flaky[0].down.store(true, Ordering::Relaxed);
    assert_eq!(store.get(id, 0, u64::MAX).await.unwrap(), data);
    let err = store
        .put(ChunkId::random(), data.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, ChunkError::Unavailable(_)), "{err}");
    // A delete is not done while a replica cannot confirm it.
    assert!(store.delete(id).await.is_err());
    flaky[0].down.store(false, Ordering::Relaxed);
    flaky[1].down.store(false, Ordering::Relaxed);
    store.delete(id).await.unwrap();
    for f in &flaky {
        assert!(!f.holds(id).await);
    }
}

/// The chunks writes noted as short of replicas.
#[derive(Default)]
struct Noted(parking_lot::Mutex<Vec<ChunkId>>);

#[async_trait::async_trait]
impl saker_chunkstore::RepairLog for Noted {
    async fn note(&self, id: ChunkId) -> Result<(), ChunkError> {
        self.0.lock().push(id);
        Ok(())
    }
}

/// A write that leaves a replica without its copy notes the chunk before it returns; a pass
/// over the noted chunks (no listing) copies them back once the replica is up, and settles
/// them, while a chunk deleted since is settled without a copy.
#[tokio::test]
async fn a_short_write_is_noted_before_it_returns_and_repaired_from_the_note() {
    let (flaky, store) = cluster(3, 3);
    let noted = Arc::new(Noted::default());
    store.set_repair_log(noted.clone());
    let whole = ChunkId::random();
    store
        .put(whole, conformance::pattern(1, 5000))
        .await
        .unwrap();
    assert!(
        noted.0.lock().is_empty(),
        "a write every replica took is not noted"
    );
    flaky[2].down.store(true, Ordering::Relaxed);
    let mut short = Vec::new();
    for seed in 0..5 {
        let id = ChunkId::random();
        store
            .put(id, conformance::pattern(seed, 5000))
            .await
            .unwrap();
        assert!(noted.0.lock().contains(&id), "noted when the put returned");
        short.push(id);
    }
    // While the replica is down, a pass copies nothing and settles nothing.
    let (report, settled) = store.repair_noted(&short, 0).await;
    assert!(settled.is_empty(), "{report:?}");
    flaky[2].down.store(false, Ordering::Relaxed);
    store.delete(short[4]).await.unwrap();
    let (report, settled) = store.repair_noted(&short, 0).await;
    assert_eq!(
        (report.scanned, report.repaired, report.failed),
        (5, 4, 0),
        "{report:?}"
    );
    assert_eq!(settled, short, "all settled");
    for (seed, id) in short[..4].iter().enumerate() {
        assert_eq!(
            flaky[2].store().get(*id, 0, u64::MAX).await.unwrap(),
            conformance::pattern(seed as u64, 5000)
        );
    }
    assert!(!flaky[2].holds(short[4]).await);
}

/// Puts `n` chunks of 5,000 bytes (`pattern(seed)`), and waits until every replica has each
/// (a put returns at a majority; the last copy lands in the background).
async fn put_everywhere(
    flaky: &[Arc<Flaky>],
    store: &ReplicatedChunkStore,
    n: u64,
) -> Vec<ChunkId> {
    let mut ids = Vec::new();
    for seed in 0..n {
        let id = ChunkId::random();
        store
            .put(id, conformance::pattern(seed, 5000))
            .await
            .unwrap();
        ids.push(id);
    }
    for &id in &ids {
        for f in flaky {
            for _ in 0..1000 {
                if f.holds(id).await {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert!(f.holds(id).await);
        }
    }
    ids
}

#[tokio::test]
async fn a_read_repairs_a_missing_copy_and_a_pass_rebuilds_a_wiped_store() {
    let (flaky, store) = cluster(3, 3);
    let ids = put_everywhere(&flaky, &store, 20).await;

    // Node 1's copy of one chunk is lost: a read is served elsewhere and puts it back.
    flaky[0].store().delete(ids[0]).await.unwrap();
    assert_eq!(
        store.get(ids[0], 0, u64::MAX).await.unwrap(),
        conformance::pattern(0, 5000)
    );
    for _ in 0..1000 {
        if flaky[0].holds(ids[0]).await {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(flaky[0].holds(ids[0]).await, "read repair");
    assert_eq!(store.stats().read_repairs, 1);

    // A whole store is lost: a repair pass re-creates its copies of the referenced chunks
    // (not of the unreferenced one).
    flaky[2].wipe();
    let referenced: HashSet<u128> = ids[..19].iter().map(|c| c.0).collect();
    let report = store.repair(&referenced, 0).await.unwrap();
    assert_eq!(report.scanned, 19);
    assert_eq!(report.under_replicated, 19);
    assert_eq!(report.repaired, 19);
    assert_eq!((report.failed, report.lost), (0, 0));
    for (seed, id) in ids[..19].iter().enumerate() {
        assert_eq!(
            flaky[2].store().get(*id, 0, u64::MAX).await.unwrap(),
            conformance::pattern(seed as u64, 5000)
        );
    }
    assert!(!flaky[2].holds(ids[19]).await);
    assert_eq!(store.stats().under_replicated, 0, "nothing left short");
    let again = store.repair(&referenced, 0).await.unwrap();
    assert_eq!((again.under_replicated, again.repaired), (0, 0));
}

/// A member joins: a repair pass copies it its share of the chunks and drops the copies it
/// replaces. A member leaves: marked as leaving it takes no new chunk, a pass copies its
/// chunks away and drops its copies, and once it is gone every chunk still reads back.
#[tokio::test]
async fn members_join_and_leave_through_repair_passes() {
    let (flaky, store) = cluster(3, 3);
    let ids = put_everywhere(&flaky, &store, 60).await;
    let referenced: HashSet<u128> = ids.iter().map(|c| c.0).collect();
    let joined = Arc::new(Flaky::default());
    let all: Vec<Arc<Flaky>> = flaky.iter().cloned().chain([joined.clone()]).collect();
    let members = |leaving: Option<usize>, gone: Option<usize>| -> Vec<Member> {
        all.iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != gone)
            .map(|(i, f)| Member {
                placing: Some(i) != leaving,
                ..Member::placing(
                    format!("127.0.0.1:{}", 9902 + 10 * i),
                    f.clone() as Arc<dyn ChunkStore>,
                    i == 0,
                )
            })
            .collect()
    };
    async fn copies(all: &[Arc<Flaky>], id: ChunkId) -> Vec<usize> {
        let mut on = Vec::new();
        for (i, f) in all.iter().enumerate() {
            if f.holds(id).await {
                on.push(i);
            }
        }
        on
    }

    store.replace_members(members(None, None)).unwrap();
    let report = store.repair(&referenced, 0).await.unwrap();
    assert_eq!((report.failed, report.lost), (0, 0), "{report:?}");
    assert_eq!(report.repaired, report.dropped, "{report:?}");
    let mut on_new = 0;
    for &id in &ids {
        let on = copies(&all, id).await;
        assert_eq!(on.len(), 3, "{id}: {on:?}");
        let placed: Vec<usize> = store.placement(id)[..3].to_vec();
        assert!(
            on.iter().all(|i| placed.contains(i)),
            "{id}: {on:?} {placed:?}"
        );
        on_new += usize::from(on.contains(&3));
    }
    // Its share of 60 chunks on 3 of 4 members is 45; rendezvous hashing spreads it.
    assert!(
        (30..=56).contains(&on_new),
        "{on_new} chunks moved to the new member"
    );
    assert_eq!(report.repaired, on_new as u64);

    // Member 0 leaves: new chunks avoid it, a pass empties it.
    store.replace_members(members(Some(0), None)).unwrap();
    let fresh = ChunkId::random();
    store
        .put(fresh, conformance::pattern(99, 5000))
        .await
        .unwrap();
    assert!(
        !flaky[0].holds(fresh).await,
        "a leaving member took a new chunk"
    );
    let report = store.repair(&referenced, 0).await.unwrap();
    assert_eq!((report.failed, report.lost), (0, 0), "{report:?}");
    for &id in &ids {
        assert_eq!(copies(&all, id).await, vec![1, 2, 3], "{id}");
    }
    assert!(flaky[0]
        .store()
        .list_older_than(SystemTime::now() + std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .is_empty());
    store.replace_members(members(None, Some(0))).unwrap();
    flaky[0].down.store(true, Ordering::Relaxed);
    for (seed, id) in ids.iter().enumerate() {
        let data = store.get(*id, 0, u64::MAX).await.unwrap();
        assert_eq!(data, conformance::pattern(seed as u64, 5000));
    }
    let again = store.repair(&referenced, 0).await.unwrap();
    assert_eq!(
        (again.under_replicated, again.dropped, again.unreachable),
        (0, 0, 0),
        "{again:?}"
    );
    assert!(store
        .replace_members(
            members(Some(1), Some(0))
                .into_iter()
                .map(|m| Member {
                    placing: false,
                    ..m
                })
                .collect()
        )
        .is_err());
}

/// A paced repair keeps to its rate: 19 chunks of 5,000 bytes at 100,000 bytes per second
/// cannot take less than 0.95 s (however fast the machine), and the pass still copies
/// everything.
#[tokio::test]
async fn a_paced_repair_keeps_to_its_rate() {
    let (flaky, store) = cluster(3, 3);
    let ids = put_everywhere(&flaky, &store, 19).await;
    flaky[1].wipe();
    let referenced: HashSet<u128> = ids.iter().map(|c| c.0).collect();
    let start = std::time::Instant::now();
    let report = store.repair(&referenced, 100_000).await.unwrap();
    let took = start.elapsed();
    assert_eq!((report.repaired, report.bytes), (19, 95_000));
    assert!(took >= std::time::Duration::from_millis(950), "{took:?}");
    for id in &ids {
        assert!(flaky[1].holds(*id).await);
    }
}

/// A chunk file damaged on one store's disk is found by a scrub and rewritten from another
/// store; a read never returns the damaged bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrub_finds_a_damaged_copy_on_disk_and_rewrites_it() {
    use saker_chunkstore::DiskChunkStore;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let disks: Vec<Arc<DiskChunkStore>> = dirs
        .iter()
        .map(|d| Arc::new(DiskChunkStore::open(d.path()).unwrap()))
        .collect();
    let members = disks
        .iter()
        .enumerate()
        .map(|(i, d)| {
            Member::placing(
                format!("store-{i}"),
                d.clone() as Arc<dyn ChunkStore>,
                i == 0,
            )
        })
        .collect();
    let store = ReplicatedChunkStore::new(members, 3);
    // Above the small-chunk limit: a file per chunk.
    let data = conformance::pattern(99, 600_000);
    let id = ChunkId::random();
    store.put(id, data.clone()).await.unwrap();
    for d in &disks {
        for _ in 0..1000 {
            if d.get(id, 0, 1).await.is_ok() {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    let path = disks[0].chunk_path(id);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        disks[0].get(id, 0, u64::MAX).await,
        Err(ChunkError::Corrupt { .. })
    ));

    let referenced: HashSet<u128> = [id.0].into();
    let report = store.scrub(&referenced, 0).await.unwrap();
    assert_eq!(
        (report.corrupt, report.repaired, report.verified),
        (1, 1, 2),
        "{report:?}"
    );
    assert_eq!(disks[0].get(id, 0, u64::MAX).await.unwrap(), data);
    let again = store.scrub(&referenced, 0).await.unwrap();
    assert_eq!((again.corrupt, again.verified), (0, 3));
    // Rate-limited: 1.8 MB at 6 MB/s takes about 0.3 s.
    let started = std::time::Instant::now();
    store.scrub(&referenced, 6_000_000).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));
}
