//! Server-side encryption on the S3 side ([`saker_client::sealed`] does the cryptography):
//! which key a write is sealed with (SSE-S3 under the master key, SSE-KMS under the named key
//! of the local keyring, SSE-C under the client's key, or the bucket's default encryption),
//! which key opens a read, and the headers S3 answers with (the bucket setting is
//! [`crate::bucket::encryption`]).
//! An encryption the server has no key for is refused, never stored unencrypted.

use base64::Engine as _;
use md5::{Digest as _, Md5};
use s3s::dto::*;
use s3s::{s3_error, S3Error, S3Result};
use saker_client::master_keys::MasterKeys;
use saker_client::sealed::{DataKey, WrappingKey};
use saker_client::{Cluster, DataStream, ReadRange};
use saker_rpc::{ObjectMeta, ObjectView, Sse};

use crate::bucket::settings::Bucket;
use crate::Gateway;

/// The one algorithm saker encrypts with (S3's name for AES-256).
pub(crate) const AES256: &str = ServerSideEncryption::AES256;

/// An SSE-C request's key (checked against its MD5) and that MD5, base64.
pub struct CustomerKey {
    key: WrappingKey,
    md5: String,
}

/// The SSE-C headers of a request (`x-amz[-copy-source]-server-side-encryption-customer-*`),
/// checked: AES256, a 256-bit key, and the key's MD5.
pub fn customer_key(
    algorithm: Option<&str>,
    key: Option<&str>,
    key_md5: Option<&str>,
) -> S3Result<Option<CustomerKey>> {
    if algorithm.is_none() && key.is_none() && key_md5.is_none() {
        return Ok(None);
    }
    if algorithm != Some(AES256) {
        return Err(s3_error!(
            InvalidArgument,
            "The requested encryption algorithm is not valid: SSE-C takes AES256"
        ));
    }
    let key = key.ok_or_else(|| {
        s3_error!(
            InvalidArgument,
            "Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key."
        )
    })?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(key)
        .ok()
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "The secret key was invalid for the specified algorithm (a 256-bit key, base64)."
            )
        })?;
    let md5 = base64::engine::general_purpose::STANDARD.encode(Md5::digest(raw));
    if key_md5 != Some(md5.as_str()) {
        return Err(s3_error!(
            InvalidArgument,
            "The calculated MD5 hash of the key did not match the hash that was provided."
        ));
    }
    Ok(Some(CustomerKey {
        key: WrappingKey::new(&raw),
        md5,
    }))
}

/// [`customer_key`] of a request input with the usual field names.
macro_rules! customer_key_of {
    ($input:expr) => {
        $crate::object::sse::customer_key(
            $input.sse_customer_algorithm.as_deref(),
            $input.sse_customer_key.as_deref(),
            $input.sse_customer_key_md5.as_deref(),
        )
    };
}
pub(crate) use customer_key_of;

/// [`customer_key`] of a copy's source (`x-amz-copy-source-server-side-encryption-customer-*`).
macro_rules! copy_source_key_of {
    ($input:expr) => {
        $crate::object::sse::customer_key(
            $input.copy_source_sse_customer_algorithm.as_deref(),
            $input.copy_source_sse_customer_key.as_deref(),
            $input.copy_source_sse_customer_key_md5.as_deref(),
        )
    };
}
pub(crate) use copy_source_key_of;

/// The master keys, or why SSE-S3 cannot be served here.
pub(crate) fn master(gw: &Gateway) -> S3Result<&MasterKeys> {
    gw.cluster.config().master_key.as_deref().ok_or_else(|| {
        s3_error!(
            NotImplemented,
            "SSE-S3 needs a master key: start saker with --sse-key-file (saker admin master-key FILE)"
        )
    })
}

