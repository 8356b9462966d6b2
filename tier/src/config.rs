//! Tier definitions, kept in the coordinator's replicated state (`tiers/<NAME>`, JSON), and
//! the cluster id under which a cluster's copies live in a tier's bucket (`cluster/id`), so
//! that several clusters may share one bucket.

use std::sync::Arc;

use saker_coordinator::StateStore;
use serde::{Deserialize, Serialize};

use crate::TierError;

const PREFIX: &str = "tiers/";
const CLUSTER_ID: &str = "cluster/id";

/// A remote tier: an S3 bucket at `endpoint`, under `prefix`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierConfig {
    /// `[A-Z0-9_-]+`: also the StorageClass S3 shows for objects in it.
    pub name: String,
    pub endpoint: String,
    pub bucket: String,
    #[serde(default)]
    pub prefix: String,
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
}

/// Never shows the secret (tier definitions reach logs and `tier list`).
impl std::fmt::Debug for TierConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TierConfig")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("region", &self.region)
            .finish()
    }
}

impl TierConfig {
    /// Checks what an operator gave before it is stored.
    pub fn validate(&self) -> Result<(), TierError> {
        saker_rpc::check_tier_name(&self.name).map_err(TierError::Invalid)?;
        if !(self.endpoint.starts_with("http://") || self.endpoint.starts_with("https://")) {
            return Err(TierError::Invalid(format!(
                "endpoint {:?} is not an http:// or https:// URL",
                self.endpoint
            )));
        }
        if self.bucket.is_empty() || self.bucket.len() > 63 || self.bucket.contains('/') {
            return Err(TierError::Invalid(format!("bucket {:?}", self.bucket)));
        }
        if self.prefix.len() > 512 || self.prefix.starts_with('/') {
            return Err(TierError::Invalid(format!("prefix {:?}", self.prefix)));
        }
        if self.access_key.is_empty() || self.secret_key.is_empty() {
            return Err(TierError::Invalid("an access key and a secret key".into()));
        }
        if self.region.is_empty() {
            return Err(TierError::Invalid("an empty region".into()));
        }
        Ok(())
    }

    /// Where an upload of version (`inode`, `mtime_ns`) of cluster `cluster` goes in this
    /// tier: `<prefix>/<cluster id>/<inode>/<mtime_ns>.<attempt>`. Each attempt has a key of
    /// its own, so the tier scrub, which deletes old keys nothing references, can never
    /// delete a key a retry is writing again.
    pub fn key_for(&self, cluster: &str, inode: u64, mtime_ns: i64) -> String {
        let attempt: u32 = rand::random();
        format!(
            "{}{cluster}/{inode}/{mtime_ns}.{attempt:08x}",
            self.cluster_prefix_root()
        )
    }

    /// The keys of cluster `cluster` in this tier start with this.
    pub fn cluster_prefix(&self, cluster: &str) -> String {
        format!("{}{cluster}/", self.cluster_prefix_root())
    }

    fn cluster_prefix_root(&self) -> String {
        let p = self.prefix.trim_end_matches('/');
        if p.is_empty() {
            String::new()
        } else {
            format!("{p}/")
        }
    }
}

fn state_err(e: impl std::fmt::Display) -> TierError {
    TierError::State(e.to_string())
}

/// Every tier defined, by name.
pub async fn list(state: &Arc<dyn StateStore>) -> Result<Vec<TierConfig>, TierError> {
    let mut out = Vec::new();
    for (key, value) in state.scan(PREFIX).await.map_err(state_err)? {
        let t: TierConfig =
            serde_json::from_slice(&value).map_err(|e| TierError::State(format!("{key}: {e}")))?;
        out.push(t);
    }
    Ok(out)
}

/// The tier named `name`.
pub async fn get(state: &Arc<dyn StateStore>, name: &str) -> Result<TierConfig, TierError> {
    list(state)
        .await?
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| TierError::NoSuchTier(name.to_string()))
}

/// Stores a new tier (refused if one has the name).
pub async fn add(state: &Arc<dyn StateStore>, tier: &TierConfig) -> Result<(), TierError> {
    tier.validate()?;
    if get(state, &tier.name).await.is_ok() {
        return Err(TierError::Exists(tier.name.clone()));
    }
    cluster_id(state).await?;
    let value = serde_json::to_vec(tier).map_err(state_err)?;
    state
        .put(&format!("{PREFIX}{}", tier.name), Some(value))
        .await
        .map_err(state_err)
}

/// Drops a tier's definition (the caller checked that nothing lives there).
pub async fn remove(state: &Arc<dyn StateStore>, name: &str) -> Result<(), TierError> {
    get(state, name).await?;
    state
        .put(&format!("{PREFIX}{name}"), None)
        .await
        .map_err(state_err)
}

/// The cluster's id (32 hex digits), made at the first call.
pub async fn cluster_id(state: &Arc<dyn StateStore>) -> Result<String, TierError> {
    if let Some((_, v)) = state.scan(CLUSTER_ID).await.map_err(state_err)?.first() {
        return String::from_utf8(v.clone()).map_err(state_err);
    }
    let id = hex::encode(rand::random::<[u8; 16]>());
    state
        .put(CLUSTER_ID, Some(id.clone().into_bytes()))
        .await
        .map_err(state_err)?;
    // Read back what the state holds (the first of two racing writers may have lost).
    match state.scan(CLUSTER_ID).await.map_err(state_err)?.first() {
        Some((_, v)) => String::from_utf8(v.clone()).map_err(state_err),
        None => Err(TierError::State("the cluster id was not stored".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tier(name: &str) -> TierConfig {
        TierConfig {
            name: name.into(),
            endpoint: "http://127.0.0.1:9000".into(),
            bucket: "archive".into(),
            prefix: "lake/".into(),
            access_key: "AK".into(),
            secret_key: "very-secret".into(),
            region: "us-east-1".into(),
        }
    }

    #[tokio::test]
    async fn tiers_are_stored_listed_and_removed() {
        let state: Arc<dyn StateStore> = Arc::new(saker_coordinator::MemState::default());
        add(&state, &tier("COLD")).await.unwrap();
        assert!(matches!(
            add(&state, &tier("COLD")).await,
            Err(TierError::Exists(_))
        ));
        assert!(matches!(
            add(&state, &tier("cold")).await,
            Err(TierError::Invalid(_))
        ));
        assert_eq!(get(&state, "COLD").await.unwrap(), tier("COLD"));
        let id = cluster_id(&state).await.unwrap();
        assert_eq!(id.len(), 32);
        assert_eq!(cluster_id(&state).await.unwrap(), id);
        let key = tier("COLD").key_for(&id, 7, 42);
        assert!(key.starts_with(&format!("lake/{id}/7/42.")), "{key}");
        assert_ne!(key, tier("COLD").key_for(&id, 7, 42), "one key per attempt");
        remove(&state, "COLD").await.unwrap();
        assert!(list(&state).await.unwrap().is_empty());
    }

    #[test]
    fn debug_hides_the_secret() {
        let shown = format!("{:?}", tier("COLD"));
        assert!(!shown.contains("very-secret"), "{shown}");
    }
}
