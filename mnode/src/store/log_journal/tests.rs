use super::*;

fn bytes(group: u32, index: u64, tag: &str) -> Bytes {
    Bytes::from(format!("{group}/{index}/{tag}"))
}

fn entries(group: u32, indexes: std::ops::RangeInclusive<u64>, tag: &str) -> Vec<(u64, Bytes)> {
    indexes.map(|i| (i, bytes(group, i, tag))).collect()
}

fn all(j: &LogJournal, group: u32) -> Vec<Bytes> {
    j.entries(group, 0, None)
}

fn expect(group: u32, parts: &[(std::ops::RangeInclusive<u64>, &str)]) -> Vec<Bytes> {
    parts
        .iter()
        .flat_map(|(r, tag)| entries(group, r.clone(), tag))
        .map(|(_, b)| b)
        .collect()
}

#[tokio::test]
async fn reopens_with_entries_votes_purges_and_truncations() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = LogJournal::open(dir.path()).unwrap();
        j.append(1, entries(1, 1..=5, "a")).await.unwrap();
        j.append(2, entries(2, 1..=3, "a")).await.unwrap();
        j.save_vote(1, Bytes::from_static(b"vote-1")).await.unwrap();
        j.truncate(1, 4).await.unwrap();
        j.append(1, entries(1, 4..=6, "b")).await.unwrap();
        // An append over existing entries replaces them from its first index on.
        j.append(1, entries(1, 6..=6, "c")).await.unwrap();
        j.purge(2, 2, Bytes::from_static(b"purged-2"))
            .await
            .unwrap();
        assert_eq!(j.entries(1, 2, Some(4)), expect(1, &[(2..=3, "a")]));
    }
    let j = LogJournal::open(dir.path()).unwrap();
    assert_eq!(
        all(&j, 1),
        expect(1, &[(1..=3, "a"), (4..=5, "b"), (6..=6, "c")])
    );
    assert_eq!(all(&j, 2), expect(2, &[(3..=3, "a")]));
    assert_eq!(j.vote(1).as_deref(), Some(&b"vote-1"[..]));
    assert_eq!(j.vote(2), None);
    assert_eq!(j.purged(2).as_deref(), Some(&b"purged-2"[..]));
    assert_eq!(j.purged(1), None);
    assert_eq!(j.last_entry(1), Some(bytes(1, 6, "c")));
    assert!(!j.has_group(3));
}

/// A forgotten group is gone, across segment rolls and a reopen: no entry, vote or purge
/// record comes back from an older segment, and its segments are not kept for it.
#[tokio::test]
async fn a_forgotten_group_stays_gone_and_frees_its_segments() {
    let dir = tempfile::tempdir().unwrap();
    let pad = "p".repeat(2000);
    {
        let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
        for i in 1..=40 {
            j.append(7, entries(7, i..=i, &pad)).await.unwrap();
        }
        j.save_vote(7, Bytes::from_static(b"vote-7")).await.unwrap();
        j.purge(7, 3, Bytes::from_static(b"purged-7"))
            .await
            .unwrap();
        j.append(1, entries(1, 1..=2, "a")).await.unwrap();
        let before = j.segment_files();
        assert!(before > 1, "group 7 filled more than one segment");
        j.forget(7).await.unwrap();
        assert!(!j.has_group(7));
        // Group 1 writes on: the segments only group 7 needed are dropped.
        for i in 3..=40 {
            j.append(1, entries(1, i..=i, &pad)).await.unwrap();
        }
        j.purge(1, 39, Bytes::from_static(b"purged-1"))
            .await
            .unwrap();
        assert!(
            j.segment_files() < before,
            "{} segments of {before} kept",
            j.segment_files()
        );
    }
    let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
    assert!(!j.has_group(7), "group 7 came back");
    assert_eq!(j.vote(7), None);
    assert_eq!(j.purged(7), None);
    assert!(all(&j, 7).is_empty());
    assert_eq!(all(&j, 1), expect(1, &[(40..=40, &pad)]));
}

