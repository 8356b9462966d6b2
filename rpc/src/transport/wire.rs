//! The body of every frame: one version byte, then postcard.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::MetaError;
use crate::meta::{ClientTag, Cred, MetaRequest, MetaResponse, RemoveCond};

/// The encoding version every body starts with. Bump it for any change to the encoding of a
/// type that crosses the wire.
pub const WIRE_VERSION: u8 = 23;

/// A body that could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("empty body")]
    Empty,
    #[error("wire version {0} (this side speaks {WIRE_VERSION})")]
    Version(u8),
    #[error("undecodable body: {0}")]
    Decode(String),
}

/// `Meta`: one call to one group.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct MetaCall {
    pub group: u32,
    pub tag: ClientTag,
    pub req: MetaRequest,
}

/// The answer to a `Meta` call, with the version of the exception table the group routes by.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct MetaReply {
    pub routing_version: u64,
    pub result: Result<MetaResponse, MetaError>,
}

/// `RemoveDir`: the coordinator's rmdir protocol.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RemoveDirCall {
    pub path: Vec<String>,
    pub cond: RemoveCond,
}

/// `Rename`: the coordinator's rename protocol.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RenameCall {
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub noreplace: bool,
    pub cred: Cred,
    pub versioning: crate::meta::RenameVersioning,
}

/// `Link`: the coordinator's link protocol.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct LinkCall {
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub expect: Option<crate::InodeId>,
    pub cred: Cred,
}

/// `SetDirAttr`: the coordinator's chmod/chown of a directory.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SetDirAttrCall {
    pub set: MetaRequest,
}

/// `TierRead`: a range of a tiered version, read through by the node.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct TierReadCall {
    pub tier: crate::TierRef,
    pub start: u64,
    pub end: u64,
    /// A client's leave to read the copy ([`crate::capability::tier_copy`]).
    pub grant: Option<crate::capability::ChunkGrant>,
}

/// `Raft`: one openraft message (append, vote, snapshot chunk) to one group's replica, encoded
/// by the MNode crate (the transport does not look inside).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RaftCall {
    pub group: u32,
    /// (Bytes encode as a Vec<u8> does, without a call per byte.)
    pub body: Bytes,
}

pub(super) fn encode<T: Serialize>(value: &T) -> Bytes {
    postcard::to_extend(value, vec![WIRE_VERSION])
        .expect("postcard encodes every wire type (no maps of unknown length)")
        .into()
}

