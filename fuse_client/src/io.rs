//! Open files' bytes: reads and writes of a handle (with the chunk grants they need), the
//! commits that send a file's local bytes to the cluster (flush at close(2), fsync), and
//! release.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use saker_client::ReadRange;
use saker_rpc::{access, Attr, Layout, MetaError, MetaRequest, MetaResponse, Want};

use crate::error::{FuseError, Result};
use crate::file::OpenFile;
use crate::fs::{drop_setid_bits, Caller, SakerFs};

/// How long before its grants lapse a file's chunks are granted again.
const GRANT_MARGIN: Duration = Duration::from_secs(60);

impl SakerFs {
    /// Makes sure this process holds grants to read the chunks of `layout`, file `ino`'s,
    /// for a while yet: else asks the MNode again, as `caller` with `mask` (an open's check
    /// again, so a reader who lost the permission since stops reading).
    pub(crate) fn ensure_grants(
        &self,
        ino: u64,
        layout: &Layout,
        caller: &Caller,
        mask: u32,
    ) -> Result<()> {
        if saker_rpc::capability::covers(saker_rpc::capability::readable(layout), GRANT_MARGIN) {
            return Ok(());
        }
        let path = self.path(ino)?;
        let view = self.block(self.access_view(&path, mask, caller, Want::ATTR))?;
        if view.attr.id != ino {
            return Err(FuseError::Stale);
        }
        Ok(())
    }

    /// Brings `f`'s current bytes into its local buffer for `writer` (who may read them: an
    /// open for writing got grants), if they are not there yet.
    pub(crate) fn materialize(&self, f: &mut OpenFile, writer: &Caller) -> Result<()> {
        if f.buf.is_none() {
            self.ensure_grants(f.attr.id, &f.attr.layout, writer, access::WRITE)?;
        }
        self.block(f.materialize(&self.cluster, &self.cfg.buffer_dir))
    }

    /// `fh`'s file: its local state, its inode and whether the handle appends.
    fn file(&self, fh: u64) -> Result<(Arc<Mutex<OpenFile>>, u64, bool)> {
        let (ino, append) = {
            let h = self.handles.lock();
            let h = h.get(&fh).ok_or(FuseError::BadHandle(fh))?;
            (h.ino, h.append)
        };
        let f = self
            .files
            .lock()
            .get(&ino)
            .cloned()
            .ok_or(FuseError::BadHandle(fh))?;
        Ok((f, ino, append))
    }

    pub fn read(&self, fh: u64, offset: u64, size: u32, reader: &Caller) -> Result<Vec<u8>> {
        let (file, ino, _) = self.file(fh)?;
        let (layout, inline, len, opening) = {
            let f = file.lock();
            if let Some(b) = &f.buf {
                return b.read(offset, size);
            }
            if f.attr.sealed && f.opening.is_none() {
                return Err(FuseError::Sealed("opened without its key"));
            }
            (
                f.attr.layout.clone(),
                f.inline.clone(),
                f.attr.size,
                f.opening.clone(),
            )
        };
        let end = (offset + size as u64).min(len);
        if offset >= end {
            return Ok(Vec::new());
        }
        self.ensure_grants(ino, &layout, reader, access::READ)?;
        // This thread waits for the bytes anyway: it reads the chunk itself.
        let range = ReadRange { start: offset, end };
        if let Some(opening) = opening {
            let read = self
                .cluster
                .read_bytes_opened(&layout, inline, range, opening);
            return Ok(self.block(read)?);
        }
        Ok(saker_chunkstore::reads_in_place(|| {
            self.block(self.cluster.read_bytes(&layout, inline, range))
        })?)
    }

    /// write(2) into the handle's buffer. `drop_setid` names a caller without `CAP_FSETID`
    /// (the kernel flags such writes with `FUSE_HANDLE_KILLPRIV_V2`): the write first drops the
    /// file's set-user-id bit, and its set-group-id bit where the group may execute, as Linux
    /// does, instead of the kernel asking for `security.capability` before every write.
    pub fn write(
        &self,
        fh: u64,
        offset: u64,
        data: &[u8],
        writer: &Caller,
        drop_setid: bool,
    ) -> Result<u32> {
        let (file, _, append) = self.file(fh)?;
        if drop_setid {
            let caller = writer;
            let (ino, mode) = {
                let f = file.lock();
                (f.attr.id, f.attr.mode)
            };
            if let Some(attr) = self.set_mode_without_setid(caller, ino, mode)? {
                file.lock().attr.mode = attr.mode;
            }
        }
        let mut f = file.lock();
        self.materialize(&mut f, writer)?;
        let buf = f.buf.as_mut().expect("materialized");
        let offset = if append { buf.size } else { offset };
        buf.write(offset, data)?;
        if !f.dirty || f.writer.is_none() {
            f.writer = Some(writer.cred.clone());
        }
        f.dirty = true;
        Ok(data.len() as u32)
    }

