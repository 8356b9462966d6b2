//! What the records reference outside the MNode, for the collectors: chunks and remote tier
//! copies queued for deletion once their grace period ends (the GC queue; a chunk's entry is
//! empty, and so is each shard's of a coded chunk, a remote copy's holds its [`TierRef`]), and
//! every chunk, shard or remote key a record still references (for the scrubs, which delete
//! only what nothing references).

use saker_rpc::{Attr, Layout, MetaResponse, TierRef, VersionKind};

use crate::keys::{Keys, GC, INODE, PART, REPAIR, SHARED, VERSIONS};
use crate::ops::versions;
use crate::read::OpResult;
use crate::records::decode;
use crate::tree::{for_each_entry, for_each_value, internal, View};

/// Chunks whose grace period ended, at most `limit`.
pub(crate) fn gc_due<V: View + ?Sized>(v: &V, keys: &Keys, now_ns: i64, limit: u32) -> OpResult {
    let mut out = Vec::new();
    due(v, keys, now_ns, |k, val| {
        if val.is_empty() {
            out.extend(Keys::gc_chunk(k).map(|c| (k.to_vec(), c)));
        }
        Ok(out.len() < limit as usize)
    })?;
    Ok(MetaResponse::Gc(out))
}

/// Chunks a write left short of replicas, at most `limit`, in id order.
pub(crate) fn repair_due<V: View + ?Sized>(v: &V, keys: &Keys, limit: u32) -> OpResult {
    let mut out = Vec::new();
    for_each_entry(v, &keys.table(REPAIR), &keys.table_end(REPAIR), |k, _| {
        out.extend(Keys::repair_chunk(k).map(|c| (k.to_vec(), c)));
        Ok(out.len() < limit as usize)
    })?;
    Ok(MetaResponse::Gc(out))
}

/// Remote copies whose grace period ended, at most `limit`.
pub(crate) fn tier_gc_due<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    now_ns: i64,
    limit: u32,
) -> OpResult {
    let mut out = Vec::new();
    due(v, keys, now_ns, |k, val| {
        if !val.is_empty() {
            out.push((k.to_vec(), decode::<TierRef>(val).map_err(internal)?));
        }
        Ok(out.len() < limit as usize)
    })?;
    Ok(MetaResponse::TierGc(out))
}

/// Calls `f` on the GC queue's entries due by `now_ns`, in order, while it answers true.
fn due<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    now_ns: i64,
    f: impl FnMut(&[u8], &[u8]) -> Result<bool, saker_rpc::MetaError>,
) -> Result<(), saker_rpc::MetaError> {
    let start = keys.table(GC);
    let end = keys.gc(now_ns.saturating_add(1), 0);
    for_each_entry(v, &start, &end, f)
}

/// Calls `f` on the layout of every record that owns bytes: inodes, hard links' shared
/// inodes, upload parts and noncurrent versions.
fn for_each_layout<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    mut f: impl FnMut(&Layout),
) -> Result<(), saker_rpc::MetaError> {
    for tag in [INODE, SHARED, PART, VERSIONS] {
        for_each_value(v, &keys.table(tag), &keys.table_end(tag), |val| {
            let layout = match tag {
                PART => {
                    decode::<saker_rpc::PartRecord>(val)
                        .map_err(internal)?
                        .layout
                }
                // Noncurrent versions keep their bytes until they are deleted.
                VERSIONS => match decode::<versions::Stored>(val).map_err(internal)?.kind {
                    VersionKind::Object(attr) => attr.layout,
                    VersionKind::Current | VersionKind::DeleteMarker => return Ok(true),
                },
                _ => decode::<Attr>(val).map_err(internal)?.layout,
            };
            f(&layout);
            Ok(true)
        })?;
    }
    Ok(())
}

/// The `limit` smallest chunk ids above `after` that a record references, in order: with
/// `leaks`, also coded chunks and their shards and the GC queue's chunks (what the leak scrub
/// keeps); without, the chunks stored as replicas. Every page walks every record (one state
/// of the group), keeping only its page.
pub(crate) fn chunk_refs<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    after: Option<u128>,
    limit: u32,
    leaks: bool,
) -> OpResult {
    let mut page = Page::new(after, limit);
    let mut keep = |id: u128| page.keep(id, ());
    for_each_layout(v, keys, |l| match l.coded() {
        // A coded chunk's shards, and its id while its replicas wait in the GC queue.
        Some(coded) if leaks => coded
            .shard_ids()
            .chain(coded.chunks.iter().map(|c| c.id))
            .for_each(&mut keep),
        Some(_) => {}
        None => l.chunks().iter().for_each(|c| keep(c.id)),
    })?;
    if !leaks {
        return Ok(MetaResponse::ChunkIds(page.ids()));
    }
    // Chunks queued for deletion are still referenced until collected.
    for_each_entry(v, &keys.table(GC), &keys.table_end(GC), |k, val| {
        if val.is_empty() {
            Keys::gc_chunk(k).into_iter().for_each(&mut keep);
        }
        Ok(true)
    })?;
    Ok(MetaResponse::ChunkIds(page.ids()))
}

/// The `limit` erasure-coded chunks of smallest id above `after` that a record references, in
/// order: (id, data shards, parity shards, stored length).
pub(crate) fn coded_refs<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    after: Option<u128>,
    limit: u32,
) -> OpResult {
    let mut page = Page::new(after, limit);
    for_each_layout(v, keys, |l| {
        let Some(coded) = l.coded() else { return };
        for (c, stored) in coded.stored_chunks().into_iter().flatten() {
            page.keep(c.id, (coded.data, coded.parity, stored));
        }
    })?;
    let out = page
        .items
        .into_iter()
        .map(|(id, (k, m, s))| (id, k, m, s))
        .collect();
    Ok(MetaResponse::CodedChunks(out))
}

/// One page of ids a walk over every record offers: the `limit` smallest above `after`, each
/// with a value.
struct Page<T> {
    after: Option<u128>,
    limit: usize,
    items: std::collections::BTreeMap<u128, T>,
}

impl<T> Page<T> {
    fn new(after: Option<u128>, limit: u32) -> Self {
        Page {
            after,
            limit: limit as usize,
            items: std::collections::BTreeMap::new(),
        }
    }

    /// Keeps `id` (with `value`) if it belongs to the page so far.
    fn keep(&mut self, id: u128, value: T) {
        let above = self.after.is_none_or(|a| id > a);
        let fits = self.items.len() < self.limit
            || self.items.last_key_value().is_some_and(|(&l, _)| id < l);
        if above && fits {
            self.items.insert(id, value);
            if self.items.len() > self.limit {
                self.items.pop_last();
            }
        }
    }

    /// The page's ids, in order.
    fn ids(self) -> Vec<u128> {
        self.items.into_keys().collect()
    }
}

/// Every key of tier `tier` a record or the GC queue references.
pub(crate) fn tier_refs<V: View + ?Sized>(v: &V, keys: &Keys, tier: &str) -> OpResult {
    let mut out = Vec::new();
    for_each_layout(v, keys, |l| {
        if let Some(t) = l.tiered().filter(|t| t.tier == tier) {
            out.push(t.key.clone());
        }
    })?;
    for_each_entry(v, &keys.table(GC), &keys.table_end(GC), |_, val| {
        if !val.is_empty() {
            let t = decode::<TierRef>(val).map_err(internal)?;
            if t.tier == tier {
                out.push(t.key);
            }
        }
        Ok(true)
    })?;
    Ok(MetaResponse::TierKeys(out))
}
