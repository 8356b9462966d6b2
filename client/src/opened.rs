//! Reads of encrypted versions ([`crate::sealed`]). A version sealed in packages is read a
//! package at a time: every package a range touches is fetched whole with its record, opened
//! (its tag checked) and cut to the range. A chunk with a package that fails is read again
//! whole from a copy that passes, the copies that failed rewritten from it
//! ([`ChunkStore::get_checked`]); with no such copy the read fails. Bytes that fail their tag
//! are never given out.

use std::sync::Arc;

use bytes::Bytes;
use saker_chunkstore::{ChunkError, ChunkId, ChunkStore};
use saker_rpc::{ChunkRef, Layout, TierRef};
use tracing::Instrument;

use crate::cluster::Cluster;
use crate::data::{channel_stream, collect, local_copy, DataStream, ReadRange, TierReader};
use crate::error::ClientError;
use crate::packaged_copy::first_packages;
use crate::sealed::packages::{records_len, Packager, PACKAGE, RECORD};
use crate::sealed::{Keystream, Opening};

/// Packages a read fetches from a chunk at once (1 MiB).
const PIECE_PACKAGES: u64 = 16;
/// Packages a read fetches from a tier at once (4 MiB: each is a request to the tier).
const TIER_PIECE_PACKAGES: u64 = 64;

impl Cluster {
    /// Streams `range` of the version stored with `layout` (inline bytes in `inline`),
    /// decrypted as `opening` says.
    pub fn read_opened(
        &self,
        layout: &Layout,
        inline: Option<Bytes>,
        range: ReadRange,
        opening: Arc<Opening>,
    ) -> DataStream {
        if let Opening::Stream(ks) = &*opening {
            return decrypted(
                ks.clone(),
                self.read_data(layout, inline, range),
                range.start,
            );
        }
        let store = match self.reads_for(layout) {
            Ok(store) => store,
            Err(e) => return Box::pin(futures::stream::once(futures::future::ready(Err(e)))),
        };
        let tiers = self.tiers.read().unwrap_or_else(|e| e.into_inner()).clone();
        let layout = layout.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let span = tracing::debug_span!("client.read_sealed");
        tokio::spawn(
            async move {
                let Opening::Packages { packager, segments } = &*opening else {
                    return;
                };
                let reader = Reader {
                    store,
                    tiers,
                    packager,
                    segments,
                    tx: &tx,
                };
                if let Err(e) = reader.send(&layout, inline, range).await {
                    let _ = tx.send(Err(e)).await;
                }
            }
            .instrument(span),
        );
        channel_stream(rx)
    }

    /// `range` of the version stored with `layout`, decrypted as `opening` says, in one
    /// buffer.
    pub async fn read_bytes_opened(
        &self,
        layout: &Layout,
        inline: Option<Bytes>,
        range: ReadRange,
        opening: Arc<Opening>,
    ) -> Result<Vec<u8>, ClientError> {
        collect(self.read_opened(layout, inline, range, opening)).await
    }
}

/// One packaged read, sending what it opened into `tx`.
struct Reader<'a> {
    store: Arc<dyn ChunkStore>,
    tiers: Option<Arc<dyn TierReader>>,
    packager: &'a Packager,
    /// Where each stream of the version starts, and its part number.
    segments: &'a [(u64, u32)],
    tx: &'a tokio::sync::mpsc::Sender<Result<Bytes, ClientError>>,
}

