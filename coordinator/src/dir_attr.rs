//! chmod and chown of a directory (FalconFS §4.3): every MNode may hold the directory's dentry
//! in its replica and checks search permission with the mode and owner it caches, so the
//! change is made only once no replica holds the old ones.
//!
//! 1. Lock the path (exclusive, its ancestors shared), so no rename or rmdir of it or above
//!    it runs meanwhile.
//! 2. Freeze the directory at its owner: remote lookups of it wait, so none can carry the old
//!    attributes to a replica after step 3.
//! 3. Invalidate the dentry on every group (each advances its replica epoch, so a lookup reply
//!    issued before is not cached). A group that does not answer fails the change here,
//!    before anything changed.
//! 4. The owner applies the `SetAttr` (`ApplyDirAttr`), then the directory thaws.

use saker_rpc::{Attr, MetaError, MetaRequest, MetaResponse};

use crate::namespace::NamespaceCoordinator;

impl NamespaceCoordinator {
    pub(crate) async fn set_dir_attr_protocol(&self, set: MetaRequest) -> Result<Attr, MetaError> {
        let path = match &set {
            MetaRequest::SetAttr { path, .. } => path.clone(),
            other => {
                return Err(MetaError::Invalid(format!(
                    "set_dir_attr takes a SetAttr, not {}",
                    other.op_name()
                )))
            }
        };
        let _held = self.locks.lock(&[&path]).await;
        let (parent, attr) = self.freeze(&path).await?;
        crate::calls::fail_point("setattr_frozen");
        let name = path.last().expect("freeze() checked the path").clone();
        let result = async {
            self.usage_everywhere(|| MetaRequest::Invalidate {
                pid: parent,
                name: name.clone(),
                dir: attr.id,
            })
            .await?;
            let apply = MetaRequest::ApplyDirAttr {
                dir: attr.id,
                set: Box::new(set),
            };
            match self.call_owner(&path, apply).await? {
                MetaResponse::Attr(a) => Ok(a),
                other => Err(MetaError::Internal(format!(
                    "ApplyDirAttr answered {other:?}"
                ))),
            }
        }
        .await;
        self.thaw(parent, &name, attr.id).await;
        result
    }
}
