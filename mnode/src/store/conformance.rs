//! The conformance suite every [`MetaStore`] engine must pass.

use super::{prefix_end, MetaStore, WriteBatch};

/// Runs every check against an empty store. Panics with a message on the first failure.
pub fn run_all<S: MetaStore>(store: &S) {
    get_put_delete(store);
    batch_is_ordered(store);
    scan_bounds_and_limit(store);
    last_in_range(store);
    binary_keys(store);
}

fn batch(ops: &[(&[u8], Option<&[u8]>)]) -> WriteBatch {
    WriteBatch {
        ops: ops
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(bytes::Bytes::copy_from_slice)))
            .collect(),
    }
}

fn get_put_delete<S: MetaStore>(s: &S) {
    assert_eq!(s.get(b"a/k").unwrap(), None, "empty store has no key");
    s.write(&batch(&[(b"a/k", Some(b"v1"))]), true).unwrap();
    assert_eq!(s.get(b"a/k").unwrap().as_deref(), Some(&b"v1"[..]));
    s.write(&batch(&[(b"a/k", Some(b"v2"))]), false).unwrap();
    assert_eq!(
        s.get(b"a/k").unwrap().as_deref(),
        Some(&b"v2"[..]),
        "overwrite"
    );
    s.write(&batch(&[(b"a/k", None)]), true).unwrap();
    assert_eq!(s.get(b"a/k").unwrap(), None, "delete");
    s.write(&batch(&[(b"a/missing", None)]), true).unwrap();
}

fn batch_is_ordered<S: MetaStore>(s: &S) {
    s.write(
        &batch(&[
            (b"b/x", Some(b"1")),
            (b"b/x", None),
            (b"b/y", Some(b"2")),
            (b"b/y", Some(b"3")),
        ]),
        true,
    )
    .unwrap();
    assert_eq!(s.get(b"b/x").unwrap(), None, "later delete wins");
    assert_eq!(
        s.get(b"b/y").unwrap().as_deref(),
        Some(&b"3"[..]),
        "later put wins"
    );
}

fn scan_bounds_and_limit<S: MetaStore>(s: &S) {
    let keys: Vec<Vec<u8>> = (0..50u8).map(|i| vec![b'c', b'/', i]).collect();
    let mut b = WriteBatch::default();
    for k in &keys {
        b.put(k.clone(), k.clone());
    }
    s.write(&b, true).unwrap();
    let end = prefix_end(b"c/").unwrap();
    let all = s.scan(b"c/", Some(&end), 1000).unwrap();
    assert_eq!(all.len(), 50, "scan sees the whole prefix and nothing else");
    assert!(
        all.windows(2).all(|w| w[0].0 < w[1].0),
        "scan is in key order"
    );
    let some = s.scan(&[b'c', b'/', 10], Some(&end), 5).unwrap();
    assert_eq!(
        some.iter().map(|(k, _)| k[2]).collect::<Vec<_>>(),
        vec![10, 11, 12, 13, 14]
    );
    let bounded = s
        .scan(&[b'c', b'/', 45], Some(&[b'c', b'/', 47]), 100)
        .unwrap();
    assert_eq!(bounded.len(), 2, "end bound is exclusive");
    let open = s.scan(&[b'c', b'/', 49], None, 100).unwrap();
    assert_eq!(open[0].0, vec![b'c', b'/', 49]);
}

fn last_in_range<S: MetaStore>(s: &S) {
    let end = prefix_end(b"c/").unwrap();
    let (k, _) = s.last_in(b"c/", &end).unwrap().expect("c/ has keys");
    assert_eq!(k, vec![b'c', b'/', 49]);
    assert_eq!(s.last_in(b"zz", b"zzz").unwrap(), None);
}

fn binary_keys<S: MetaStore>(s: &S) {
    let k1 = vec![0u8, 0xff, 0, 1];
    let k2 = vec![0u8, 0xff, 0, 2];
    s.write(&batch(&[(&k1, Some(&[0, 0])), (&k2, Some(&[]))]), true)
        .unwrap();
    assert_eq!(s.get(&k1).unwrap(), Some(vec![0, 0]));
    assert_eq!(s.get(&k2).unwrap(), Some(vec![]), "empty values are kept");
    assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
    assert_eq!(prefix_end(&[0xff, 0xff]), None);
}