impl Reader<'_> {
    /// The part of the stream holding offset `pos` of the version, and where it starts.
    fn stream_at(&self, pos: u64) -> (u32, u64) {
        let i = self.segments.partition_point(|(s, _)| *s <= pos).max(1) - 1;
        let (start, part) = self.segments.get(i).copied().unwrap_or((0, 0));
        (part, start)
    }

    /// Sends `piece`; false when the consumer went away.
    async fn give(&self, piece: Bytes) -> bool {
        piece.is_empty() || self.tx.send(Ok(piece)).await.is_ok()
    }

    async fn send(
        &self,
        layout: &Layout,
        inline: Option<Bytes>,
        range: ReadRange,
    ) -> Result<(), ClientError> {
        let chunks = match layout {
            Layout::Inline => {
                let plain = self.open_inline(inline.unwrap_or_default())?;
                let end = (range.end as usize).min(plain.len());
                let start = (range.start as usize).min(end);
                self.give(plain.slice(start..end)).await;
                return Ok(());
            }
            Layout::Chunks(chunks) => chunks,
            Layout::Coded(c) => &c.chunks,
            Layout::Tiered(t) => match local_copy(t) {
                Some(chunks) => chunks,
                None => return self.tiered(t, range).await,
            },
            Layout::Shared { .. } => {
                return Err(ClientError::Protocol(
                    "read through a hard link's reference instead of its file".into(),
                ))
            }
        };
        let mut c0 = 0u64;
        for c in chunks {
            let (start, end) = (range.start.max(c0), range.end.min(c0 + c.len));
            if start < end && !self.chunk(c, c0, start - c0, end - c0).await? {
                return Ok(());
            }
            c0 += c.len;
            if c0 >= range.end {
                break;
            }
        }
        Ok(())
    }

    /// `range` of a version from its tier copy: its data, then the records of all its
    /// packages in order ([`crate::packaged_copy`]).
    async fn tiered(&self, t: &TierRef, range: ReadRange) -> Result<(), ClientError> {
        let Some(tiers) = &self.tiers else {
            return Err(ClientError::Tier(format!(
                "no tier reader here for tier {}",
                t.tier
            )));
        };
        let read = |from: u64, to: u64| {
            collect(tiers.read(
                t,
                ReadRange {
                    start: from,
                    end: to,
                },
            ))
        };
        let (firsts, _) = first_packages(self.segments, t.size);
        let end = range.end.min(t.size);
        for (i, (s0, part)) in self.segments.iter().enumerate() {
            let s1 = self.segments.get(i + 1).map_or(t.size, |(s, _)| *s);
            let (a, b) = (range.start.max(*s0), end.min(s1));
            if a >= b {
                continue;
            }
            let (k0, k1) = ((a - s0) / PACKAGE, (b - s0).div_ceil(PACKAGE));
            let at = t.size + (firsts[i] + k0) * RECORD;
            let records = read(at, at + (k1 - k0) * RECORD).await?;
            let mut k = k0;
            while k < k1 {
                let n = (k1 - k).min(TIER_PIECE_PACKAGES);
                let (from, to) = (s0 + k * PACKAGE, (s0 + (k + n) * PACKAGE).min(s1));
                let mut data = read(from, to).await?;
                let r = ((k - k0) * RECORD) as usize..((k - k0 + n) * RECORD) as usize;
                let record = records.get(r).unwrap_or_default();
                if data.len() as u64 != to - from
                    || self.packager.open(*part, k, &mut data, record).is_err()
                {
                    tracing::error!(tier = %t.tier, key = %t.key, "a tier copy fails its encryption tags");
                    return Err(ClientError::Tier(format!(
                        "the copy in tier {} fails its encryption tags",
                        t.tier
                    )));
                }
                let (s, e) = ((a.max(from) - from) as usize, (b.min(to) - from) as usize);
                if !self.give(Bytes::from(data).slice(s..e)).await {
                    return Ok(());
                }
                k += n;
            }
        }
        Ok(())
    }

    /// Inline bytes: the data then its records, packages of the object written at once.
    fn open_inline(&self, payload: Bytes) -> Result<Bytes, ClientError> {
        let total = payload.len() as u64;
        let packages = total.div_ceil(PACKAGE + RECORD);
        let corrupt =
            || ClientError::Protocol("an encrypted object's inline bytes fail their tags".into());
        let len = total.checked_sub(packages * RECORD).ok_or_else(corrupt)?;
        let (data, records) = payload.split_at(len as usize);
        let mut data = data.to_vec();
        self.packager
            .open(0, 0, &mut data, records)
            .map_err(|_| corrupt())?;
        Ok(Bytes::from(data))
    }

    /// Sends bytes `[a, b)` of chunk `c`, which starts at `c0` in the version; false when
    /// the consumer went away.
    async fn chunk(&self, c: &ChunkRef, c0: u64, a: u64, b: u64) -> Result<bool, ClientError> {
        let id = ChunkId(c.id);
        let (part, stream_start) = self.stream_at(c0);
        if !(c0 - stream_start).is_multiple_of(PACKAGE) {
            return Err(corrupt(id, "does not start on a package of its stream"));
        }
        let first = (c0 - stream_start) / PACKAGE;
        let (k0, k1) = (a / PACKAGE, b.div_ceil(PACKAGE));
        // The chunk's last packages with their records in one read, when that is one piece.
        let tail = k1 * PACKAGE >= c.len && k1 - k0 <= PIECE_PACKAGES;
        let (records, mut tail_data) = if tail {
            let all = self
                .store
                .get(id, k0 * PACKAGE, c.len + k1 * RECORD - k0 * PACKAGE)
                .await?;
            let d = ((c.len - k0 * PACKAGE) as usize).min(all.len());
            let r = (d + (k0 * RECORD) as usize).min(all.len());
            (all.slice(r..), Some(all.slice(..d)))
        } else {
            let at = c.len + k0 * RECORD;
            (self.store.get(id, at, (k1 - k0) * RECORD).await?, None)
        };
        let mut k = k0;
        while k < k1 {
            let n = (k1 - k).min(PIECE_PACKAGES);
            let (from, to) = (k * PACKAGE, ((k + n) * PACKAGE).min(c.len));
            let mut data = match tail_data.take() {
                Some(d) => d.to_vec(),
                None => self.store.get(id, from, to - from).await?.to_vec(),
            };
            let at = ((k - k0) * RECORD) as usize;
            let record = records
                .get(at..at + (n * RECORD) as usize)
                .unwrap_or_default();
            let opened = data.len() as u64 == to - from
                && self
                    .packager
                    .open(part, first + k, &mut data, record)
                    .is_ok();
            if !opened {
                // Not these bytes: the whole chunk from a copy that opens.
                let plain = self.repaired(c, part, first).await?;
                let (s, e) = (a.max(from) as usize, b as usize);
                return Ok(self.give(Bytes::from(plain).slice(s..e)).await);
            }
            let s = (a.max(from) - from) as usize;
            let e = (b.min(to) - from) as usize;
            if !self.give(Bytes::from(data).slice(s..e)).await {
                return Ok(false);
            }
            k += n;
        }
        Ok(true)
    }

    /// The plaintext of all of chunk `c` (packages `first..` of `part`), read from a copy
    /// whose tags all match.
    async fn repaired(&self, c: &ChunkRef, part: u32, first: u64) -> Result<Vec<u8>, ClientError> {
        let id = ChunkId(c.id);
        let packager = self.packager;
        let check = |payload: &[u8]| packager.verifies(part, first, c.len, payload);
        let payload = self.store.get_checked(id, &check).await.map_err(|e| {
            tracing::error!(chunk = %id, error = %e, "no copy of an encrypted chunk passes its tags");
            match e {
                ChunkError::Corrupt { .. } => corrupt(id, "fails its encryption tags"),
                other => other.into(),
            }
        })?;
        let (data, records) = payload.split_at(c.len as usize);
        let mut data = data.to_vec();
        debug_assert_eq!(records.len() as u64, records_len(c.len));
        packager
            .open(part, first, &mut data, records)
            .map_err(|_| corrupt(id, "fails its encryption tags"))?;
        Ok(data)
    }
}

