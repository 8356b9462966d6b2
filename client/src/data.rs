//! File bytes: splitting writes into chunks (or keeping them inline) and streaming reads.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use saker_chunkstore::{ChunkId, ChunkStore, CodedReads};
use saker_rpc::{ChunkRef, Layout, TierRef};
use tracing::Instrument;

use crate::cluster::Cluster;
use crate::error::ClientError;
use crate::sealed::{packages, Sealing};

/// Largest piece a read fetches from a chunkstore at once.
const READ_PIECE: u64 = 1024 * 1024;

/// Accumulates the bytes of one new file, writing full chunks as they fill.
///
/// Chunks are durable on the chunkstore before [`ChunkWriter::finish`] returns, so the metadata
/// commit that references them comes after their data (a crash in between only leaks chunks,
/// which the scrub collects).
pub struct ChunkWriter {
    chunks_store: Arc<dyn ChunkStore>,
    inline_threshold: usize,
    chunk_size: usize,
    buf: BytesMut,
    chunks: Vec<ChunkRef>,
    total: u64,
    /// Encrypts the bytes (SSE): in the stream format as they are buffered, in packages as
    /// each chunk (or the inline bytes) is stored.
    seal: Option<Sealing>,
    /// The file whose bytes these are, for a mount's commit ([`saker_rpc::chunk_for`]).
    file: Option<u64>,
}

/// The stored form of a finished file.
pub struct Written {
    pub layout: Layout,
    pub inline: Option<Bytes>,
    pub size: u64,
}

impl ChunkWriter {
    pub fn new(cluster: &Cluster) -> Self {
        Self {
            chunks_store: cluster.chunks.clone(),
            inline_threshold: cluster.config.inline_threshold,
            chunk_size: cluster.config.chunk_size.max(1),
            buf: BytesMut::new(),
            chunks: Vec::new(),
            total: 0,
            seal: None,
            file: None,
        }
    }

    /// This writer's chunks are made for file `id`, as an MNode takes a mount's commit only
    /// with chunks of the file's own ([`saker_rpc::chunk_of`]).
    pub fn for_file(mut self, id: u64) -> Self {
        self.file = Some(id);
        self
    }

    /// This writer encrypts what it stores as `sealing` says (the bytes' offsets in the
    /// stream are their offsets in this write). Sealed in packages, chunks are cut on package
    /// boundaries.
    pub fn sealed(mut self, sealing: Option<Sealing>) -> Self {
        if let Some(Sealing::Packages { .. }) = &sealing {
            self.chunk_size = packages::aligned_chunk_size(self.chunk_size);
        }
        self.seal = sealing;
        self
    }

    /// `data` sealed in packages when this writer seals so (its records appended), as it is
    /// stored; `at` is the offset of `data` in the stream.
    fn packaged(&self, at: u64, data: BytesMut) -> Bytes {
        let Some(Sealing::Packages { packager, part }) = &self.seal else {
            return data.freeze();
        };
        let mut data = data;
        let records = packager.seal(*part, at / packages::PACKAGE, &mut data);
        data.extend_from_slice(&records);
        data.freeze()
    }

    pub async fn write(&mut self, data: &[u8]) -> Result<(), ClientError> {
        let mut pos = self.total;
        self.total += data.len() as u64;
        let mut rest = data;
        while !rest.is_empty() {
            let room = self.chunk_size - self.buf.len();
            let take = room.min(rest.len());
            if self.buf.len() + take > self.inline_threshold
                && self.buf.capacity() < self.chunk_size
            {
                // Past inline: room for the whole chunk at once, not grown by doubling (each
                // growth copies what the buffer holds).
                self.buf.reserve(self.chunk_size - self.buf.len());
            }
            self.buf.extend_from_slice(&rest[..take]);
            if let Some(Sealing::Stream(ks)) = &self.seal {
                let at = self.buf.len() - take;
                ks.apply(pos, &mut self.buf[at..]);
            }
            pos += take as u64;
            rest = &rest[take..];
            if self.buf.len() == self.chunk_size {
                self.flush().await?;
            }
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), ClientError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let len = self.buf.len() as u64;
        let at = self.chunks.iter().map(|c| c.len).sum::<u64>();
        let buf = self.buf.split();
        let data = self.packaged(at, buf);
        let id = match self.file {
            Some(file) => ChunkId(saker_rpc::chunk_for(file)),
            None => ChunkId::random(),
        };
        let span = tracing::debug_span!("client.chunk_put", len = data.len());
        let info = self.chunks_store.put(id, data).instrument(span).await?;
        // A packaged chunk's records follow its data: the layout counts the data.
        self.chunks.push(ChunkRef {
            id: id.0,
            len,
            crc32c: info.crc32c,
        });
        Ok(())
    }

