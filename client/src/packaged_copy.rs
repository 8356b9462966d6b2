//! Copies of a version sealed in packages ([`crate::sealed::packages`]) outside its chunks. A
//! tier copy holds the version's data (offsets one to one, as any tier copy) followed by the
//! records of all its packages in order: [`Cluster::records_of`] gathers them. A copy brought
//! back from a tier is cut into chunks the way a sealed writer cuts them, each with its own
//! packages' records after its data ([`Cluster::put_packaged`]), so it reads as the version
//! did before it moved.

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use saker_chunkstore::ChunkId;
use saker_rpc::{ChunkRef, Layout};

use crate::cluster::Cluster;
use crate::data::{local_copy, DataStream, ReadRange};
use crate::error::ClientError;
use crate::sealed::packages::{aligned_chunk_size, records_len, PACKAGE, RECORD};

/// The global index of the first package of each stream in `segments` (start, part) of a
/// version of `size` bytes, and the total count of its packages.
pub fn first_packages(segments: &[(u64, u32)], size: u64) -> (Vec<u64>, u64) {
    let mut firsts = Vec::with_capacity(segments.len());
    let mut count = 0;
    for (i, (start, _)) in segments.iter().enumerate() {
        let end = segments.get(i + 1).map_or(size, |(s, _)| *s);
        firsts.push(count);
        count += end.saturating_sub(*start).div_ceil(PACKAGE);
    }
    (firsts, count)
}

impl Cluster {
    /// The records of every package of the version of `size` bytes in streams starting at
    /// `segments`, stored with `layout` (`inline` bytes), in order: what follows its data in
    /// a tier copy.
    pub async fn records_of(
        &self,
        layout: &Layout,
        inline: Option<Bytes>,
        size: u64,
        segments: &[(u64, u32)],
    ) -> Result<Bytes, ClientError> {
        let bad = |what: &str| ClientError::Protocol(format!("an encrypted version's {what}"));
        let (_, count) = first_packages(segments, size);
        if let Layout::Tiered(t) = layout {
            if let Some(chunks) = local_copy(t) {
                let local = Layout::Chunks(chunks.to_vec());
                return Box::pin(self.records_of(&local, None, size, segments)).await;
            }
            let past = ReadRange {
                start: size,
                end: size + count * RECORD,
            };
            let records = crate::data::collect(self.read_data_past(t, past)).await?;
            if records.len() as u64 != count * RECORD {
                return Err(bad("tier copy lacks its records"));
            }
            return Ok(Bytes::from(records));
        }
        match layout {
            Layout::Inline => {
                let payload = inline.unwrap_or_default();
                if payload.len() as u64 != size + records_len(size) {
                    return Err(bad("inline bytes are not its data and records"));
                }
                Ok(payload.slice(size as usize..))
            }
            Layout::Chunks(_) | Layout::Coded(_) => {
                let store = self.reads_for(layout)?;
                let mut out = BytesMut::new();
                for c in layout.chunks() {
                    let want = records_len(c.len);
                    let r = store.get(ChunkId(c.id), c.len, want).await?;
                    if r.len() as u64 != want {
                        return Err(bad("chunk lacks its records"));
                    }
                    out.extend_from_slice(&r);
                }
                Ok(out.freeze())
            }
            Layout::Tiered(_) | Layout::Shared { .. } => Err(bad("bytes are not local")),
        }
    }

    /// Stores `data` (the version's ciphertext, `size` bytes in streams starting at
    /// `segments`) with `records` (all its packages', in order) as chunks cut as a sealed
    /// writer cuts them; answers them. On an error the chunks written are deleted.
    pub async fn put_packaged(
        &self,
        mut data: DataStream,
        records: &[u8],
        segments: &[(u64, u32)],
        size: u64,
    ) -> Result<Vec<ChunkRef>, ClientError> {
        let (firsts, count) = first_packages(segments, size);
        if records.len() as u64 != count * RECORD {
            return Err(ClientError::Protocol(format!(
                "{} bytes of records for {count} packages",
                records.len()
            )));
        }
        let chunk = aligned_chunk_size(self.config.chunk_size) as u64;
        let mut written: Vec<ChunkRef> = Vec::new();
        let result = async {
            let mut buf = BytesMut::new();
            for (i, (start, _)) in segments.iter().enumerate() {
                let end = segments.get(i + 1).map_or(size, |(s, _)| *s);
                let mut at = *start;
                while at < end {
                    let len = (end - at).min(chunk);
                    while (buf.len() as u64) < len {
                        match data.next().await {
                            Some(piece) => buf.extend_from_slice(&piece?),
                            None => return Err(ClientError::Protocol("a short copy".into())),
                        }
                    }
                    let mut payload = buf.split_to(len as usize);
                    let first = firsts[i] + (at - start) / PACKAGE;
                    let r =
                        (first * RECORD) as usize..((first * RECORD) + records_len(len)) as usize;
                    payload.extend_from_slice(&records[r]);
                    let id = ChunkId::random();
                    let info = self.chunks.put(id, payload.freeze()).await?;
                    written.push(ChunkRef {
                        id: id.0,
                        len,
                        crc32c: info.crc32c,
                    });
                    at += len;
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = result {
            for c in &written {
                let _ = self.chunks.delete(ChunkId(c.id)).await;
            }
            return Err(e);
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_are_counted_per_stream() {
        let p = PACKAGE;
        // One stream of 2.5 packages; three streams of 1, 1.5 and 0.1 packages.
        assert_eq!(first_packages(&[(0, 0)], 5 * p / 2), (vec![0], 3));
        let segments = [(0, 1), (p, 3), (p + 3 * p / 2, 4)];
        assert_eq!(
            first_packages(&segments, p + 3 * p / 2 + p / 10),
            (vec![0, 1, 3], 4)
        );
    }
}