/// The SSE-KMS key `id` of the keyring, or why it cannot be used.
pub(crate) fn kms_key<'a>(
    gw: &'a Gateway,
    id: Option<&str>,
) -> S3Result<(&'a WrappingKey, String)> {
    let ring = gw.cluster.config().kms_keys.as_deref().ok_or_else(|| {
        s3_error!(
            NotImplemented,
            "SSE-KMS needs a keyring: start saker with --sse-kms-keyring (saker admin kms-key FILE ID)"
        )
    })?;
    let id = id.ok_or_else(|| {
        s3_error!(
            InvalidArgument,
            "SSE-KMS needs x-amz-server-side-encryption-aws-kms-key-id (there is no default KMS key)"
        )
    })?;
    let key = ring
        .get(id)
        .ok_or_else(|| s3_error!(InvalidArgument, "The KMS key {id} does not exist"))?;
    Ok((key, id.to_string()))
}

/// A bucket's default encryption as stored: `AES256`, or `aws:kms KEY-ID`.
pub(crate) fn parse_default(text: &str) -> (&str, Option<&str>) {
    match text.split_once(' ') {
        Some((algorithm, id)) => (algorithm, Some(id)),
        None => (text, None),
    }
}

/// The data key a new object is sealed with, and its record (`None`: stored as sent): the
/// request's SSE-S3, SSE-KMS (`kms_key_id`) or SSE-C, else the bucket's default encryption.
pub fn for_write(
    gw: &Gateway,
    bucket: &Bucket,
    sse: Option<&ServerSideEncryption>,
    kms_key_id: Option<&str>,
    customer: Option<CustomerKey>,
) -> S3Result<Option<(DataKey, Sse)>> {
    if let Some(c) = customer {
        if sse.is_some() || kms_key_id.is_some() {
            return Err(s3_error!(
                InvalidArgument,
                "Server Side Encryption with Customer provided key is incompatible with the encryption method specified"
            ));
        }
        return Ok(Some(c.key.new_data_key(Some(c.md5), None)));
    }
    let (algorithm, kms_key_id) = match sse {
        Some(s) => (s.as_str(), kms_key_id),
        None if kms_key_id.is_some() => (AES256, kms_key_id),
        None => match &bucket.encryption {
            Some(text) => parse_default(text),
            None => return Ok(None),
        },
    };
    match algorithm {
        AES256 if kms_key_id.is_some() => Err(s3_error!(
            InvalidArgument,
            "x-amz-server-side-encryption-aws-kms-key-id goes with aws:kms only"
        )),
        AES256 => Ok(Some(master(gw)?.new_data_key())),
        ServerSideEncryption::AWS_KMS => {
            let (key, id) = kms_key(gw, kms_key_id)?;
            Ok(Some(key.new_data_key(None, Some(id))))
        }
        ServerSideEncryption::AWS_KMS_DSSE => Err(s3_error!(
            NotImplemented,
            "dual-layer SSE-KMS is not supported; use aws:kms or AES256"
        )),
        _ => Err(s3_error!(
            InvalidArgument,
            "The encryption method specified is not supported"
        )),
    }
}

/// [`for_write`] of a request input with the usual field names.
macro_rules! for_write_of {
    ($gw:expr, $settings:expr, $input:expr) => {
        match $crate::object::sse::customer_key_of!($input) {
            Ok(customer) => $crate::object::sse::for_write(
                $gw,
                $settings,
                $input.server_side_encryption.as_ref(),
                $input.ssekms_key_id.as_deref(),
                customer,
            ),
            Err(e) => Err(e),
        }
    };
}
pub(crate) use for_write_of;

/// The data key of a stored version `meta` for a read that sent `customer` (its SSE-C
/// headers); `None`: the version is not encrypted.
pub fn for_read(
    gw: &Gateway,
    meta: Option<&ObjectMeta>,
    customer: Option<CustomerKey>,
) -> S3Result<Option<(DataKey, Sse)>> {
    let Some(sse) = meta.and_then(|m| m.sse.as_ref()) else {
        return match customer {
            Some(_) => Err(s3_error!(
                InvalidRequest,
                "The encryption parameters are not applicable to this object."
            )),
            None => Ok(None),
        };
    };
    let key = match (&sse.customer_key_md5, customer) {
        (Some(_), None) => {
            return Err(s3_error!(
                InvalidRequest,
                "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object."
            ))
        }
        (Some(stored), Some(c)) => {
            if *stored != c.md5 {
                return Err(wrong_customer_key());
            }
            c.key.open(sse).map_err(|_| wrong_customer_key())?
        }
        (None, Some(_)) => {
            return Err(s3_error!(
                InvalidRequest,
                "The encryption parameters are not applicable to this object."
            ))
        }
        (None, None) => {
            let opened = match &sse.kms_key_id {
                Some(id) => kms_key(gw, Some(id))?.0.open(sse),
                None => master(gw)?.open(sse),
            };
            opened.map_err(|_| {
                s3_error!(
                    InternalError,
                    "the server's key is not the one this object was encrypted under"
                )
            })?
        }
    };
    Ok(Some((key, sse.clone())))
}

