//! Who an account is to S3: a canonical user id (64 lowercase hex, as AWS's) and a display
//! name. They are what listings, ACLs and multipart uploads show as owner, grantee and
//! initiator, so that reading an ACL never hands out an access key id.
//!
//! A new account gets a random id. An account from before ids existed (a key record or key
//! file without one) gets one derived from its key: HMAC-SHA256 keyed by the key's secret
//! over its access key id, so every node of a cluster derives the same one without writing
//! anything, and the id says nothing about the key without its secret (checking a guessed
//! secret against it is no easier than against any signature the key has made). The default
//! display name is `saker-` and the id's first 8 hex digits.

use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::KeyError;

/// An account's canonical user id and display name, as S3 shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanonicalUser {
    /// 64 lowercase hex digits.
    pub id: String,
    pub display_name: String,
}

/// The longest display name taken (AWS's account names are at most 63 characters; this is
/// room enough for an RGW user's display name as well).
pub const MAX_DISPLAY_NAME: usize = 128;

impl CanonicalUser {
    /// A new account's: a random id, and `display_name` or the default one.
    pub fn generate(display_name: Option<String>) -> Result<Self, KeyError> {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self::with_id(hex::encode(bytes), display_name)
    }

    /// The account of key `access_key` (secret `secret_key`) that has none recorded: an id
    /// derived from the key (see the module docs), the default display name.
    pub fn derived(access_key: &str, secret_key: &str) -> Self {
        let id = derive(
            secret_key.as_bytes(),
            b"saker canonical user id\0",
            access_key,
        );
        let display_name = default_display_name(&id);
        CanonicalUser { id, display_name }
    }

    /// An id no key has (an account deleted since it was named in an ACL or a bucket's
    /// owner): derived from it keyed by `secret` (the root key's), so it is stable and tells
    /// nothing about the id.
    pub fn unknown(secret: &str, account: &str) -> Self {
        let id = derive(secret.as_bytes(), b"saker unknown account\0", account);
        let display_name = default_display_name(&id);
        CanonicalUser { id, display_name }
    }

    fn with_id(id: String, display_name: Option<String>) -> Result<Self, KeyError> {
        let display_name = match display_name {
            Some(name) => {
                validate_display_name(&name)?;
                name
            }
            None => default_display_name(&id),
        };
        Ok(CanonicalUser { id, display_name })
    }
}

fn derive(key: &[u8], domain: &[u8], what: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(domain);
    mac.update(what.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The display name of an account given none: `saker-` and the id's first 8 hex digits.
pub fn default_display_name(id: &str) -> String {
    format!("saker-{}", &id[..id.len().min(8)])
}

/// Whether `id` is a canonical user id: 64 lowercase hex digits.
pub fn is_canonical_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A display name is 1 to [`MAX_DISPLAY_NAME`] characters, none of them a control
/// character, not starting or ending with a space (it is shown in XML and in `key list`'s
/// tab-separated lines).
pub fn validate_display_name(name: &str) -> Result<(), KeyError> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_DISPLAY_NAME
        && !name.chars().any(char::is_control)
        && name.trim() == name;
    if ok {
        Ok(())
    } else {
        Err(KeyError::Invalid(format!(
            "a display name is 1-{MAX_DISPLAY_NAME} characters, no control characters, no \
             leading or trailing space"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_64_hex_and_differ() {
        let a = CanonicalUser::generate(None).unwrap();
        let b = CanonicalUser::generate(Some("team".into())).unwrap();
        assert!(is_canonical_id(&a.id) && is_canonical_id(&b.id));
        assert_ne!(a.id, b.id);
        assert_eq!(a.display_name, format!("saker-{}", &a.id[..8]));
        assert_eq!(b.display_name, "team");
        for bad in ["", " team", "team ", "a\tb", "a\nb", &"x".repeat(129)] {
            assert!(
                CanonicalUser::generate(Some(bad.to_string())).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn derived_ids_are_stable_and_hide_the_key() {
        let a = CanonicalUser::derived("AKOLD", "old-secret-1");
        assert_eq!(a, CanonicalUser::derived("AKOLD", "old-secret-1"));
        assert!(is_canonical_id(&a.id));
        assert!(!a.id.contains("AKOLD") && !a.display_name.contains("AKOLD"));
        assert_ne!(a.id, CanonicalUser::derived("AKOLD", "another-secret").id);
        assert_ne!(a.id, CanonicalUser::derived("AKOTHER", "old-secret-1").id);
        let gone = CanonicalUser::unknown("root-secret", "AKOLD");
        assert!(is_canonical_id(&gone.id));
        assert_ne!(gone.id, a.id);
        assert_eq!(gone, CanonicalUser::unknown("root-secret", "AKOLD"));
    }

    #[test]
    fn canonical_ids_are_recognized() {
        assert!(is_canonical_id(&"0a".repeat(32)));
        assert!(!is_canonical_id(&"0A".repeat(32)));
        assert!(!is_canonical_id("AKOLD"));
        assert!(!is_canonical_id(&"0".repeat(63)));
    }
}