    /// After a truncate by a caller other than root: the set-id bits [`drop_setid_bits`]
    /// keeps out are dropped (with `FUSE_HANDLE_KILLPRIV_V2` the kernel leaves that to the file
    /// system, as for writes). Free unless a bit is set.
    pub fn drop_setid_after_truncate(&self, caller: &Caller, attr: Attr) -> Result<Attr> {
        if caller.cred.uid == 0 {
            return Ok(attr);
        }
        Ok(self
            .set_mode_without_setid(caller, attr.id, attr.mode)?
            .unwrap_or(attr))
    }

    /// Sets `ino`'s mode to `mode` less the bits [`drop_setid_bits`] drops; `None` (and no
    /// request) when none of them is set. The MNode lets anyone who may write the file drop
    /// them.
    fn set_mode_without_setid(&self, caller: &Caller, ino: u64, mode: u32) -> Result<Option<Attr>> {
        let mode = mode & 0o7777;
        let kept = drop_setid_bits(mode);
        if kept == mode {
            return Ok(None);
        }
        self.setattr(caller, ino, Some(kept), None, None, None, None, None, false)
            .map(Some)
    }

    /// fsync(2): the file's writes committed, then everything acknowledged so far on disk
    /// (see [`saker_client::Cluster::sync_to_disk`]).
    pub fn fsync(&self, fh: u64) -> Result<()> {
        self.commit(fh)?;
        self.sync_to_disk()
    }

    /// Everything acknowledged so far on disk: fsyncdir, and the second half of fsync.
    pub fn sync_to_disk(&self) -> Result<()> {
        Ok(self.block(self.cluster.sync_to_disk())?)
    }

    /// Commits `fh`'s file if it has unsent bytes (flush, fsync).
    pub fn commit(&self, fh: u64) -> Result<()> {
        self.with_file(fh, |ino, f| self.commit_locked(ino, f))
    }

    /// `op` on `fh`'s file (its inode and local state, locked).
    fn with_file<T>(&self, fh: u64, op: impl FnOnce(u64, &mut OpenFile) -> Result<T>) -> Result<T> {
        let (file, ino, _) = self.file(fh)?;
        let mut f = file.lock();
        op(ino, &mut f)
    }

    pub(crate) fn commit_locked(&self, ino: u64, f: &mut OpenFile) -> Result<()> {
        if !f.dirty {
            return Ok(());
        }
        let path = self.path(ino)?;
        let id = f.attr.id;
        let writer = f.writer.clone().unwrap_or_else(|| owner(&f.attr));
        let seal = self.commit_seal(&path, id, f.attr.sealed, &writer)?;
        self.block(async {
            let (stored, guard) = f
                .store(&self.cluster, seal.as_ref().map(|s| s.sealing()))
                .await?;
            let req = MetaRequest::CommitFile {
                path: path.clone(),
                id,
                size: stored.size,
                etag: stored.etag,
                layout: stored.layout,
                inline: stored.inline.clone(),
                cred: writer,
                receipt: f.committed,
                sse: seal.as_ref().map(|s| s.commit.clone()),
                versioning: Default::default(),
                replaces: None,
                default_lock: None,
            };
            let answer = self.call(&path, req).await.and_then(|r| match r {
                MetaResponse::Committed { attr, receipt } => Ok((attr, receipt)),
                other => Err(MetaError::Internal(format!("CommitFile answered {other:?}")).into()),
            });
            match answer {
                Ok((attr, receipt)) => {
                    f.committed = Some(receipt);
                    f.attr = attr;
                    f.inline = stored.inline;
                    // The server's bytes are now the ones sealed here (or plaintext).
                    f.opening = seal.map(|s| s.opening());
                    f.dirty = false;
                    Ok(())
                }
                // The file was removed (here or elsewhere) while open: its bytes go with it.
                Err(FuseError::Client(saker_client::ClientError::Meta(MetaError::NotFound))) => {
                    guard.discard(&self.cluster).await;
                    f.dirty = false;
                    Ok(())
                }
                Err(e) => {
                    guard.discard(&self.cluster).await;
                    Err(e)
                }
            }
        })
    }

    /// close(2) of a descriptor (flush): commit. (In a bucket with a default retention the
    /// MNode locks the version a commit makes, in the commit's own batch.)
    pub fn flush(&self, fh: u64) -> Result<()> {
        self.with_file(fh, |ino, f| self.commit_locked(ino, f))
    }

    /// The last close of a handle: commit (as [`Self::flush`]), then forget the
    /// handle (and the file's local state with its last handle).
    pub fn release(&self, fh: u64) -> Result<()> {
        let result = self.flush(fh);
        let Some(h) = self.handles.lock().remove(&fh) else {
            return result;
        };
        let mut files = self.files.lock();
        if let Some(f) = files.get(&h.ino).cloned() {
            let mut g = f.lock();
            g.handles = g.handles.saturating_sub(1);
            if g.handles == 0 {
                drop(g);
                files.remove(&h.ino);
            }
        }
        result
    }
}

/// The owner of a file, as a commit's writer where no write recorded one.
fn owner(attr: &Attr) -> saker_rpc::Cred {
    saker_rpc::Cred {
        uid: attr.uid,
        gid: attr.gid,
        groups: Vec::new(),
    }
}
