//! The conformance suite every [`ChunkStore`] must pass: call [`run_all`] on a fresh store from a
//! test. Each check is also public so a failing one can be run alone. Checks use fresh random ids
//! and compare stats as deltas, so the store need not be empty. Failures panic.

use std::time::{Duration, SystemTime};

use bytes::Bytes;

use crate::ec::Layout;
use crate::error::ChunkError;
use crate::format::{ShardOf, BLOCK_SIZE};
use crate::id::ChunkId;
use crate::store::ChunkStore;

const BS: u64 = BLOCK_SIZE as u64;

/// Runs every check.
pub async fn run_all<S: ChunkStore>(store: &S) {
    put_get_round_trip(store).await;
    ranges(store).await;
    block_boundary_sizes(store).await;
    already_exists(store).await;
    not_found(store).await;
    delete_is_idempotent(store).await;
    concurrent_puts(store).await;
    stats_count(store).await;
    list_older_than(store).await;
}

/// The checks of a store that keeps shards of erasure-coded chunks (every store of one disk;
/// not a store of several, which places shards on its members).
pub async fn run_shards<S: ChunkStore>(store: &S) {
    shards_round_trip(store).await;
}

/// Shards of a small and a large chunk (a volume record and a file of their own) read back
/// whole and by range beside a chunk under the chunk's own id; a shard stored twice, of the
/// wrong length or missing is the error it should be.
pub async fn shards_round_trip<S: ChunkStore>(store: &S) {
    let layout: Layout = "4+2".parse().expect("layout");
    for (seed, len) in [(31, 1000), (32, 3 << 20)] {
        let chunk = ChunkId::random();
        let data = pattern(seed, len);
        // A replica of the chunk under its own id, as before it is encoded.
        store.put(chunk, data.clone()).await.expect("put the chunk");
        let shards = layout.encode(&data).expect("encode");
        let of = |index: usize| ShardOf {
            chunk,
            index: index as u8,
            layout,
            chunk_len: len as u64,
        };
        for (i, shard) in shards.iter().enumerate() {
            let info = store
                .put_shard(of(i), shard.clone())
                .await
                .expect("put_shard");
            assert_eq!(info.len, shard.len() as u64, "shard {i} length");
            assert_eq!(info.crc32c, crc32c::crc32c(shard), "shard {i} crc");
        }
        for (i, shard) in shards.iter().enumerate() {
            let got = store
                .get_shard(chunk, layout, i as u8, 0, u64::MAX)
                .await
                .expect("get_shard");
            assert_eq!(got, shard, "shard {i} of a {len}-byte chunk");
            let s = shard.len() as u64;
            let part = store
                .get_shard(chunk, layout, i as u8, s / 3, s / 2)
                .await
                .expect("get_shard range");
            assert_eq!(
                part,
                shard.slice((s / 3) as usize..(s / 3 + s / 2) as usize)
            );
        }
        assert_eq!(
            get(store, chunk, 0, u64::MAX).await,
            data,
            "the chunk beside its shards"
        );
        let some: Vec<Option<Bytes>> = (0..shards.len())
            .map(|i| (i % 3 != 0).then(|| shards[i].clone()))
            .collect();
        assert_eq!(layout.decode(len as u64, &some).expect("decode"), data);
        assert!(matches!(
            store.put_shard(of(2), shards[2].clone()).await,
            Err(ChunkError::AlreadyExists(_))
        ));
        assert!(matches!(
            store.put_shard(of(1), shards[1].slice(1..)).await,
            Err(ChunkError::BadFormat(_))
        ));
        assert!(matches!(
            store.get_shard(ChunkId::random(), layout, 0, 0, 10).await,
            Err(ChunkError::NotFound(_))
        ));
        store
            .delete(crate::ec::shard_id(chunk, layout, 0))
            .await
            .expect("delete a shard");
        assert!(matches!(
            store.get_shard(chunk, layout, 0, 0, 10).await,
            Err(ChunkError::NotFound(_))
        ));
    }
}

