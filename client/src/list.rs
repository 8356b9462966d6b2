//! The listing engine: S3-ordered key streams over the directory tree.
//!
//! Keys come out in UTF-8 byte order of the full key: a depth-first walk in which each
//! directory's entries are ordered by sort name (a directory `d` sorts as `d/`), so a directory's
//! subtree sits exactly where its `d/` prefix belongs. Each level reads pages with one `scan`
//! per MNode group, merged. A position is only a key: resuming re-resolves it, descending into
//! the directories that still exist and seeking by name in the deepest one, so pages stay
//! correct while entries come and go. Delimiters are applied on full keys (any delimiter), and a
//! common prefix is skipped by seeking past it.

use std::collections::VecDeque;

use saker_rpc::{Attr, Entry, FileKind, InodeId, MetaError, MetaRequest, MetaResponse, Want};

use crate::cluster::Cluster;
use crate::error::ClientError;

/// Every bucket (the directories at the root), gathered from every group, in name order.
pub async fn buckets(cluster: &Cluster) -> Result<Vec<Entry>, ClientError> {
    const PAGE: u32 = 1000;
    let mut buckets = Vec::new();
    let groups: Vec<_> = cluster.groups().map(|(g, _)| *g).collect();
    for g in groups {
        let mut after = Vec::new();
        loop {
            let req = MetaRequest::Scan {
                dir: saker_namespace::ROOT_ID,
                start_after: after.clone(),
                limit: PAGE,
                reader: None,
            };
            let entries = match cluster.call_group(g, req).await? {
                MetaResponse::Entries(e) => e,
                other => return Err(MetaError::Internal(format!("scan answered {other:?}")).into()),
            };
            let done = entries.len() < PAGE as usize;
            for e in entries {
                after = e.name.clone().into_bytes();
                after.push(b'/');
                if e.attr.kind == FileKind::Dir {
                    buckets.push(e);
                }
            }
            if done {
                break;
            }
        }
    }
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(buckets)
}

/// One listed item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListItem {
    /// An object (a file, or an explicit directory's marker `d/`).
    Object {
        key: String,
        attr: Attr,
    },
    CommonPrefix(String),
}

impl ListItem {
    pub fn key(&self) -> &str {
        match self {
            ListItem::Object { key, .. } => key,
            ListItem::CommonPrefix(p) => p,
        }
    }
}

struct Frame {
    dir: InodeId,
    /// Full key prefix of this directory ("" for the bucket, "a/b/" below it).
    prefix: Vec<u8>,
    /// Sort-name position: entries after it are still to come.
    after: Vec<u8>,
    buffer: VecDeque<Entry>,
    exhausted: bool,
    pages: u32,
}

impl Frame {
    fn new(dir: InodeId, prefix: Vec<u8>, after: Vec<u8>) -> Self {
        Self {
            dir,
            prefix,
            after,
            buffer: VecDeque::new(),
            exhausted: false,
            pages: 0,
        }
    }
}

/// Lists one bucket.
pub struct Lister<'a> {
    cluster: &'a Cluster,
    bucket: String,
    bucket_id: InodeId,
    stack: Vec<Frame>,
}

fn sort_name(e: &Entry) -> Vec<u8> {
    let mut n = e.name.as_bytes().to_vec();
    if e.attr.kind == FileKind::Dir {
        n.push(b'/');
    }
    n
}

/// The greatest byte string below every key that starts with `prefix` (keys hold no 0xFF and
/// no NUL, so this is exact for real keys).
fn just_before(prefix: &[u8]) -> Vec<u8> {
    let mut p = prefix.to_vec();
    match p.pop() {
        None => Vec::new(),
        Some(last) => {
            p.push(last.saturating_sub(1));
            p.push(0xff);
            p
        }
    }
}

impl<'a> Lister<'a> {
    /// Opens a lister on `bucket`; `NoSuchBucket` if it does not exist.
    pub async fn new(cluster: &'a Cluster, bucket: &str) -> Result<Self, ClientError> {
        let view = cluster.lookup(&[bucket.to_string()], Want::ATTR).await?;
        Ok(Self {
            cluster,
            bucket: bucket.to_string(),
            bucket_id: view.attr.id,
            stack: Vec::new(),
        })
    }