/// Entries of many sizes (frames that end anywhere in a block, and span blocks), with a
/// sync after each, across segment rolls; all read back after a reopen. Returns the
/// journal's syncs to disk beyond the writes' own and the segments it rolled.
async fn entries_of_every_size_survive_a_reopen(
    dir: &Path,
    durability: Durability,
) -> (u64, usize) {
    let sized = |i: u64| Bytes::from(vec![(i % 251) as u8 + 1; (i as usize * 397) % 9000]);
    let counts = {
        let j = LogJournal::open_with(dir, 64 << 10, durability).unwrap();
        for i in 1..=60 {
            j.append(1, vec![(i, sized(i))]).await.unwrap();
        }
        let rolled = j.segment_files() - 1;
        assert!(rolled > 0, "the segments rolled");
        (j.disk_syncs(), rolled)
    };
    let j = LogJournal::open_with(dir, 64 << 10, durability).unwrap();
    assert_eq!(all(&j, 1), (1..=60).map(sized).collect::<Vec<_>>());
    counts
}

#[tokio::test]
async fn frames_that_end_anywhere_in_a_block_are_all_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (disk_syncs, _) =
        entries_of_every_size_survive_a_reopen(dir.path(), Durability::Disk).await;
    assert_eq!(disk_syncs, 0, "every write is on disk by itself");
}

#[tokio::test]
async fn with_process_durability_appends_are_kept_and_each_sealed_segment_is_synced() {
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let (disk_syncs, rolled) =
        entries_of_every_size_survive_a_reopen(dir.path(), Durability::Process).await;
    // One sync per sealed segment, plus at most one background sync per second; none of
    // the 60 appends synced on its own.
    let background = start.elapsed().as_secs() + 1;
    assert!(
        disk_syncs >= rolled as u64 && disk_syncs <= rolled as u64 + background,
        "{disk_syncs} syncs to disk for {rolled} rolls"
    );
}

#[tokio::test]
async fn with_process_durability_votes_and_fsyncs_go_to_disk() {
    let dir = tempfile::tempdir().unwrap();
    let j = LogJournal::open_with(dir.path(), 1 << 20, Durability::Process).unwrap();
    j.append(1, entries(1, 1..=3, "a")).await.unwrap();
    let before = j.disk_syncs();
    j.save_vote(1, Bytes::from_static(b"vote")).await.unwrap();
    assert!(j.disk_syncs() > before, "a vote is on disk when it returns");
    let before = j.disk_syncs();
    j.sync_to_disk().unwrap();
    assert!(j.disk_syncs() > before);

    let disk = tempfile::tempdir().unwrap();
    let j = LogJournal::open_with(disk.path(), 1 << 20, Durability::Disk).unwrap();
    j.save_vote(1, Bytes::from_static(b"vote")).await.unwrap();
    j.sync_to_disk().unwrap();
    assert_eq!(j.disk_syncs(), 0, "nothing to do: every write is on disk");
}

#[test]
fn a_segment_opened_without_direct_io_is_written_the_same() {
    // Segments opened without O_DIRECT (O_DSYNC alone, where the file system refuses it,
    // or plain, for `Durability::Process`) hold the same frames.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(segment_name(7));
    File::create(&path).unwrap();
    let file = Arc::new(open_segment(&path, false).unwrap());
    let first = frame(7, &Record::Checkpoint(Vec::new()));
    file.write_all_at(Blocks::of(&first).as_slice(), 0).unwrap();
    let w = SegmentWriter::new(file, &first);
    let votes: Vec<Record> = (0..40)
        .map(|i| Record::Vote {
            group: i,
            vote: Bytes::from(vec![i as u8; 300 * i as usize]),
        })
        .collect();
    for (i, rec) in votes.iter().enumerate() {
        w.append(&frame(7, rec));
        if i % 3 == 0 {
            w.flush().unwrap();
        }
    }
    w.flush().unwrap();
    let back = read_records(7, &fs::read(&path).unwrap()).unwrap();
    assert_eq!(back.len(), 41);
    for (i, rec) in back[1..].iter().enumerate() {
        let Record::Vote { group, vote } = rec else {
            panic!("frame {i} is not a vote");
        };
        assert_eq!((*group, vote.len()), (i as u32, 300 * i));
    }
}

