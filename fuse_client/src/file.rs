//! An open file's bytes on this mount: what the server had at open (close-to-open), and once
//! written, a local buffer holding the whole new content until it is committed at flush, fsync
//! or release (in memory up to [`MEM_BUFFER_LIMIT`], else a sparse unlinked local file).

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;

use bytes::Bytes;
use futures::StreamExt;
use md5::{Digest, Md5};
use saker_client::sealed::{Opening, Sealing};
use saker_client::{ChunkWriter, Cluster, ReadRange};
use saker_rpc::{Attr, CommitReceipt, Cred, Layout};

use crate::error::{FuseError, Result};

/// Files up to this size get the plain MD5 as ETag even when written out of order
/// (ARCHITECTURE.md: larger ones get `md5(chunk md5s)-N` unless written sequentially).
pub const FULL_MD5_LIMIT: u64 = 64 * 1024 * 1024;

/// The state of one inode opened through this mount, shared by all its handles.
pub struct OpenFile {
    /// The attributes from the server at the last open or commit.
    pub attr: Attr,
    /// Inline bytes from the server (small files).
    pub inline: Option<Bytes>,
    /// The whole content, once written locally.
    pub buf: Option<Buffer>,
    /// Bytes in `buf` the server does not have yet.
    pub dirty: bool,
    /// Open handles.
    pub handles: usize,
    /// The receipt of the bytes these handles committed last: in a bucket that keeps
    /// versions, the next commit replaces them in place instead of making another version.
    pub committed: Option<CommitReceipt>,
    /// Who wrote the bytes not yet committed (the commit is made as them).
    pub writer: Option<Cred>,
    /// Decrypts the server's bytes of an SSE-S3 object ([`Attr::sealed`]).
    pub opening: Option<std::sync::Arc<Opening>>,
}

/// Content up to this size stays in memory; a write past it moves the whole buffer to an
/// unlinked local file (large files, sparse writes far out). Most files a DL pipeline or a
/// build writes are far smaller, and skip the local file's create, write and read back.
pub const MEM_BUFFER_LIMIT: u64 = 1024 * 1024;

/// Where a buffer's bytes are.
enum Store {
    Mem(Vec<u8>),
    File(File),
}

/// The local copy of a file being written.
pub struct Buffer {
    store: Store,
    /// The directory a spilled buffer's file goes to.
    dir: std::path::PathBuf,
    pub size: u64,
    /// While every write so far continued at the end from offset 0: the end they reached.
    seq: Option<Seq>,
}

/// The running MD5 of a sequentially written buffer. Bytes in memory are hashed at commit, on
/// the writing thread while the chunk put runs (so the hash costs no latency of its own); bytes
/// that go to a local file are hashed as they are written.
struct Seq {
    md5: Md5,
    /// `md5` covers `[0, hashed)`.
    hashed: u64,
    /// Writes so far covered `[0, end)`.
    end: u64,
}

impl Seq {
    fn new() -> Self {
        Seq {
            md5: Md5::new(),
            hashed: 0,
            end: 0,
        }
    }
}

impl Buffer {
    fn empty(dir: &std::path::Path) -> Self {
        Self {
            store: Store::Mem(Vec::new()),
            dir: dir.to_path_buf(),
            size: 0,
            seq: Some(Seq::new()),
        }
    }

    /// Moves the bytes to a local file (hashing what the running MD5 has not covered yet).
    fn spill(&mut self) -> Result<&File> {
        if let Store::Mem(bytes) = &self.store {
            if let Some(seq) = &mut self.seq {
                let end = (seq.end as usize).min(bytes.len());
                seq.md5.update(&bytes[seq.hashed as usize..end]);
                seq.hashed = end as u64;
            }
            let file = tempfile::tempfile_in(&self.dir)?;
            file.write_all_at(bytes, 0)?;
            file.set_len(self.size)?;
            self.store = Store::File(file);
        }
        match &self.store {
            Store::File(f) => Ok(f),
            Store::Mem(_) => unreachable!("spilled above"),
        }
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = offset + data.len() as u64;
        match &mut self.store {
            Store::Mem(bytes) if end <= MEM_BUFFER_LIMIT => {
                // Overwrite what is there, append the rest (no zero-fill of bytes about to be
                // written: most writes append).
                let o = offset as usize;
                if bytes.len() < o {
                    bytes.resize(o, 0);
                }
                let over = (bytes.len() - o).min(data.len());
                bytes[o..o + over].copy_from_slice(&data[..over]);
                bytes.extend_from_slice(&data[over..]);
            }
            _ => self.spill()?.write_all_at(data, offset)?,
        }
        self.size = self.size.max(end);
        let in_file = matches!(self.store, Store::File(_));
        self.seq = match self.seq.take() {
            Some(mut seq) if seq.end == offset => {
                seq.end = end;
                if in_file {
                    seq.md5.update(data);
                    seq.hashed = end;
                }
                Some(seq)
            }
            _ => None,
        };
        Ok(())
    }

