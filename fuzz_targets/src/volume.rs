//! The `volume` target: a chunk volume file (`chunkstore/src/volume.rs`), replayed as a disk
//! chunk store does at startup.
//!
//! Input: the bytes of volume 0. It is scanned read-only, then opened by a store (which cuts a
//! torn tail, and may compact), every chunk found is read, one is deleted and a new one put;
//! after a reopen the new one reads back and the deleted one is gone.

use std::path::PathBuf;
use std::sync::OnceLock;

use bytes::Bytes;
use saker_chunkstore::volume::{self, VOLUME_SIZE};
use saker_chunkstore::{reads_in_place, ChunkId, ChunkStore, DiskChunkStore, SMALL_CHUNK_MAX};

/// The chunk every run puts.
const NEW: ChunkId = ChunkId(0x6e65_7720_6368_756e_6b21);

/// Replays a volume and uses the store it opens into.
pub fn volume(data: &[u8]) {
    let root = root();
    let dir = root.join("volumes");
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("scratch {dir:?}: {e}"),
        _ => {}
    }
    std::fs::create_dir_all(&dir).expect("scratch directory");
    std::fs::write(dir.join("00000000.vol"), data).expect("scratch write");

    let Ok(scanned) = volume::scan(&dir) else {
        return;
    };
    let Ok(store) = DiskChunkStore::open_with(root, SMALL_CHUNK_MAX, VOLUME_SIZE) else {
        return;
    };
    let rt = crate::scratch::runtime();
    for &id in &scanned {
        assert!(
            store.volumes().locate(id).is_some(),
            "a chunk the scan found is not in the store"
        );
        let _ = reads_in_place(|| rt.block_on(store.get(id, 0, u64::MAX)));
    }
    let gone = scanned.iter().copied().find(|&id| id != NEW);
    if let Some(id) = gone {
        rt.block_on(store.delete(id))
            .expect("a delete from a scratch volume");
    }
    let new = Bytes::from_static(b"a chunk put after replay");
    rt.block_on(store.put(NEW, new.clone()))
        .expect("a put to a scratch volume");
    drop(store);

    let store = DiskChunkStore::open_with(root, SMALL_CHUNK_MAX, VOLUME_SIZE)
        .expect("a volume this store wrote reopens");
    let got = reads_in_place(|| rt.block_on(store.get(NEW, 0, u64::MAX)));
    assert_eq!(got.ok(), Some(new), "a put after replay is lost on reopen");
    if let Some(id) = gone {
        assert!(
            store.volumes().locate(id).is_none(),
            "a deleted chunk is back on reopen"
        );
    }
}

/// The store's root directory (one per process).
fn root() -> &'static PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| crate::scratch::dir("volume"))
}

/// Volumes for the seed corpus: a store's volume after a few puts and deletes, and cut short.
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let dir = crate::scratch::dir("volume-seeds");
    let volumes = volume::Volumes::open(&dir, VOLUME_SIZE).expect("a scratch volume");
    let mut out = Vec::new();
    let snap = |out: &mut Vec<Vec<u8>>| {
        out.push(std::fs::read(dir.join("00000000.vol")).expect("the volume"));
    };
    for i in 0..4u128 {
        let data: Vec<u8> = (0..(i * 40) as usize).map(|b| b as u8).collect();
        volumes.put(ChunkId(i + 1), &data).expect("a put");
        snap(&mut out);
    }
    volumes.delete(ChunkId(2)).expect("a delete");
    snap(&mut out);
    let whole = out.last().expect("a volume").clone();
    out.push(whole[..whole.len() - 7].to_vec());
    let mut damaged = whole.clone();
    damaged[50] ^= 0xff;
    out.push(damaged);
    let _ = std::fs::remove_dir_all(&dir);
    out
}
