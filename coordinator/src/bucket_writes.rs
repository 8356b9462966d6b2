//! Buckets' write settings in every group (versioning, Object Lock, default retention,
//! default encryption): after a setting's record changed in group 1, [`publish`] has group 1
//! seal the bucket's records under its next settings version and installs what was sealed
//! in every other group, each through its own raft log, before the change is answered.
//!
//! The protocol needs no state of its own, so whoever changed the record runs it (a gateway,
//! the one writer of bucket settings) rather than the active coordinator: group 1's executor
//! orders seals, and installs only ever raise a group's copy. A group that does not take an
//! install fails the change (a gateway answers 503, and the S3 client repeats it, which
//! seals and installs again); until then that group applies the bucket's writes under the
//! previous settings, and refuses a gateway's write decided under the new ones after
//! catching its copy up from group 1. The coordinator installs group 1's copies everywhere
//! when it starts ([`NamespaceCoordinator::resolve_bucket_writes`]), and seals the buckets
//! whose settings predate seals.

use std::collections::BTreeSet;

use futures::future::join_all;
use saker_namespace::GroupId;
use saker_rpc::{
    MetaError, MetaRequest, MetaResponse, MetaService, SealedWrites, SettingsRequest, SEALED_RECORD,
};

use crate::calls::tag;
use crate::namespace::{Groups, NamespaceCoordinator};

/// The group that seals: the cluster's first.
fn sealer(groups: &Groups) -> Result<(GroupId, &dyn MetaService), MetaError> {
    groups
        .iter()
        .next()
        .map(|(g, s)| (*g, s.as_ref()))
        .ok_or_else(|| MetaError::Internal("a cluster without groups".into()))
}

fn sealed_of(answer: MetaResponse) -> Result<SealedWrites, MetaError> {
    match answer {
        MetaResponse::Sealed(s) => Ok(s),
        other => Err(MetaError::Internal(format!(
            "bucket settings answered {other:?}"
        ))),
    }
}

/// Seals `bucket`'s write settings as group 1's records have them and installs them in every
/// other group; answers what was sealed.
pub async fn publish(groups: &Groups, bucket: &str) -> Result<SealedWrites, MetaError> {
    let (first, service) = sealer(groups)?;
    let seal = SettingsRequest::Seal {
        bucket: bucket.to_string(),
    };
    let sealed = sealed_of(
        service
            .call(tag(), MetaRequest::BucketSettings(seal))
            .await?,
    )?;
    install(groups, first, bucket, &sealed).await?;
    Ok(sealed)
}

/// Installs `sealed` in every group but `except`; all must take it.
async fn install(
    groups: &Groups,
    except: GroupId,
    bucket: &str,
    sealed: &SealedWrites,
) -> Result<(), MetaError> {
    let calls = groups.iter().filter(|(g, _)| **g != except).map(|(g, s)| {
        let req = SettingsRequest::Install {
            bucket: bucket.to_string(),
            sealed: sealed.clone(),
        };
        async move { (*g, s.call(tag(), MetaRequest::BucketSettings(req)).await) }
    });
    for (g, result) in join_all(calls).await {
        if let Err(e) = result {
            tracing::warn!(group = g, error = %e, "bucket settings not installed");
            return Err(MetaError::Unavailable(format!(
                "group {g} did not take the bucket's settings: {e}"
            )));
        }
    }
    Ok(())
}

/// What group 1's records say of buckets' settings: the sealed settings of every bucket
/// that has them, and the buckets with write settings but no seal yet (set before seals
/// existed).
pub(crate) fn sealed_records(
    records: &[(String, Vec<u8>)],
) -> (Vec<(String, SealedWrites)>, BTreeSet<String>) {
    let mut sealed = Vec::new();
    let mut unsealed = BTreeSet::new();
    let mut has_seal = BTreeSet::new();
    for (key, value) in records {
        let Some((bucket, name)) = key
            .strip_prefix("buckets/")
            .and_then(|rest| rest.split_once('/'))
        else {
            continue;
        };
        match name {
            SEALED_RECORD => match serde_json::from_slice::<SealedWrites>(value) {
                Ok(s) => {
                    has_seal.insert(bucket.to_string());
                    sealed.push((bucket.to_string(), s));
                }
                // Sealed anew below, from the records.
                Err(e) => tracing::warn!(bucket, error = %e, "sealed bucket settings unreadable"),
            },
            "versioning" | "object-lock" | "encryption" => {
                unsealed.insert(bucket.to_string());
            }
            _ => {}
        }
    }
    unsealed.retain(|b| !has_seal.contains(b));
    (sealed, unsealed)
}

impl NamespaceCoordinator {
    /// Installs group 1's copy of every bucket's write settings in every group (a group that
    /// missed an install while it was down gets it), sealing first the buckets whose settings
    /// were never sealed.
    pub async fn resolve_bucket_writes(&self) -> Result<(), MetaError> {
        let (first, service) = sealer(&self.groups)?;
        let scan = MetaRequest::CoordScan {
            prefix: "buckets/".into(),
        };
        let records = match service.call(tag(), scan).await? {
            MetaResponse::Records(r) => r,
            other => return Err(MetaError::Internal(format!("CoordScan answered {other:?}"))),
        };
        let (sealed, unsealed) = sealed_records(&records);
        for bucket in unsealed {
            publish(&self.groups, &bucket).await?;
        }
        for (bucket, s) in sealed {
            install(&self.groups, first, &bucket, &s).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use saker_rpc::{BucketWrites, Versioning};

    #[test]
    fn group_1_s_records_name_what_is_sealed_and_what_is_not() {
        let s = SealedWrites {
            version: 3,
            writes: BucketWrites {
                versioning: Versioning::Enabled,
                ..Default::default()
            },
        };
        let json = serde_json::to_vec(&s).unwrap();
        let records = vec![
            ("buckets/new/versioning".to_string(), b"Enabled".to_vec()),
            ("buckets/old/policy".to_string(), b"{}".to_vec()),
            ("buckets/sealed/versioning".to_string(), b"Enabled".to_vec()),
            ("buckets/sealed/writes".to_string(), json),
            ("buckets/torn/writes".to_string(), b"{".to_vec()),
            ("buckets/torn/encryption".to_string(), b"AES256".to_vec()),
        ];
        let (sealed, unsealed) = sealed_records(&records);
        assert_eq!(sealed, vec![("sealed".to_string(), s)]);
        assert_eq!(
            unsealed.into_iter().collect::<Vec<_>>(),
            vec!["new".to_string(), "torn".to_string()]
        );
    }
}
