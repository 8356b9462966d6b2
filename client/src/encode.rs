//! Erasure-coding a version's chunks (issue 63): each chunk's stored bytes (its data, and an
//! encrypted chunk's records) read whole and written as k data and m parity shards on their
//! stores, then the version switched to the coded layout by compare-and-set in its MNode
//! (`SetCoded`), which queues the replicas for GC in the same batch.
//!
//! Crash safety: until the switch the version keeps its replicas and the shards written are
//! unreferenced (the leak scrub collects them); after it, the shards are the version's and the
//! replicas go only after their grace period. A retry writes the same shards (encoding is
//! deterministic) and switches only a version that still has the chunks it read.

use saker_chunkstore::ec::Layout as EcLayout;
use saker_chunkstore::ChunkId;
use saker_rpc::{Attr, Coded, Layout, MetaError, MetaRequest};

use crate::cluster::Cluster;
use crate::error::ClientError;

/// What coding one version did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Encoded {
    /// Its chunks are now coded (this many stored bytes were encoded).
    Coded(u64),
    /// It was coded already, or has no chunks to code (inline bytes).
    Nothing,
    /// The version changed or went since it was read (its shards are the leak scrub's).
    Changed,
    /// It cannot be coded (a file with hard links, a version in a tier).
    Skipped(&'static str),
}

impl Cluster {
    /// `Ok` if the cluster's chunkstores can keep chunks coded in `layout`; why not otherwise.
    pub fn takes_coded(&self, layout: EcLayout) -> Result<(), String> {
        self.chunks.takes_coded(layout).map_err(|e| match e {
            saker_chunkstore::ChunkError::Unavailable(why) => why,
            other => other.to_string(),
        })
    }

    /// Codes the chunks of the object at `path` in `layout`, if it is still the version `seen`
    /// (`noncurrent`: a noncurrent version of it).
    pub async fn encode_version(
        &self,
        path: &[String],
        seen: &Attr,
        noncurrent: bool,
        layout: EcLayout,
    ) -> Result<Encoded, ClientError> {
        let chunks = match &seen.layout {
            Layout::Chunks(c) => c,
            Layout::Inline => return Ok(Encoded::Nothing),
            Layout::Coded(c)
                if (c.data, c.parity) == (layout.data() as u8, layout.parity() as u8) =>
            {
                return Ok(Encoded::Nothing)
            }
            Layout::Coded(_) => return Ok(Encoded::Skipped("coded in another layout")),
            Layout::Shared { .. } => return Ok(Encoded::Skipped("a file with hard links")),
            Layout::Tiered(_) => return Ok(Encoded::Skipped("a version in a tier")),
        };
        let mut stored = Vec::with_capacity(chunks.len());
        for c in chunks {
            let id = ChunkId(c.id);
            let data = self.chunks.get(id, 0, u64::MAX).await?;
            if (data.len() as u64) < c.len {
                return Err(ClientError::Protocol(format!(
                    "chunk {id} holds {} bytes of its {}",
                    data.len(),
                    c.len
                )));
            }
            stored.push(data.len() as u64);
            self.chunks.put_coded(id, layout, data).await?;
        }
        let coded = Coded {
            data: layout.data() as u8,
            parity: layout.parity() as u8,
            chunks: chunks.clone(),
            stored,
        };
        let bytes = coded.stored.iter().sum();
        // Crash tests: the shards written, the version not switched yet.
        saker_rpc::fail_point::abort_at("encode-after-shards");
        let req = MetaRequest::SetCoded {
            path: path.to_vec(),
            inode: seen.id,
            mtime_ns: seen.s3_mtime_ns,
            coded: Box::new(coded),
            noncurrent,
        };
        match self.call(path, req).await {
            Ok(_) => {
                // Crash tests: the version switched, its replicas only queued for the GC.
                saker_rpc::fail_point::abort_at("encode-after-switch");
                Ok(Encoded::Coded(bytes))
            }
            Err(MetaError::PreconditionFailed | MetaError::NotFound) => Ok(Encoded::Changed),
            Err(e) => Err(e.into()),
        }
    }
}