    /// Positions the stream so that the next key is the first one greater than `pos`.
    pub async fn seek_after(&mut self, pos: &[u8]) -> Result<(), ClientError> {
        self.stack.clear();
        let mut dir = self.bucket_id;
        let mut prefix: Vec<u8> = Vec::new();
        let mut path = vec![self.bucket.clone()];
        let comps: Vec<&[u8]> = pos.split(|&b| b == b'/').collect();
        for (i, comp) in comps.iter().enumerate() {
            let rest = comps[i..].join(&b'/');
            let descend = if i + 1 < comps.len() {
                // A component no name can be ('.', '..', empty, ...) is a directory no key
                // lies under: the position is in the parent.
                match std::str::from_utf8(comp) {
                    Ok(name) if saker_namespace::Name::check(name).is_ok() => {
                        path.push(name.to_string());
                        match self.cluster.lookup(&path, Want::ATTR).await {
                            Ok(v) if v.attr.kind == FileKind::Dir => Some(v.attr.id),
                            Ok(_) | Err(MetaError::NotFound | MetaError::NotDir) => None,
                            Err(e) => return Err(e.into()),
                        }
                    }
                    _ => None,
                }
            } else {
                None
            };
            match descend {
                Some(child) => {
                    let mut after = comp.to_vec();
                    after.push(b'/');
                    let mut child_prefix = prefix.clone();
                    child_prefix.extend_from_slice(&after);
                    self.stack.push(Frame::new(dir, prefix, after));
                    dir = child;
                    prefix = child_prefix;
                }
                None => {
                    self.stack.push(Frame::new(dir, prefix, rest));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Positions the stream at the first key that starts with `prefix` (or after `after`,
    /// whichever is later).
    pub async fn start(&mut self, prefix: &str, after: &str) -> Result<(), ClientError> {
        if after.as_bytes() >= prefix.as_bytes() {
            self.seek_after(after.as_bytes()).await
        } else {
            self.seek_after(&just_before(prefix.as_bytes())).await
        }
    }

    async fn fill(&mut self) -> Result<(), ClientError> {
        let frame = self.stack.last_mut().expect("fill needs a frame");
        // Small first pages: a walk often needs only the first key of a directory.
        let limit: u32 = match frame.pages {
            0 => 16,
            1 => 128,
            _ => 1000,
        };
        frame.pages += 1;
        let mut merged: Vec<Entry> = Vec::new();
        let groups: Vec<_> = self.cluster.groups().map(|(g, _)| *g).collect();
        for g in groups {
            let req = MetaRequest::Scan {
                dir: frame.dir,
                start_after: frame.after.clone(),
                limit,
                reader: None,
            };
            match self.cluster.call_group(g, req).await? {
                MetaResponse::Entries(e) => merged.extend(e),
                other => return Err(ClientError::Protocol(format!("{other:?}"))),
            }
        }
        merged.sort_by_key(sort_name);
        merged.truncate(limit as usize);
        if merged.len() < limit as usize {
            frame.exhausted = true;
        }
        frame.buffer.extend(merged);
        Ok(())
    }

    /// The next key in order, or `None` at the end of the bucket.
    pub async fn next_key(&mut self) -> Result<Option<(String, Attr)>, ClientError> {
        loop {
            let Some(frame) = self.stack.last_mut() else {
                return Ok(None);
            };
            if frame.buffer.is_empty() {
                if frame.exhausted {
                    self.stack.pop();
                    continue;
                }
                self.fill().await?;
                continue;
            }
            let entry = frame.buffer.pop_front().expect("checked non-empty");
            frame.after = sort_name(&entry);
            let mut key = frame.prefix.clone();
            key.extend_from_slice(&frame.after);
            let key = String::from_utf8(key)
                .map_err(|_| ClientError::Protocol("non-UTF-8 key".into()))?;
            match entry.attr.kind {
                FileKind::Dir => {
                    let show = !entry.attr.implicit;
                    self.stack.push(Frame::new(
                        entry.attr.id,
                        key.clone().into_bytes(),
                        Vec::new(),
                    ));
                    if show {
                        return Ok(Some((key, entry.attr)));
                    }
                }
                FileKind::File => return Ok(Some((key, entry.attr))),
                // Symlinks and other FUSE-only types are not S3 objects.
                _ => {}
            }
        }
    }

    /// One page of a listing: up to `max` items (objects and common prefixes) after `after`
    /// that start with `prefix`, rolled up at `delimiter`. Returns the items and whether more
    /// follow.
    pub async fn page(
        &mut self,
        prefix: &str,
        delimiter: Option<&str>,
        after: &str,
        max: usize,
    ) -> Result<(Vec<ListItem>, bool), ClientError> {
        let mut items = Vec::new();
        let delimiter = delimiter.filter(|d| !d.is_empty());
        // A marker inside a common prefix means the whole prefix was already returned.
        let rolled = delimiter.and_then(|d| {
            let rest = after.strip_prefix(prefix)?;
            rest.find(d).map(|i| &after[..prefix.len() + i + d.len()])
        });
        match rolled {
            Some(cp) => {
                let mut past = cp.as_bytes().to_vec();
                past.push(0xff);
                self.seek_after(&past).await?;
            }
            None => self.start(prefix, after).await?,
        }
        while let Some((key, attr)) = self.next_key().await? {
            if !key.starts_with(prefix) {
                if key.as_str() > prefix {
                    break;
                }
                continue;
            }
            let item = match delimiter.and_then(|d| key[prefix.len()..].find(d).map(|i| (i, d))) {
                Some((i, d)) => {
                    ListItem::CommonPrefix(key[..prefix.len() + i + d.len()].to_string())
                }
                None => ListItem::Object { key, attr },
            };
            if items.len() == max {
                return Ok((items, true));
            }
            if let ListItem::CommonPrefix(cp) = &item {
                let mut past = cp.as_bytes().to_vec();
                past.push(0xff);
                self.seek_after(&past).await?;
            }
            items.push(item);
        }
        Ok((items, false))
    }
}
