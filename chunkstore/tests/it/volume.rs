//! Small chunks in volumes: the conformance suite with every chunk in (tiny, rolling) volumes,
//! recovery after a reopen (puts kept, deletes kept, a torn tail cut), damaged records read as
//! corrupt, group commit, and compaction giving space back without losing a live chunk.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use saker_chunkstore::conformance::{self, pattern};
use saker_chunkstore::volume::{RECORD_HEADER_LEN, VOLUME_SIZE};
use saker_chunkstore::{ChunkError, ChunkId, ChunkStore, DiskChunkStore, SMALL_CHUNK_MAX};
use saker_rpc::Durability;

/// Every chunk in volumes of at most `volume_size` bytes.
fn volumes_only(dir: &std::path::Path, volume_size: u64) -> DiskChunkStore {
    DiskChunkStore::open_with(dir, u64::MAX, volume_size).unwrap()
}

/// Puts `n` chunks of 20,000 bytes (`pattern(i, 20_000)`, in order); returns their ids, the
/// first volume's number, and the ids in that volume.
async fn fill_volumes(store: &DiskChunkStore, n: u64) -> (Vec<ChunkId>, u32, Vec<ChunkId>) {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = ChunkId::random();
        store.put(id, pattern(i, 20_000)).await.unwrap();
        ids.push(id);
    }
    let first = store.volumes().locate(ids[0]).unwrap().volume;
    let in_first = ids
        .iter()
        .copied()
        .filter(|id| store.volumes().locate(*id).unwrap().volume == first)
        .collect();
    (ids, first, in_first)
}

