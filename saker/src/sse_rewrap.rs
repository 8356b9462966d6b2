//! `saker admin sse rewrap`, the node's side: every SSE-S3 data key a bucket stores (its
//! current objects', its noncurrent versions' and its multipart uploads in progress') is
//! wrapped anew under the current master key, by a metadata write per record
//! ([`MetaRequest::RewrapSse`]); no object byte is rewritten. Each write applies only while
//! the record is as read (a version or upload written meanwhile is left alone, and counted:
//! run again) and is done already if it is under the new key, so a pass cut short is simply
//! run again.

use saker_client::master_keys::MasterKeys;
use saker_client::{Cluster, Lister};
use saker_rpc::{
    is_sse_s3, MetaError, MetaRequest, MetaResponse, SealedRecord, Sse, VersionKind, Want,
};
use serde::{Deserialize, Serialize};

/// Versions a page of the version walk asks for.
const PAGE: u32 = 1000;

/// What a rewrap of one bucket found and did.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Rewrapped {
    pub bucket: String,
    /// SSE-S3 versions seen (current and noncurrent).
    pub sealed: u64,
    /// Of those, wrapped anew by this pass.
    pub rewrapped: u64,
    /// SSE-S3 multipart uploads in progress seen.
    pub uploads: u64,
    /// Of those, wrapped anew by this pass.
    pub uploads_rewrapped: u64,
    /// Records that changed while the pass ran (rewritten, completed or removed): run again.
    pub changed: u64,
}

/// Rewraps every SSE-S3 data key of `bucket` under `keys`' current key.
pub async fn bucket(
    cluster: &Cluster,
    keys: &MasterKeys,
    bucket: &str,
) -> Result<Rewrapped, String> {
    let mut sum = Rewrapped {
        bucket: bucket.to_string(),
        ..Default::default()
    };
    current_objects(cluster, keys, bucket, &mut sum).await?;
    noncurrent_versions(cluster, keys, bucket, &mut sum).await?;
    uploads(cluster, keys, bucket, &mut sum).await?;
    Ok(sum)
}

/// The bucket's current objects, in key order.
async fn current_objects(
    cluster: &Cluster,
    keys: &MasterKeys,
    bucket: &str,
    sum: &mut Rewrapped,
) -> Result<(), String> {
    let mut lister = Lister::new(cluster, bucket)
        .await
        .map_err(|e| e.to_string())?;
    lister.start("", "").await.map_err(|e| e.to_string())?;
    while let Some((key, attr)) = lister.next_key().await.map_err(|e| e.to_string())? {
        if !attr.sealed {
            continue;
        }
        let path = object_path(bucket, &key)?;
        let view = match cluster.lookup(&path, Want::HEAD).await {
            Ok(v) => v,
            Err(MetaError::NotFound) => continue,
            Err(e) => return Err(e.to_string()),
        };
        if let Some(sse) = view.meta.and_then(|m| m.sse) {
            rewrap_version(cluster, keys, path, view.attr.id, &sse, sum).await?;
        }
    }
    Ok(())
}

/// The bucket's noncurrent versions, group by group.
async fn noncurrent_versions(
    cluster: &Cluster,
    keys: &MasterKeys,
    bucket: &str,
    sum: &mut Rewrapped,
) -> Result<(), String> {
    let groups: Vec<u32> = cluster.groups().map(|(g, _)| *g).collect();
    for group in groups {
        let (mut key_marker, mut id_marker) = (String::new(), None);
        loop {
            let req = MetaRequest::ScanVersions {
                bucket: bucket.to_string(),
                prefix: String::new(),
                key_marker: key_marker.clone(),
                id_marker,
                limit: PAGE,
                with_current: false,
            };
            let page = match cluster.call_group(group, req).await {
                Ok(MetaResponse::Versions(v)) => v,
                Ok(other) => return Err(format!("ScanVersions answered {other:?}")),
                Err(e) => return Err(e.to_string()),
            };
            let full = page.len() == PAGE as usize;
            for v in &page {
                key_marker.clone_from(&v.key);
                id_marker = Some(v.id);
                let VersionKind::Object(attr) = &v.kind else {
                    continue;
                };
                if !attr.sealed {
                    continue;
                }
                let path = object_path(bucket, &v.key)?;
                let req = MetaRequest::LookupVersion {
                    path: path.clone(),
                    version_id: v.version_id.clone(),
                    want: Want::HEAD,
                };
                let view = match cluster.call(&path, req).await {
                    Ok(MetaResponse::Object(view)) => view,
                    Ok(other) => return Err(format!("LookupVersion answered {other:?}")),
                    Err(MetaError::NotFound | MetaError::NoSuchVersion) => continue,
                    Err(e) => return Err(e.to_string()),
                };
                if let Some(sse) = view.meta.and_then(|m| m.sse) {
                    rewrap_version(cluster, keys, path, v.id, &sse, sum).await?;
                }
            }
            if !full {
                break;
            }
        }
    }
    Ok(())
}