    pub fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>> {
        Ok(self.view(offset, len)?.into_owned())
    }

    /// `[offset, offset + len)` (clamped to the size), borrowed where the bytes are in memory
    /// as they are, else read (a local file, or zeros past the written end).
    fn view(&self, offset: u64, len: u32) -> Result<Cow<'_, [u8]>> {
        let end = (offset + len as u64).min(self.size);
        if offset >= end {
            return Ok(Cow::Borrowed(&[]));
        }
        if let Store::Mem(bytes) = &self.store {
            if end <= bytes.len() as u64 {
                return Ok(Cow::Borrowed(&bytes[offset as usize..end as usize]));
            }
        }
        let mut out = vec![0u8; (end - offset) as usize];
        match &self.store {
            Store::Mem(bytes) => {
                // Bytes past the written end (a truncate that grew the file) read as zeros.
                let have = (bytes.len() as u64).clamp(offset, end);
                out[..(have - offset) as usize]
                    .copy_from_slice(&bytes[offset as usize..have as usize]);
            }
            Store::File(file) => {
                let mut done = 0;
                while done < out.len() {
                    // A sparse hole reads as zeros; a short read past the written end is zeros too.
                    let n = file.read_at(&mut out[done..], offset + done as u64)?;
                    if n == 0 {
                        break;
                    }
                    done += n;
                }
            }
        }
        Ok(Cow::Owned(out))
    }

    pub fn truncate(&mut self, size: u64) -> Result<()> {
        match &mut self.store {
            Store::Mem(bytes) if size <= MEM_BUFFER_LIMIT => bytes.truncate(size as usize),
            _ => self.spill()?.set_len(size)?,
        }
        self.seq = match self.seq.take() {
            Some(seq) if seq.end == size => Some(seq),
            _ if size == 0 => Some(Seq::new()),
            _ => None,
        };
        self.size = size;
        Ok(())
    }
}

/// What a commit stores.
pub struct Committed {
    pub size: u64,
    pub etag: String,
    pub layout: Layout,
    pub inline: Option<Bytes>,
}

impl OpenFile {
    pub fn new(attr: Attr, inline: Option<Bytes>) -> Self {
        Self {
            attr,
            inline,
            buf: None,
            dirty: false,
            handles: 0,
            committed: None,
            writer: None,
            opening: None,
        }
    }

    /// Empties the content without reading it (a truncate to 0).
    pub fn empty(&mut self, dir: &std::path::Path) {
        self.buf = Some(Buffer::empty(dir));
    }

    /// The size the kernel should see.
    pub fn size(&self) -> u64 {
        match &self.buf {
            Some(b) => b.size,
            None => self.attr.size,
        }
    }

    /// Makes sure `buf` holds the whole content, fetching the server's bytes if needed.
    pub async fn materialize(&mut self, cluster: &Cluster, dir: &std::path::Path) -> Result<()> {
        if self.buf.is_some() {
            return Ok(());
        }
        let opening = match (self.attr.sealed, &self.opening) {
            (false, _) => None,
            (true, Some(o)) => Some(o.clone()),
            (true, None) => return Err(FuseError::Sealed("opened without its key")),
        };
        let mut buf = Buffer::empty(dir);
        if self.attr.size > 0 {
            let (layout, inline) = (&self.attr.layout, self.inline.clone());
            let range = ReadRange {
                start: 0,
                end: self.attr.size,
            };
            let mut stream = match opening {
                Some(o) => cluster.read_opened(layout, inline, range, o),
                None => cluster.read_data(layout, inline, range),
            };
            while let Some(piece) = stream.next().await {
                let piece = piece?;
                let at = buf.size;
                buf.write(at, &piece)?;
            }
            // The running MD5 stays valid: it covers [0, size) whoever wrote those bytes.
            if buf.size != self.attr.size {
                buf.truncate(self.attr.size)?;
            }
        }
        self.buf = Some(buf);
        Ok(())
    }

