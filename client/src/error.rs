//! Errors of client operations.

use saker_rpc::MetaError;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("chunk store: {0}")]
    Chunk(#[from] saker_chunkstore::ChunkError),
    #[error("gave up after {0} attempts to create missing parent directories")]
    TooManyRetries(usize),
    /// A remote tier failed or is not configured here.
    #[error("remote tier: {0}")]
    Tier(String),
    #[error("unexpected reply from metadata node: {0}")]
    Protocol(String),
}
