//! Who owns what. An account is the id ACLs and listings name as an owner: an access key
//! made with `--account` is an account of its own, every other key (the root key included)
//! belongs to the root key's account. A bucket is owned by the account that created it (a
//! bucket setting, unset for the root account's); an object by its bucket's owner, unless
//! the bucket's Object Ownership lets the writer keep it (its ACL then names the writer).

use s3s::dto::Owner;
use s3s::S3Result;
use saker_policy::{CannedAcl, ObjectOwnership};

use crate::settings::Bucket;
use crate::Gateway;

/// The account of the key `access_key` (`None`: anonymous, or a key deleted since).
pub fn account(gw: &Gateway, access_key: Option<&str>) -> Option<String> {
    gw.keys.account_of(access_key?)
}

/// The account that owns the bucket of settings `s`.
pub fn of_bucket(gw: &Gateway, s: &Bucket) -> String {
    s.owner.clone().unwrap_or_else(|| gw.keys.root_account())
}

/// The account that owns `bucket`, from this gateway's copy of its settings (callers have
/// looked the bucket up already, or their own request answers NoSuchBucket).
pub async fn of_bucket_named(gw: &Gateway, bucket: &str) -> S3Result<String> {
    let s = crate::bucket_access::copy_of(gw, bucket).await?;
    Ok(of_bucket(gw, &s))
}

/// The owner of an object that `writer` (an account; `None`: anonymous) writes with canned
/// ACL `canned` into a bucket of `bucket_owner` whose Object Ownership is `ownership`:
/// the writer under `ObjectWriter`, and under `BucketOwnerPreferred` unless the ACL is
/// `bucket-owner-full-control`; the bucket owner otherwise (and for anonymous writers).
pub fn of_new_object(
    ownership: ObjectOwnership,
    bucket_owner: &str,
    writer: Option<&str>,
    canned: Option<&str>,
) -> String {
    let writer_keeps = match ownership {
        ObjectOwnership::ObjectWriter => true,
        ObjectOwnership::BucketOwnerPreferred => {
            canned.and_then(|c| c.parse().ok()) != Some(CannedAcl::BucketOwnerFullControl)
        }
        ObjectOwnership::BucketOwnerEnforced => false,
    };
    match writer {
        Some(w) if writer_keeps => w.to_string(),
        _ => bucket_owner.to_string(),
    }
}

/// An owner as S3 shows one (the id is also the display name).
pub fn dto(id: &str) -> Owner {
    Owner {
        display_name: Some(id.to_string()),
        id: Some(id.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_owner_follows_object_ownership() {
        use ObjectOwnership::*;
        let cases = [
            (ObjectWriter, Some("alt"), None, "alt"),
            (
                ObjectWriter,
                Some("alt"),
                Some("bucket-owner-full-control"),
                "alt",
            ),
            (BucketOwnerPreferred, Some("alt"), None, "alt"),
            (BucketOwnerPreferred, Some("alt"), Some("private"), "alt"),
            (
                BucketOwnerPreferred,
                Some("alt"),
                Some("bucket-owner-full-control"),
                "main",
            ),
            (BucketOwnerEnforced, Some("alt"), None, "main"),
            (ObjectWriter, None, None, "main"),
        ];
        for (i, (ownership, writer, canned, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                of_new_object(ownership, "main", writer, canned),
                want,
                "case {i}"
            );
        }
    }
}
