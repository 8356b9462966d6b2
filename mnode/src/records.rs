//! Versioned encodings of everything the MNode persists.
//!
//! Each value is one version byte followed by the postcard encoding of the current struct. A
//! change of a struct adds a new version and a migration from the old one; decoding an unknown
//! version is an error, never a guess.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// Version marker of every record written by this release.
pub const RECORD_V1: u8 = 1;

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = vec![RECORD_V1];
    // Encoding into a Vec cannot fail for our plain data types.
    let body = postcard::to_allocvec(value).expect("postcard encodes plain structs");
    out.extend_from_slice(&body);
    out
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    match bytes.split_first() {
        Some((&RECORD_V1, body)) => {
            postcard::from_bytes(body).map_err(|e| StoreError::Corrupt(e.to_string()))
        }
        Some((v, _)) => Err(StoreError::Corrupt(format!("unknown record version {v}"))),
        None => Err(StoreError::Corrupt("empty record".into())),
    }
}

/// Version marker of the records whose struct changed since [`RECORD_V1`] (multipart uploads,
/// which gained their Object Lock); every other record is still written as version 1.
pub const RECORD_V2: u8 = 2;
/// Version marker of the records whose struct changed since [`RECORD_V2`] (multipart uploads,
/// which gained their ACL).
pub const RECORD_V3: u8 = 3;

/// `value` encoded under version marker `version`.
pub fn encode_as<T: Serialize>(value: &T, version: u8) -> Vec<u8> {
    let mut out = encode(value);
    out[0] = version;
    out
}

pub fn encode_v3<T: Serialize>(value: &T) -> Vec<u8> {
    encode_as(value, RECORD_V3)
}

/// Decodes a record that has a version 2: version 1 bytes decode as `Old` and migrate.
pub fn decode_v2<T: DeserializeOwned, Old: DeserializeOwned + Into<T>>(
    bytes: &[u8],
) -> Result<T, StoreError> {
    match bytes.split_first() {
        Some((&RECORD_V2, body)) => {
            postcard::from_bytes(body).map_err(|e| StoreError::Corrupt(e.to_string()))
        }
        Some((&RECORD_V1, _)) => decode::<Old>(bytes).map(Into::into),
        Some((v, _)) => Err(StoreError::Corrupt(format!("unknown record version {v}"))),
        None => Err(StoreError::Corrupt("empty record".into())),
    }
}

/// Decodes a record that has a version 3: older bytes decode as `Old2` (a version 1 record
/// migrating through `Old1`) and migrate.
pub fn decode_v3<T, Old2, Old1>(bytes: &[u8]) -> Result<T, StoreError>
where
    T: DeserializeOwned,
    Old2: DeserializeOwned + Into<T>,
    Old1: DeserializeOwned + Into<Old2>,
{
    match bytes.split_first() {
        Some((&RECORD_V3, body)) => {
            postcard::from_bytes(body).map_err(|e| StoreError::Corrupt(e.to_string()))
        }
        _ => decode_v2::<Old2, Old1>(bytes).map(Into::into),
    }
}

/// Inline bytes are stored raw behind the version byte (no postcard framing).
pub fn encode_bytes(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(RECORD_V1);
    out.extend_from_slice(data);
    out
}

pub fn decode_bytes(bytes: &[u8]) -> Result<&[u8], StoreError> {
    match bytes.split_first() {
        Some((&RECORD_V1, body)) => Ok(body),
        _ => Err(StoreError::Corrupt("bad inline data record".into())),
    }
}

/// State-machine bookkeeping of one group, written with every apply.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SmMeta {
    pub last_applied: Option<openraft::LogId<u64>>,
    pub membership: openraft::StoredMembership<u64, openraft::BasicNode>,
    /// Highest inode id handed out by this group.
    pub id_high_water: u64,
}

impl SmMeta {
    /// The record of group `keys.group` in `store` (the default before the first apply).
    pub fn load(
        store: &dyn crate::store::MetaStore,
        keys: crate::keys::Keys,
    ) -> Result<Self, StoreError> {
        match store.get(&keys.single(crate::keys::SM_META))? {
            Some(b) => decode(&b),
            None => Ok(Self::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_unknown_version() {
        let v: (u32, String) = (7, "x".into());
        let bytes = encode(&v);
        assert_eq!(bytes[0], RECORD_V1);
        assert_eq!(decode::<(u32, String)>(&bytes).unwrap(), v);
        let mut bad = bytes.clone();
        bad[0] = 9;
        assert!(decode::<(u32, String)>(&bad).is_err());
        assert!(decode::<(u32, String)>(&[]).is_err());
        assert_eq!(decode_bytes(&encode_bytes(b"abc")).unwrap(), b"abc");
    }

    #[test]
    fn version_2_records_read_version_1_by_migration() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct New(u32, Option<u8>);
        #[derive(Deserialize)]
        struct Old(u32);
        impl From<Old> for New {
            fn from(o: Old) -> New {
                New(o.0, None)
            }
        }
        let old = encode(&(7u32,));
        assert_eq!(decode_v2::<New, Old>(&old).unwrap(), New(7, None));
        let new = encode_as(&New(8, Some(1)), RECORD_V2);
        assert_eq!(new[0], RECORD_V2);
        assert_eq!(decode_v2::<New, Old>(&new).unwrap(), New(8, Some(1)));
        let mut bad = new.clone();
        bad[0] = 3;
        assert!(decode_v2::<New, Old>(&bad).is_err());
    }

    #[test]
    fn version_3_records_read_both_older_versions() {
        #[derive(Serialize, Deserialize, Debug, PartialEq)]
        struct V3(u32, Option<u8>, Option<String>);
        #[derive(Serialize, Deserialize)]
        struct V2(u32, Option<u8>);
        #[derive(Deserialize)]
        struct V1(u32);
        impl From<V1> for V2 {
            fn from(o: V1) -> V2 {
                V2(o.0, None)
            }
        }
        impl From<V2> for V3 {
            fn from(o: V2) -> V3 {
                V3(o.0, o.1, None)
            }
        }
        let decode = |b: &[u8]| decode_v3::<V3, V2, V1>(b);
        assert_eq!(decode(&encode(&(7u32,))).unwrap(), V3(7, None, None));
        let v2 = encode_as(&V2(8, Some(1)), RECORD_V2);
        assert_eq!(decode(&v2).unwrap(), V3(8, Some(1), None));
        let v3 = encode_v3(&V3(9, None, Some("acl".into())));
        assert_eq!(v3[0], RECORD_V3);
        assert_eq!(decode(&v3).unwrap(), V3(9, None, Some("acl".into())));
        let mut bad = v3.clone();
        bad[0] = 4;
        assert!(decode(&bad).is_err());
    }
}
