//! An in-memory [`MetaStore`] for tests: a `BTreeMap` behind a lock, nothing durable.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::RwLock;

use super::{Kv, KvPairs, MetaStore, StoreError, WriteBatch};

#[derive(Default)]
pub struct MemStore {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }
}

impl MetaStore for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.map.read().get(key).cloned())
    }

    fn write(&self, batch: &WriteBatch, _durable: bool) -> Result<(), StoreError> {
        let mut map = self.map.write();
        for (k, v) in &batch.ops {
            match v {
                Some(v) => map.insert(k.clone(), v.to_vec()),
                None => map.remove(k),
            };
        }
        Ok(())
    }

    fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KvPairs, StoreError> {
        let map = self.map.read();
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        Ok(map
            .range::<[u8], _>((Bound::Included(start), upper))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn last_in(&self, start: &[u8], end: &[u8]) -> Result<Option<Kv>, StoreError> {
        let map = self.map.read();
        Ok(map
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .next_back()
            .map(|(k, v)| (k.clone(), v.clone())))
    }
}
