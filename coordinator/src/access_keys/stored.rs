//! The persisted encodings of access keys, versioned: the key file (`{"version": N, "keys":
//! [...]}`) and the replicated records (`keys/<access key>`, one key each, its own
//! `"version"`). Version 1 is what saker wrote before keys were denied by default: a key
//! without a policy could do everything, so such a key migrates to the `admin` policy.
//! Version 2: a key without a policy may do nothing. An unknown version is an error, never a
//! guess.
//!
//! A node still running version 1 code reads a version 2 record as before (it ignores the
//! marker): a key made without a policy can do everything at such a node until it is
//! upgraded. Upgrade every node before making keys without a policy.
//!
//! The account's canonical user id and display name (`canonical`, of the root key and keys
//! made with `--account`) are an optional field of version 2, not a version of their own: a
//! node of older code ignores the field (and shows access keys as owners, as it did), and a
//! record or file without it, of either version, gets the id derived from the key
//! ([`CanonicalUser::derived`]), the same at every node, without a write. Those are the
//! records and files saker wrote before accounts had canonical ids.

use serde::{Deserialize, Serialize};

use super::{AccessKey, CanonicalUser, KeyError};

/// The version written.
pub const VERSION: u32 = 2;

/// The encodings of version 1.
pub mod v1 {
    use serde::Deserialize;

    use crate::AccessKey;

    #[derive(Deserialize)]
    pub struct AccessKey1 {
        pub access_key: String,
        pub secret_key: String,
        pub uid: u32,
        pub gid: u32,
        pub root: bool,
        /// `None`: the key may do everything.
        #[serde(default)]
        pub policy: Option<String>,
        #[serde(default)]
        pub account: bool,
    }

    #[derive(Deserialize)]
    pub struct File1 {
        pub keys: Vec<AccessKey1>,
    }

    impl AccessKey1 {
        /// A key without a policy could do everything: it gets the `admin` policy (the root
        /// key needs none).
        pub fn migrate(self) -> AccessKey {
            let policy = match (self.root, self.policy) {
                (false, None) => Some(saker_policy::admin_identity_json().to_string()),
                (_, policy) => policy,
            };
            super::completed(AccessKey {
                access_key: self.access_key,
                secret_key: self.secret_key,
                uid: self.uid,
                gid: self.gid,
                root: self.root,
                policy,
                account: self.account,
                canonical: None,
            })
        }
    }
}

/// The version marker of a file or record (absent in records of version 1).
#[derive(Deserialize)]
struct Marker {
    #[serde(default = "version_1")]
    version: u32,
}

fn version_1() -> u32 {
    1
}

/// A record as written: the key and its version.
#[derive(Serialize, Deserialize)]
struct Record<K> {
    version: u32,
    #[serde(flatten)]
    key: K,
}

/// The key file as written.
#[derive(Serialize, Deserialize)]
struct File<K> {
    version: u32,
    keys: Vec<K>,
}

/// `key` with the canonical user its account has when it has none recorded: the root key
/// and account keys from before canonical ids get the derived one.
fn completed(mut key: AccessKey) -> AccessKey {
    if key.canonical.is_none() && (key.root || key.account) {
        key.canonical = Some(CanonicalUser::derived(&key.access_key, &key.secret_key));
    }
    key
}

fn corrupt(what: &str) -> impl FnOnce(serde_json::Error) -> KeyError + '_ {
    move |e| KeyError::Corrupt(format!("{what}: {e}"))
}

fn unknown(what: &str, version: u32) -> KeyError {
    KeyError::Corrupt(format!("{what}: unknown version {version}"))
}

/// The bytes of record `key`.
pub fn encode_record(key: &AccessKey) -> Vec<u8> {
    let record = Record {
        version: VERSION,
        key,
    };
    serde_json::to_vec(&record).expect("keys serialize")
}

/// Decodes record `name` of any known version.
pub fn decode_record(name: &str, bytes: &[u8]) -> Result<AccessKey, KeyError> {
    let marker: Marker = serde_json::from_slice(bytes).map_err(corrupt(name))?;
    match marker.version {
        1 => {
            let old: v1::AccessKey1 = serde_json::from_slice(bytes).map_err(corrupt(name))?;
            Ok(old.migrate())
        }
        VERSION => {
            let record: Record<AccessKey> = serde_json::from_slice(bytes).map_err(corrupt(name))?;
            Ok(completed(record.key))
        }
        v => Err(unknown(name, v)),
    }
}

/// The bytes of a key file holding `keys`.
pub fn encode_file(keys: Vec<AccessKey>) -> Result<Vec<u8>, KeyError> {
    let file = File {
        version: VERSION,
        keys,
    };
    serde_json::to_vec_pretty(&file).map_err(|e| KeyError::Corrupt(e.to_string()))
}