/// The bucket's multipart uploads in progress, group by group.
async fn uploads(
    cluster: &Cluster,
    keys: &MasterKeys,
    bucket: &str,
    sum: &mut Rewrapped,
) -> Result<(), String> {
    let groups: Vec<u32> = cluster.groups().map(|(g, _)| *g).collect();
    for group in groups {
        let (mut key_marker, mut upload_id_marker) = (String::new(), String::new());
        loop {
            let req = MetaRequest::ListUploads {
                bucket: bucket.to_string(),
                prefix: String::new(),
                key_marker: key_marker.clone(),
                upload_id_marker: upload_id_marker.clone(),
                limit: PAGE,
            };
            let page = match cluster.call_group(group, req).await {
                Ok(MetaResponse::Uploads(u)) => u,
                Ok(other) => return Err(format!("ListUploads answered {other:?}")),
                Err(e) => return Err(e.to_string()),
            };
            let full = page.len() == PAGE as usize;
            for u in page {
                key_marker.clone_from(&u.key);
                upload_id_marker.clone_from(&u.upload_id);
                let Some(sse) = u.meta.sse.filter(is_sse_s3) else {
                    continue;
                };
                sum.uploads += 1;
                let path = object_path(bucket, &u.key)?;
                let record = SealedRecord::Upload(u.upload_id);
                if rewrap(cluster, keys, path, record, &sse, sum).await? {
                    sum.uploads_rewrapped += 1;
                }
            }
            if !full {
                break;
            }
        }
    }
    Ok(())
}

/// Rewraps the SSE-S3 record `sse` kept as `record` of the object at `path` if a previous
/// key wrapped it: whether it did.
async fn rewrap(
    cluster: &Cluster,
    keys: &MasterKeys,
    path: Vec<String>,
    record: SealedRecord,
    sse: &Sse,
    sum: &mut Rewrapped,
) -> Result<bool, String> {
    let Some(to) = keys.rewrapped(sse).map_err(|_| {
        format!(
            "{record:?} of /{}: none of this node's master keys opens its data key",
            path.join("/")
        )
    })?
    else {
        return Ok(false);
    };
    let req = MetaRequest::RewrapSse {
        path: path.clone(),
        record,
        from: sse.wrapped.clone(),
        to,
    };
    match cluster.call(&path, req).await {
        Ok(_) => Ok(true),
        Err(MetaError::Conflict { .. } | MetaError::NotFound | MetaError::NoSuchUpload) => {
            sum.changed += 1;
            Ok(false)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// [`rewrap`] of version `id`, counted as a version.
async fn rewrap_version(
    cluster: &Cluster,
    keys: &MasterKeys,
    path: Vec<String>,
    id: u64,
    sse: &Sse,
    sum: &mut Rewrapped,
) -> Result<(), String> {
    if !is_sse_s3(sse) {
        return Ok(());
    }
    sum.sealed += 1;
    if rewrap(cluster, keys, path, SealedRecord::Version(id), sse, sum).await? {
        sum.rewrapped += 1;
    }
    Ok(())
}

/// The namespace path of object `key` of `bucket`.
fn object_path(bucket: &str, key: &str) -> Result<Vec<String>, String> {
    let p = saker_namespace::key_to_path(bucket, key).map_err(|e| e.to_string())?;
    let mut path = vec![p.bucket.to_string()];
    path.extend(p.components.iter().map(|c| c.to_string()));
    Ok(path)
}
