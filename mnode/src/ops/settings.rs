//! Buckets' write settings in the batch: each group keeps its copy of every bucket's write
//! settings ([`BUCKET_WRITES`], raft state like everything else, in snapshots and backups),
//! group 1 seals them under the bucket's next settings version, and every write that depends
//! on them is decided here, in the batch that applies it, from the copy this batch sees:
//!
//! - a write the MNode decides alone (a mount's create, commit, unlink, rename, truncation)
//!   gets its versioning and default retention filled in from the copy, whatever its sender
//!   said;
//! - a write a gateway decided (S3 PUT, DELETE, CompleteMultipartUpload: its version id, its
//!   lock, its encryption were chosen from the gateway's copy) carries the settings version it
//!   was decided under ([`saker_rpc::Decided`]) and is refused, nothing written, when the copy
//!   has another one ([`MetaError::SettingsChanged`]).
//!
//! Since the executor evaluates ops one after the other, an install of new settings is
//! ordered with the writes of the same group: each write is applied under the settings it
//! was decided under, or not at all.

use std::borrow::Cow;

use saker_rpc::{
    sealed_record, BucketWrites, MetaError, MetaRequest, MetaResponse, RenameVersioning,
    SealedWrites, Versioning,
};

use super::{Ctx, OpResult};
use crate::keys::{Keys, COORD};
use crate::records::{decode_v2, encode_as, RECORD_V2};
use crate::store::prefix_end;
use crate::tree::{internal, View};
use crate::txn::Txn;

#[cfg(doc)]
use crate::keys::BUCKET_WRITES;

/// The encodings of a group's copy before it had its feed settings (record version 1).
mod v1 {
    use saker_rpc::{LockConfig, Versioning};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    pub struct BucketWrites {
        pub versioning: Versioning,
        pub object_lock: Option<LockConfig>,
        pub encryption: Option<String>,
    }

    #[derive(Serialize, Deserialize)]
    pub struct SealedWrites {
        pub version: u64,
        pub writes: BucketWrites,
    }

    impl From<SealedWrites> for saker_rpc::SealedWrites {
        fn from(old: SealedWrites) -> Self {
            let w = old.writes;
            saker_rpc::SealedWrites {
                version: old.version,
                writes: saker_rpc::BucketWrites {
                    versioning: w.versioning,
                    object_lock: w.object_lock,
                    encryption: w.encryption,
                    feed: None,
                },
            }
        }
    }
}

/// A group's copy as stored (record version 2: with the feed settings).
fn encode_copy(sealed: &SealedWrites) -> Vec<u8> {
    encode_as(sealed, RECORD_V2)
}

/// This group's copy of `bucket`'s write settings (the defaults, version 0, if it has none).
pub(crate) fn copy_of<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
) -> Result<SealedWrites, MetaError> {
    match v.get(&keys.bucket_writes(bucket)).map_err(internal)? {
        Some(b) => decode_v2::<SealedWrites, v1::SealedWrites>(&b).map_err(internal),
        None => Ok(SealedWrites::default()),
    }
}

/// The copy of the settings of the bucket of `path` (none for a path outside buckets).
pub(crate) fn copy_for<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    path: &[String],
) -> Result<SealedWrites, MetaError> {
    match path.first() {
        Some(bucket) => copy_of(v, keys, bucket),
        None => Ok(SealedWrites::default()),
    }
}

/// Key of coordinator record `name` (group 1's table of them).
fn coord_key(keys: &Keys, name: &str) -> Vec<u8> {
    let mut k = keys.table(COORD);
    k.extend_from_slice(name.as_bytes());
    k
}

