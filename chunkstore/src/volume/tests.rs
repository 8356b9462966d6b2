use super::*;

#[test]
fn a_volume_with_a_pending_put_is_not_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let vols = Volumes::open(dir.path(), 1).unwrap();
    let a = ChunkId::random();
    vols.put(a, &[1u8; 100]).unwrap();
    let first = vols.locate(a).unwrap().volume;
    // The next put rolls to a new volume: the first is sealed.
    vols.put(ChunkId::random(), &[2u8; 100]).unwrap();
    // A put still waiting for its sync in the sealed volume (as one is between its write
    // and its index insert).
    vols.tail.lock().pending.insert(ChunkId::random(), first);
    vols.delete(a).unwrap();
    assert!(
        vols.volume_path(first).exists(),
        "kept while a put is pending in it"
    );
    assert_eq!(vols.compactions(), 0);
    vols.tail.lock().pending.clear();
    vols.compact(first).unwrap();
    assert!(!vols.volume_path(first).exists());
    assert_eq!(vols.compactions(), 1);
}
