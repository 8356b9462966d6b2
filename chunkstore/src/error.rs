//! [`ChunkError`]: every way a chunk store operation can fail.

use crate::id::ChunkId;

/// Errors of [`crate::ChunkStore`] operations.
#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    /// No chunk with this id.
    #[error("chunk {0} not found")]
    NotFound(ChunkId),
    /// `put` of an id that is already stored; ids are never reused.
    #[error("chunk {0} already exists")]
    AlreadyExists(ChunkId),
    /// Stored bytes fail their checksum or the file is damaged (short, bad magic, bad header).
    #[error("chunk {id} is corrupt: {detail}")]
    Corrupt { id: ChunkId, detail: String },
    /// The underlying storage failed.
    #[error("chunk store I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Input that is not in a format we understand (an unknown on-disk version, a bad id string).
    #[error("bad format: {0}")]
    BadFormat(String),
    /// The store's disk is full (ENOSPC or a quota): nothing was stored.
    #[error("no space left on the chunkstore: {0}")]
    Full(String),
    /// A remote chunkstore could not be reached, or answered out of protocol.
    #[error("chunkstore unavailable: {0}")]
    Unavailable(String),
}

impl ChunkError {
    pub(crate) fn corrupt(id: ChunkId, detail: impl Into<String>) -> Self {
        ChunkError::Corrupt {
            id,
            detail: detail.into(),
        }
    }
}

impl ChunkError {
    /// `Full` for an I/O error that says the disk or a quota is full; anything else as is.
    pub fn classify(self) -> Self {
        match self {
            ChunkError::Io(e)
                if matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) =>
            {
                ChunkError::Full(e.to_string())
            }
            other => other,
        }
    }
}