/// Deterministic pseudo-random bytes (xorshift64*), different per seed.
pub fn pattern(seed: u64, len: usize) -> Bytes {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

async fn put_new<S: ChunkStore>(store: &S, data: &Bytes) -> ChunkId {
    let id = ChunkId::random();
    let info = store.put(id, data.clone()).await.expect("put");
    assert_eq!(info.len, data.len() as u64, "ChunkInfo.len");
    assert_eq!(info.crc32c, crc32c::crc32c(data), "ChunkInfo.crc32c");
    id
}

async fn get<S: ChunkStore>(store: &S, id: ChunkId, offset: u64, len: u64) -> Bytes {
    store
        .get(id, offset, len)
        .await
        .unwrap_or_else(|e| panic!("get({offset}, {len}): {e}"))
}

/// A put chunk reads back whole, with the right length and checksum.
pub async fn put_get_round_trip<S: ChunkStore>(store: &S) {
    for (seed, len) in [(1, 0), (2, 1), (3, 1000), (4, 200_000)] {
        let data = pattern(seed, len);
        let id = put_new(store, &data).await;
        assert_eq!(
            get(store, id, 0, u64::MAX).await,
            data,
            "whole read, len {len}"
        );
        assert_eq!(
            get(store, id, 0, len as u64).await,
            data,
            "exact read, len {len}"
        );
    }
}

/// Range reads, including ones crossing block boundaries, clamped and empty ones.
pub async fn ranges<S: ChunkStore>(store: &S) {
    let len = 3 * BS + 1234;
    let data = pattern(10, len as usize);
    let id = put_new(store, &data).await;
    let cases: &[(u64, u64)] = &[
        (0, 10),
        (5, 100),
        (BS - 1, 2),
        (BS - 10, BS + 20),
        (BS, BS),
        (BS, 1),
        (2 * BS - 1, 1),
        (1, len - 2),
        (3 * BS, 1234),
        (len - 1, 1),
        (len - 1, 10),
        (len - 100, u64::MAX),
        (17, 0),
        (len, 0),
        (len, 5),
        (len + 100, 5),
        (u64::MAX, u64::MAX),
        (u64::MAX - 1, 10),
    ];
    for &(offset, n) in cases {
        let got = get(store, id, offset, n).await;
        let s = offset.min(len) as usize;
        let e = offset.saturating_add(n).min(len) as usize;
        assert_eq!(got, data.slice(s..e), "get({offset}, {n})");
    }
}

/// Chunks whose length is exactly one or two blocks, or one byte off.
pub async fn block_boundary_sizes<S: ChunkStore>(store: &S) {
    for len in [BS - 1, BS, BS + 1, 2 * BS] {
        let data = pattern(len, len as usize);
        let id = put_new(store, &data).await;
        assert_eq!(get(store, id, 0, u64::MAX).await, data, "len {len}");
        let tail = get(store, id, len - 1, 10).await;
        assert_eq!(tail, data.slice(len as usize - 1..), "tail of len {len}");
        assert!(
            get(store, id, len, 1).await.is_empty(),
            "past end of len {len}"
        );
    }
}

/// Putting an existing id fails and leaves the first chunk intact.
pub async fn already_exists<S: ChunkStore>(store: &S) {
    let data = pattern(20, 5000);
    let id = put_new(store, &data).await;
    match store.put(id, pattern(21, 10)).await {
        Err(ChunkError::AlreadyExists(got)) => assert_eq!(got, id),
        other => panic!("second put: expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(
        get(store, id, 0, u64::MAX).await,
        data,
        "first chunk intact"
    );
}

/// Reading a missing chunk is NotFound, whatever the range.
pub async fn not_found<S: ChunkStore>(store: &S) {
    let id = ChunkId::random();
    for (offset, len) in [(0, 10), (0, 0), (u64::MAX, 1)] {
        match store.get(id, offset, len).await {
            Err(ChunkError::NotFound(got)) => assert_eq!(got, id),
            other => panic!("get({offset}, {len}) of missing chunk: got {other:?}"),
        }
    }
}

/// Delete removes; deleting again, or a chunk never stored, is Ok; a deleted id stays gone.
pub async fn delete_is_idempotent<S: ChunkStore>(store: &S) {
    let id = put_new(store, &pattern(30, 100)).await;
    store.delete(id).await.expect("delete");
    assert!(
        matches!(store.get(id, 0, 1).await, Err(ChunkError::NotFound(_))),
        "get after delete"
    );
    store.delete(id).await.expect("second delete");
    store
        .delete(ChunkId::random())
        .await
        .expect("delete of missing chunk");
    let other = put_new(store, &pattern(31, 100)).await;
    store.delete(id).await.expect("third delete");
    assert_eq!(
        get(store, other, 0, 100).await,
        pattern(31, 100),
        "unrelated chunk"
    );
}

/// Puts running at the same time do not interfere.
pub async fn concurrent_puts<S: ChunkStore>(store: &S) {
    let data: Vec<Bytes> = (0..4)
        .map(|i| pattern(40 + i, 70_000 + i as usize))
        .collect();
    let ids: Vec<ChunkId> = (0..4).map(|_| ChunkId::random()).collect();
    let (a, b, c, d) = tokio::join!(
        store.put(ids[0], data[0].clone()),
        store.put(ids[1], data[1].clone()),
        store.put(ids[2], data[2].clone()),
        store.put(ids[3], data[3].clone()),
    );
    for res in [a, b, c, d] {
        res.expect("concurrent put");
    }
    for (id, data) in ids.iter().zip(&data) {
        assert_eq!(&get(store, *id, 0, u64::MAX).await, data);
    }
}

/// Puts, reads and deletes are counted (at least; other users of the store may add more).
pub async fn stats_count<S: ChunkStore>(store: &S) {
    let before = store.stats();
    let id = put_new(store, &pattern(50, 3000)).await;
    let _ = get(store, id, 1000, 500).await;
    store.delete(id).await.expect("delete");
    store.delete(id).await.expect("delete again");
    let after = store.stats();
    assert!(after.chunks_put > before.chunks_put, "chunks_put");
    assert!(
        after.bytes_written >= before.bytes_written + 3000,
        "bytes_written"
    );
    assert!(after.bytes_read >= before.bytes_read + 500, "bytes_read");
    assert!(
        after.chunks_deleted > before.chunks_deleted,
        "chunks_deleted"
    );
    assert_eq!(after.crc_failures, before.crc_failures, "crc_failures");
}

/// `list_older_than` lists chunks last modified before the cut-off, and not deleted ones.
pub async fn list_older_than<S: ChunkStore>(store: &S) {
    // Margins well above file-system timestamp granularity (coarse clocks lag by a tick).
    const GAP: Duration = Duration::from_millis(60);
    let hour = Duration::from_secs(3600);
    let old = put_new(store, &pattern(60, 10)).await;
    tokio::time::sleep(GAP).await;
    let cut = SystemTime::now();
    tokio::time::sleep(GAP).await;
    let new = put_new(store, &pattern(61, 10)).await;

    let list = |t: SystemTime| async move { store.list_older_than(t).await.expect("list") };
    let before_both = list(cut - hour).await;
    assert!(
        !before_both.contains(&old) && !before_both.contains(&new),
        "cut-off an hour ago"
    );
    let at_cut = list(cut).await;
    assert!(at_cut.contains(&old), "old chunk listed at cut-off");
    assert!(!at_cut.contains(&new), "new chunk not listed at cut-off");
    let future = SystemTime::now() + hour;
    let all = list(future).await;
    assert!(
        all.contains(&old) && all.contains(&new),
        "both listed with a future cut-off"
    );

    store.delete(old).await.expect("delete");
    let all = list(future).await;
    assert!(!all.contains(&old), "deleted chunk not listed");
    assert!(all.contains(&new), "remaining chunk listed");
}