/// A key that is not the object's (S3 answers 400, as for a missing one).
fn wrong_customer_key() -> S3Error {
    s3_error!(
        InvalidRequest,
        "The provided encryption key does not match the object's"
    )
}

/// A GET or HEAD that names SSE-S3 (`x-amz-server-side-encryption`): S3 refuses it, the
/// header belongs to writes.
pub fn refuse_on_read(headers: &http::HeaderMap) -> S3Result<()> {
    match headers.contains_key("x-amz-server-side-encryption") {
        true => Err(s3_error!(
            InvalidArgument,
            "x-amz-server-side-encryption is not a header of reads"
        )),
        false => Ok(()),
    }
}

/// `range` of the bytes of the version `view`, decrypted when `key` is set.
pub fn read_plain(
    cluster: &Cluster,
    view: &ObjectView,
    key: Option<&(DataKey, Sse)>,
    range: ReadRange,
) -> DataStream {
    let (layout, inline) = (&view.attr.layout, view.data.clone());
    match key {
        Some((k, sse)) => {
            let opening = std::sync::Arc::new(k.opening(sse, &view.attr.parts));
            cluster.read_opened(layout, inline, range, opening)
        }
        None => cluster.read_data(layout, inline, range),
    }
}

/// The encryption headers S3 answers about a version.
#[derive(Default)]
pub struct Shown {
    pub sse: Option<ServerSideEncryption>,
    pub kms_key_id: Option<SSEKMSKeyId>,
    pub customer_algorithm: Option<SSECustomerAlgorithm>,
    pub customer_key_md5: Option<SSECustomerKeyMD5>,
}

pub fn shown(sse: Option<&Sse>) -> Shown {
    let Some(sse) = sse else {
        return Shown::default();
    };
    if let Some(md5) = &sse.customer_key_md5 {
        return Shown {
            customer_algorithm: Some(AES256.to_string()),
            customer_key_md5: Some(md5.clone()),
            ..Shown::default()
        };
    }
    Shown {
        sse: Some(ServerSideEncryption::from(match &sse.kms_key_id {
            Some(_) => ServerSideEncryption::AWS_KMS.to_string(),
            None => AES256.to_string(),
        })),
        kms_key_id: sse.kms_key_id.clone(),
        ..Shown::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn customer_keys_are_checked_before_use() {
        let key = [9u8; 32];
        let md5 = b64(&Md5::digest(key));
        assert!(customer_key(None, None, None).unwrap().is_none());
        let ok = customer_key(Some("AES256"), Some(&b64(&key)), Some(&md5)).unwrap();
        assert_eq!(ok.unwrap().md5, md5);
        let code = |r: S3Result<Option<CustomerKey>>| r.err().unwrap().code().as_str().to_string();
        // Wrong MD5, short key, other algorithm, missing key.
        let bad = b64(&Md5::digest([1u8; 32]));
        assert_eq!(
            code(customer_key(Some("AES256"), Some(&b64(&key)), Some(&bad))),
            "InvalidArgument"
        );
        assert_eq!(
            code(customer_key(
                Some("AES256"),
                Some(&b64(&key[..16])),
                Some(&md5)
            )),
            "InvalidArgument"
        );
        assert_eq!(
            code(customer_key(Some("AES128"), Some(&b64(&key)), Some(&md5))),
            "InvalidArgument"
        );
        assert_eq!(
            code(customer_key(Some("AES256"), None, Some(&md5))),
            "InvalidArgument"
        );
    }
}
