//! The data keys of encrypted (SSE-S3) files on this mount.
//!
//! A mount in a node's process (`saker server --mount`) holds the master keys and unwraps
//! and makes data keys itself. A library mount (`saker mount --cluster`) never holds them: it
//! asks the file's MNode for the data key of the version it opens, after the check a read
//! gets, and for a fresh data key for each commit of new bytes (the check a commit gets), over
//! mutual TLS ([`MetaRequest::SseKey`]). New bytes are sealed where the bucket encrypts by
//! default (SSE-S3) and where the file was sealed already; a bucket whose default is SSE-KMS
//! takes writes through S3 only. SSE-C and SSE-KMS objects stay readable through S3 only.

use std::sync::Arc;

use saker_client::sealed::{DataKey, Opening, Sealing};
use saker_client::ClientError;
use saker_rpc::{
    access, is_sse_s3, CommitSeal, Cred, FreshKey, MetaError, MetaRequest, MetaResponse, Sse, Want,
};

use crate::error::{FuseError, Result};
use crate::fs::{Caller, SakerFs};

/// The sealing of one commit's bytes: the keystream they are written with and the record
/// the commit stores.
pub(crate) struct Seal {
    pub key: DataKey,
    /// The record and the proof that a node gave it out for these bytes.
    pub commit: CommitSeal,
}

impl Seal {
    /// How the new bytes are sealed.
    pub fn sealing(&self) -> Sealing {
        self.key.sealing(&self.commit.sse, 0)
    }

    /// How the new bytes open, once committed.
    pub fn opening(&self) -> Arc<Opening> {
        Arc::new(self.key.opening(&self.commit.sse, &[]))
    }
}

impl SakerFs {
    /// How the SSE-S3 file `id` at `path` opens for `caller` (who may read it; the node
    /// checks a read again before it hands out the key).
    pub(crate) fn read_key(
        &self,
        path: &[String],
        id: u64,
        caller: &Caller,
    ) -> Result<Arc<Opening>> {
        let view = self.block(self.access_view(path, access::READ, caller, Want::HEAD))?;
        if view.attr.id != id {
            return Err(FuseError::Stale);
        }
        let sse = view.meta.and_then(|m| m.sse).ok_or(FuseError::Stale)?;
        if sse.customer_key_md5.is_some() {
            return Err(FuseError::Sealed(
                "encrypted with a client's key (SSE-C): readable through S3 with that key only",
            ));
        }
        if sse.kms_key_id.is_some() {
            return Err(FuseError::Sealed(
                "encrypted with SSE-KMS: readable through S3 only",
            ));
        }
        let (key, sse) = match &self.cluster.config().master_key {
            Some(master) => {
                let key = master
                    .open(&sse)
                    .map_err(|_| FuseError::Sealed("the master key is not this object's"))?;
                (key, sse)
            }
            None => {
                let (key, sse, _) = self.node_key(path, id, &caller.cred, false)?;
                (key, sse)
            }
        };
        Ok(Arc::new(key.opening(&sse, &view.attr.parts)))
    }

    /// How the bytes a commit of file `id` at `path` (sealed now: `sealed`) brings are
    /// sealed, with a fresh data key for `writer`: `None` for plaintext.
    pub(crate) fn commit_seal(
        &self,
        path: &[String],
        id: u64,
        sealed: bool,
        writer: &Cred,
    ) -> Result<Option<Seal>> {
        let encryption = self.bucket_writes(path)?.encryption;
        match encryption.as_deref() {
            Some("AES256") => {}
            Some(_) => {
                return Err(FuseError::Sealed(
                    "the bucket encrypts with SSE-KMS by default: write it through S3",
                ))
            }
            None if sealed => {}
            None => return Ok(None),
        }
        let (key, sse, fresh) = match &self.cluster.config().master_key {
            // In a node's process, which signs as any node does.
            Some(master) => {
                let (key, sse) = master.new_data_key();
                let fresh = FreshKey::sign(id, &sse);
                (key, sse, Some(fresh))
            }
            None => self.node_key(path, id, writer, true)?,
        };
        let fresh =
            fresh.ok_or_else(|| MetaError::Internal("a fresh key without its proof".into()))?;
        Ok(Some(Seal {
            key,
            commit: CommitSeal { sse, fresh },
        }))
    }

    /// A data key from the file's MNode (`fresh`: a new one for new bytes, with its proof).
    fn node_key(
        &self,
        path: &[String],
        id: u64,
        cred: &Cred,
        fresh: bool,
    ) -> Result<(DataKey, Sse, Option<FreshKey>)> {
        let req = MetaRequest::SseKey {
            path: path.to_vec(),
            id,
            cred: cred.clone(),
            fresh,
        };
        match self.block(self.call(path, req)) {
            Ok(MetaResponse::SseKey { key, sse, fresh }) if is_sse_s3(&sse) => {
                Ok((DataKey::from_plain(&key), sse, fresh))
            }
            Ok(other) => Err(MetaError::Internal(format!("SseKey answered {other:?}")).into()),
            // The node cannot give this file a key (no master key there, SSE-C or SSE-KMS).
            Err(
                FuseError::Meta(MetaError::Invalid(why))
                | FuseError::Client(ClientError::Meta(MetaError::Invalid(why))),
            ) => {
                tracing::warn!(why, "a node refused a data key");
                Err(FuseError::Sealed(
                    "the cluster gives no data key for this file (see the mount's log)",
                ))
            }
            Err(e) => Err(e),
        }
    }
}
