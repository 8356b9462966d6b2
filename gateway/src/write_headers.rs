//! Write headers saker must not silently ignore: the storage class (an upload is stored as
//! `STANDARD`, so that is the one it accepts; PutObject and CopyObject also take a remote
//! tier's name, [`crate::tiering::requested_tier`]) and server-side encryption (not
//! implemented: refused, never stored in the clear while the client believes it encrypted).

use s3s::dto::{SSECustomerAlgorithm, ServerSideEncryption, StorageClass};
use s3s::{s3_error, S3Result};

/// Refuses a storage class other than `STANDARD` and any server-side encryption.
pub fn check(
    storage_class: Option<&StorageClass>,
    sse: Option<&ServerSideEncryption>,
    sse_c: Option<&SSECustomerAlgorithm>,
) -> S3Result<()> {
    if let Some(c) = storage_class {
        if c.as_str() != StorageClass::STANDARD {
            return Err(s3_error!(
                InvalidStorageClass,
                "The storage class you specified is not valid: saker stores objects as STANDARD"
            ));
        }
    }
    if sse.is_some() || sse_c.is_some() {
        return Err(s3_error!(
            NotImplemented,
            "Server-side encryption is not implemented; the object was not stored"
        ));
    }
    Ok(())
}

/// [`check`] of a request input with the usual field names (PutObject, CopyObject,
/// CreateMultipartUpload).
macro_rules! check_write_headers {
    ($input:expr) => {
        $crate::write_headers::check(
            $input.storage_class.as_ref(),
            $input.server_side_encryption.as_ref(),
            $input.sse_customer_algorithm.as_ref(),
        )
    };
}
pub(crate) use check_write_headers;

/// [`check`] of a PutObject's or CopyObject's input, which may also name a remote tier as its
/// storage class: answers that tier ([`crate::tiering::requested_tier`]).
macro_rules! tier_of_write {
    ($gw:expr, $input:expr, $dir_marker:expr) => {
        match $crate::write_headers::check(
            None,
            $input.server_side_encryption.as_ref(),
            $input.sse_customer_algorithm.as_ref(),
        ) {
            Ok(()) => {
                $crate::tiering::requested_tier($gw, $input.storage_class.as_ref(), $dir_marker)
                    .await
            }
            Err(e) => Err(e),
        }
    };
}
pub(crate) use tier_of_write;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_and_nothing_pass_the_rest_is_refused() {
        let standard = StorageClass::from_static(StorageClass::STANDARD);
        assert!(check(None, None, None).is_ok());
        assert!(check(Some(&standard), None, None).is_ok());
        let glacier = StorageClass::from_static(StorageClass::GLACIER);
        let e = check(Some(&glacier), None, None).unwrap_err();
        assert_eq!(e.code().as_str(), "InvalidStorageClass");
        let aes = ServerSideEncryption::from_static(ServerSideEncryption::AES256);
        let e = check(None, Some(&aes), None).unwrap_err();
        assert_eq!(e.code().as_str(), "NotImplemented");
        let c = SSECustomerAlgorithm::from("AES256".to_string());
        assert!(check(None, None, Some(&c)).is_err());
    }
}
