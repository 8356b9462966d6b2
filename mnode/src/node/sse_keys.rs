//! Data keys for library mounts, which never hold the master key: a node started with it
//! answers [`MetaRequest::SseKey`] after the permission check a read (or, for a fresh key, a
//! write) of the file gets, and checks the SSE record a mount's commit brings (the bucket's
//! default encryption is never skipped, and only a record this cluster's master key opens is
//! stored). The RPC server hands keys out over mutual TLS (or to loopback) only.

use saker_rpc::{
    access, is_sse_s3, BucketWrites, ClientTag, CommitSeal, Cred, FreshKey, MetaError, MetaRequest,
    MetaResponse, MetaService, Want,
};

use super::Mnode;
use crate::metrics::SSE_KEYS;

/// Refusal of a key or commit this node cannot serve without the master key (not retried:
/// another try would find no key either).
fn no_master_key() -> MetaError {
    MetaError::Invalid("this node holds no SSE-S3 master key (start it with --sse-key-file)".into())
}

impl Mnode {
    /// The data key of file `id` at `path` (`fresh`: a new one for what `cred` writes there),
    /// counted by outcome.
    pub(super) async fn sse_key(
        &self,
        tag: ClientTag,
        path: Vec<String>,
        id: u64,
        cred: Cred,
        fresh: bool,
    ) -> Result<MetaResponse, MetaError> {
        let kind = if fresh { "fresh" } else { "open" };
        let result = self.sse_key_checked(tag, path, id, cred, fresh).await;
        let outcome = match &result {
            Ok(_) => "given",
            Err(MetaError::AccessDenied | MetaError::NotPermitted) => "denied",
            Err(_) => "failed",
        };
        SSE_KEYS.with_label_values(&[kind, outcome]).inc();
        result
    }

    async fn sse_key_checked(
        &self,
        tag: ClientTag,
        path: Vec<String>,
        id: u64,
        cred: Cred,
        fresh: bool,
    ) -> Result<MetaResponse, MetaError> {
        let keys = self.sse_keys.as_ref().ok_or_else(no_master_key)?;
        // The check a read of the file gets, by its owner; for new bytes, the check of the
        // commit that will bring them (the owner may commit whatever the mode).
        let check = MetaRequest::Access {
            path,
            mask: if fresh { 0 } else { access::READ },
            cred: cred.clone(),
            want: Want::HEAD,
        };
        let view = match self.call(tag, check).await? {
            MetaResponse::Object(view) => view,
            other => return Err(MetaError::Internal(format!("Access answered {other:?}"))),
        };
        if view.attr.id != id {
            return Err(MetaError::NotFound);
        }
        if fresh {
            if cred.uid != view.attr.uid {
                crate::perm::check(&view.attr, &cred, access::WRITE)?;
            }
            let (key, sse) = keys.fresh();
            let fresh = Some(FreshKey::sign(id, &sse));
            return Ok(MetaResponse::SseKey { key, sse, fresh });
        }
        let sse = view
            .meta
            .and_then(|m| m.sse)
            .ok_or_else(|| MetaError::Invalid("the file is not encrypted".into()))?;
        if !is_sse_s3(&sse) {
            return Err(MetaError::Invalid(
                "SSE-C and SSE-KMS objects are readable through S3 only".into(),
            ));
        }
        let key = keys.open(&sse).ok_or_else(|| {
            MetaError::Internal("no master key of this node opens the file's data key".into())
        })?;
        Ok(MetaResponse::SseKey {
            key,
            sse,
            fresh: None,
        })
    }

    /// Checks the SSE record of a mount's commit of file `id` into a bucket with settings
    /// `w`: required where the bucket encrypts by default (SSE-S3; other defaults are S3's
    /// alone), and only an SSE-S3 record a node gave out for new bytes of this file (not one
    /// read from another file, nor the file's own: no two contents under one keystream).
    pub(super) fn check_commit_sse(
        &self,
        w: &BucketWrites,
        id: u64,
        seal: Option<&CommitSeal>,
    ) -> Result<(), MetaError> {
        let Some(seal) = seal else {
            return match &w.encryption {
                Some(_) => Err(MetaError::AccessDenied),
                None => Ok(()),
            };
        };
        if w.encryption.as_deref().is_some_and(|e| e != "AES256") {
            return Err(MetaError::AccessDenied);
        }
        let keys = self.sse_keys.as_ref().ok_or_else(no_master_key)?;
        let sse = &seal.sse;
        if !is_sse_s3(sse) || !seal.fresh.verify(id, sse) || keys.open(sse).is_none() {
            return Err(MetaError::Invalid(
                "a commit's SSE record must be one a node gave out for this file's new bytes"
                    .into(),
            ));
        }
        Ok(())
    }
}