#[tokio::test]
async fn a_torn_tail_is_dropped_and_what_follows_it_never_read() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = LogJournal::open(dir.path()).unwrap();
        j.append(1, entries(1, 1..=3, "a")).await.unwrap();
        j.append(1, entries(1, 4..=4, "a")).await.unwrap();
    }
    // Tear the last frame: flip its last byte.
    let newest = |d: &Path| {
        let mut segs: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("seg-"))
            .collect();
        segs.sort();
        segs
    };
    let segs = newest(dir.path());
    let path = segs.last().unwrap();
    let mut data = fs::read(path).unwrap();
    let end = data.iter().rposition(|&b| b != 0).unwrap();
    data[end] ^= 0xff;
    fs::write(path, &data).unwrap();
    {
        let j = LogJournal::open(dir.path()).unwrap();
        assert_eq!(all(&j, 1), expect(1, &[(1..=3, "a")]));
        j.append(1, entries(1, 4..=4, "b")).await.unwrap();
    }
    let j = LogJournal::open(dir.path()).unwrap();
    assert_eq!(all(&j, 1), expect(1, &[(1..=3, "a"), (4..=4, "b")]));
}

#[tokio::test]
async fn a_new_journal_gets_a_zero_filled_spare_and_starts_its_next_segment_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
    j.join_zeroing();
    let spare = fs::read(dir.path().join(SPARE)).unwrap();
    assert_eq!(spare.len(), 64 << 10);
    assert!(spare.iter().all(|&b| b == 0));
    // Fill the first segment: the second one takes the spare, and another is written.
    let pad = "y".repeat(1000);
    for i in 1..=80 {
        j.append(1, entries(1, i..=i, &pad)).await.unwrap();
    }
    assert_eq!(j.segment_files(), 2);
    j.join_zeroing();
    assert!(dir.path().join(SPARE).exists());
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    drop(j);
    let j = LogJournal::open_with(dir.path(), 64 << 10, Durability::Disk).unwrap();
    assert_eq!(all(&j, 1), expect(1, &[(1..=80, &pad)]));
}

#[tokio::test]
async fn a_damaged_frame_in_an_older_segment_is_an_error_not_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let pad = "z".repeat(600);
    {
        let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
        for i in 1..=20 {
            j.append(1, entries(1, i..=i, &pad)).await.unwrap();
        }
        assert!(j.segment_files() >= 3);
    }
    // Damage the first entry frame of the first segment (after its checkpoint).
    let first = dir.path().join(segment_name(1));
    let mut data = fs::read(&first).unwrap();
    let cp_len = u32::from_le_bytes(data[8..12].try_into().unwrap()) as usize;
    data[HEADER + cp_len + HEADER + 5] ^= 0xff;
    fs::write(&first, &data).unwrap();
    match LogJournal::open_with(dir.path(), 4096, Durability::Disk) {
        Err(StoreError::Corrupt(msg)) => assert!(msg.contains("group 1"), "{msg}"),
        Err(e) => panic!("expected a corrupt-log error, got {e}"),
        Ok(j) => panic!("opened with entries {:?}", j.entries(1, 0, None).len()),
    }
}

