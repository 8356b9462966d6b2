//! Every internal error becomes an S3 error here, in one exhaustive match each.

use s3s::{S3Error, S3ErrorCode};
use saker_client::ClientError;
use saker_namespace::KeyError;
use saker_rpc::MetaError;

fn with_status(code: S3ErrorCode, msg: String, status: http::StatusCode) -> S3Error {
    let mut e = S3Error::with_message(code, msg);
    e.set_status_code(status);
    e
}

/// A metadata error in the context of an object request.
pub fn meta(e: MetaError) -> S3Error {
    match e {
        MetaError::NotFound | MetaError::NotDir | MetaError::IsDir => S3Error::new(S3ErrorCode::NoSuchKey),
        MetaError::NoSuchBucket => S3Error::new(S3ErrorCode::NoSuchBucket),
        MetaError::Exists => S3Error::new(S3ErrorCode::BucketAlreadyOwnedByYou),
        MetaError::NotEmpty => S3Error::new(S3ErrorCode::BucketNotEmpty),
        MetaError::Conflict { path } => with_status(
            S3ErrorCode::Custom("ObjectPathConflict".into()),
            format!("the namespace cannot hold this key: '{path}' is in the way (a file where a directory must be, or the reverse)"),
            http::StatusCode::CONFLICT,
        ),
        MetaError::NoSuchUpload => S3Error::new(S3ErrorCode::NoSuchUpload),
        MetaError::InvalidPart(m) => S3Error::with_message(S3ErrorCode::InvalidPart, m),
        MetaError::InvalidPartOrder => S3Error::new(S3ErrorCode::InvalidPartOrder),
        MetaError::EntityTooSmall => S3Error::new(S3ErrorCode::EntityTooSmall),
        MetaError::Invalid(m) => S3Error::with_message(S3ErrorCode::InvalidArgument, m),
        MetaError::CrossGroup | MetaError::TooManyLinks => S3Error::new(S3ErrorCode::NotImplemented),
        MetaError::MetadataTooLarge => S3Error::new(S3ErrorCode::MetadataTooLarge),
        MetaError::NoAttr => S3Error::new(S3ErrorCode::NoSuchKey),
        MetaError::PreconditionFailed => S3Error::new(S3ErrorCode::PreconditionFailed),
        MetaError::NoSuchVersion => S3Error::new(S3ErrorCode::NoSuchVersion),
        MetaError::DeleteMarker(version_id) => {
            // By version id: 405, with the headers that say what it is.
            let mut e = with_status(
                S3ErrorCode::MethodNotAllowed,
                "The specified method is not allowed against this resource.".into(),
                http::StatusCode::METHOD_NOT_ALLOWED,
            );
            let mut headers = http::HeaderMap::new();
            headers.insert("x-amz-delete-marker", http::HeaderValue::from_static("true"));
            if let Ok(v) = http::HeaderValue::from_str(&version_id) {
                headers.insert("x-amz-version-id", v);
            }
            e.set_headers(headers);
            e
        }
        MetaError::NotPermitted | MetaError::AccessDenied => {
            S3Error::new(S3ErrorCode::AccessDenied)
        }
        MetaError::ObjectLocked => S3Error::with_message(
            S3ErrorCode::AccessDenied,
            "The object version is protected by Object Lock (a retention or a legal hold)",
        ),
        MetaError::NoSpace(m) => {
            tracing::warn!(error = %m, "metadata not written: disk full");
            with_status(
                S3ErrorCode::Custom("InsufficientStorage".into()),
                format!("not enough space for the metadata ({m}); nothing was changed"),
                http::StatusCode::INSUFFICIENT_STORAGE,
            )
        }
        // Transient, as S3's 503 tells a client (and its SDK retries); why is in the logs and
        // on /health, not for clients.
        MetaError::Unavailable(m) => {
            tracing::warn!(error = %m, "metadata node unavailable");
            S3Error::with_message(
                S3ErrorCode::ServiceUnavailable,
                "the metadata service did not answer (its node or store is unreachable); try \
                 again"
                    .to_string(),
            )
        }
        // The write was decided under settings its group no longer has: nothing was written,
        // and the client's retry is decided anew.
        MetaError::SettingsChanged { .. } => S3Error::with_message(
            S3ErrorCode::ServiceUnavailable,
            "The bucket's settings changed while the request was decided; please retry",
        ),
        e @ (MetaError::NotLeader { .. } | MetaError::Fenced { .. }) => {
            tracing::warn!(error = %e, "metadata group or coordinator without a leader");
            S3Error::with_message(
                S3ErrorCode::ServiceUnavailable,
                "no metadata server serves this part of the namespace right now (a failover, \
                 or its store is unreachable); try again"
                    .to_string(),
            )
        }
        e @ (MetaError::MissingParent { .. }
        | MetaError::NotOwner { .. }
        | MetaError::Internal(_)
        | MetaError::Unauthenticated(_)) => {
            tracing::error!(error = %e, "internal metadata error");
            S3Error::new(S3ErrorCode::InternalError)
        }
    }
}

/// A client-library error.
pub fn client(e: ClientError) -> S3Error {
    match e {
        ClientError::Meta(m) => meta(m),
        ClientError::Chunk(saker_chunkstore::ChunkError::Full(m)) => {
            tracing::warn!(error = %m, "object data not stored: disk full");
            with_status(
                S3ErrorCode::Custom("InsufficientStorage".into()),
                format!("not enough space to store the object's data ({m}); nothing was stored"),
                http::StatusCode::INSUFFICIENT_STORAGE,
            )
        }
        // Too few chunkstores reached for a write quorum or a read (a node cut off from the
        // others, say): transient, as S3's 503 tells a client (and its SDK retries).
        ClientError::Chunk(saker_chunkstore::ChunkError::Unavailable(m)) => {
            tracing::warn!(error = %m, "chunkstores unavailable");
            S3Error::with_message(
                S3ErrorCode::ServiceUnavailable,
                "not enough chunkstores reachable to store or read the object's data; try again"
                    .to_string(),
            )
        }
        // The archive tier holding the object's bytes is unreachable: transient.
        ClientError::Tier(m) => {
            tracing::warn!(error = %m, "remote tier read failed");
            S3Error::with_message(
                S3ErrorCode::ServiceUnavailable,
                "the archive tier holding the object's data is unreachable; try again".to_string(),
            )
        }
        e @ (ClientError::Chunk(_) | ClientError::TooManyRetries(_) | ClientError::Protocol(_)) => {
            tracing::error!(error = %e, "internal error");
            S3Error::new(S3ErrorCode::InternalError)
        }
    }
}

/// A key that cannot be stored as a path: 400 with the reason.
pub fn bad_key(e: KeyError) -> S3Error {
    match e {
        KeyError::TooLong => S3Error::with_message(S3ErrorCode::KeyTooLongError, e.to_string()),
        KeyError::Bucket(_) => S3Error::new(S3ErrorCode::NoSuchBucket),
        e @ (KeyError::Empty
        | KeyError::EmptyComponent(_)
        | KeyError::DotComponent(_)
        | KeyError::ComponentTooLong(_)
        | KeyError::Nul(_)) => S3Error::with_message(S3ErrorCode::InvalidArgument, e.to_string()),
    }
}

/// Wraps an unexpected failure, logging its source once.
pub fn internal(e: impl std::fmt::Display) -> S3Error {
    tracing::error!(error = %e, "internal error");
    S3Error::new(S3ErrorCode::InternalError)
}
