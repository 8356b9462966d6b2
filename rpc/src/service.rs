//! The metadata service trait: one implementation per MNode in process, one over the network.

use async_trait::async_trait;

use crate::error::MetaError;
use crate::meta::{ClientTag, MetaRequest, MetaResponse};

/// A metadata node (or a handle to a remote one).
#[async_trait]
pub trait MetaService: Send + Sync + 'static {
    /// Executes one operation. `tag` identifies writes for exactly-once replies; reads ignore it.
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError>;
}
