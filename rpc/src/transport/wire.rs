//! The body of every frame: one version byte, then postcard.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::MetaError;
use crate::meta::{ClientTag, Cred, MetaRequest, MetaResponse, RemoveCond};

/// The encoding version every body starts with. Bump it for any change to the encoding of a
/// type that crosses the wire.
pub const WIRE_VERSION: u8 = 8;

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
    pub cred: Option<Cred>,
}

/// `Link`: the coordinator's link protocol.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct LinkCall {
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub expect: Option<crate::InodeId>,
    pub cred: Option<Cred>,
}

/// `SetDirAttr`: the coordinator's chmod/chown of a directory.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SetDirAttrCall {
    pub set: MetaRequest,
}

/// `Raft`: one openraft message (append, vote, snapshot chunk) to one group's replica, encoded
/// by the MNode crate (the transport does not look inside).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RaftCall {
    pub group: u32,
    pub body: Vec<u8>,
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
}
