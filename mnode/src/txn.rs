//! A batch transaction: reads see the store plus this batch's own writes.
//!
//! The executor evaluates every op of a batch against one [`Txn`]; an op that fails is rolled
//! back to its savepoint, so ops in a batch fail individually. The accumulated writes become the
//! physical mutations of one raft entry.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use crate::store::{KvPairs, MetaStore, StoreError, WriteBatch};

/// Writes not yet in the store, by key (`None`: deleted).
pub type Overlay = BTreeMap<Vec<u8>, Option<Bytes>>;

pub struct Txn<'a> {
    store: &'a dyn MetaStore,
    /// Writes of earlier batches that are proposed but not yet applied (read-only here).
    pending: Arc<Overlay>,
    overlay: Overlay,
    /// (key, overlay value before the write) for rollback.
    undo: Vec<(Vec<u8>, Option<Option<Bytes>>)>,
}

/// A point to roll back to.
#[derive(Clone, Copy, Debug)]
pub struct Savepoint(usize);

impl<'a> Txn<'a> {
    pub fn new(store: &'a dyn MetaStore) -> Self {
        Self::on_pending(store, Arc::default())
    }

    /// A transaction that sees `pending` (earlier, unapplied batches) on top of the store.
    pub fn on_pending(store: &'a dyn MetaStore, pending: Arc<Overlay>) -> Self {
        Self {
            store,
            pending,
            overlay: BTreeMap::new(),
            undo: Vec::new(),
        }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match self.overlay.get(key).or_else(|| self.pending.get(key)) {
            Some(v) => Ok(v.as_ref().map(|b| b.to_vec())),
            None => self.store.get(key),
        }
    }

    pub fn put(&mut self, key: Vec<u8>, value: impl Into<Bytes>) {
        self.set(key, Some(value.into()));
    }

    pub fn delete(&mut self, key: Vec<u8>) {
        self.set(key, None);
    }

    fn set(&mut self, key: Vec<u8>, value: Option<Bytes>) {
        let before = self.overlay.insert(key.clone(), value);
        self.undo.push((key, before));
    }

    pub fn savepoint(&self) -> Savepoint {
        Savepoint(self.undo.len())
    }

    pub fn rollback(&mut self, sp: Savepoint) {
        while self.undo.len() > sp.0 {
            let (key, before) = self.undo.pop().expect("undo longer than savepoint");
            match before {
                Some(v) => self.overlay.insert(key, v),
                None => self.overlay.remove(&key),
            };
        }
    }

    /// Up to `limit` live pairs with `start <= key < end`, in key order.
    pub fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, StoreError> {
        let range = (Bound::Included(start), Bound::Excluded(end));
        // This batch's writes win over pending ones.
        let mut overlaid: BTreeMap<&[u8], &Option<Bytes>> = self
            .pending
            .range::<[u8], _>(range)
            .map(|(k, v)| (k.as_slice(), v))
            .collect();
        overlaid.extend(
            self.overlay
                .range::<[u8], _>(range)
                .map(|(k, v)| (k.as_slice(), v)),
        );
        let overlaid: Vec<(&[u8], &Option<Bytes>)> = overlaid.into_iter().collect();
        // Deleted keys may hide store pairs, so ask the store for enough to fill `limit`.
        let deletes = overlaid.iter().filter(|(_, v)| v.is_none()).count();
        let base = self
            .store
            .scan(start, Some(end), limit.saturating_add(deletes))?;
        let mut out = Vec::with_capacity(limit.min(base.len() + overlaid.len()));
        let (mut i, mut j) = (0, 0);
        while out.len() < limit && (i < base.len() || j < overlaid.len()) {
            let take_overlay = match (base.get(i), overlaid.get(j)) {
                (Some((bk, _)), Some((ok, _))) => {
                    if *ok == bk.as_slice() {
                        i += 1; // the overlay shadows the store
                    }
                    *ok <= bk.as_slice()
                }
                (None, Some(_)) => true,
                _ => false,
            };
            if take_overlay {
                let (k, v) = overlaid[j];
                j += 1;
                if let Some(v) = v {
                    out.push((k.to_vec(), v.to_vec()));
                }
            } else {
                out.push(base[i].clone());
                i += 1;
            }
        }
        Ok(out)
    }

