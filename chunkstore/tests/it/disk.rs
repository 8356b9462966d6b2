//! DiskChunkStore-specific checks of the file-per-chunk layout (stores opened with no volume
//! chunks): file layout, persistence across reopen, and damaged files (flipped bytes,
//! truncation, bad header) read as errors, never panics or wrong data. Volumes: `volume.rs`.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::time::{Duration, SystemTime};

use saker_chunkstore::conformance::pattern;
use saker_chunkstore::volume::VOLUME_SIZE;
use saker_chunkstore::{ChunkError, ChunkId, ChunkStore, DiskChunkStore, BLOCK_SIZE};
use tempfile::TempDir;

const BS: u64 = BLOCK_SIZE as u64;
const HEADER_LEN: u64 = 24;

fn store() -> (TempDir, DiskChunkStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = files_only(dir.path());
    (dir, store)
}

/// A store that keeps every chunk in a file of its own.
fn files_only(dir: &std::path::Path) -> DiskChunkStore {
    DiskChunkStore::open_with(dir, 0, VOLUME_SIZE).unwrap()
}

/// Puts a 3-block chunk (the last one short) and returns its id.
async fn put_three_blocks(store: &DiskChunkStore) -> ChunkId {
    let id = ChunkId::random();
    store
        .put(id, pattern(1, 2 * BS as usize + 100))
        .await
        .unwrap();
    id
}

fn flip(path: &std::path::Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x01;
    f.write_all_at(&b, at).unwrap();
}

fn assert_corrupt<T: std::fmt::Debug>(res: Result<T, ChunkError>, id: ChunkId, what: &str) {
    match res {
        Err(ChunkError::Corrupt { id: got, .. }) => assert_eq!(got, id, "{what}"),
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    }
}

#[tokio::test]
async fn layout_is_sharded_by_id_prefix() {
    let (dir, store) = store();
    for shard in ["00", "7f", "ff"] {
        assert!(dir.path().join(shard).is_dir(), "shard {shard}");
    }
    let id: ChunkId = "ab0123456789abcdef0123456789abcd".parse().unwrap();
    store.put(id, pattern(2, 10)).await.unwrap();
    let path = dir.path().join("ab").join(format!("{id}.chunk"));
    assert_eq!(store.chunk_path(id), path);
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[..4], b"SKCH");
    assert_eq!(bytes.len() as u64, HEADER_LEN + 10 + 4 + 4);
}

#[tokio::test]
async fn chunks_survive_reopen() {
    let (dir, store) = store();
    let id = put_three_blocks(&store).await;
    drop(store);
    let store = files_only(dir.path());
    let data = store.get(id, 0, u64::MAX).await.unwrap();
    assert_eq!(data, pattern(1, 2 * BS as usize + 100));
    let info = store.verify(id).await.unwrap();
    assert_eq!(info.len, data.len() as u64);
    assert_eq!(info.crc32c, crc32c::crc32c(&data));
}

#[tokio::test]
async fn flipped_data_byte_is_corrupt_only_in_its_block() {
    let (_dir, store) = store();
    let id = put_three_blocks(&store).await;
    flip(&store.chunk_path(id), HEADER_LEN + BS + 5);

    assert_corrupt(store.get(id, BS, 10).await, id, "read of the damaged block");
    assert_corrupt(
        store.get(id, BS - 1, 2).await,
        id,
        "read across into the damaged block",
    );
    assert_corrupt(store.get(id, 0, u64::MAX).await, id, "whole read");
    assert_corrupt(store.verify(id).await, id, "verify");
    // Blocks 0 and 2 still read fine.
    let data = pattern(1, 2 * BS as usize + 100);
    assert_eq!(
        store.get(id, 0, BS).await.unwrap(),
        data.slice(..BS as usize)
    );
    assert_eq!(
        store.get(id, 2 * BS, 100).await.unwrap(),
        data.slice(2 * BS as usize..)
    );
    assert_eq!(store.stats().crc_failures, 4);
}

#[tokio::test]
async fn flipped_checksums_are_corrupt() {
    let (_dir, store) = store();
    let id = put_three_blocks(&store).await;
    let table = HEADER_LEN + 2 * BS + 100;
    flip(&store.chunk_path(id), table + 4 * 2); // block 2's entry
    assert_corrupt(store.get(id, 2 * BS, 1).await, id, "damaged table entry");
    assert!(
        store.get(id, 0, 10).await.is_ok(),
        "other blocks unaffected"
    );

    let id = put_three_blocks(&store).await;
    flip(&store.chunk_path(id), table + 4 * 3); // whole-data crc
    assert!(
        store.get(id, 0, 10).await.is_ok(),
        "ranged reads don't need it"
    );
    assert_corrupt(store.get(id, 0, u64::MAX).await, id, "whole read checks it");
    assert_corrupt(store.verify(id).await, id, "verify checks it");
}

#[tokio::test]
async fn truncated_or_extended_file_is_corrupt() {
    let (_dir, store) = store();
    for keep in [
        0,
        3,
        HEADER_LEN - 1,
        HEADER_LEN,
        HEADER_LEN + 7,
        HEADER_LEN + 2 * BS + 100 + 8,
    ] {
        let id = put_three_blocks(&store).await;
        let path = store.chunk_path(id);
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(keep)
            .unwrap();
        assert_corrupt(
            store.get(id, 0, 10).await,
            id,
            &format!("truncated to {keep}"),
        );
        assert_corrupt(
            store.get(id, 0, 0).await,
            id,
            &format!("empty read, truncated to {keep}"),
        );
    }
    let id = put_three_blocks(&store).await;
    let path = store.chunk_path(id);
    let len = fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len + 1)
        .unwrap();
    assert_corrupt(store.get(id, 0, 10).await, id, "extended by a byte");
}