/// A whole record header (the volume format's) for `magic` (`SKVP` a put, `SKVD` a delete).
fn record_header(magic: &[u8; 4], id: ChunkId, body_len: u64) -> [u8; RECORD_HEADER_LEN as usize] {
    let mut h = [0u8; RECORD_HEADER_LEN as usize];
    h[..4].copy_from_slice(magic);
    h[4..20].copy_from_slice(&id.0.to_le_bytes());
    h[20..28].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32c::crc32c(&h[..36]);
    h[36..40].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What a crash in the middle of a put leaves: a whole header promising `promised` bytes of
/// body, and only `written` of them.
fn torn_put(promised: u64, written: &[u8]) -> Vec<u8> {
    let mut torn = record_header(b"SKVP", ChunkId::random(), promised).to_vec();
    torn.extend_from_slice(written);
    torn
}

fn chunk_files(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for shard in fs::read_dir(dir).unwrap() {
        let shard = shard.unwrap().path();
        if shard.file_name().unwrap() == "volumes" || !shard.is_dir() {
            continue;
        }
        n += fs::read_dir(shard).unwrap().count();
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_with_every_chunk_in_small_volumes_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), 64 * 1024);
    store.volumes().set_compact_delay(std::time::Duration::ZERO);
    conformance::run_all(&store).await;
    assert_eq!(chunk_files(dir.path()), 0, "no chunk file was written");
    let newest = store.volumes().usage().last().unwrap().0;
    assert!(newest > 0, "the suite's puts rolled over to new volumes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_chunks_go_to_volumes_and_large_ones_to_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskChunkStore::open(dir.path()).unwrap();
    let (small, large) = (ChunkId::random(), ChunkId::random());
    store
        .put(small, pattern(1, SMALL_CHUNK_MAX as usize))
        .await
        .unwrap();
    store
        .put(large, pattern(2, SMALL_CHUNK_MAX as usize + 1))
        .await
        .unwrap();
    assert!(store.volumes().locate(small).is_some());
    assert!(!store.chunk_path(small).exists());
    assert!(store.volumes().locate(large).is_none());
    assert!(store.chunk_path(large).exists());
    assert_eq!(
        store.get(small, 0, u64::MAX).await.unwrap(),
        pattern(1, SMALL_CHUNK_MAX as usize)
    );
    store.delete(large).await.unwrap();
    store.delete(small).await.unwrap();
    assert!(!store.chunk_path(large).exists());
    for id in [small, large] {
        assert!(matches!(
            store.get(id, 0, 1).await,
            Err(ChunkError::NotFound(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_and_deletes_survive_a_reopen_and_a_torn_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    let mut kept = HashMap::new();
    let mut deleted = Vec::new();
    for i in 0..40u64 {
        let id = ChunkId::random();
        let data = pattern(i, 1000 + 997 * i as usize);
        store.put(id, data.clone()).await.unwrap();
        if i % 3 == 0 {
            deleted.push(id);
        } else {
            kept.insert(id, data);
        }
    }
    for id in &deleted {
        store.delete(*id).await.unwrap();
    }
    let before = store.volumes().usage();
    assert_eq!(before.len(), 1);
    let (volume, size, _) = before[0];
    let path = store.volumes().volume_path(volume);
    drop(store);

    // A crash in the middle of a put: a whole record header promising 5000 bytes, 100 of them.
    let torn = torn_put(5000, &[0u8; 100]);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&torn, size).unwrap();
    drop(f);
    assert_eq!(fs::metadata(&path).unwrap().len(), size + torn.len() as u64);

    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        size,
        "the torn record was cut off"
    );
    for (id, data) in &kept {
        assert_eq!(&store.get(*id, 0, u64::MAX).await.unwrap(), data);
    }
    for id in &deleted {
        assert!(
            matches!(store.get(*id, 0, 1).await, Err(ChunkError::NotFound(_))),
            "a deleted chunk stays deleted after a reopen"
        );
    }
    // Appends continue after the cut and survive the next reopen too.
    let id = ChunkId::random();
    store.put(id, pattern(99, 5000)).await.unwrap();
    assert_eq!(store.volumes().locate(id).unwrap().offset, size);
    drop(store);
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(store.get(id, 0, u64::MAX).await.unwrap(), pattern(99, 5000));
    assert_eq!(store.volumes().usage().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_volume_record_reads_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    let id = ChunkId::random();
    let data = pattern(5, 3 * 65536);
    store.put(id, data.clone()).await.unwrap();
    let other = ChunkId::random();
    store.put(other, pattern(6, 100)).await.unwrap();
    let loc = store.volumes().locate(id).unwrap();
    let path = store.volumes().volume_path(loc.volume);
    // Second block's data: chunk header (24 bytes) + one block + 7.
    let at = loc.offset + RECORD_HEADER_LEN + 24 + 65536 + 7;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 1], at).unwrap();
    assert_eq!(store.get(id, 0, 65536).await.unwrap(), data.slice(..65536));
    assert!(matches!(
        store.get(id, 65536, 10).await,
        Err(ChunkError::Corrupt { id: got, .. }) if got == id
    ));
    assert!(store.verify(id).await.is_err());
    assert_eq!(store.stats().crc_failures, 2);
    assert_eq!(store.get(other, 0, 100).await.unwrap(), pattern(6, 100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_share_fdatasyncs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(volumes_only(dir.path(), VOLUME_SIZE));
    let data = pattern(9, 32 * 1024);
    let syncs_before = store.volumes().syncs();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (store, data) = (store.clone(), data.clone());
        tasks.push(tokio::spawn(async move {
            let id = ChunkId::random();
            store.put(id, data).await.unwrap();
            id
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.unwrap());
    }
    let syncs = store.volumes().syncs() - syncs_before;
    assert!(syncs >= 1);
    assert!(syncs < 64, "64 concurrent puts took {syncs} fdatasyncs");
    for id in ids {
        assert_eq!(store.get(id, 0, u64::MAX).await.unwrap(), data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_gives_space_back_and_keeps_every_live_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let volume_size = 256 * 1024;
    let store = volumes_only(dir.path(), volume_size);
    store.volumes().set_compact_delay(std::time::Duration::ZERO);
    let mut all: Vec<(ChunkId, Bytes)> = Vec::new();
    for i in 0..60u64 {
        let id = ChunkId::random();
        let data = pattern(100 + i, 30_000);
        store.put(id, data.clone()).await.unwrap();
        all.push((id, data));
    }
    let first_volumes: Vec<u32> = store.volumes().usage().iter().map(|u| u.0).collect();
    assert!(first_volumes.len() >= 6, "{first_volumes:?}");
    let bytes_before: u64 = store.volumes().usage().iter().map(|u| u.1).sum();

    // Delete three of every four: every sealed volume falls under half live.
    let mut live = Vec::new();
    for (i, (id, data)) in all.into_iter().enumerate() {
        if i % 4 == 0 {
            live.push((id, data));
        } else {
            store.delete(id).await.unwrap();
        }
    }
    assert!(store.volumes().compactions() >= 4);
    let after = store.volumes().usage();
    let bytes_after: u64 = after.iter().map(|u| u.1).sum();
    assert!(
        bytes_after * 2 < bytes_before,
        "{bytes_before} bytes before, {bytes_after} after"
    );
    for n in &first_volumes[..4] {
        assert!(
            !store.volumes().volume_path(*n).exists(),
            "volume {n} was removed"
        );
    }
    for (id, data) in &live {
        assert_eq!(&store.get(*id, 0, u64::MAX).await.unwrap(), data);
    }
    drop(store);
    let store = volumes_only(dir.path(), volume_size);
    for (id, data) in &live {
        assert_eq!(&store.get(*id, 0, u64::MAX).await.unwrap(), data);
    }
    let listed = store
        .list_older_than(std::time::SystemTime::now())
        .await
        .unwrap();
    let mut want: Vec<ChunkId> = live.iter().map(|(id, _)| *id).collect();
    want.sort_unstable();
    assert_eq!(listed, want, "exactly the live chunks come back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_record_followed_by_whole_ones_cuts_nothing_and_is_never_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    let ids: Vec<ChunkId> = (0..4).map(|_| ChunkId::random()).collect();
    for (i, id) in ids.iter().enumerate() {
        store.put(*id, pattern(i as u64, 3000)).await.unwrap();
    }
    let hit = store.volumes().locate(ids[1]).unwrap();
    let path = store.volumes().volume_path(hit.volume);
    let len = fs::metadata(&path).unwrap().len();
    drop(store);

    // Damage to the medium (not a crash): the second record's magic is gone.
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(b"XXXX", hit.offset).unwrap();
    drop(f);

    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        len,
        "nothing was cut: acknowledged records follow the damage"
    );
    for (i, id) in ids.iter().enumerate() {
        match i {
            1 => assert!(matches!(
                store.get(*id, 0, 1).await,
                Err(ChunkError::NotFound(_))
            )),
            _ => assert_eq!(
                store.get(*id, 0, u64::MAX).await.unwrap(),
                pattern(i as u64, 3000),
                "chunk {i}"
            ),
        }
    }
    // Even emptied, the damaged volume stays (it is the active one here, so seal it first by
    // reopening with a tiny volume size: the next put starts a new volume).
    drop(store);
    let store = volumes_only(dir.path(), 1);
    store.put(ChunkId::random(), pattern(9, 10)).await.unwrap();
    for id in [ids[0], ids[2], ids[3]] {
        store.delete(id).await.unwrap();
    }
    assert_eq!(store.volumes().compactions(), 0);
    assert!(path.exists(), "a damaged volume is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_volume_left_by_a_crash_is_compacted_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), 64 * 1024);
    let (ids, first, doomed) = fill_volumes(&store, 6).await;
    let first_path = store.volumes().volume_path(first);
    let last = store.volumes().locate(ids[5]).unwrap().volume;
    assert_ne!(first, last);
    let last_path = store.volumes().volume_path(last);
    drop(store);

    // Tombstones for everything in the first volume, as a crash right after those deletes
    // (before their compaction ran) leaves them.
    let f = OpenOptions::new().write(true).open(&last_path).unwrap();
    let mut at = fs::metadata(&last_path).unwrap().len();
    for id in &doomed {
        f.write_all_at(&record_header(b"SKVD", *id, 0), at).unwrap();
        at += RECORD_HEADER_LEN;
    }
    drop(f);

    let store = volumes_only(dir.path(), 64 * 1024);
    assert!(
        !first_path.exists(),
        "the emptied volume was removed at open"
    );
    assert_eq!(store.volumes().compactions(), 1);
    for (i, id) in ids.iter().enumerate() {
        let got = store.get(*id, 0, u64::MAX).await;
        if doomed.contains(id) {
            assert!(matches!(got, Err(ChunkError::NotFound(_))));
        } else {
            assert_eq!(got.unwrap(), pattern(i as u64, 20_000));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_under_half_live_waits_for_the_delay_and_an_empty_one_goes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), 64 * 1024);
    let (ids, first, in_first) = fill_volumes(&store, 9).await;
    assert!(in_first.len() >= 3, "{in_first:?}");
    let path = store.volumes().volume_path(first);
    // Under half live, within the (default, minutes long) delay: kept, nothing copied.
    for id in &in_first[..in_first.len() - 1] {
        store.delete(*id).await.unwrap();
    }
    assert!(path.exists());
    assert_eq!(store.volumes().compactions(), 0);
    // Its last live chunk deleted: removed at once, without waiting.
    store.delete(*in_first.last().unwrap()).await.unwrap();
    assert!(!path.exists());
    assert_eq!(store.volumes().compactions(), 1);
    for id in &ids[in_first.len()..] {
        assert_eq!(store.get(*id, 0, u64::MAX).await.unwrap().len(), 20_000);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeros_at_the_end_of_the_last_volume_are_cut_with_a_torn_put_in_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    let mut ids = Vec::new();
    for i in 0..20u64 {
        let id = ChunkId::random();
        store.put(id, pattern(i, 30_000)).await.unwrap();
        ids.push(id);
    }
    let usage = store.volumes().usage();
    let (volume, size, _) = usage[0];
    let path = store.volumes().volume_path(volume);
    drop(store);

    // A crash that made the file's new length durable before its data: a put whose header
    // reached the disk and whose body did not (a hole, read as zeros), and more zeros after it.
    let torn = torn_put(5000, &[7u8; 100]);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&torn, size).unwrap();
    f.set_len(size + (1 << 20)).unwrap();
    drop(f);

    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(
        store.volumes().usage(),
        usage,
        "the torn put is not indexed"
    );
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        size,
        "it and the zeros were cut"
    );
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            store.get(*id, 0, u64::MAX).await.unwrap(),
            pattern(i as u64, 30_000)
        );
    }
    let id = ChunkId::random();
    store.put(id, pattern(77, 1234)).await.unwrap();
    assert_eq!(store.volumes().locate(id).unwrap().offset, size);
    drop(store);
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(store.get(id, 0, u64::MAX).await.unwrap(), pattern(77, 1234));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zeros_at_the_end_of_a_sealed_volume_are_not_taken_for_damage() {
    let dir = tempfile::tempdir().unwrap();
    let volume_size = 1 << 20;
    let store = volumes_only(dir.path(), volume_size);
    let mut ids = Vec::new();
    for i in 0..120u64 {
        let id = ChunkId::random();
        store.put(id, pattern(i, 20_000)).await.unwrap();
        ids.push(id);
    }
    let usage = store.volumes().usage();
    assert!(usage.len() >= 2, "{usage:?}");
    let (first, first_size, _) = usage[0];
    let first_path = store.volumes().volume_path(first);
    drop(store);

    OpenOptions::new()
        .write(true)
        .open(&first_path)
        .unwrap()
        .set_len(first_size + 3 * 4096)
        .unwrap();
    let store = volumes_only(dir.path(), volume_size);
    assert_eq!(store.volumes().usage(), usage, "same records, same sizes");
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            store.get(*id, 0, u64::MAX).await.unwrap(),
            pattern(i as u64, 20_000)
        );
    }
    // Not damaged: emptied, it is removed like any other.
    for id in &ids {
        if store.volumes().locate(*id).unwrap().volume == first {
            store.delete(*id).await.unwrap();
        }
    }
    assert!(!first_path.exists(), "the emptied volume was removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_compaction_copy_leaves_the_chunk_where_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), 64 * 1024);
    let (ids, first, in_first) = fill_volumes(&store, 6).await;
    let id = in_first[0];
    let loc = store.volumes().locate(id).unwrap();
    let (last, records_end, _) = *store.volumes().usage().last().unwrap();
    assert_ne!(first, last);
    let first_path = store.volumes().volume_path(first);
    let last_path = store.volumes().volume_path(last);
    drop(store);

    // A crash in a compaction, before its copies were synced: the copy's header reached the
    // disk, part of its body did not; a later record did.
    let mut copy = vec![0u8; (RECORD_HEADER_LEN + loc.body_len) as usize];
    fs::File::open(&first_path)
        .unwrap()
        .read_exact_at(&mut copy, loc.offset)
        .unwrap();
    copy[RECORD_HEADER_LEN as usize + 5000..][..4096].fill(0);
    let later = record_header(b"SKVD", ChunkId::random(), 0);
    let f = OpenOptions::new().write(true).open(&last_path).unwrap();
    f.write_all_at(&copy, records_end).unwrap();
    f.write_all_at(&later, records_end + copy.len() as u64)
        .unwrap();
    drop(f);

    let store = volumes_only(dir.path(), 64 * 1024);
    assert_eq!(store.volumes().locate(id), Some(loc), "still the original");
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            store.get(*id, 0, u64::MAX).await.unwrap(),
            pattern(i as u64, 20_000)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_process_durability_puts_reach_the_disk_at_syncs_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let mut ids = Vec::new();
    {
        let store = DiskChunkStore::open_with_durability(dir.path(), Durability::Process).unwrap();
        for i in 0..100 {
            let id = ChunkId::random();
            store.put(id, pattern(i, 5_000)).await.unwrap();
            ids.push(id);
        }
        // No put synced on its own: at most the background thread's once-a-second syncs.
        let background = start.elapsed().as_secs() + 1;
        let syncs = store.stats().volume_syncs;
        assert!(syncs <= background, "{syncs} syncs for 100 puts");
        store.sync_to_disk().await.unwrap();
        assert!(store.stats().volume_syncs > syncs, "an fsync syncs");
    }
    // The kernel has what the puts wrote: a crash of the process loses none of it.
    let store = DiskChunkStore::open(dir.path()).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let got = store.get(*id, 0, u64::MAX).await.unwrap();
        assert_eq!(got, pattern(i as u64, 5_000), "chunk {i}");
    }

    // With disk durability every put is synced before it returns.
    let disk = tempfile::tempdir().unwrap();
    let store = DiskChunkStore::open(disk.path()).unwrap();
    for i in 0..10 {
        store
            .put(ChunkId::random(), pattern(i, 5_000))
            .await
            .unwrap();
    }
    assert!(store.stats().volume_syncs >= 10);
}