    /// The writes of this transaction, in key order, one per key.
    pub fn into_batch(self) -> WriteBatch {
        WriteBatch {
            ops: self.overlay.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    fn store_with(keys: &[&[u8]]) -> MemStore {
        let s = MemStore::new();
        let mut b = WriteBatch::default();
        for k in keys {
            b.put(k.to_vec(), k.to_vec());
        }
        s.write(&b, true).unwrap();
        s
    }

    #[test]
    fn overlay_shadows_and_merges_in_order() {
        let s = store_with(&[b"a1", b"a3", b"a5"]);
        let mut t = Txn::new(&s);
        t.put(b"a2".to_vec(), b"x".to_vec());
        t.delete(b"a3".to_vec());
        t.put(b"a5".to_vec(), b"new".to_vec());
        let got = t.scan(b"a", b"b", 10).unwrap();
        assert_eq!(got.len(), 3);
        let keys: Vec<&[u8]> = got.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(keys, vec![&b"a1"[..], b"a2", b"a5"]);
        assert_eq!(got[2].1, b"new");
        assert_eq!(t.get(b"a3").unwrap(), None);
        assert_eq!(t.scan(b"a", b"b", 2).unwrap().len(), 2, "limit holds");
    }

    #[test]
    fn limit_is_filled_past_deleted_keys() {
        let s = store_with(&[b"k1", b"k2", b"k3"]);
        let mut t = Txn::new(&s);
        t.delete(b"k1".to_vec());
        t.delete(b"k2".to_vec());
        let got = t.scan(b"k", b"l", 1).unwrap();
        assert_eq!(got, vec![(b"k3".to_vec(), b"k3".to_vec())]);
    }

    #[test]
    fn pending_batches_are_seen_and_shadowed() {
        let s = store_with(&[b"k1", b"k2"]);
        let mut pending = Overlay::new();
        pending.insert(b"k1".to_vec(), None);
        pending.insert(b"k3".to_vec(), Some(Bytes::from_static(b"p")));
        let mut t = Txn::on_pending(&s, Arc::new(pending));
        assert_eq!(
            t.get(b"k1").unwrap(),
            None,
            "a pending delete hides the store"
        );
        assert_eq!(t.get(b"k3").unwrap(), Some(b"p".to_vec()));
        t.put(b"k3".to_vec(), b"mine".to_vec());
        let got = t.scan(b"k", b"l", 10).unwrap();
        assert_eq!(
            got,
            vec![
                (b"k2".to_vec(), b"k2".to_vec()),
                (b"k3".to_vec(), b"mine".to_vec())
            ]
        );
        assert_eq!(
            t.into_batch().ops.len(),
            1,
            "only this batch's writes are proposed"
        );
    }

    #[test]
    fn rollback_restores_previous_overlay() {
        let s = store_with(&[b"k"]);
        let mut t = Txn::new(&s);
        t.put(b"a".to_vec(), b"1".to_vec());
        let sp = t.savepoint();
        t.put(b"a".to_vec(), b"2".to_vec());
        t.delete(b"k".to_vec());
        t.put(b"z".to_vec(), b"3".to_vec());
        t.rollback(sp);
        assert_eq!(t.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(t.get(b"k").unwrap(), Some(b"k".to_vec()));
        assert_eq!(t.get(b"z").unwrap(), None);
        let b = t.into_batch();
        assert_eq!(b.ops, vec![(b"a".to_vec(), Some(Bytes::from_static(b"1")))]);
    }
}