#[tokio::test]
async fn bad_header_is_corrupt_or_bad_format() {
    let (_dir, store) = store();
    let id = put_three_blocks(&store).await;
    flip(&store.chunk_path(id), 0);
    assert_corrupt(store.get(id, 0, 10).await, id, "bad magic");

    let id = put_three_blocks(&store).await;
    flip(&store.chunk_path(id), 9); // data length
    assert_corrupt(store.get(id, 0, 10).await, id, "damaged length");

    let id = put_three_blocks(&store).await;
    flip(&store.chunk_path(id), 5); // version 1 -> 257
    assert!(
        matches!(store.get(id, 0, 10).await, Err(ChunkError::BadFormat(_))),
        "unknown version"
    );

    let id = ChunkId::random();
    fs::write(
        store.chunk_path(id),
        b"not a chunk file at all, definitely not",
    )
    .unwrap();
    assert_corrupt(store.get(id, 0, 10).await, id, "garbage file");
}

#[tokio::test]
async fn list_ignores_foreign_files_and_lists_partial_chunks() {
    let (dir, store) = store();
    let id = put_three_blocks(&store).await;
    // A partial chunk, as a crash during put would leave it.
    let partial = ChunkId::random();
    fs::write(store.chunk_path(partial), b"SKCH").unwrap();
    // Things that are not chunk files.
    let other = ChunkId::random().to_string();
    fs::write(dir.path().join("ab").join("notes.txt"), b"x").unwrap();
    fs::write(
        dir.path().join("ab").join(format!("{other}.chunk.tmp")),
        b"x",
    )
    .unwrap();
    // A chunk-named file in the wrong shard.
    let wrong_shard = if other.starts_with("00") { "01" } else { "00" };
    fs::write(
        dir.path().join(wrong_shard).join(format!("{other}.chunk")),
        b"x",
    )
    .unwrap();
    fs::create_dir(dir.path().join("zz")).unwrap();

    let mut want = vec![id, partial];
    want.sort();
    let listed = store
        .list_older_than(SystemTime::now() + Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(listed, want);
    // The scrub deletes the partial chunk like any other.
    store.delete(partial).await.unwrap();
    assert!(!store.chunk_path(partial).exists());
}

#[tokio::test]
async fn put_recreates_a_missing_shard_dir() {
    let (_dir, store) = store();
    let id = ChunkId::random();
    let path = store.chunk_path(id);
    fs::remove_dir(path.parent().unwrap()).unwrap();
    store.put(id, pattern(3, 10)).await.unwrap();
    assert_eq!(store.get(id, 0, 10).await.unwrap(), pattern(3, 10));
}

/// Inside `reads_in_place`, a read polled on the calling thread does not wait for tokio's
/// blocking pool: here the pool's only thread is held until the read has returned, for chunks
/// in volumes and in files of their own. Outside it, reads go back to the pool.
#[test]
fn reads_in_place_do_not_need_the_blocking_pool() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for small_max in [0, VOLUME_SIZE] {
        let store = DiskChunkStore::open_with(
            &dir.path().join(small_max.to_string()),
            small_max,
            VOLUME_SIZE,
        )
        .unwrap();
        let id = ChunkId::random();
        let data = pattern(7, 3 * BS as usize);
        rt.block_on(store.put(id, data.clone())).unwrap();

        let (release, held) = std::sync::mpsc::channel::<()>();
        let (holding, started) = std::sync::mpsc::channel::<()>();
        let blocker = rt.spawn_blocking(move || {
            holding.send(()).unwrap();
            held.recv().unwrap();
        });
        started.recv().unwrap();
        // A read left to the pool would wait for the blocker forever: give up after 10 s.
        let got = saker_chunkstore::reads_in_place(|| {
            rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), store.get(id, BS, BS)).await
            })
        })
        .expect("the read waited for the blocking pool");
        assert_eq!(got.unwrap(), data.slice(BS as usize..2 * BS as usize));
        release.send(()).unwrap();
        rt.block_on(blocker).unwrap();
        // The flag is gone with the call: this read runs on the pool (free again) as before.
        assert_eq!(rt.block_on(store.get(id, 0, 10)).unwrap(), data.slice(..10));
    }
}

#[tokio::test]
async fn large_reads_past_the_page_cache_return_the_same_bytes_and_catch_the_same_damage() {
    let (_dir, store) = store();
    let id = ChunkId::random();
    let len = 70 * BS as usize + 333;
    let data = pattern(3, len);
    store.put(id, data.clone()).await.unwrap();
    // A chunk file of 4 MiB or more: ranges from 256 KiB up read with O_DIRECT, here with
    // unaligned starts and ends in a short last block.
    for (off, n) in [
        (0, len),
        (7, 5 * BS as usize),
        (BS as usize + 1, len - BS as usize - 1),
    ] {
        let got = store.get(id, off as u64, n as u64).await.unwrap();
        assert_eq!(got, data.slice(off..off + n), "{off}+{n}");
    }
    assert_eq!(
        store.verify(id).await.unwrap().crc32c,
        crc32c::crc32c(&data)
    );
    flip(&store.chunk_path(id), HEADER_LEN + 9 * BS + 17);
    assert_corrupt(
        store.get(id, 0, 10 * BS).await,
        id,
        "large read over the damage",
    );
    assert_corrupt(store.verify(id).await, id, "verify");
    assert_eq!(
        store.get(id, 10 * BS, 5 * BS).await.unwrap(),
        data.slice(10 * BS as usize..15 * BS as usize),
        "a large read beside the damage"
    );
}