/// Decodes a key file of any known version.
pub fn decode_file(bytes: &[u8]) -> Result<Vec<AccessKey>, KeyError> {
    const WHAT: &str = "key file";
    let marker: Marker = serde_json::from_slice(bytes).map_err(corrupt(WHAT))?;
    match marker.version {
        1 => {
            let old: v1::File1 = serde_json::from_slice(bytes).map_err(corrupt(WHAT))?;
            Ok(old.keys.into_iter().map(v1::AccessKey1::migrate).collect())
        }
        VERSION => {
            let file: File<AccessKey> = serde_json::from_slice(bytes).map_err(corrupt(WHAT))?;
            Ok(file.keys.into_iter().map(completed).collect())
        }
        v => Err(unknown(WHAT, v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as version 1 wrote it (serde of the struct of then, no marker).
    const V1_RECORD: &str =
        r#"{"access_key":"AKOLD","secret_key":"old-secret-1","uid":5,"gid":6,"root":false}"#;

    #[test]
    fn version_1_keys_without_a_policy_decode_as_admin() {
        let k = decode_record("keys/AKOLD", V1_RECORD.as_bytes()).unwrap();
        assert_eq!(k.access_key, "AKOLD");
        assert_eq!((k.uid, k.gid, k.root, k.account), (5, 6, false, false));
        assert_eq!(
            k.policy.as_deref(),
            Some(saker_policy::admin_identity_json())
        );
        // A policy it had is kept; the root key stays without one.
        let limited = r#"{"access_key":"AKRO","secret_key":"ro-secret-1","uid":0,"gid":0,
            "root":false,"policy":"{\"Statement\":[]}","account":true}"#;
        let k = decode_record("keys/AKRO", limited.as_bytes()).unwrap();
        assert_eq!(k.policy.as_deref(), Some(r#"{"Statement":[]}"#));
        assert!(k.account);
        // An account gets the id derived from its key; a key of the root's account none.
        assert_eq!(
            k.canonical,
            Some(CanonicalUser::derived("AKRO", "ro-secret-1"))
        );
        assert_eq!(
            decode_record("keys/AKOLD", V1_RECORD.as_bytes())
                .unwrap()
                .canonical,
            None
        );
        let root =
            r#"{"access_key":"AKROOT","secret_key":"root-secret","uid":0,"gid":0,"root":true}"#;
        let root = decode_record("keys/AKROOT", root.as_bytes()).unwrap();
        assert_eq!(root.policy, None);
        assert_eq!(
            root.canonical,
            Some(CanonicalUser::derived("AKROOT", "root-secret"))
        );
    }

    /// Records and files of version 2 as saker wrote them before accounts had canonical ids:
    /// the root key and account keys get the derived id (every node the same one), other
    /// keys none; one recorded is kept, and written back.
    #[test]
    fn version_2_keys_from_before_canonical_ids_get_a_derived_one() {
        let account = r#"{"version":2,"access_key":"AKTEAM","secret_key":"team-secret-1",
            "uid":0,"gid":0,"root":false,"policy":"{}","account":true}"#;
        let k = decode_record("keys/AKTEAM", account.as_bytes()).unwrap();
        let derived = CanonicalUser::derived("AKTEAM", "team-secret-1");
        assert!(super::super::is_canonical_id(&derived.id));
        assert_eq!(k.canonical.as_ref(), Some(&derived));
        assert_eq!(derived.display_name, format!("saker-{}", &derived.id[..8]));
        let member = r#"{"version":2,"access_key":"AKMEMBER","secret_key":"member-secret-1",
            "uid":0,"gid":0,"root":false}"#;
        assert_eq!(
            decode_record("keys/AKMEMBER", member.as_bytes())
                .unwrap()
                .canonical,
            None
        );
        let file = r#"{"version":2,"keys":[{"access_key":"AKROOT","secret_key":"root-secret",
            "uid":0,"gid":0,"root":true}]}"#;
        let keys = decode_file(file.as_bytes()).unwrap();
        assert_eq!(
            keys[0].canonical,
            Some(CanonicalUser::derived("AKROOT", "root-secret"))
        );
        // A recorded one is kept as is, and round trips.
        let named = AccessKey {
            canonical: Some(CanonicalUser {
                id: "ab".repeat(32),
                display_name: "Team A".into(),
            }),
            ..k
        };
        let bytes = encode_record(&named);
        assert_eq!(decode_record("keys/AKTEAM", &bytes).unwrap(), named);
        let file = encode_file(vec![named.clone()]).unwrap();
        assert_eq!(decode_file(&file).unwrap(), vec![named]);
    }

    #[test]
    fn version_2_round_trips_a_key_without_a_policy() {
        let k = AccessKey {
            access_key: "AKNEW".into(),
            secret_key: "new-secret-1".into(),
            uid: 1,
            gid: 2,
            root: false,
            policy: None,
            account: false,
            canonical: None,
        };
        let bytes = encode_record(&k);
        assert!(String::from_utf8_lossy(&bytes).contains(r#""version":2"#));
        assert_eq!(decode_record("keys/AKNEW", &bytes).unwrap(), k);
        let file = encode_file(vec![k.clone()]).unwrap();
        assert_eq!(decode_file(&file).unwrap(), vec![k]);
    }

    #[test]
    fn a_version_1_file_migrates_and_unknown_versions_are_refused() {
        let file = format!(r#"{{"version":1,"keys":[{V1_RECORD}]}}"#);
        let keys = decode_file(file.as_bytes()).unwrap();
        assert_eq!(
            keys[0].policy.as_deref(),
            Some(saker_policy::admin_identity_json())
        );
        assert!(matches!(
            decode_file(br#"{"version":3,"keys":[]}"#),
            Err(KeyError::Corrupt(_))
        ));
        let future =
            r#"{"version":3,"access_key":"AK","secret_key":"s","uid":0,"gid":0,"root":false}"#;
        assert!(matches!(
            decode_record("keys/AK", future.as_bytes()),
            Err(KeyError::Corrupt(_))
        ));
    }
}
