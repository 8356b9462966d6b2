//! Open directories, listed as the kernel reads them: a page at a time from every MNode group
//! ([`PAGE`] entries each), merged in the groups' own order (sort keys, as S3 lists), so
//! reading a directory of millions of entries holds a page per group, never the whole
//! directory. An offset is a position in that order (`.` and `..` first); reading from
//! another offset than where the last read stopped (`rewinddir`, `seekdir`) lists again from
//! the start up to it. Entries created or removed while a listing is open appear at most once.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use saker_client::Cluster;
use saker_namespace::{cmp_entries, sort_key, GroupId};
use saker_rpc::{access, Entry, MetaError, MetaRequest, MetaResponse, ScanReader, Want};

use crate::error::{FuseError, Result};
use crate::fs::{Caller, SakerFs};

/// Entries asked of one group at a time.
const PAGE: u32 = 1000;

/// What a directory read hands out, in order.
pub enum Listed<'a> {
    Dot,
    DotDot,
    Entry(&'a Entry),
}

/// One open directory's listing.
pub struct DirStream {
    /// The directory's id.
    dir: u64,
    /// Who opened it and its path: every page is checked as theirs by the MNodes.
    reader: ScanReader,
    sources: Vec<Source>,
    /// Items handed out (counting `.` and `..`): the offset of the next one.
    pos: u64,
}

/// One group's share of the listing.
struct Source {
    group: GroupId,
    /// The sort key of the last entry fetched.
    after: Vec<u8>,
    page: VecDeque<Entry>,
    done: bool,
}

impl DirStream {
    fn new(dir: u64, reader: ScanReader, groups: Vec<GroupId>) -> Self {
        let sources = groups
            .into_iter()
            .map(|group| Source {
                group,
                after: Vec::new(),
                page: VecDeque::new(),
                done: false,
            })
            .collect();
        Self {
            dir,
            reader,
            sources,
            pos: 0,
        }
    }

    fn rewind(&mut self) {
        for s in &mut self.sources {
            s.after.clear();
            s.page.clear();
            s.done = false;
        }
        self.pos = 0;
    }

    /// The next entry (`pos` ≥ 2), fetching the next page of every group whose page is used
    /// up; `None` at the end.
    async fn peek(&mut self, cluster: &Cluster) -> Result<Option<&Entry>> {
        let dir = self.dir;
        let reader = &self.reader;
        let fetches = self
            .sources
            .iter_mut()
            .filter(|s| s.page.is_empty() && !s.done)
            .map(|s| async move {
                let req = MetaRequest::Scan {
                    dir,
                    start_after: s.after.clone(),
                    limit: PAGE,
                    reader: Some(reader.clone()),
                };
                let entries = match cluster.call_group(s.group, req).await? {
                    MetaResponse::Entries(e) => e,
                    other => {
                        return Err(FuseError::from(MetaError::Internal(format!(
                            "scan answered {other:?}"
                        ))))
                    }
                };
                s.done = entries.len() < PAGE as usize;
                if let Some(last) = entries.last() {
                    s.after = sort_key(&last.name, last.attr.is_dir()).as_bytes().to_vec();
                }
                s.page.extend(entries);
                Ok(())
            });
        for r in futures::future::join_all(fetches).await {
            r?;
        }
        Ok(self
            .next_source()
            .and_then(|i| self.sources[i].page.front()))
    }

    /// The source whose first fetched entry comes next in the listing's order.
    fn next_source(&self) -> Option<usize> {
        self.sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.page.front().map(|e| (i, e)))
            .min_by(|(_, a), (_, b)| {
                cmp_entries((&a.name, a.attr.is_dir()), (&b.name, b.attr.is_dir()))
            })
            .map(|(i, _)| i)
    }

    /// Hands out the entry [`DirStream::peek`] showed.
    fn advance(&mut self) {
        if self.pos >= 2 {
            if let Some(i) = self.next_source() {
                self.sources[i].page.pop_front();
            }
        }
        self.pos += 1;
    }

    /// Positions the listing at `offset`.
    async fn seek(&mut self, cluster: &Cluster, offset: u64) -> Result<()> {
        if offset < self.pos {
            self.rewind();
        }
        while self.pos < offset {
            if self.pos >= 2 && self.peek(cluster).await?.is_none() {
                break;
            }
            self.advance();
        }
        Ok(())
    }
}

impl SakerFs {
    pub fn opendir(&self, caller: &Caller, ino: u64) -> Result<u64> {
        let path = self.path(ino)?;
        let view = self.block(self.access_view(&path, access::READ, caller, Want::ATTR))?;
        if !view.attr.is_dir() {
            return Err(MetaError::NotDir.into());
        }
        let groups = self.cluster.groups().map(|(g, _)| *g).collect();
        let fh = self.new_fh();
        let reader = ScanReader {
            path,
            cred: caller.cred.clone(),
        };
        let stream = DirStream::new(view.attr.id, reader, groups);
        self.dirs.lock().insert(fh, Arc::new(Mutex::new(stream)));
        Ok(fh)
    }

    /// Hands `add` the items of open directory `fh` from `offset` on, each with the offset
    /// after it, until `add` says the reply is full (true) or the listing ends.
    pub fn list_dir(
        &self,
        fh: u64,
        offset: u64,
        mut add: impl FnMut(u64, Listed<'_>) -> bool,
    ) -> Result<()> {
        let stream = self
            .dirs
            .lock()
            .get(&fh)
            .cloned()
            .ok_or(FuseError::BadHandle(fh))?;
        let mut s = stream.lock();
        if s.pos != offset {
            self.block(s.seek(&self.cluster, offset))?;
        }
        loop {
            let next = s.pos + 1;
            let full = match s.pos {
                0 => add(next, Listed::Dot),
                1 => add(next, Listed::DotDot),
                _ => match self.block(s.peek(&self.cluster))? {
                    Some(e) => add(next, Listed::Entry(e)),
                    None => return Ok(()),
                },
            };
            if full {
                return Ok(());
            }
            s.advance();
        }
    }

    pub fn releasedir(&self, fh: u64) {
        self.dirs.lock().remove(&fh);
    }
}
