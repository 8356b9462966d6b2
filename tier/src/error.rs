//! Errors of tier operations.

#[derive(Debug, thiserror::Error)]
pub enum TierError {
    #[error("no tier named {0}")]
    NoSuchTier(String),
    #[error("tier {0} already exists")]
    Exists(String),
    #[error("bad tier definition: {0}")]
    Invalid(String),
    /// The remote service failed or answered something unexpected.
    #[error("remote tier {tier}: {msg}")]
    Remote { tier: String, msg: String },
    /// Bytes read back do not match the checksum recorded when they were written.
    #[error("remote tier {tier}: {key} does not match its checksum")]
    Corrupt { tier: String, key: String },
    #[error("coordinator state: {0}")]
    State(String),
    #[error(transparent)]
    Client(#[from] saker_client::ClientError),
    #[error(transparent)]
    Meta(#[from] saker_rpc::MetaError),
    #[error("local cache: {0}")]
    Io(#[from] std::io::Error),
}
