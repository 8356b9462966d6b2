//! The coordinator's and balancer's requests to a group beyond plain ops: freezing a directory
//! for rmdir, dentry invalidation, migrating a name's inodes to another group, and the name
//! statistics the balancer decides by.

use std::sync::atomic::Ordering;

use saker_rpc::{Attr, MetaError, MetaRequest, MetaResponse, ObjectMeta};

use super::holds::Hold;
use super::{untagged, Mnode, MAX_ATTEMPTS};
use crate::keys::PayloadKind;
use crate::metrics;
use crate::read::dir_usage;
use crate::records::decode;
use crate::tree::{child, resolve_parents, Child, StoreView};

impl Mnode {
    /// Freezes the directory at `path` for the coordinator of term `coord` (rmdir, directory
    /// rename) and answers it with its parent.
    pub(super) async fn freeze(
        &self,
        path: &[String],
        coord: u64,
    ) -> Result<MetaResponse, MetaError> {
        let Some(name) = path.last() else {
            return Err(MetaError::Invalid("the root cannot be removed".into()));
        };
        for _ in 0..MAX_ATTEMPTS {
            let absent = self.warm(path).await?;
            let r = self.resolver(false);
            r.set_absent(absent);
            let view = StoreView(self.store.as_ref());
            let found = resolve_parents(&view, &r, path).and_then(|chain| {
                let pid = chain.last().expect("chain has the root").attr.id;
                Ok((pid, child(&view, &self.keys, pid, name)?))
            });
            if r.take_retry().is_some() {
                continue;
            }
            return match found {
                Ok((parent, Child::Dir(loc))) => {
                    // Writes under it that were evaluated before the freeze finish first.
                    self.hold_and_drain(coord, Hold::Dir(loc.attr.id)).await?;
                    Ok(MetaResponse::Frozen {
                        parent,
                        attr: loc.attr,
                    })
                }
                Ok((_, Child::Other(_))) => Err(MetaError::NotDir),
                Ok((_, Child::None)) if path.len() == 1 => Err(MetaError::NoSuchBucket),
                Ok((_, Child::None)) => Err(MetaError::NotFound),
                Err(MetaError::MissingParent { .. }) => Err(MetaError::NotFound),
                Err(MetaError::Conflict { .. }) => Err(MetaError::NotDir),
                Err(e) => Err(e),
            };
        }
        Err(MetaError::Unavailable("freeze retried too often".into()))
    }

    pub(super) async fn invalidate(
        &self,
        pid: u64,
        name: &str,
        dir: u64,
    ) -> Result<MetaResponse, MetaError> {
        self.replica.lock().invalidate(pid, name);
        metrics::INVALIDATIONS.inc();
        self.invalidations.fetch_add(1, Ordering::Relaxed);
        // A batch that resolved through the old entry is applied before we count entries.
        self.drain_inflight().await?;
        dir_usage(&StoreView(self.store.as_ref()), &self.keys, &[dir])
    }