/// `Seal`, at group 1: `bucket`'s records as they stand, under its next settings version, in
/// this group's copy and in the record gateways read, in this one batch.
pub(super) fn seal(txn: &mut Txn<'_>, ctx: &Ctx<'_>, bucket: &str) -> OpResult {
    if ctx.keys.group != 1 {
        return Err(MetaError::Invalid(
            "buckets' settings are sealed in group 1".into(),
        ));
    }
    let prefix = format!("buckets/{bucket}/");
    let start = coord_key(ctx.keys, &prefix);
    let end = prefix_end(&start).unwrap_or_else(|| ctx.keys.table_end(COORD));
    let strip = ctx.keys.table(COORD).len();
    // A bucket has a dozen records at most.
    let records: Vec<(String, Vec<u8>)> = txn
        .scan(&start, &end, 64)
        .map_err(internal)?
        .into_iter()
        .map(|(k, v)| (String::from_utf8_lossy(&k[strip..]).into_owned(), v))
        .collect();
    let writes = BucketWrites::from_records(&records)?;
    let current = copy_of(txn, ctx.keys, bucket)?;
    if current.writes.feed.is_none() != writes.feed.is_none() {
        super::feed::clear(txn, ctx, bucket)?;
    }
    let version = current.version + 1;
    let sealed = SealedWrites { version, writes };
    let json = serde_json::to_vec(&sealed).map_err(|e| MetaError::Internal(e.to_string()))?;
    txn.put(ctx.keys.bucket_writes(bucket), encode_copy(&sealed));
    txn.put(coord_key(ctx.keys, &sealed_record(bucket)), json);
    Ok(MetaResponse::Sealed(sealed))
}

/// `Install`: keeps `sealed` unless this group has a newer copy; answers the copy it has.
pub(super) fn install(
    txn: &mut Txn<'_>,
    ctx: &Ctx<'_>,
    bucket: &str,
    sealed: &SealedWrites,
) -> OpResult {
    let current = copy_of(txn, ctx.keys, bucket)?;
    if sealed.version <= current.version {
        return Ok(MetaResponse::Sealed(current));
    }
    if current.writes.feed.is_none() != sealed.writes.feed.is_none() {
        super::feed::clear(txn, ctx, bucket)?;
    }
    txn.put(ctx.keys.bucket_writes(bucket), encode_copy(sealed));
    Ok(MetaResponse::Sealed(sealed.clone()))
}

/// The copies of buckets' settings a decision read, by bucket (the feed needs them too,
/// [`super::feed`], and reads no other).
pub(crate) type Copies = Vec<(String, SealedWrites)>;

