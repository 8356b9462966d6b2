//! Replay of damaged volumes (volumes built by hand): what the store appends after opening one
//! is found by the next replay, and a chunk indexed at open stays readable or reads as corrupt,
//! never deleted or replaced by records a resync found in damage (`volume/replay.rs`).

use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;

use bytes::Bytes;
use saker_chunkstore::conformance::pattern;
use saker_chunkstore::format::{self, Header};
use saker_chunkstore::volume::{RECORD_HEADER_LEN, VOLUME_SIZE};
use saker_chunkstore::{ChunkError, ChunkId, ChunkStore, DiskChunkStore};

fn volumes_only(dir: &std::path::Path, volume_size: u64) -> DiskChunkStore {
    DiskChunkStore::open_with(dir, u64::MAX, volume_size).unwrap()
}

/// A record header with a valid CRC (put time 0).
fn header(magic: &[u8; 4], id: ChunkId, body_len: u64) -> Vec<u8> {
    let mut h = vec![0u8; RECORD_HEADER_LEN as usize];
    h[..4].copy_from_slice(magic);
    h[4..20].copy_from_slice(&id.0.to_le_bytes());
    h[20..28].copy_from_slice(&body_len.to_le_bytes());
    let crc = crc32c::crc32c(&h[..36]);
    h[36..40].copy_from_slice(&crc.to_le_bytes());
    h
}

/// A whole put record of `data` (put time 0).
fn put_record(id: ChunkId, data: &[u8]) -> Vec<u8> {
    let h = Header::new(data.len() as u64);
    let (trailer, _) = format::encode_trailer(data, h.block_size);
    let mut r = header(b"SKVP", id, h.file_len().unwrap());
    r.extend_from_slice(&h.encode());
    r.extend_from_slice(data);
    r.extend_from_slice(&trailer);
    r
}

async fn is_not_found(store: &DiskChunkStore, id: ChunkId) -> bool {
    matches!(store.get(id, 0, 1).await, Err(ChunkError::NotFound(_)))
}

/// The fuzz finding `regression-put-lost-on-reopen`: after damage, replay resyncs past a put
/// header whose length reaches past the end of the file. Records appended there would make it
/// whole, and the next replay would resync onto it and skip them: the put was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_after_opening_a_damaged_volume_survives_the_next_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let vols = dir.path().join("volumes");
    fs::create_dir_all(&vols).unwrap();
    let (a, b, c) = (ChunkId::random(), ChunkId::random(), ChunkId::random());
    let mut volume = put_record(a, &pattern(1, 100));
    volume.extend_from_slice(b"garbage!"); // damage: not a record
                                           // A whole header promising more body than the file holds (it is cut short by the damage).
    let short_body = 30u64;
    let b_at = volume.len() as u64;
    let file_len = b_at + RECORD_HEADER_LEN + short_body + RECORD_HEADER_LEN;
    let reaches = file_len + 50; // into what the store will append
    volume.extend_from_slice(&header(b"SKVP", b, reaches - b_at - RECORD_HEADER_LEN));
    volume.extend_from_slice(&[7u8; 30]);
    volume.extend_from_slice(&header(b"SKVD", c, 0)); // the whole record the resync finds
    assert_eq!(volume.len() as u64, file_len);
    fs::write(vols.join("00000000.vol"), &volume).unwrap();

    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(store.get(a, 0, u64::MAX).await.unwrap(), pattern(1, 100));
    assert!(is_not_found(&store, b).await);
    store.delete(a).await.unwrap();
    let new = ChunkId::random();
    store.put(new, pattern(2, 200)).await.unwrap();
    let new_volume = store.volumes().locate(new).unwrap().volume;
    drop(store);

    let store = volumes_only(dir.path(), VOLUME_SIZE);
    assert_eq!(store.get(new, 0, u64::MAX).await.unwrap(), pattern(2, 200));
    assert!(is_not_found(&store, a).await, "the delete holds too");
    assert!(is_not_found(&store, b).await);
    assert_ne!(
        new_volume, 0,
        "nothing is appended to a volume replay resynced in"
    );
    assert_eq!(
        fs::metadata(vols.join("00000000.vol")).unwrap().len(),
        file_len,
        "the damaged volume is left as it was"
    );
}

/// A resync can land in user data that looks like records: a tombstone or a put found after
/// one neither deletes nor replaces a chunk indexed before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_found_after_damage_neither_delete_nor_replace_earlier_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), VOLUME_SIZE);
    let (x, y) = (ChunkId::random(), ChunkId::random());
    store.put(x, pattern(3, 300)).await.unwrap();
    store.put(y, pattern(4, 400)).await.unwrap();
    let path = store.volumes().volume_path(0);
    drop(store);

    let mut tail = b"damage, then what looks like records: ".to_vec();
    tail.extend_from_slice(&header(b"SKVD", x, 0));
    tail.extend_from_slice(&put_record(y, b"a fake image of y"));
    let fresh = ChunkId::random();
    let fresh_rec = put_record(fresh, b"a chunk only the damage holds");
    tail.extend_from_slice(&fresh_rec);
    tail.extend_from_slice(&header(b"SKVD", fresh, 0));
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&tail, fs::metadata(&path).unwrap().len())
        .unwrap();
    drop(f);

    for _ in 0..2 {
        let store = volumes_only(dir.path(), VOLUME_SIZE);
        assert_eq!(store.get(x, 0, u64::MAX).await.unwrap(), pattern(3, 300));
        assert_eq!(store.get(y, 0, u64::MAX).await.unwrap(), pattern(4, 400));
        // Records after the damage may add chunks, and delete those.
        assert!(is_not_found(&store, fresh).await);
        let id = ChunkId::random();
        store.put(id, Bytes::from_static(b"after")).await.unwrap();
        drop(store);
        let store = volumes_only(dir.path(), VOLUME_SIZE);
        assert_eq!(store.get(id, 0, u64::MAX).await.unwrap(), "after");
    }
}

/// Compaction does not copy a live chunk that reads as corrupt: the copy, the last put of the
/// active volume, would be cut as torn at the next open and the chunk not found at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_live_chunk_stops_compaction_and_stays_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let store = volumes_only(dir.path(), 64 * 1024);
    store.volumes().set_compact_delay(std::time::Duration::ZERO);
    let ids: Vec<ChunkId> = (0..4).map(|_| ChunkId::random()).collect();
    for (i, id) in ids.iter().enumerate() {
        store.put(*id, pattern(i as u64, 20_000)).await.unwrap();
    }
    let hit = store.volumes().locate(ids[0]).unwrap();
    let in_first: Vec<ChunkId> = ids
        .iter()
        .copied()
        .filter(|id| store.volumes().locate(*id).unwrap().volume == hit.volume)
        .collect();
    assert!(in_first.len() >= 2 && in_first.len() < ids.len());
    let path = store.volumes().volume_path(hit.volume);
    let at = hit.offset + RECORD_HEADER_LEN + 24 + 100;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 1], at).unwrap();
    drop(f);
    for id in &in_first[1..] {
        store.delete(*id).await.unwrap();
    }
    let compactions = store.volumes().compactions();
    drop(store);
    let store = volumes_only(dir.path(), 64 * 1024);
    assert!(matches!(
        store.get(ids[0], 0, u64::MAX).await,
        Err(ChunkError::Corrupt { id, .. }) if id == ids[0]
    ));
    assert_eq!(compactions, 0);
    assert!(path.exists(), "the volume is kept");
}