pub(super) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    match body.split_first() {
        None => Err(WireError::Empty),
        Some((&WIRE_VERSION, rest)) => {
            postcard::from_bytes(rest).map_err(|e| WireError::Decode(e.to_string()))
        }
        Some((&v, _)) => Err(WireError::Version(v)),
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use saker_namespace::{Exception, ExceptionTable};

    use super::*;
    use crate::attr::{Attr, ChunkRef, FileKind, Layout, ObjectMeta};
    use crate::chunk::{ChunkReply, ChunkRequest, ChunkWireError};
    use crate::meta::{MetaResponse, NewObject, ObjectView, Want};
    use crate::{ClusterMap, Endpoints, MetaError};

    fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: T) {
        let body = encode(&v);
        assert_eq!(body[0], WIRE_VERSION);
        assert_eq!(decode::<T>(&body).unwrap(), v);
    }

    fn attr() -> Attr {
        Attr {
            id: 42,
            kind: FileKind::File,
            mode: 0o644,
            uid: 1,
            gid: 2,
            nlink: 1,
            size: 5,
            atime_ns: -1,
            mtime_ns: 1_700_000_000_000_000_000,
            ctime_ns: 3,
            etag: "abc".into(),
            implicit: false,
            children: 0,
            layout: Layout::Chunks(vec![ChunkRef {
                id: u128::MAX,
                len: 5,
                crc32c: 7,
            }]),
            parts: vec![],
            s3_mtime_ns: 9,
            sealed: false,
        }
    }

    #[test]
    fn requests_replies_and_errors_round_trip() {
        round_trip(MetaRequest::PutObject {
            path: vec!["b".into(), "dir".into(), "ключ".into()],
            obj: NewObject {
                size: 5,
                etag: "e".into(),
                inline: Some(Bytes::from_static(b"hello")),
                meta: ObjectMeta {
                    content_type: Some("text/plain".into()),
                    user: vec![("k".into(), "v".into())],
                    ..Default::default()
                },
                tags: vec![("t".into(), "1".into())],
                ..Default::default()
            },
            cond: None,
            versioning: Default::default(),
        });
        round_trip(MetaRequest::Lookup {
            path: vec!["b".into()],
            want: Want::OBJECT,
        });
        round_trip::<Result<MetaResponse, MetaError>>(Ok(MetaResponse::Object(Box::new(
            ObjectView {
                attr: attr(),
                meta: Some(ObjectMeta::default()),
                data: Some(Bytes::from_static(b"hello")),
                tags: None,
                version_id: None,
                lock: None,
                acl: Some("{}".into()),
                grants: vec![(7, crate::capability::ChunkGrant::sign(7, 1))],
            },
        ))));
        round_trip::<Result<MetaResponse, MetaError>>(Err(MetaError::MissingParent { depth: 2 }));
        round_trip::<Result<(), MetaError>>(Err(MetaError::NotEmpty));
        let mut exceptions = ExceptionTable::new();
        exceptions.set("train", Exception::PathWalk);
        round_trip(MetaReply {
            routing_version: 7,
            result: Ok(MetaResponse::Exceptions(exceptions.clone())),
        });
        round_trip(ClusterMap {
            version: 3,
            groups: vec![1, 2],
            vnodes: 64,
            exceptions,
            endpoints: Endpoints {
                mnodes: [(1, vec!["127.0.0.1:9911".to_string()])].into(),
                coordinator: Some("127.0.0.1:9910".into()),
                chunkstores: vec!["127.0.0.1:9914".into()],
                chunk_replicas: 3,
            },
        });
        round_trip::<Result<ChunkReply, ChunkWireError>>(Ok(ChunkReply::Data(Bytes::from_static(
            b"chunk bytes",
        ))));
        round_trip::<Result<ChunkReply, ChunkWireError>>(Err(ChunkWireError::Corrupt {
            id: 7,
            detail: "crc".into(),
        }));
        round_trip(ChunkRequest::Put {
            id: u128::MAX,
            data: Bytes::from_static(b"x"),
        });
    }

    #[test]
    fn other_versions_and_garbage_are_rejected() {
        let mut body = encode(&RemoveCond::Empty).to_vec();
        assert_eq!(decode::<RemoveCond>(&body), Ok(RemoveCond::Empty));
        body[0] = WIRE_VERSION + 1;
        assert_eq!(
            decode::<RemoveCond>(&body),
            Err(WireError::Version(WIRE_VERSION + 1))
        );
        assert_eq!(decode::<RemoveCond>(&[]), Err(WireError::Empty));
        assert!(matches!(
            decode::<RemoveCond>(&[WIRE_VERSION, 200]),
            Err(WireError::Decode(_))
        ));
    }

    /// Bodies of every call and reply type, from arbitrary bytes (with and without the
    /// version byte): decoding never panics, a request that decodes is served only if
    /// `validate` accepts it, and then every path component it carries is a valid name, and
    /// what decodes encodes back to the same value.
    mod arbitrary {
        use proptest::prelude::*;

        use super::*;
        use crate::chunk::{ChunkReply, ChunkRequest};

        fn bodies(raw: &[u8]) -> [Vec<u8>; 2] {
            let mut versioned = vec![WIRE_VERSION];
            versioned.extend_from_slice(raw);
            [raw.to_vec(), versioned]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn arbitrary_bodies_never_panic_and_what_decodes_is_checked(
                raw in prop::collection::vec(any::<u8>(), 0..256),
            ) {
                for body in bodies(&raw) {
                    let _ = decode::<MetaReply>(&body);
                    let _ = decode::<ChunkRequest>(&body);
                    let _ = decode::<ChunkReply>(&body);
                    let _ = decode::<RaftCall>(&body);
                    let _ = decode::<RenameCall>(&body);
                    let _ = decode::<LinkCall>(&body);
                    let _ = decode::<RemoveDirCall>(&body);
                    let _ = decode::<TierReadCall>(&body);
                    let _ = decode::<crate::ClusterMap>(&body);
                    if let Ok(call) = decode::<MetaCall>(&body) {
                        let again = decode::<MetaCall>(&encode(&call)).unwrap();
                        prop_assert_eq!(format!("{again:?}"), format!("{call:?}"));
                        if call.req.validate().is_ok() {
                            let paths = call.req.path().into_iter().chain(call.req.written_paths());
                            for path in paths {
                                for c in path {
                                    prop_assert!(saker_namespace::Name::check(c).is_ok(), "{c:?}");
                                }
                            }
                        }
                    }
                }
            }
        }

        /// A length prefix far beyond the body is an error, not an allocation.
        #[test]
        fn a_huge_length_prefix_is_refused_without_allocating_it() {
            // RaftCall { group: 1, body: <u64::MAX bytes> } with 3 bytes of body.
            let mut forged = vec![WIRE_VERSION, 1];
            forged.extend_from_slice(&[0xff; 9]);
            forged.extend_from_slice(&[0x01, 7, 7, 7]);
            assert!(matches!(
                decode::<RaftCall>(&forged),
                Err(WireError::Decode(_))
            ));
            // And a string of a path claiming 2^32 bytes.
            let call = MetaCall {
                group: 1,
                tag: ClientTag { client: 1, seq: 1 },
                req: MetaRequest::Lookup {
                    path: vec!["abc".into()],
                    want: crate::Want::ATTR,
                },
            };
            let body = encode(&call).to_vec();
            let at = body
                .windows(4)
                .position(|w| w == [3, b'a', b'b', b'c'])
                .unwrap();
            let mut forged = body[..at].to_vec();
            forged.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10]);
            forged.extend_from_slice(&body[at + 1..]);
            assert!(matches!(
                decode::<MetaCall>(&forged),
                Err(WireError::Decode(_))
            ));
        }
    }
}