/// `req` as it is to be applied under this batch's copy of its buckets' settings: what the
/// MNode decides filled in, a gateway's decision checked (module docs). Borrowed when
/// nothing changes. With it, the copies of the settings the decision read.
pub(super) fn decided<'r>(
    txn: &Txn<'_>,
    ctx: &Ctx<'_>,
    req: &'r MetaRequest,
) -> Result<(Cow<'r, MetaRequest>, Copies), MetaError> {
    let keys = ctx.keys;
    let mut copies = Copies::new();
    // Reads the copy of the bucket of `path` once per decision.
    let mut read = |path: &[String]| -> Result<SealedWrites, MetaError> {
        let Some(bucket) = path.first() else {
            return Ok(SealedWrites::default());
        };
        if let Some((_, c)) = copies.iter().find(|(b, _)| b == bucket) {
            return Ok(c.clone());
        }
        let c = copy_of(txn, keys, bucket)?;
        copies.push((bucket.clone(), c.clone()));
        Ok(c)
    };
    if let Some((path, decided)) = req.gateway_decided() {
        decided.check(read(path)?.version)?;
        return Ok((Cow::Borrowed(req), copies));
    }
    let mut owned = match req {
        MetaRequest::SetAttr {
            path,
            size: Some(0),
            ..
        } => {
            // Where versions are kept a truncation is a commit (it keeps the old bytes).
            if read(path)?.writes.versioning != Versioning::Off {
                return Err(MetaError::Invalid(
                    "in a bucket that keeps versions a truncation is a commit".into(),
                ));
            }
            return Ok((Cow::Borrowed(req), copies));
        }
        MetaRequest::CommitFile { .. }
        | MetaRequest::Create { .. }
        | MetaRequest::Unlink { .. }
        | MetaRequest::Rename { .. }
        | MetaRequest::RenameIn { .. }
        | MetaRequest::RenameOut { .. } => req.clone(),
        _ => return Ok((Cow::Borrowed(req), copies)),
    };
    match &mut owned {
        MetaRequest::CommitFile {
            path,
            versioning,
            default_lock,
            ..
        } => {
            let w = read(path)?.writes;
            *versioning = w.versioning;
            // A default retention locks versions, which only a bucket keeping them has.
            *default_lock = w
                .default_lock()
                .filter(|_| w.versioning == Versioning::Enabled)
                .cloned();
        }
        MetaRequest::Create {
            path, versioning, ..
        }
        | MetaRequest::Unlink {
            path, versioning, ..
        } => *versioning = read(path)?.writes.versioning,
        MetaRequest::RenameOut {
            from, versioning, ..
        } => *versioning = read(from)?.writes.versioning,
        MetaRequest::Rename {
            from,
            to,
            versioning,
            ..
        }
        | MetaRequest::RenameIn {
            from,
            to,
            versioning,
            ..
        } => {
            let (from, to) = (read(from)?.writes, read(to)?.writes);
            *versioning = RenameVersioning {
                from: from.versioning,
                to: to.versioning,
                feed: from.feed.is_some() || to.feed.is_some(),
            }
        }
        _ => {}
    }
    Ok((Cow::Owned(owned), copies))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemStore, MetaStore, WriteBatch};
    use crate::tree::Resolver;
    use saker_rpc::{Cred, Decided, Layout, LockConfig, NewObject};

    fn with_ctx<T>(group: u32, f: impl FnOnce(&mut Txn<'_>, &Ctx<'_>) -> T) -> T {
        let keys = Keys::new(group);
        let store = MemStore::new();
        let router = saker_namespace::SharedRouter::new(saker_namespace::Router::single(group));
        let replica = parking_lot::Mutex::new(saker_namespace::DentryReplica::default());
        let frozen = crate::frozen::FrozenDirs::default();
        let ns = Resolver::new(&keys, router.get(), &replica, &frozen, true);
        let ctx = Ctx {
            keys: &keys,
            ns: &ns,
            now_ns: 1,
            gc_grace_ns: 0,
            next_id: 100,
            changes: Vec::new(),
            reap: None,
            reaped: false,
            fed: false,
        };
        let mut txn = Txn::new(&store);
        f(&mut txn, &ctx)
    }

    fn record(txn: &mut Txn<'_>, keys: &Keys, name: &str, value: &[u8]) {
        txn.put(coord_key(keys, name), value.to_vec());
    }

    fn put(path: &str, versioning: Decided) -> MetaRequest {
        MetaRequest::PutObject {
            path: path.split('/').map(String::from).collect(),
            obj: NewObject::default(),
            cond: None,
            versioning,
        }
    }

    fn sealed(r: OpResult) -> SealedWrites {
        match r {
            Ok(MetaResponse::Sealed(s)) => s,
            other => panic!("answered {other:?}"),
        }
    }

    #[test]
    fn group_1_seals_the_records_under_growing_versions() {
        with_ctx(1, |txn, ctx| {
            let first = sealed(seal(txn, ctx, "logs"));
            assert_eq!(first.version, 1);
            assert_eq!(first.writes, BucketWrites::default());
            record(txn, ctx.keys, "buckets/logs/versioning", b"Enabled");
            record(txn, ctx.keys, "buckets/logs/encryption", b"AES256");
            // Another bucket's records are not this one's.
            record(txn, ctx.keys, "buckets/logs2/versioning", b"Suspended");
            let second = sealed(seal(txn, ctx, "logs"));
            assert_eq!(second.version, 2);
            assert_eq!(second.writes.versioning, Versioning::Enabled);
            assert_eq!(second.writes.encryption.as_deref(), Some("AES256"));
            assert_eq!(copy_of(txn, ctx.keys, "logs").unwrap(), second);
            // The record gateways read says the same.
            let json = txn
                .get(&coord_key(ctx.keys, &sealed_record("logs")))
                .unwrap()
                .unwrap();
            assert_eq!(
                serde_json::from_slice::<SealedWrites>(&json).unwrap(),
                second
            );
            // A bucket deleted (its records gone) goes on from its last version.
            txn.delete(coord_key(ctx.keys, "buckets/logs/versioning"));
            txn.delete(coord_key(ctx.keys, "buckets/logs/encryption"));
            let third = sealed(seal(txn, ctx, "logs"));
            assert_eq!((third.version, third.writes), (3, BucketWrites::default()));
            // A record that does not parse is refused, not sealed.
            record(txn, ctx.keys, "buckets/logs/object-lock", b"{");
            assert!(seal(txn, ctx, "logs").is_err());
        });
        with_ctx(2, |txn, ctx| {
            assert!(seal(txn, ctx, "logs").is_err(), "only group 1 seals");
        });
    }

    #[test]
    fn a_group_keeps_the_newest_copy_it_is_given() {
        with_ctx(3, |txn, ctx| {
            let v = |version, versioning| SealedWrites {
                version,
                writes: BucketWrites {
                    versioning,
                    ..Default::default()
                },
            };
            assert_eq!(
                sealed(install(txn, ctx, "logs", &v(2, Versioning::Enabled))).version,
                2
            );
            // Late or repeated installs change nothing.
            let kept = sealed(install(txn, ctx, "logs", &v(1, Versioning::Suspended)));
            assert_eq!(kept, v(2, Versioning::Enabled));
            assert_eq!(
                sealed(install(txn, ctx, "logs", &v(2, Versioning::Off))),
                kept
            );
            assert_eq!(copy_of(txn, ctx.keys, "logs").unwrap(), kept);
            assert_eq!(copy_of(txn, ctx.keys, "other").unwrap().version, 0);
        });
    }

    #[test]
    fn a_gateway_s_write_applies_only_under_the_group_s_version() {
        with_ctx(2, |txn, ctx| {
            let enabled = SealedWrites {
                version: 4,
                writes: BucketWrites {
                    versioning: Versioning::Enabled,
                    ..Default::default()
                },
            };
            // A bucket never set: version 0.
            let r = put("logs/k", Decided::under(Versioning::Off, 0));
            assert!(matches!(
                decided(txn, ctx, &r),
                Ok((Cow::Borrowed(_), copies)) if copies.len() == 1
            ));
            install(txn, ctx, "logs", &enabled).unwrap();
            assert_eq!(
                decided(txn, ctx, &r).err(),
                Some(MetaError::SettingsChanged {
                    decided: 0,
                    current: 4
                })
            );
            let now = put("logs/k", Decided::under(Versioning::Enabled, 4));
            assert!(decided(txn, ctx, &now).is_ok());
            // Another bucket's version is its own.
            assert!(decided(
                txn,
                ctx,
                &put("other/k", Decided::under(Versioning::Off, 0))
            )
            .is_ok());
            let delete = MetaRequest::DeleteObject {
                path: vec!["logs".into(), "k".into()],
                dir_marker: false,
                cond: None,
                versioning: Decided::under(Versioning::Enabled, 5),
                version_id: None,
                bypass_governance: false,
                lifecycle: false,
            };
            assert!(
                decided(txn, ctx, &delete).is_err(),
                "a version ahead is refused too"
            );
        });
    }

    #[test]
    fn the_mnode_decides_a_mount_s_writes_from_its_copy() {
        with_ctx(2, |txn, ctx| {
            let lock = br#"{"default":{"mode":"Governance","days":1,"years":null}}"#;
            let copy = SealedWrites {
                version: 1,
                writes: BucketWrites {
                    versioning: Versioning::Enabled,
                    object_lock: Some(LockConfig::parse(lock).unwrap()),
                    encryption: None,
                    feed: None,
                },
            };
            install(txn, ctx, "logs", &copy).unwrap();
            let path = vec!["logs".to_string(), "f".to_string()];
            let commit = MetaRequest::CommitFile {
                path: path.clone(),
                id: 7,
                size: 0,
                etag: String::new(),
                layout: Layout::Inline,
                inline: None,
                cred: Cred::default(),
                receipt: None,
                versioning: Versioning::Off,
                replaces: None,
                default_lock: None,
                sse: None,
            };
            match decided(txn, ctx, &commit).unwrap().0.as_ref() {
                MetaRequest::CommitFile {
                    versioning,
                    default_lock,
                    ..
                } => {
                    assert_eq!(*versioning, Versioning::Enabled);
                    assert_eq!(default_lock.as_ref(), copy.writes.default_lock());
                }
                other => panic!("{other:?}"),
            }
            let unlink = MetaRequest::Unlink {
                path: path.clone(),
                cred: Cred::default(),
                versioning: Versioning::Off,
            };
            assert!(matches!(
                decided(txn, ctx, &unlink).unwrap().0.as_ref(),
                MetaRequest::Unlink {
                    versioning: Versioning::Enabled,
                    ..
                }
            ));
            let truncate = MetaRequest::truncate(path, Cred::default());
            assert!(decided(txn, ctx, &truncate).is_err());
            // Suspended: a commit keeps no lock (a null version is never locked).
            let suspended = SealedWrites {
                version: 2,
                writes: BucketWrites {
                    versioning: Versioning::Suspended,
                    ..copy.writes.clone()
                },
            };
            install(txn, ctx, "logs", &suspended).unwrap();
            match decided(txn, ctx, &commit).unwrap().0.as_ref() {
                MetaRequest::CommitFile {
                    versioning,
                    default_lock,
                    ..
                } => assert_eq!((*versioning, default_lock), (Versioning::Suspended, &None)),
                other => panic!("{other:?}"),
            }
        });
    }

    #[test]
    fn a_copy_written_before_feeds_reads_as_one_without() {
        let keys = Keys::new(2);
        let store = MemStore::new();
        let old = v1::SealedWrites {
            version: 4,
            writes: v1::BucketWrites {
                versioning: Versioning::Suspended,
                object_lock: None,
                encryption: Some("AES256".into()),
            },
        };
        let mut b = WriteBatch::default();
        b.put(keys.bucket_writes("logs"), crate::records::encode(&old));
        store.write(&b, true).unwrap();
        let copy = copy_of(&crate::tree::StoreView(&store), &keys, "logs").unwrap();
        assert_eq!(copy.version, 4);
        assert_eq!(copy.writes.versioning, Versioning::Suspended);
        assert_eq!(copy.writes.encryption.as_deref(), Some("AES256"));
        assert_eq!(copy.writes.feed, None);
    }

    #[test]
    fn copies_are_state_machine_records() {
        // Written through a batch, the copy is read back from the store (so a restarted
        // MNode, which replays or restores its state machine, has it).
        let keys = Keys::new(2);
        let store = MemStore::new();
        let copy = SealedWrites {
            version: 9,
            ..Default::default()
        };
        let mut b = WriteBatch::default();
        b.put(keys.bucket_writes("logs"), encode_copy(&copy));
        store.write(&b, true).unwrap();
        assert_eq!(
            copy_of(&crate::tree::StoreView(&store), &keys, "logs").unwrap(),
            copy
        );
        assert!(crate::keys::SM_TABLES.contains(&crate::keys::BUCKET_WRITES));
    }
}