    /// This group's part of moving the inodes of `name` (see `MetaRequest::MigrateName`): the
    /// coordinator has blocked the name everywhere.
    pub(super) async fn migrate_name(
        &self,
        name: &str,
        table: &saker_namespace::ExceptionTable,
    ) -> Result<MetaResponse, MetaError> {
        let mut next = (*self.router.get()).clone();
        next.set_exceptions(table.clone());
        // Entries named `name` this group holds, found by a scan of its inode table.
        let mut found = Vec::new();
        let mut dir_named = false;
        self.each_entry(|pid, entry, value| {
            if entry == name.as_bytes() {
                found.push((pid, decode::<Attr>(value)?));
            } else if entry.strip_suffix(b"/") == Some(name.as_bytes()) {
                dir_named = true;
            }
            Ok(())
        })?;
        if dir_named {
            return Err(MetaError::Invalid(format!(
                "directories named {name} exist; only file names are redirected"
            )));
        }
        let view = StoreView(self.store.as_ref());
        if crate::ops::feed::holds_name(&view, &self.keys, name)? {
            // Its new group's records could be delivered before these: the name moves once
            // they are delivered (a later round).
            return Err(MetaError::Invalid(format!(
                "keys named {name} have change-feed records not delivered yet"
            )));
        }
        if self.has_versions_named(name)? {
            // Their version records would stay behind, out of reach of the name's new owner.
            return Err(MetaError::Invalid(format!(
                "keys named {name} keep versions; only names without are redirected"
            )));
        }
        let mut moved = 0;
        for (pid, attr) in found {
            let owner = next.owner(pid, name);
            if owner == self.keys.group {
                continue;
            }
            let payload = |kind| crate::tree::read_payload(&view, &self.keys, attr.id, kind);
            let meta = match payload(PayloadKind::Meta)? {
                Some(b) => decode(&b).map_err(|e| MetaError::Internal(e.to_string()))?,
                None => ObjectMeta::default(),
            };
            let data = match payload(PayloadKind::Data)? {
                Some(b) => Some(bytes::Bytes::copy_from_slice(
                    crate::records::decode_bytes(&b)
                        .map_err(|e| MetaError::Internal(e.to_string()))?,
                )),
                None => None,
            };
            let tags = match payload(PayloadKind::Tags)? {
                Some(b) => decode(&b).map_err(|e| MetaError::Internal(e.to_string()))?,
                None => Vec::new(),
            };
            let lock = crate::ops::retention::lock_of(&view, &self.keys, attr.id)?;
            let acl = match payload(PayloadKind::Acl)? {
                Some(b) => Some(decode(&b).map_err(|e| MetaError::Internal(e.to_string()))?),
                None => None,
            };
            let id = attr.id;
            let adopt = MetaRequest::AdoptEntry {
                pid,
                name: name.to_string(),
                attr: Box::new(attr),
                meta,
                data,
                tags,
                lock: (!lock.is_empty()).then_some(lock),
                acl,
            };
            self.peer(owner)?.call(untagged(), adopt).await?;
            let drop = MetaRequest::DropEntry {
                pid,
                name: name.to_string(),
                id,
            };
            self.serve(untagged(), drop).await?;
            moved += 1;
        }
        metrics::MIGRATED.inc_by(moved);
        Ok(MetaResponse::Moved(moved))
    }

    /// Whether this group's version table holds a version of a key whose last component is
    /// `name` (in any bucket).
    fn has_versions_named(&self, name: &str) -> Result<bool, MetaError> {
        let mut found = false;
        self.each_record(crate::keys::VERSIONS, |rest, _| {
            // bucket \0 key \0 !id
            let key = rest
                .iter()
                .position(|&b| b == 0)
                .and_then(|i| rest.get(i + 1..rest.len().checked_sub(9)?));
            if let Some(key) = key {
                let last = key.rsplit(|&b| b == b'/').next().unwrap_or(key);
                found |= last == name.as_bytes();
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// Calls `f(pid, entry name (a directory's ends in '/'), record)` for every entry of this
    /// group's inode table, in pages.
    fn each_entry(
        &self,
        mut f: impl FnMut(u64, &[u8], &[u8]) -> Result<(), crate::store::StoreError>,
    ) -> Result<(), MetaError> {
        self.each_record(crate::keys::INODE, |rest, value| {
            let (pid, entry) = rest.split_at(8);
            let pid = u64::from_be_bytes(pid.try_into().expect("8 bytes"));
            f(pid, entry, value)
        })
    }

    /// Calls `f(key after the table's prefix, record)` for every record of this group's
    /// `table`, in pages.
    fn each_record(
        &self,
        table: u8,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<(), crate::store::StoreError>,
    ) -> Result<(), MetaError> {
        const PAGE: usize = 4096;
        let prefix = self.keys.table(table);
        let end = crate::store::prefix_end(&prefix).expect("a table prefix has an end");
        let mut start = prefix.clone();
        loop {
            let page = self
                .store
                .scan(&start, Some(&end), PAGE)
                .map_err(|e| MetaError::Internal(e.to_string()))?;
            let Some((last, _)) = page.last() else {
                return Ok(());
            };
            start = last.clone();
            start.push(0);
            let full = page.len() == PAGE;
            for (key, value) in &page {
                f(&key[prefix.len()..], value).map_err(|e| MetaError::Internal(e.to_string()))?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// The balancer's report: inodes held and the `top` most frequent file names.
    pub(super) fn name_stats(&self, top: usize) -> Result<MetaResponse, MetaError> {
        let mut inodes = 0u64;
        let mut counts: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        self.each_entry(|_, entry, _| {
            inodes += 1;
            if !entry.ends_with(b"/") {
                *counts.entry(entry.to_vec()).or_default() += 1;
            }
            Ok(())
        })?;
        let mut names: Vec<(String, u64)> = counts
            .into_iter()
            .filter(|(_, c)| *c > 1)
            .filter_map(|(n, c)| String::from_utf8(n).ok().map(|n| (n, c)))
            .collect();
        names.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        names.truncate(top);
        Ok(MetaResponse::NameStats { inodes, top: names })
    }
}