    /// Finishes the file: small files stay inline, the rest is flushed to chunks.
    pub async fn finish(mut self) -> Result<Written, ClientError> {
        if self.chunks.is_empty() && self.buf.len() <= self.inline_threshold {
            let buf = self.buf.split();
            let inline = self.packaged(0, buf);
            return Ok(Written {
                layout: Layout::Inline,
                inline: Some(inline),
                size: self.total,
            });
        }
        self.finish_chunked().await
    }

    /// Finishes with a chunked layout even for small data (multipart parts are never inline).
    pub async fn finish_chunked(mut self) -> Result<Written, ClientError> {
        self.flush().await?;
        Ok(Written {
            layout: Layout::Chunks(std::mem::take(&mut self.chunks)),
            inline: None,
            size: self.total,
        })
    }

    /// Deletes the chunks written so far (nothing references them yet).
    pub async fn abort(self) {
        for c in &self.chunks {
            if let Err(e) = self.chunks_store.delete(ChunkId(c.id)).await {
                tracing::warn!(error = %e, "could not delete chunk of an aborted write; the scrub will");
            }
        }
    }
}

/// A byte range `[start, end)` of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRange {
    pub start: u64,
    pub end: u64,
}

/// File bytes as a stream that can be shared across threads (as HTTP bodies require).
pub type DataStream = Pin<Box<dyn Stream<Item = Result<Bytes, ClientError>> + Send + Sync>>;

struct ChannelStream(tokio::sync::mpsc::Receiver<Result<Bytes, ClientError>>);

impl Stream for ChannelStream {
    type Item = Result<Bytes, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// The bytes a task sends into `rx`'s channel, as a [`DataStream`].
pub fn channel_stream(rx: tokio::sync::mpsc::Receiver<Result<Bytes, ClientError>>) -> DataStream {
    Box::pin(ChannelStream(rx))
}

/// Every piece of `stream`, in one buffer.
pub async fn collect(mut stream: DataStream) -> Result<Vec<u8>, ClientError> {
    let mut out = Vec::new();
    while let Some(piece) = stream.next().await {
        out.extend_from_slice(&piece?);
    }
    Ok(out)
}

/// `range` of a file's inline bytes (clamped to their end).
fn inline_range(inline: Option<Bytes>, range: ReadRange) -> Bytes {
    let data = inline.unwrap_or_default();
    let end = (range.end as usize).min(data.len());
    let start = (range.start as usize).min(end);
    data.slice(start..end)
}

/// The (chunk, offset in it, length) reads that cover `range` of a file made of `chunks`, at
/// most [`READ_PIECE`] bytes each.
fn pieces(chunks: &[ChunkRef], range: ReadRange) -> Vec<(ChunkId, u64, u64)> {
    let mut pieces = Vec::new();
    let mut offset = 0u64;
    for c in chunks {
        let (c_start, c_end) = (offset, offset + c.len);
        offset = c_end;
        let s = range.start.max(c_start);
        let e = range.end.min(c_end);
        let mut pos = s;
        while pos < e {
            let n = (e - pos).min(READ_PIECE);
            pieces.push((ChunkId(c.id), pos - c_start, n));
            pos += n;
        }
    }
    pieces
}

impl Cluster {
    /// `range` of a file in one buffer, its pieces read one after the other in the caller's
    /// task (no reader task): for a caller that waits for the whole range anyway, such as a
    /// FUSE read, whose thread may then read in place
    /// ([`saker_chunkstore::reads_in_place`]).
    pub async fn read_bytes(
        &self,
        layout: &Layout,
        inline: Option<Bytes>,
        range: ReadRange,
    ) -> Result<Vec<u8>, ClientError> {
        let chunks = match layout {
            Layout::Inline => {
                return Ok(inline_range(inline, range).to_vec());
            }
            Layout::Chunks(chunks) => chunks,
            Layout::Coded(c) => &c.chunks,
            Layout::Tiered(t) => match local_copy(t) {
                Some(chunks) => chunks,
                None => return collect(self.tier_read(t, range)).await,
            },
            Layout::Shared { .. } => return Err(reference_read()),
        };
        let store = self.reads_for(layout)?;
        let mut out = Vec::with_capacity(range.end.saturating_sub(range.start) as usize);
        let span = tracing::debug_span!("client.read", len = out.capacity());
        async {
            for (id, off, len) in pieces(chunks, range) {
                out.extend_from_slice(&store.get(id, off, len).await?);
            }
            Ok(out)
        }
        .instrument(span)
        .await
    }

