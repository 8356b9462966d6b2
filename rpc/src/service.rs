//! The service traits: metadata (one implementation per MNode in process, one over the
//! network) and the coordinator's namespace protocols.

use async_trait::async_trait;

use crate::attr::Attr;
use crate::error::MetaError;
use crate::meta::{ClientTag, Cred, MetaRequest, MetaResponse, RemoveCond};

/// A metadata node (or a handle to a remote one).
#[async_trait]
pub trait MetaService: Send + Sync + 'static {
    /// Executes one operation. `tag` identifies writes for exactly-once replies; reads ignore it.
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError>;
}

/// The coordinator's namespace protocols: the operations that need every MNode's agreement.
#[async_trait]
pub trait CoordinatorService: Send + Sync + 'static {
    /// Removes the directory at `path` if `cond` holds across all groups (the rmdir protocol:
    /// freeze at the owner, invalidate everywhere, check, remove). `NotEmpty` if it does not.
    async fn remove_dir(&self, path: Vec<String>, cond: RemoveCond) -> Result<(), MetaError>;

    /// Renames the directory at `from` to `to` (replacing an empty directory there unless
    /// `noreplace`), checking `cred`'s permissions: freeze, invalidate everywhere, move the
    /// directory's own record between owners (its entries stay: they are keyed by its id).
    /// Answers the moved directory.
    async fn rename_dir(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Option<Cred>,
    ) -> Result<Attr, MetaError>;
}
