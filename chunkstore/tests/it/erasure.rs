//! Erasure-coded chunks over in-memory members: shards on distinct members, healthy reads from
//! the data shards only, degraded reads with up to m members down, and what happens past that.

use bytes::Bytes;
use saker_chunkstore::conformance::pattern;
use saker_chunkstore::ec::{shard_id, Layout};
use saker_chunkstore::{ChunkError, ChunkId, ChunkStore};

use crate::flaky::cluster;

#[tokio::test]
async fn a_chunk_reads_back_with_any_m_members_down() {
    let (flaky, store) = cluster(7, 3);
    let layout: Layout = "4+2".parse().unwrap();
    for len in [1usize, 70_000, 1 << 20] {
        let chunk = ChunkId::random();
        let data = pattern(len as u64, len);
        let info = store
            .put_encoded(chunk, layout, data.clone())
            .await
            .unwrap();
        assert_eq!((info.len, info.crc32c), (len as u64, crc32c::crc32c(&data)));
        // One shard on each of 6 distinct members, none elsewhere.
        let places = store.shard_places(chunk, layout).unwrap();
        let mut holders = 0;
        for (m, f) in flaky.iter().enumerate() {
            let mut held = Vec::new();
            for i in 0..6u8 {
                if f.holds(shard_id(chunk, layout, i)).await {
                    held.push(i);
                }
            }
            assert!(held.len() <= 1, "member {m} holds shards {held:?}");
            holders += held.len();
        }
        assert_eq!(holders, 6, "{places:?}");

        let read = |offset, n| store.get_coded(chunk, layout, len as u64, offset, n);
        assert_eq!(read(0, u64::MAX).await.unwrap(), data);
        let stats = store.stats().degraded_reads;
        // A healthy read of a range touches only the data shards it lies in.
        let (offset, n) = (len as u64 / 3, len as u64 / 4 + 1);
        let want = data.slice(offset as usize..((offset + n) as usize).min(len));
        assert_eq!(read(offset, n).await.unwrap(), want);
        assert_eq!(store.stats().degraded_reads, stats, "healthy reads");

        // Any two members down: every range still reads, degraded when a data shard is gone.
        for (a, b) in [(0, 1), (2, 5), (3, 6), (1, 4)] {
            flaky[a]
                .down
                .store(true, std::sync::atomic::Ordering::Relaxed);
            flaky[b]
                .down
                .store(true, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(read(0, u64::MAX).await.unwrap(), data, "{a} and {b} down");
            assert_eq!(read(offset, n).await.unwrap(), want, "{a} and {b} down");
            flaky[a]
                .down
                .store(false, std::sync::atomic::Ordering::Relaxed);
            flaky[b]
                .down
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
    assert!(store.stats().degraded_reads > 0);
}

#[tokio::test]
async fn past_m_lost_shards_a_read_fails_and_says_why() {
    let (flaky, store) = cluster(6, 3);
    let layout: Layout = "4+2".parse().unwrap();
    let chunk = ChunkId::random();
    let data = pattern(9, 300_000);
    store
        .put_encoded(chunk, layout, data.clone())
        .await
        .unwrap();
    // Three shards' members wiped: 3 of 6 shards left, 4 needed.
    let places = store.shard_places(chunk, layout).unwrap();
    let members = store.members();
    for name in &places[..3] {
        let m = members.iter().position(|m| &m.id == name).unwrap();
        flaky[m].wipe();
    }
    match store.get_coded(chunk, layout, 300_000, 0, u64::MAX).await {
        Err(ChunkError::Unavailable(why)) => {
            assert!(why.contains("3 shards readable, 4 needed"), "{why}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_layout_that_does_not_fit_the_members_is_refused_and_writes_nothing() {
    let (flaky, store) = cluster(5, 3);
    let layout: Layout = "4+2".parse().unwrap();
    let chunk = ChunkId::random();
    let e = store
        .put_encoded(chunk, layout, Bytes::from_static(b"data"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("6 shards need 6 chunkstores"), "{e}");
    for f in &flaky {
        assert!(f.store().is_empty());
    }
}

#[tokio::test]
async fn a_write_with_a_member_down_fails_and_a_retry_completes_it() {
    let (flaky, store) = cluster(6, 3);
    let layout: Layout = "4+2".parse().unwrap();
    let chunk = ChunkId::random();
    let data = pattern(3, 100_000);
    flaky[2]
        .down
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let e = store
        .put_encoded(chunk, layout, data.clone())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("1 of 6 shards not written"), "{e}");
    flaky[2]
        .down
        .store(false, std::sync::atomic::Ordering::Relaxed);
    // The shards written before count: encoding the same chunk gives the same shards.
    store
        .put_encoded(chunk, layout, data.clone())
        .await
        .unwrap();
    assert_eq!(
        store
            .get_coded(chunk, layout, 100_000, 0, u64::MAX)
            .await
            .unwrap(),
        data
    );
    // Deleting removes every shard.
    store.delete_encoded(chunk, layout).await.unwrap();
    for f in &flaky {
        assert!(f.store().is_empty());
    }
}

/// A shard left by an earlier try at coding the same chunk (shard ids are derived from the
/// chunk, so a retry meets it) is kept only if it reads back as the shard the retry would
/// write: one that differs (a crash tore it) is replaced, and the chunk then reads back with
/// no degraded read.
#[tokio::test]
async fn a_retry_replaces_a_shard_an_earlier_try_left_torn() {
    let (flaky, store) = cluster(6, 3);
    let layout: Layout = "4+2".parse().unwrap();
    let chunk = ChunkId::random();
    let data = pattern(7, 1 << 20);
    let places = store.shard_places(chunk, layout).unwrap();
    let s = layout.shard_len(data.len() as u64) as usize;
    // The member holding shard i.
    let holder = |i: usize| {
        let k = (0..flaky.len())
            .find(|k| format!("127.0.0.1:{}", 9902 + 10 * k) == places[i])
            .unwrap();
        flaky[k].clone()
    };
    // Shards 1 and 4 as a torn try left them: the right length, the wrong bytes.
    for i in [1u8, 4] {
        let of = saker_chunkstore::format::ShardOf {
            chunk,
            index: i,
            layout,
            chunk_len: data.len() as u64,
        };
        holder(i as usize)
            .put_shard(of, Bytes::from(vec![0u8; s]))
            .await
            .unwrap();
    }
    store
        .put_encoded(chunk, layout, data.clone())
        .await
        .unwrap();
    let before = store.stats().degraded_reads;
    let got = store
        .get_coded(chunk, layout, data.len() as u64, 0, u64::MAX)
        .await
        .unwrap();
    assert!(got == data, "the chunk reads back");
    assert_eq!(
        store.stats().degraded_reads,
        before,
        "no shard was left torn"
    );
    // Every shard, parity included, is the one encoding writes.
    let want = layout.encode(&data).unwrap();
    for (i, w) in want.iter().enumerate() {
        let got = holder(i)
            .get_shard(chunk, layout, i as u8, 0, s as u64)
            .await;
        assert!(got.is_ok_and(|g| g == *w), "shard {i}");
    }
}

#[tokio::test]
async fn a_degraded_read_notes_its_chunk_and_the_next_repair_rebuilds_the_shard() {
    let (flaky, store) = cluster(6, 3);
    let layout: Layout = "4+2".parse().unwrap();
    let wiped = "127.0.0.1:9922"; // flaky[2]
                                  // Chunks whose data shard 1 is on the member to be wiped (one in every six ids), then one
                                  // more whose shards are wherever they fall.
    let mut chunks = Vec::new();
    while chunks.len() < 2 {
        let chunk = ChunkId::random();
        if store.shard_places(chunk, layout).unwrap()[1] == wiped {
            chunks.push(chunk);
        }
    }
    let data = pattern(3, 300_000);
    let len = data.len() as u64;
    for &chunk in &chunks {
        store
            .put_encoded(chunk, layout, data.clone())
            .await
            .unwrap();
    }
    // Nothing degraded yet: nothing to do.
    let idle = store.repair_degraded(0).await;
    assert_eq!((idle.scanned, idle.repaired), (0, 0));

    // The member's disk is lost; a read of the first chunk finds out.
    flaky[2].wipe();
    let before = store.stats().degraded_reads;
    let got = store.get_coded(chunks[0], layout, len, 0, u64::MAX).await;
    assert!(got.is_ok_and(|g| g == data), "a degraded read reads back");
    assert_eq!(store.stats().degraded_reads, before + 1);

    let r = store.repair_degraded(0).await;
    assert_eq!((r.scanned, r.repaired, r.failed), (1, 1, 0), "{r:?}");
    assert!(flaky[2].holds(shard_id(chunks[0], layout, 1)).await);
    // Healthy again: the read is not degraded, and the note is gone.
    let got = store.get_coded(chunks[0], layout, len, 0, u64::MAX).await;
    assert!(got.is_ok_and(|g| g == data));
    assert_eq!(store.stats().degraded_reads, before + 1);
    assert_eq!(store.repair_degraded(0).await.scanned, 0);
    // The chunk no read touched waits for the full pass.
    assert!(!flaky[2].holds(shard_id(chunks[1], layout, 1)).await);

    // A member down during the repair keeps the note until it answers.
    let got = store.get_coded(chunks[1], layout, len, 0, u64::MAX).await;
    assert!(got.is_ok_and(|g| g == data));
    flaky[2]
        .down
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let r = store.repair_degraded(0).await;
    assert_eq!((r.repaired, r.unreachable), (0, 1), "{r:?}");
    flaky[2]
        .down
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let r = store.repair_degraded(0).await;
    assert_eq!((r.scanned, r.repaired), (1, 1), "{r:?}");
    assert!(flaky[2].holds(shard_id(chunks[1], layout, 1)).await);
}