    /// Writes the buffer to the chunkstores (or inline), encrypted with `seal` if given, and
    /// computes its ETag (of the plaintext); the caller sends the `CommitFile`.
    pub async fn store(
        &mut self,
        cluster: &Cluster,
        seal: Option<Sealing>,
    ) -> Result<(Committed, ChunkWriterGuard)> {
        let buf = self
            .buf
            .as_mut()
            .expect("store is called on a materialized file");
        let chunk_size = cluster.config().chunk_size.max(1) as u64;
        // The ETag: the MD5 of the whole content (continuing the running one of a sequential
        // write), else for files too large to hash whole `md5(chunk md5s)-N`.
        let (mut whole_md5, hash_from) = match &buf.seq {
            Some(seq) if seq.end == buf.size => (Some(seq.md5.clone()), seq.hashed),
            _ if buf.size <= FULL_MD5_LIMIT => (Some(Md5::new()), 0),
            _ => (None, 0),
        };
        // Content in memory is hashed while the last put runs (below), not before it.
        let deferred = whole_md5.is_some() && matches!(buf.store, Store::Mem(_));
        let mut chunk_md5s: Vec<[u8; 16]> = Vec::new();
        let mut writer = ChunkWriter::new(cluster)
            .for_file(self.attr.id)
            .sealed(seal);
        let mut off = 0u64;
        let piece = chunk_size.min(4 * 1024 * 1024);
        let mut chunk_md5 = Md5::new();
        let mut in_chunk = 0u64;
        while off < buf.size {
            let n = piece.min(buf.size - off).min(chunk_size - in_chunk);
            let data = buf.view(off, n as u32)?;
            match &mut whole_md5 {
                Some(md5) if !deferred => {
                    let skip = hash_from.saturating_sub(off).min(n) as usize;
                    md5.update(&data[skip..]);
                }
                Some(_) => {}
                None => {
                    chunk_md5.update(&data);
                    in_chunk += n;
                    if in_chunk == chunk_size {
                        chunk_md5s.push(
                            std::mem::replace(&mut chunk_md5, Md5::new())
                                .finalize()
                                .into(),
                        );
                        in_chunk = 0;
                    }
                }
            }
            if let Err(e) = writer.write(&data).await {
                writer.abort().await;
                return Err(e.into());
            }
            off += n;
        }
        let unhashed = if deferred {
            buf.view(hash_from, (buf.size - hash_from) as u32)?
        } else {
            Cow::Borrowed(&[][..])
        };
        let etag = async {
            match whole_md5 {
                Some(mut md5) => {
                    md5.update(&unhashed);
                    hex::encode(md5.finalize())
                }
                None => {
                    if in_chunk > 0 {
                        chunk_md5s.push(chunk_md5.finalize().into());
                    }
                    let mut all = Md5::new();
                    for m in &chunk_md5s {
                        all.update(m);
                    }
                    format!("{}-{}", hex::encode(all.finalize()), chunk_md5s.len())
                }
            }
        };
        // The put is polled first: a local store hands its I/O to a blocking thread (a remote
        // one sends its request), then the hash runs here while the put completes.
        let (written, etag) = futures::join!(writer.finish(), etag);
        let written = written?;
        let guard = ChunkWriterGuard {
            layout: written.layout.clone(),
        };
        Ok((
            Committed {
                size: written.size,
                etag,
                layout: written.layout,
                inline: written.inline,
            },
            guard,
        ))
    }
}

/// The chunks of a stored buffer, to delete if the metadata commit fails.
pub struct ChunkWriterGuard {
    pub layout: Layout,
}

impl ChunkWriterGuard {
    pub async fn discard(self, cluster: &Cluster) {
        for c in self.layout.chunks() {
            if let Err(e) = cluster
                .chunk_store()
                .delete(saker_chunkstore::ChunkId(c.id))
                .await
            {
                tracing::warn!(error = %e, "could not delete a chunk of a failed commit; the scrub will");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_reads_holes_as_zeros_and_tracks_sequential_md5() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buffer::empty(dir.path());
        b.write(0, b"hello ").unwrap();
        b.write(6, b"world").unwrap();
        assert!(b.seq.as_ref().is_some_and(|s| s.end == 11 && s.hashed == 0));
        assert_eq!(b.read(0, 100).unwrap(), b"hello world");
        b.write(20, b"!").unwrap();
        assert!(b.seq.is_none());
        assert_eq!(b.size, 21);
        let r = b.read(9, 12).unwrap();
        assert_eq!(&r[..2], b"ld");
        assert!(r[2..11].iter().all(|&x| x == 0));
        assert_eq!(r[11], b'!');
        b.truncate(5).unwrap();
        assert_eq!(b.read(0, 100).unwrap(), b"hello");
        // A write that overwrites the tail and runs past the end.
        b.write(3, b"p me!").unwrap();
        assert_eq!(b.size, 8);
        assert_eq!(b.read(0, 100).unwrap(), b"help me!");
        b.truncate(0).unwrap();
        assert!(b.seq.is_some());
    }

    #[test]
    fn a_buffer_moves_to_a_file_past_the_memory_limit_and_keeps_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buffer::empty(dir.path());
        b.write(0, b"head").unwrap();
        b.truncate(10).unwrap();
        assert_eq!(b.read(0, 100).unwrap(), b"head\0\0\0\0\0\0");
        assert!(matches!(b.store, Store::Mem(_)));
        b.write(MEM_BUFFER_LIMIT, b"tail").unwrap();
        assert!(matches!(b.store, Store::File(_)));
        assert_eq!(b.size, MEM_BUFFER_LIMIT + 4);
        assert_eq!(b.read(0, 6).unwrap(), b"head\0\0");
        assert_eq!(b.read(MEM_BUFFER_LIMIT - 2, 10).unwrap(), b"\0\0tail");
        b.truncate(2).unwrap();
        assert_eq!(b.read(0, 100).unwrap(), b"he");
    }
}
