//! Who owns what. An access key made with `--account` is an account of its own, every
//! other key (the root key included) belongs to the root key's account. A bucket is owned by
//! the account that created it (a bucket setting, unset for the root account's); an object
//! by its bucket's owner, unless the bucket's Object Ownership lets the writer keep it (its
//! ACL then names the writer).
//!
//! Inside saker an account is named by its key's access key id (bucket settings and ACLs
//! keep it so, as they did before accounts had canonical ids); S3 never sees that id. At the
//! S3 boundary an account is its canonical user ([`saker_coordinator::access_keys`]): a 64
//! hex id and a display name, in owners, grantees and initiators ([`dto`], [`user`]), and
//! the id by which grants and `x-amz-expected-bucket-owner` name it ([`named`]).

use s3s::dto::Owner;
use s3s::S3Result;
use saker_coordinator::access_keys::{is_canonical_id, CanonicalUser};
use saker_policy::{CannedAcl, ObjectOwnership};

use crate::bucket::settings::Bucket;
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
    let s = crate::bucket::lookup::copy_of(gw, bucket).await?;
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

/// The canonical user S3 shows for `account`.
pub async fn user(gw: &Gateway, account: &str) -> CanonicalUser {
    gw.keys.canonical_user(account).await
}

/// `account` as S3 shows an owner: its canonical user id and display name.
pub async fn dto(gw: &Gateway, account: &str) -> Owner {
    let user = user(gw, account).await;
    Owner {
        display_name: Some(user.display_name),
        id: Some(user.id),
    }
}

/// The account a grant's canonical user id `id` names (`None`: none). An access key id,
/// what saker showed as canonical user id before accounts had one, is still taken (it names
/// that key), so ACLs written then can be written again.
pub async fn named(gw: &Gateway, id: &str) -> Option<String> {
    if is_canonical_id(id) {
        if let Some(account) = gw.keys.account_with_id(id).await {
            return Some(account);
        }
    }
    gw.keys.get(id).map(|k| k.access_key)
}

/// The uid/gid an authenticated request acts as.
pub fn identity(gw: &Gateway, creds: Option<&s3s::auth::Credentials>) -> (u32, u32) {
    creds
        .and_then(|c| gw.keys.with(&c.access_key, |k| (k.uid, k.gid)))
        .unwrap_or((0, 0))
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
