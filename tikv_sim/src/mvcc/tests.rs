use super::*;

fn put(key: &[u8], value: &[u8]) -> Mutation {
    Mutation {
        op: Op::Put,
        key: key.to_vec(),
        value: value.to_vec(),
    }
}

fn ts(ms: u64) -> u64 {
    ms << LOGICAL_BITS
}

/// Prewrites and commits `muts` with the first key as primary.
/// Prewrites `muts` (the first key primary) and asserts it took every lock.
fn lock(m: &mut Mvcc, muts: &[Mutation], start: u64, txn_size: u64) {
    let primary = muts[0].key.clone();
    assert!(m
        .prewrite(muts, &primary, start, 3000, txn_size, None)
        .is_empty());
}

fn txn(m: &mut Mvcc, muts: &[Mutation], start: u64, commit: u64) {
    lock(m, muts, start, 1);
    let keys: Vec<Key> = muts.iter().map(|x| x.key.clone()).collect();
    m.commit(&keys, start, commit).unwrap();
}

#[test]
fn snapshot_reads_see_commits_before_them() {
    let mut m = Mvcc::default();
    txn(&mut m, &[put(b"a", b"1")], ts(10), ts(11));
    txn(&mut m, &[put(b"a", b"2")], ts(20), ts(21));
    assert_eq!(m.get(b"a", ts(5), &[]).unwrap(), None);
    assert_eq!(m.get(b"a", ts(15), &[]).unwrap(), Some(b"1".to_vec()));
    assert_eq!(m.get(b"a", ts(30), &[]).unwrap(), Some(b"2".to_vec()));
    let del = Mutation {
        op: Op::Del,
        key: b"a".to_vec(),
        value: vec![],
    };
    txn(&mut m, &[del], ts(40), ts(41));
    assert_eq!(m.get(b"a", ts(50), &[]).unwrap(), None);
    assert_eq!(m.get(b"a", ts(35), &[]).unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_lock_blocks_readers_after_it_until_resolved() {
    let mut m = Mvcc::default();
    lock(&mut m, &[put(b"p", b"1"), put(b"s", b"1")], ts(10), 2);
    assert!(matches!(
        m.get(b"s", ts(20), &[]),
        Err(KeyError::Locked { .. })
    ));
    assert_eq!(
        m.get(b"s", ts(5), &[]).unwrap(),
        None,
        "older snapshot reads past it"
    );
    assert_eq!(
        m.get(b"s", ts(20), &[ts(10)]).unwrap(),
        None,
        "resolved lock skipped"
    );
    // The primary commits; the secondary's lock is resolved by a reader.
    m.commit(&[b"p".to_vec()], ts(10), ts(12)).unwrap();
    let (status, _) = m.check_txn_status(b"p", ts(10), ts(20), ts(20)).unwrap();
    assert_eq!(status, TxnStatus::Committed { commit_ts: ts(12) });
    m.resolve(ts(10), ts(12), &[], b"", b"").unwrap();
    assert_eq!(m.get(b"s", ts(20), &[]).unwrap(), Some(b"1".to_vec()));
}

#[test]
fn write_conflicts_and_locks_refuse_a_prewrite_whole() {
    let mut m = Mvcc::default();
    txn(&mut m, &[put(b"a", b"1")], ts(20), ts(21));
    // Started before that commit: conflict, and the other key is not locked either.
    let errs = m.prewrite(
        &[put(b"b", b"x"), put(b"a", b"x")],
        b"b",
        ts(15),
        3000,
        2,
        None,
    );
    assert!(matches!(errs[..], [KeyError::Conflict { .. }]), "{errs:?}");
    assert_eq!(m.scan_locks(b"", b"", u64::MAX, 0).len(), 0);
    assert!(m
        .prewrite(&[put(b"a", b"y")], b"a", ts(30), 3000, 1, None)
        .is_empty());
    let errs = m.prewrite(&[put(b"a", b"z")], b"a", ts(31), 3000, 1, None);
    assert!(matches!(errs[..], [KeyError::Locked { .. }]));
    let insert = Mutation {
        op: Op::Insert,
        key: b"a".to_vec(),
        value: vec![],
    };
    m.rollback(&[b"a".to_vec()], ts(30)).unwrap();
    let errs = m.prewrite(&[insert], b"a", ts(40), 3000, 1, None);
    assert!(matches!(errs[..], [KeyError::AlreadyExist { .. }]));
}

#[test]
fn a_rolled_back_transaction_cannot_prewrite_or_commit_later() {
    let mut m = Mvcc::default();
    let (status, action) = m.check_txn_status(b"p", ts(10), ts(20), ts(20)).unwrap();
    assert_eq!(
        (status, action),
        (TxnStatus::RolledBack, Action::LockNotExistRollback)
    );
    let errs = m.prewrite(&[put(b"p", b"1")], b"p", ts(10), 3000, 1, None);
    assert!(matches!(errs[..], [KeyError::Abort(_)]), "{errs:?}");
    assert!(matches!(
        m.commit(&[b"p".to_vec()], ts(10), ts(11)),
        Err(KeyError::Abort(_))
    ));
    assert!(matches!(
        m.commit(&[b"q".to_vec()], ts(12), ts(13)),
        Err(KeyError::TxnLockNotFound { .. })
    ));
}

#[test]
fn expired_locks_roll_back_and_live_ones_get_pushed() {
    let mut m = Mvcc::default();
    assert!(m
        .prewrite(&[put(b"p", b"1")], b"p", ts(100), 50, 1, None)
        .is_empty());
    let (status, action) = m.check_txn_status(b"p", ts(100), ts(120), ts(120)).unwrap();
    assert!(matches!(status, TxnStatus::Locked { ttl: 50, .. }));
    assert_eq!(action, Action::MinCommitTsPushed);
    assert!(
        matches!(
            m.commit(&[b"p".to_vec()], ts(100), ts(110)),
            Err(KeyError::CommitTsExpired { .. })
        ),
        "a commit below the pushed min commit ts is refused"
    );
    assert_eq!(m.heart_beat(b"p", ts(100), 80).unwrap(), 80);
    let (status, _) = m.check_txn_status(b"p", ts(100), ts(170), ts(170)).unwrap();
    assert!(
        matches!(status, TxnStatus::Locked { .. }),
        "heart beat extended it"
    );
    let (status, action) = m.check_txn_status(b"p", ts(100), ts(190), ts(190)).unwrap();
    assert_eq!(
        (status, action),
        (TxnStatus::RolledBack, Action::TtlExpireRollback)
    );
    assert_eq!(m.get(b"p", ts(200), &[]).unwrap(), None);
}

#[test]
fn scans_are_ordered_bounded_and_reversible() {
    let mut m = Mvcc::default();
    let muts: Vec<Mutation> = (0u8..10).map(|i| put(&[b'k', i], &[i])).collect();
    txn(&mut m, &muts, ts(10), ts(11));
    let keys = |r: Vec<Result<(Key, Vec<u8>), KeyError>>| -> Vec<u8> {
        r.into_iter().map(|p| p.unwrap().0[1]).collect()
    };
    assert_eq!(
        keys(m.scan(&[b'k', 2], &[b'k', 6], 10, ts(20), false, &[])),
        vec![2, 3, 4, 5]
    );
    assert_eq!(
        keys(m.scan(b"k", b"", 3, ts(20), false, &[])),
        vec![0, 1, 2]
    );
    assert_eq!(
        keys(m.scan(&[b'k', 2], &[b'k', 6], 2, ts(20), true, &[])),
        vec![5, 4]
    );
    assert!(m.scan(b"k", b"", 10, ts(5), false, &[]).is_empty());
    assert_eq!(m.middle_key(b"", b""), Some(vec![b'k', 5]));
}

#[test]
fn scans_merge_locked_keys_in_place_both_ways() {
    let mut m = Mvcc::default();
    txn(&mut m, &[put(b"a", b"1"), put(b"c", b"3")], ts(10), ts(11));
    // A lock on a key with no record yet, and one on a key that has one.
    lock(&mut m, &[put(b"b", b"2"), put(b"c", b"4")], ts(20), 2);
    let shape = |r: Vec<Result<(Key, Vec<u8>), KeyError>>| -> Vec<String> {
        r.into_iter()
            .map(|p| match p {
                Ok((k, _)) => String::from_utf8(k).unwrap(),
                Err(KeyError::Locked { key, .. }) => {
                    format!("!{}", String::from_utf8(key).unwrap())
                }
                Err(e) => panic!("{e:?}"),
            })
            .collect()
    };
    assert_eq!(
        shape(m.scan(b"", b"", 10, ts(30), false, &[])),
        ["a", "!b", "!c"]
    );
    assert_eq!(
        shape(m.scan(b"", b"", 10, ts(30), true, &[])),
        ["!c", "!b", "a"]
    );
    assert_eq!(
        shape(m.scan(b"", b"", 2, ts(15), true, &[])),
        ["c", "a"],
        "older snapshot"
    );
}

#[test]
fn gc_keeps_what_reads_at_the_safe_point_see_and_nothing_older() {
    let mut m = Mvcc::default();
    for i in 1..=5 {
        txn(
            &mut m,
            &[put(b"a", format!("{i}").as_bytes())],
            ts(10 * i),
            ts(10 * i + 1),
        );
    }
    txn(&mut m, &[put(b"gone", b"x")], ts(60), ts(61));
    let del = Mutation {
        op: Op::Del,
        key: b"gone".to_vec(),
        value: Vec::new(),
    };
    txn(&mut m, &[del], ts(62), ts(63));
    m.rollback(&[b"a".to_vec()], ts(64)).unwrap();
    assert_eq!(m.versions(b"").held, 8);
    // Versions at 11..41 below 45: the one at 41 stays (a read at 45 sees it).
    assert_eq!(m.gc(ts(45)), 3);
    assert_eq!(m.get(b"a", ts(45), &[]).unwrap(), Some(b"4".to_vec()));
    assert_eq!(m.get(b"a", ts(55), &[]).unwrap(), Some(b"5".to_vec()));
    // A delete below the safe point goes with everything older, and so does a rollback.
    assert_eq!(m.gc(ts(70)), 4);
    assert_eq!(m.get(b"gone", ts(70), &[]).unwrap(), None);
    assert_eq!(m.get(b"a", ts(70), &[]).unwrap(), Some(b"5".to_vec()));
    let v = m.versions(b"");
    assert_eq!((v.keys, v.held, v.collected), (1, 1, 7));
    assert_eq!(
        v.per_key,
        vec![(b"a".to_vec(), 1, 5), (b"gone".to_vec(), 0, 2)]
    );
    assert_eq!(m.gc(ts(70)), 0, "nothing new below it");
}

#[test]
fn gc_stops_below_the_oldest_lock() {
    let mut m = Mvcc::default();
    txn(&mut m, &[put(b"p", b"1")], ts(10), ts(11));
    // A transaction whose primary committed while a secondary is still locked: its commit
    // record must outlive the lock, or resolving the lock would roll it back.
    lock(&mut m, &[put(b"p", b"2"), put(b"s", b"2")], ts(20), 2);
    m.commit(&[b"p".to_vec()], ts(20), ts(21)).unwrap();
    txn(&mut m, &[put(b"p", b"3")], ts(30), ts(31));
    m.gc(ts(40));
    assert_eq!(
        m.versions(b"p").held,
        3,
        "nothing at or above the lock's start went"
    );
    m.resolve(ts(20), ts(21), &[], b"", b"").unwrap();
    assert_eq!(m.get(b"s", ts(40), &[]).unwrap(), Some(b"2".to_vec()));
    assert_eq!(m.gc(ts(40)), 2);
    assert_eq!(m.versions(b"").held, 2);
}
