//! The rmdir protocol (FalconFS §4.3): removing a directory needs every MNode's agreement,
//! because its entries may live on any of them.
//!
//! 1. Lock the path (exclusive, its ancestors shared, in the coordinator).
//! 2. Freeze the directory at its owner: writes that resolve through it wait, and so do remote
//!    lookups of it, so no new entry can appear under it.
//! 3. Invalidate the dentry on every MNode. Each drops its replica entry, waits for batches that
//!    resolved through it, and reports what it holds under the directory.
//! 4. Decide by the condition; for DeleteBucket, walk the implicit directories below (they can
//!    only be reached through the frozen bucket), check that no group keeps a version of a key
//!    in it, and sweep them and the bucket's uploads.
//! 5. Remove the directory at its owner (which re-checks its own entries), then thaw.
//!
//! Reaping (S3's removal of empty implicit directories) is the same protocol with the
//! condition "implicit and empty", cascading to the parent after each success.

use std::sync::Arc;

use futures::future::join_all;
use saker_rpc::{
    InodeId, MetaError, MetaRequest, MetaResponse, MetaService, RemoveCond, VersionKind,
};

use crate::calls::tag;
use crate::namespace::NamespaceCoordinator;

impl NamespaceCoordinator {
    /// Whether any group holds a version (not a current object's record) of a key below the
    /// directory `path` of a bucket, or in the bucket `path`. Records of current objects do
    /// not count: a directory or bucket with current objects is not empty anyway.
    async fn versions_below(&self, path: &[String]) -> Result<bool, MetaError> {
        let prefix = match path {
            [] => return Ok(false),
            [_bucket] => String::new(),
            [_bucket, dirs @ ..] => format!("{}/", dirs.join("/")),
        };
        let found = self
            .groups
            .values()
            .map(|g| versions_in(g.as_ref(), &path[0], &prefix));
        for r in join_all(found).await {
            if r? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn remove_one(&self, path: &[String], cond: RemoveCond) -> Result<(), MetaError> {
        let _held = self.locks.lock(&[path]).await;
        self.remove_locked(path, cond).await
    }

    async fn remove_locked(&self, path: &[String], cond: RemoveCond) -> Result<(), MetaError> {
        let freeze = MetaRequest::Freeze {
            path: path.to_vec(),
            coord: self.term,
        };
        let (parent, attr) = match self.owner(path)?.call(tag(), freeze).await? {
            MetaResponse::Frozen { parent, attr } => (parent, attr),
            other => return Err(MetaError::Internal(format!("freeze answered {other:?}"))),
        };
        crate::calls::fail_point("rmdir_frozen");
        // Now that the parent is known, the owner is known even for a path-walked name (the
        // freeze itself reached it by forwarding).
        let name = path.last().expect("checked by owner()");
        let g = self.router.read().owner(parent, name);
        let owner = self
            .groups
            .get(&g)
            .ok_or_else(|| MetaError::Unavailable(format!("no route to group {g}")))?;
        let result = self
            .check_and_remove(path, cond, parent, &attr, owner)
            .await;
        let thaw = MetaRequest::Unfreeze {
            dir: attr.id,
            coord: self.term,
        };
        if let Err(e) = owner.call(tag(), thaw).await {
            tracing::warn!(error = %e, "unfreeze failed");
        }
        result
    }

    async fn check_and_remove(
        &self,
        path: &[String],
        cond: RemoveCond,
        parent: InodeId,
        attr: &saker_rpc::Attr,
        owner: &Arc<dyn MetaService>,
    ) -> Result<(), MetaError> {
        if cond == RemoveCond::ImplicitEmpty && !attr.implicit {
            return Err(MetaError::NotEmpty);
        }
        let name = path.last().expect("checked by owner()").clone();
        let dir = attr.id;
        let reports = self
            .usage_everywhere(|| MetaRequest::Invalidate {
                pid: parent,
                name: name.clone(),
                dir,
            })
            .await?;
        let mut objects = reports.iter().any(|u| u.objects);
        let mut frontier: Vec<InodeId> =
            reports.into_iter().flat_map(|u| u.implicit_dirs).collect();
        match cond {
            RemoveCond::Empty | RemoveCond::ImplicitEmpty => {
                if objects || !frontier.is_empty() {
                    return Err(MetaError::NotEmpty);
                }
                // rmdir(2): noncurrent versions and delete markers of keys below keep a
                // directory of a bucket that keeps versions, as its files would.
                if cond == RemoveCond::Empty && self.versions_below(path).await? {
                    return Err(MetaError::NotEmpty);
                }
            }
            RemoveCond::Bucket => {
                let mut swept = vec![dir];
                while !objects && !frontier.is_empty() {
                    swept.extend_from_slice(&frontier);
                    let dirs = std::mem::take(&mut frontier);
                    let reports = self
                        .usage_everywhere(|| MetaRequest::DirUsage { dirs: dirs.clone() })
                        .await?;
                    objects = reports.iter().any(|u| u.objects);
                    frontier = reports.into_iter().flat_map(|u| u.implicit_dirs).collect();
                }
                // Versions of its keys (noncurrent ones, delete markers) keep a bucket from
                // being empty; checked under the freeze, so none can appear meanwhile.
                if objects || self.versions_below(path).await? {
                    return Err(MetaError::NotEmpty);
                }
                let calls = self.groups.values().map(|g| {
                    g.call(
                        tag(),
                        MetaRequest::PurgeDirs {
                            bucket: name.clone(),
                            dirs: swept.clone(),
                        },
                    )
                });
                for r in join_all(calls).await {
                    r?;
                }
            }
        }
        let remove = MetaRequest::RemoveDir {
            path: path.to_vec(),
            dir,
            cond,
        };
        owner.call(tag(), remove).await?;
        Ok(())
    }
}

impl NamespaceCoordinator {
    /// rmdir of `path`, then (for an implicit directory) of each parent it left empty.
    pub(crate) async fn remove_dir_cascading(
        &self,
        path: Vec<String>,
        cond: RemoveCond,
    ) -> Result<(), MetaError> {
        self.until_ready().await?;
        self.remove_one(&path, cond).await?;
        if cond == RemoveCond::ImplicitEmpty {
            // Cascade: the parent may be an implicit directory left empty. Never the bucket.
            let mut parent = path;
            parent.pop();
            while parent.len() > 1 {
                if self
                    .remove_one(&parent, RemoveCond::ImplicitEmpty)
                    .await
                    .is_err()
                {
                    break;
                }
                parent.pop();
            }
        }
        Ok(())
    }
}

/// Whether `group` holds a version (not a current object's record) of a key of `bucket` that
/// starts with `prefix`, reading its version records page by page until one is found.
async fn versions_in(
    group: &dyn MetaService,
    bucket: &str,
    prefix: &str,
) -> Result<bool, MetaError> {
    const PAGE: u32 = 256;
    let (mut key_marker, mut id_marker) = (String::new(), None);
    loop {
        let req = MetaRequest::ScanVersions {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            key_marker: key_marker.clone(),
            id_marker,
            limit: PAGE,
            with_current: false,
        };
        let page = match group.call(tag(), req).await? {
            MetaResponse::Versions(v) => v,
            other => return Err(MetaError::Internal(format!("versions answered {other:?}"))),
        };
        if page.iter().any(|e| !matches!(e.kind, VersionKind::Current)) {
            return Ok(true);
        }
        match page.last() {
            Some(last) if page.len() == PAGE as usize => {
                (key_marker, id_marker) = (last.key.clone(), Some(last.id));
            }
            _ => return Ok(false),
        }
    }
}
