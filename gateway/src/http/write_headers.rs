//! Write headers saker must not silently ignore: the storage class (an upload is stored as
//! `STANDARD`, so that is the one it accepts; PutObject and CopyObject also take a remote
//! tier's name, [`crate::object::tiering::requested_tier`]). Server-side encryption is
//! [`crate::object::sse`]'s.

use s3s::dto::StorageClass;
use s3s::{s3_error, S3Result};

/// Refuses a storage class other than `STANDARD`.
pub fn check(storage_class: Option<&StorageClass>) -> S3Result<()> {
    if let Some(c) = storage_class {
        if c.as_str() != StorageClass::STANDARD {
            return Err(s3_error!(
                InvalidStorageClass,
                "The storage class you specified is not valid: saker stores objects as STANDARD"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_and_nothing_pass_the_rest_is_refused() {
        let standard = StorageClass::from_static(StorageClass::STANDARD);
        assert!(check(None).is_ok());
        assert!(check(Some(&standard)).is_ok());
        let glacier = StorageClass::from_static(StorageClass::GLACIER);
        let e = check(Some(&glacier)).unwrap_err();
        assert_eq!(e.code().as_str(), "InvalidStorageClass");
    }
}