    /// Streams `range` of a file stored with `layout` (inline bytes in `inline`).
    pub fn read_data(
        &self,
        layout: &Layout,
        inline: Option<Bytes>,
        range: ReadRange,
    ) -> DataStream {
        match layout {
            Layout::Inline => Box::pin(futures::stream::once(futures::future::ready(Ok(
                inline_range(inline, range),
            )))),
            Layout::Tiered(t) if local_copy(t).is_none() => self.tier_read(t, range),
            Layout::Chunks(_) | Layout::Tiered(_) | Layout::Coded(_) => {
                let pieces = pieces(layout.chunks(), range);
                // A reader task fetches ahead while the consumer sends (two pieces in flight).
                let store = match self.reads_for(layout) {
                    Ok(store) => store,
                    Err(e) => {
                        return Box::pin(futures::stream::once(futures::future::ready(Err(e))))
                    }
                };
                let (tx, rx) = tokio::sync::mpsc::channel(2);
                let span = tracing::debug_span!("client.read", pieces = pieces.len());
                tokio::spawn(
                    async move {
                        for (id, off, len) in pieces {
                            // (An erasure-coded chunk comes as its shards' pieces, unjoined.)
                            let parts = match store.get_parts(id, off, len).await {
                                Ok(parts) => parts,
                                Err(e) => {
                                    let _ = tx.send(Err(e.into())).await;
                                    break;
                                }
                            };
                            for part in parts {
                                if tx.send(Ok(part)).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    .instrument(span),
                );
                Box::pin(ChannelStream(rx))
            }
            Layout::Shared { .. } => Box::pin(futures::stream::once(futures::future::ready(Err(
                reference_read(),
            )))),
        }
    }
}

impl Cluster {
    /// The store that reads the chunks of `layout`: the cluster's, through [`CodedReads`]
    /// when they are erasure-coded.
    pub(crate) fn reads_for(&self, layout: &Layout) -> Result<Arc<dyn ChunkStore>, ClientError> {
        let Some(coded) = layout.coded() else {
            return Ok(self.chunks.clone());
        };
        let bad = |why: String| ClientError::Protocol(format!("an erasure-coded layout: {why}"));
        let ec = saker_chunkstore::ec::Layout::new(coded.data, coded.parity)
            .map_err(|e| bad(e.to_string()))?;
        let chunks = coded
            .stored_chunks()
            .ok_or_else(|| bad("its chunks and their stored lengths disagree".into()))?
            .map(|(c, stored)| (ChunkId(c.id), stored));
        Ok(Arc::new(CodedReads::new(self.chunks.clone(), ec, chunks)))
    }

    /// `range` (at or past its data's end) of the tier copy `t`: the records of an encrypted
    /// version ([`crate::packaged_copy`]).
    pub(crate) fn read_data_past(&self, t: &TierRef, range: ReadRange) -> DataStream {
        self.tier_read(t, range)
    }

    /// `range` of a tiered version, from its tier.
    fn tier_read(&self, t: &TierRef, range: ReadRange) -> DataStream {
        let reader = self.tiers.read().unwrap_or_else(|e| e.into_inner()).clone();
        match reader {
            Some(r) => r.read(t, range),
            None => Box::pin(futures::stream::once(futures::future::ready(Err(
                ClientError::Tier(format!("no tier reader here for tier {}", t.tier)),
            )))),
        }
    }
}

/// Reads of versions whose bytes live in a remote tier (the binary's, which knows the
/// tiers' endpoints and keys).
pub trait TierReader: Send + Sync + 'static {
    /// Streams `range` of the tiered version `t`.
    fn read(&self, t: &TierRef, range: ReadRange) -> DataStream;
}

/// The chunks of a tiered version's restored copy, while it lasts.
pub(crate) fn local_copy(t: &TierRef) -> Option<&[ChunkRef]> {
    let r = t.restored.as_ref()?;
    (r.until_ns > saker_durable::now_ns()).then_some(&r.chunks[..])
}

/// A read through a hard link's reference: the MNodes answer the shared inode instead, so
/// this is a bug of the caller.
fn reference_read() -> ClientError {
    ClientError::Protocol("read through a hard link's reference instead of its file".into())
}