#[tokio::test]
async fn purged_segments_go_and_their_files_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let pad = "x".repeat(600);
    {
        let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
        j.save_vote(1, Bytes::from_static(b"early-vote"))
            .await
            .unwrap();
        // Group 3 writes once and never purges: its entry is copied forward at a purge,
        // and its old segment can go too.
        j.append(3, entries(3, 1..=1, "idle")).await.unwrap();
        for i in 1..=40 {
            j.append(1, entries(1, i..=i, &pad)).await.unwrap();
            j.append(2, entries(2, i..=i, &pad)).await.unwrap();
        }
        let before = j.segment_files();
        assert!(before > 10, "{before} segments");
        j.purge(1, 35, Bytes::from_static(b"p1")).await.unwrap();
        j.purge(2, 35, Bytes::from_static(b"p2")).await.unwrap();
        let after = j.segment_files();
        assert!(after < before / 2, "{before} -> {after} segments");
        assert!(dir.path().join(SPARE).exists());
    }
    let check = |j: &LogJournal| {
        assert_eq!(j.vote(1).as_deref(), Some(&b"early-vote"[..]));
        assert_eq!(j.purged(1).as_deref(), Some(&b"p1"[..]));
        assert_eq!(j.purged(2).as_deref(), Some(&b"p2"[..]));
        assert_eq!(all(j, 3), expect(3, &[(1..=1, "idle")]));
    };
    {
        let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
        check(&j);
        assert_eq!(all(&j, 1), expect(1, &[(36..=40, &pad)]));
        // The next segment takes the spare file; its old frames must not come back.
        for i in 41..=50 {
            j.append(1, entries(1, i..=i, "new")).await.unwrap();
        }
    }
    let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
    check(&j);
    assert_eq!(all(&j, 1), expect(1, &[(36..=40, &pad), (41..=50, "new")]));
    assert_eq!(all(&j, 2), expect(2, &[(36..=40, &pad)]));
}

/// A purge copies forward a group whose few live entries keep old segments, but not a busy
/// group whose live log is large beside the segments it keeps: that one frees them with its
/// own purge. Both survive a reopen, and the busy group's purge drops its old segments.
#[tokio::test]
async fn a_purge_copies_forward_only_live_logs_small_beside_what_they_keep() {
    let dir = tempfile::tempdir().unwrap();
    let pad = "b".repeat(600);
    // The groups whose live entries keep segment `seq`.
    let groups_in = |j: &LogJournal, seq: u64| -> Vec<u32> {
        let st = j.state.lock();
        let seg = st
            .sealed
            .iter()
            .find(|s| s.seq == seq)
            .expect("segment kept");
        let pinning = seg
            .last
            .iter()
            .filter(|(&g, &last)| pins(&st.groups, g, last));
        let mut g: Vec<u32> = pinning.map(|(&g, _)| g).collect();
        g.sort_unstable();
        g
    };
    {
        let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
        // Group 3 writes once; group 1 writes a live log of ~30 KB and does not purge;
        // group 2 writes as much and purges.
        j.append(3, entries(3, 1..=1, "idle")).await.unwrap();
        for i in 1..=50 {
            j.append(1, entries(1, i..=i, &pad)).await.unwrap();
            j.append(2, entries(2, i..=i, &pad)).await.unwrap();
        }
        let first = j.state.lock().sealed.front().unwrap().seq;
        assert_eq!(groups_in(&j, first), vec![1, 2, 3]);
        j.purge(2, 50, Bytes::from_static(b"p2")).await.unwrap();
        // Group 3 was copied forward; group 1 (30 KB live, keeping some 17 segments of 4 KB:
        // less than 4 times its bytes) was not, and keeps its oldest segment (a copy would
        // have let it go).
        assert_eq!(groups_in(&j, first), vec![1]);
    }
    let j = LogJournal::open_with(dir.path(), 4096, Durability::Disk).unwrap();
    assert_eq!(all(&j, 3), expect(3, &[(1..=1, "idle")]));
    assert_eq!(all(&j, 1), expect(1, &[(1..=50, &pad)]));
    assert!(all(&j, 2).is_empty());
    let before = j.segment_files();
    j.purge(1, 48, Bytes::from_static(b"p1")).await.unwrap();
    let after = j.segment_files();
    assert!(after < before / 4, "{before} -> {after} segments");
    assert_eq!(all(&j, 1), expect(1, &[(49..=50, &pad)]));
    assert_eq!(all(&j, 3), expect(3, &[(1..=1, "idle")]));
}
