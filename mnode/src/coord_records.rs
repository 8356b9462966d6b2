//! The coordinator's replicated state: records it keeps in group 1's state machine (its
//! journals, the exception table, access keys), written through raft like any mutation, so
//! they survive the loss of a node and a new coordinator finds them at the new leader.

use saker_rpc::{MetaError, MetaResponse};

use crate::engine::Engine;
use crate::keys::{Keys, COORD};
use crate::leadership::Leadership;
use crate::store::{prefix_end, MetaStore, WriteBatch};
use crate::tree::{for_each_entry, StoreView};

/// Longest record key a peer may send.
const MAX_KEY: usize = 512;
/// Largest record (an exception table of many names is the biggest).
const MAX_VALUE: usize = 4 << 20;

fn key_of(keys: &Keys, key: &str) -> Vec<u8> {
    let mut k = keys.table(COORD);
    k.extend_from_slice(key.as_bytes());
    k
}

/// Sets (or, with `None`, drops) record `key`, if `term` is 0 or the term this replica leads.
pub(crate) async fn put(
    engine: &Engine,
    keys: &Keys,
    leadership: &Leadership,
    term: u64,
    key: &str,
    value: Option<Vec<u8>>,
) -> Result<MetaResponse, MetaError> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(MetaError::Invalid(format!(
            "a coordinator record key has 1 to {MAX_KEY} bytes"
        )));
    }
    if value.as_ref().is_some_and(|v| v.len() > MAX_VALUE) {
        return Err(MetaError::Invalid(format!(
            "a coordinator record has at most {MAX_VALUE} bytes"
        )));
    }
    if term != 0 && term != leadership.ready_term() {
        return Err(MetaError::Fenced { term });
    }
    let mut mutations = WriteBatch::default();
    match value {
        Some(v) => mutations.put(key_of(keys, key), v),
        None => mutations.delete(key_of(keys, key)),
    }
    engine
        .write_control(keys.group, mutations, || leadership.refusal())
        .await?;
    Ok(MetaResponse::Done)
}

/// The records whose key starts with `prefix`, in key order.
pub(crate) fn scan(
    store: &dyn MetaStore,
    keys: &Keys,
    prefix: &str,
) -> Result<MetaResponse, MetaError> {
    let start = key_of(keys, prefix);
    let end = prefix_end(&start).unwrap_or_else(|| keys.table_end(COORD));
    let strip = keys.table(COORD).len();
    let mut out = Vec::new();
    for_each_entry(&StoreView(store), &start, &end, |k, v| {
        let name = String::from_utf8(k[strip..].to_vec())
            .map_err(|_| MetaError::Internal("a coordinator record key is not UTF-8".into()))?;
        out.push((name, v.to_vec()));
        Ok(true)
    })?;
    Ok(MetaResponse::Records(out))
}

/// The versioning and Object Lock records of `bucket` (`buckets/<bucket>/versioning` and
/// `…/object-lock`, the gateway's bucket settings), for a mount: `Records` with those it has.
pub(crate) fn bucket_versioning(
    store: &dyn MetaStore,
    keys: &Keys,
    bucket: &str,
) -> Result<MetaResponse, MetaError> {
    let prefix = format!("buckets/{bucket}/");
    let wanted = [
        format!("{prefix}versioning"),
        format!("{prefix}object-lock"),
        format!("{prefix}encryption"),
    ];
    match scan(store, keys, &prefix)? {
        MetaResponse::Records(r) => Ok(MetaResponse::Records(
            r.into_iter().filter(|(k, _)| wanted.contains(k)).collect(),
        )),
        other => Ok(other),
    }
}