fn corrupt(id: ChunkId, detail: &str) -> ClientError {
    ClientError::Chunk(ChunkError::Corrupt {
        id,
        detail: detail.into(),
    })
}

/// `stream`, the stored bytes of a version in the stream format from offset `start`,
/// decrypted with `ks`.
fn decrypted(ks: Keystream, stream: DataStream, start: u64) -> DataStream {
    use futures::StreamExt;
    let ks = Arc::new(ks);
    Box::pin(stream.scan(start, move |pos, piece| {
        let out = piece.map(|p| {
            let plain = ks.applied(*pos, &p);
            *pos += p.len() as u64;
            plain
        });
        futures::future::ready(Some(out))
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use saker_chunkstore::{MemChunkStore, Member, ReplicatedChunkStore};
    use saker_namespace::Router;

    use super::*;
    use crate::cluster::ClusterConfig;
    use crate::data::ChunkWriter;
    use crate::sealed::{DataKey, Sealing, WrappingKey};

    fn cluster(chunks: Arc<dyn ChunkStore>) -> Cluster {
        let config = ClusterConfig {
            chunk_size: 200_000,
            ..Default::default()
        };
        Cluster::new(Router::single(1), BTreeMap::new(), chunks, config)
    }

    async fn write(c: &Cluster, sealing: Sealing, data: &[u8]) -> (Layout, Option<Bytes>) {
        let mut w = ChunkWriter::new(c).sealed(Some(sealing));
        for piece in data.chunks(7_777) {
            w.write(piece).await.unwrap();
        }
        let written = w.finish().await.unwrap();
        assert_eq!(written.size, data.len() as u64);
        (written.layout, written.inline)
    }

    async fn read(
        c: &Cluster,
        at: (&Layout, &Option<Bytes>),
        o: &Arc<Opening>,
        r: (u64, u64),
    ) -> Vec<u8> {
        let range = ReadRange {
            start: r.0,
            end: r.1,
        };
        c.read_bytes_opened(at.0, at.1.clone(), range, o.clone())
            .await
            .unwrap()
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 253) as u8).collect()
    }

    fn key() -> (DataKey, saker_rpc::Sse) {
        WrappingKey::new(&[3; 32]).new_data_key(None, None)
    }

    #[tokio::test]
    async fn any_range_of_a_packaged_version_reads_back() {
        let c = cluster(Arc::new(MemChunkStore::new()));
        let (k, sse) = key();
        assert!(crate::sealed::packaged(&sse));
        let plain = data(1_000_003);
        let (layout, inline) = write(&c, k.sealing(&sse, 0), &plain).await;
        // Chunks are cut on packages (200,000 rounds down to three).
        assert!(layout
            .chunks()
            .iter()
            .rev()
            .skip(1)
            .all(|ch| ch.len == 3 * PACKAGE));
        let o = Arc::new(k.opening(&sse, &[]));
        let at = (&layout, &inline);
        for (s, e) in [
            (0, 1_000_003),
            (0, 1),
            (65_535, 65_537),
            (196_000, 400_000),
            (999_999, 1_000_003),
        ] {
            assert_eq!(
                read(&c, at, &o, (s, e)).await,
                &plain[s as usize..e as usize],
                "{s}..{e}"
            );
        }
        // Small objects stay inline, sealed too.
        let small = data(5_000);
        let (layout, inline) = write(&c, k.sealing(&sse, 0), &small).await;
        assert_eq!(layout, Layout::Inline);
        assert_eq!(inline.as_ref().unwrap().len(), 5_000 + RECORD as usize);
        assert_ne!(&inline.as_ref().unwrap()[..5_000], &small[..]);
        assert_eq!(
            read(&c, (&layout, &inline), &o, (100, 4_000)).await,
            &small[100..4_000]
        );
    }

    #[tokio::test]
    async fn versions_in_the_stream_format_still_read() {
        let c = cluster(Arc::new(MemChunkStore::new()));
        let master = WrappingKey::new(&[3; 32]);
        let (_, mut sse) = master.new_data_key(None, None);
        // What a version written before packages has: the bare wrapping.
        sse.wrapped.remove(0);
        assert!(!crate::sealed::packaged(&sse));
        let k = master.open(&sse).unwrap();
        let plain = data(300_001);
        let (layout, inline) = write(&c, k.sealing(&sse, 0), &plain).await;
        let stored = c
            .read_bytes(
                &layout,
                inline.clone(),
                ReadRange {
                    start: 0,
                    end: 300_001,
                },
            )
            .await
            .unwrap();
        assert_eq!(stored.len(), plain.len());
        assert_ne!(stored, plain);
        let o = Arc::new(k.opening(&sse, &[]));
        assert_eq!(
            read(&c, (&layout, &inline), &o, (1_000, 250_000)).await,
            &plain[1_000..250_000]
        );
    }

    #[tokio::test]
    async fn a_tampered_copy_is_read_from_another_and_rewritten() {
        let stores: Vec<Arc<MemChunkStore>> =
            (0..3).map(|_| Arc::new(MemChunkStore::new())).collect();
        let members = stores
            .iter()
            .enumerate()
            .map(|(i, s)| Member::placing(format!("m{i}"), s.clone(), i == 0))
            .collect();
        let c = cluster(Arc::new(ReplicatedChunkStore::new(members, 3)));
        let (k, sse) = key();
        let plain = data(150_000);
        let (layout, inline) = write(&c, k.sealing(&sse, 0), &plain).await;
        let id = ChunkId(layout.chunks()[0].id);
        // The local copy, read first, has a byte changed.
        let good = stores[0].get(id, 0, u64::MAX).await.unwrap();
        let mut bad = good.to_vec();
        bad[70_000] ^= 1;
        stores[0].delete(id).await.unwrap();
        stores[0].put(id, Bytes::from(bad)).await.unwrap();
        let o = Arc::new(k.opening(&sse, &[]));
        assert_eq!(
            read(&c, (&layout, &inline), &o, (69_000, 71_000)).await,
            &plain[69_000..71_000]
        );
        assert_eq!(stores[0].get(id, 0, u64::MAX).await.unwrap(), good);

        // With one copy, the read fails.
        let one = cluster(stores[1].clone());
        let mut bad = good.to_vec();
        bad[10] ^= 1;
        stores[1].delete(id).await.unwrap();
        stores[1].put(id, Bytes::from(bad)).await.unwrap();
        let range = ReadRange { start: 0, end: 100 };
        let failed = one.read_bytes_opened(&layout, inline, range, o).await;
        assert!(
            matches!(failed, Err(ClientError::Chunk(ChunkError::Corrupt { .. }))),
            "{failed:?}"
        );
    }
}
