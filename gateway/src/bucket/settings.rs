//! Per-bucket settings: the bucket's owner (an account; unset: the root key's), the bucket policy, the bucket ACL, Object Ownership, the Public Access
//! Block, the bucket's tags, its CORS rules, whether it keeps object versions, its Object
//! Lock configuration, its lifecycle rules, its default encryption and its notification
//! configuration.
//!
//! Each is one record of the coordinator's replicated state (group 1's state machine),
//! `buckets/<bucket>/<setting>`, so every gateway of a cluster sees the same settings and a
//! backup carries them; one record per setting, so two gateways changing two settings of one
//! bucket never overwrite each other. Each gateway keeps a parsed copy, loaded before the
//! first request that needs it (a policy is never skipped for not being loaded yet) and
//! refreshed every [`REFRESH`]; its own changes are in its copy at once. Another gateway's
//! change is seen within [`REFRESH`] (S3 too documents policy changes as eventually
//! consistent).
//!
//! The write settings (versioning, Object Lock, default encryption, and whether the bucket
//! keeps a change feed, which its notification configuration decides) are kept differently:
//! a change of one is sealed by group 1 under the bucket's next settings version and
//! installed in every MNode group before it is answered ([`saker_coordinator::bucket_writes`]),
//! and this copy takes them from what was sealed (the `writes` record), never from the
//! records alone, so that its settings version ([`Bucket::settings_version`]) names exactly
//! the settings a write was decided under. A write decided under another version than the
//! one its group has is refused and decided again ([`BucketSettings::reload`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use saker_coordinator::{Groups, JournalError, StateStore};
use saker_policy::{Acl, ObjectOwnership, Policy, PublicAccessBlock};
use saker_rpc::{SealedWrites, SEALED_RECORD};

/// How often a gateway refreshes its copy.
pub const REFRESH: Duration = Duration::from_secs(2);
/// Record key prefix of bucket settings in the coordinator's state.
const PREFIX: &str = "buckets/";

/// One setting of a bucket: its record name under `buckets/<bucket>/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    Owner,
    Policy,
    Acl,
    Ownership,
    PublicAccessBlock,
    Tagging,
    Cors,
    Versioning,
    ObjectLock,
    Lifecycle,
    Encryption,
    StorageClass,
    Notification,
}

impl Setting {
    const ALL: [Setting; 13] = [
        Setting::Owner,
        Setting::Policy,
        Setting::Acl,
        Setting::Ownership,
        Setting::PublicAccessBlock,
        Setting::Tagging,
        Setting::Cors,
        Setting::Versioning,
        Setting::ObjectLock,
        Setting::Lifecycle,
        Setting::Encryption,
        Setting::StorageClass,
        Setting::Notification,
    ];

    fn name(self) -> &'static str {
        match self {
            Setting::Owner => "owner",
            Setting::Policy => "policy",
            Setting::Acl => "acl",
            Setting::Ownership => "ownership",
            Setting::PublicAccessBlock => "public-access-block",
            Setting::Tagging => "tagging",
            Setting::Cors => "cors",
            Setting::Versioning => "versioning",
            Setting::ObjectLock => "object-lock",
            Setting::Lifecycle => "lifecycle",
            Setting::Encryption => "encryption",
            Setting::StorageClass => "storage-class",
            Setting::Notification => saker_rpc::NOTIFICATION_RECORD,
        }
    }

    fn record(self, bucket: &str) -> String {
        format!("{PREFIX}{bucket}/{}", self.name())
    }

    /// Whether writes into the bucket are decided by it (so it reaches every MNode group).
    fn decides_writes(self) -> bool {
        matches!(
            self,
            Setting::Versioning | Setting::ObjectLock | Setting::Encryption | Setting::Notification
        )
    }

    /// Whether this copy takes it only from what group 1 sealed (the notification rules are
    /// not part of the seal, only whether a feed is kept: they are taken from the record).
    fn kept_from_seal(self) -> bool {
        self.decides_writes() && self != Setting::Notification
    }
}

/// What a bucket has set (unset: S3's defaults: no policy, the private ACL, ownership
/// `BucketOwnerEnforced`, no public access block).
#[derive(Clone, Debug, Default)]
pub struct Bucket {
    /// The account that created the bucket, when it is not the root key's.
    pub owner: Option<String>,
    /// The policy as it was put, and parsed.
    pub policy: Option<(String, Policy)>,
    pub acl: Option<Acl>,
    pub ownership: Option<ObjectOwnership>,
    pub public_access_block: Option<PublicAccessBlock>,
    /// The bucket's tag set (PutBucketTagging), in the order it was put.
    pub tags: Option<Vec<(String, String)>>,
    /// CORS rules (PutBucketCors).
    pub cors: Option<Vec<crate::bucket::cors_rules::Rule>>,
    /// Whether the bucket keeps versions (`Off` until PutBucketVersioning).
    pub versioning: saker_rpc::Versioning,
    /// The Object Lock configuration, once Object Lock is enabled (it stays enabled).
    pub object_lock: Option<saker_rpc::LockConfig>,
    /// Lifecycle rules (PutBucketLifecycleConfiguration).
    pub lifecycle: Option<Arc<Vec<crate::bucket::lifecycle::rules::Rule>>>,
    /// The default encryption of new objects (PutBucketEncryption): `AES256`, SSE-S3.
    pub encryption: Option<String>,
    /// Storage classes by prefix (`saker admin bucket storage-class`).
    pub storage_class: Option<Arc<Vec<crate::bucket::class_rules::ClassRule>>>,
    /// Where the bucket's events go (PutBucketNotificationConfiguration).
    pub notification: Option<Arc<saker_notify::NotificationConfig>>,
    /// The settings version `versioning`, `object_lock` and `encryption` were sealed under
    /// (0: never sealed).
    pub settings_version: u64,
}

impl Bucket {
    fn set(&mut self, setting: Setting, value: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(value).map_err(|e| e.to_string())?;
        match setting {
            Setting::Owner => self.owner = Some(text.to_string()),
            Setting::Policy => {
                let p = Policy::parse_bucket(text).map_err(|e| e.to_string())?;
                self.policy = Some((text.to_string(), p));
            }
            Setting::Acl => self.acl = Some(serde_json::from_str(text).map_err(|e| e.to_string())?),
            Setting::Ownership => self.ownership = Some(text.parse().map_err(|e| format!("{e}"))?),
            Setting::PublicAccessBlock => {
                self.public_access_block =
                    Some(serde_json::from_str(text).map_err(|e| e.to_string())?)
            }
            Setting::Tagging => {
                self.tags = Some(serde_json::from_str(text).map_err(|e| e.to_string())?)
            }
            Setting::Cors => {
                self.cors = Some(serde_json::from_str(text).map_err(|e| e.to_string())?)
            }
            Setting::Versioning => {
                self.versioning = saker_rpc::Versioning::from_setting(text.as_bytes())
                    .ok_or_else(|| format!("versioning status {text:?}"))?
            }
            Setting::ObjectLock => {
                self.object_lock =
                    Some(saker_rpc::LockConfig::parse(text.as_bytes()).map_err(|e| e.to_string())?)
            }
            Setting::Lifecycle => {
                self.lifecycle = Some(Arc::new(
                    serde_json::from_str(text).map_err(|e| e.to_string())?,
                ))
            }
            Setting::Encryption => self.encryption = Some(text.to_string()),
            Setting::StorageClass => {
                self.storage_class = Some(Arc::new(
                    serde_json::from_str(text).map_err(|e| e.to_string())?,
                ))
            }
            Setting::Notification => {
                self.notification = Some(Arc::new(
                    saker_notify::NotificationConfig::parse(value).map_err(|e| e.to_string())?,
                ))
            }
        }
        Ok(())
    }

    /// Takes the write settings from what group 1 sealed.
    fn seal(&mut self, sealed: &SealedWrites) {
        self.versioning = sealed.writes.versioning;
        self.object_lock = sealed.writes.object_lock.clone();
        self.encryption = sealed.writes.encryption.clone();
        self.settings_version = sealed.version;
    }

    fn unset(&mut self, setting: Setting) {
        match setting {
            Setting::Owner => self.owner = None,
            Setting::Policy => self.policy = None,
            Setting::Acl => self.acl = None,
            Setting::Ownership => self.ownership = None,
            Setting::PublicAccessBlock => self.public_access_block = None,
            Setting::Tagging => self.tags = None,
            Setting::Cors => self.cors = None,
            Setting::Versioning => self.versioning = saker_rpc::Versioning::Off,
            Setting::ObjectLock => self.object_lock = None,
            Setting::Lifecycle => self.lifecycle = None,
            Setting::Encryption => self.encryption = None,
            Setting::StorageClass => self.storage_class = None,
            Setting::Notification => self.notification = None,
        }
    }

    fn is_empty(&self) -> bool {
        self.owner.is_none()
            && self.policy.is_none()
            && self.acl.is_none()
            && self.ownership.is_none()
            && self.public_access_block.is_none()
            && self.tags.is_none()
            && self.cors.is_none()
            && self.versioning == saker_rpc::Versioning::Off
            && self.object_lock.is_none()
            && self.lifecycle.is_none()
            && self.encryption.is_none()
            && self.storage_class.is_none()
            && self.notification.is_none()
            && self.settings_version == 0
    }
}

/// The settings of every bucket that has any.
pub struct BucketSettings {
    state: Arc<dyn StateStore>,
    /// The MNode groups write settings are installed in (none: not published, for tests).
    groups: Option<Groups>,
    copy: RwLock<Option<BTreeMap<String, Arc<Bucket>>>>,
    /// When the copy was last loaded (one load at a time).
    loaded: tokio::sync::Mutex<Option<Instant>>,
}

impl BucketSettings {
    pub fn new(state: Arc<dyn StateStore>) -> Self {
        Self {
            state,
            groups: None,
            copy: RwLock::new(None),
            loaded: tokio::sync::Mutex::new(None),
        }
    }

    /// Settings whose changes of write settings are installed in `groups`.
    pub fn publishing(mut self, groups: Groups) -> Self {
        self.groups = Some(groups);
        self
    }

    /// Reloads the copy now: a write was refused for settings that changed since.
    pub async fn reload(&self) -> Result<(), JournalError> {
        self.load(Duration::ZERO).await
    }

    /// Refreshes the copy every [`REFRESH`], for ever.
    pub async fn follow(self: Arc<Self>) {
        loop {
            if let Err(e) = self.load(REFRESH / 2).await {
                tracing::debug!(error = %e, "bucket settings not refreshed");
            }
            tokio::time::sleep(REFRESH).await;
        }
    }

    /// Reloads the copy unless it was loaded less than `min_age` ago.
    async fn load(&self, min_age: Duration) -> Result<(), JournalError> {
        let mut last = self.loaded.lock().await;
        if last.is_some_and(|t| t.elapsed() < min_age) {
            return Ok(());
        }
        let mut fresh: BTreeMap<String, Bucket> = BTreeMap::new();
        let mut sealed = Vec::new();
        for (key, value) in self.state.scan(PREFIX).await? {
            let Some((bucket, name)) = key[PREFIX.len()..].split_once('/') else {
                continue;
            };
            if name == SEALED_RECORD {
                match serde_json::from_slice::<SealedWrites>(&value) {
                    Ok(s) => sealed.push((bucket.to_string(), s)),
                    Err(e) => tracing::warn!(bucket, error = %e, "sealed settings ignored"),
                }
                continue;
            }
            let Some(setting) = Setting::ALL.into_iter().find(|s| s.name() == name) else {
                continue;
            };
            if let Err(e) = fresh
                .entry(bucket.to_string())
                .or_default()
                .set(setting, &value)
            {
                // Only valid settings are stored; one that no longer parses denies what it
                // would have allowed rather than failing every request of the bucket.
                tracing::warn!(bucket, setting = name, error = %e, "bucket setting ignored");
            }
        }
        // What was sealed wins over the records (a change not sealed yet is not in force).
        for (bucket, s) in sealed {
            fresh.entry(bucket).or_default().seal(&s);
        }
        *self.copy.write() = Some(fresh.into_iter().map(|(b, s)| (b, Arc::new(s))).collect());
        *last = Some(Instant::now());
        Ok(())
    }

    /// The settings of `bucket` (its defaults when it has none), loaded first if this copy
    /// never was.
    pub async fn get(&self, bucket: &str) -> Result<Arc<Bucket>, JournalError> {
        if self.copy.read().is_none() {
            self.load(Duration::MAX).await?;
        }
        Ok(self
            .copy
            .read()
            .as_ref()
            .and_then(|m| m.get(bucket).cloned())
            .unwrap_or_default())
    }

    /// Every bucket that has settings, with them, from a copy at most [`REFRESH`] / 2 old
    /// (for once-per-cluster work such as lifecycle passes, which must see every gateway's
    /// changes).
    pub async fn all(&self) -> Result<Vec<(String, Arc<Bucket>)>, JournalError> {
        self.load(REFRESH / 2).await?;
        Ok(self
            .copy
            .read()
            .iter()
            .flatten()
            .map(|(b, s)| (b.clone(), s.clone()))
            .collect())
    }

    /// Stores one setting of `bucket` (`None` removes it); `value` must parse as the
    /// setting (callers check it first and answer the client's error).
    ///
    /// A write setting is in force once it reached every MNode group: an error after the
    /// record was stored leaves the change out of this copy and of writes' decisions until
    /// it is made again (module docs).
    pub async fn put(
        &self,
        bucket: &str,
        setting: Setting,
        value: Option<Vec<u8>>,
    ) -> Result<(), JournalError> {
        self.store(bucket, setting, value).await?;
        if setting.decides_writes() {
            self.publish(bucket).await?;
        }
        Ok(())
    }

    /// Stores the record and, unless it decides writes (those come from the seal), keeps it
    /// in this copy.
    async fn store(
        &self,
        bucket: &str,
        setting: Setting,
        value: Option<Vec<u8>>,
    ) -> Result<(), JournalError> {
        self.get(bucket).await?;
        self.state
            .put(&setting.record(bucket), value.clone())
            .await?;
        if setting.kept_from_seal() && self.groups.is_some() {
            return Ok(());
        }
        self.change(bucket, |b| match value {
            Some(v) => {
                if let Err(e) = b.set(setting, &v) {
                    tracing::warn!(bucket, error = %e, "bucket setting stored but not parsed");
                }
            }
            None => b.unset(setting),
        });
        Ok(())
    }

    /// Changes this copy's settings of `bucket`.
    fn change(&self, bucket: &str, f: impl FnOnce(&mut Bucket)) {
        let mut copy = self.copy.write();
        let map = copy.get_or_insert_with(BTreeMap::new);
        let mut b = map.get(bucket).map(|b| (**b).clone()).unwrap_or_default();
        f(&mut b);
        if b.is_empty() {
            map.remove(bucket);
        } else {
            map.insert(bucket.to_string(), Arc::new(b));
        }
    }

    /// Has `bucket`'s write settings sealed and installed in every group, and keeps what
    /// was sealed.
    async fn publish(&self, bucket: &str) -> Result<(), JournalError> {
        let Some(groups) = &self.groups else {
            return Ok(());
        };
        let sealed = saker_coordinator::bucket_writes::publish(groups, bucket)
            .await
            .map_err(JournalError::State)?;
        self.change(bucket, |b| {
            // A reload may have brought a newer seal already.
            if b.settings_version < sealed.version {
                b.seal(&sealed)
            }
        });
        Ok(())
    }

    /// Forgets every setting of `bucket` (it was deleted, or is being created anew); its
    /// write settings go back to the defaults under a new settings version.
    pub async fn clear(&self, bucket: &str) -> Result<(), JournalError> {
        let has = !self.get(bucket).await?.is_empty();
        if has {
            for s in Setting::ALL {
                self.store(bucket, s, None).await?;
            }
            self.publish(bucket).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use saker_coordinator::MemState;

    const POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
        "Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pub/*"}]}"#;

    #[tokio::test]
    async fn settings_are_records_another_copy_loads() {
        let state: Arc<dyn StateStore> = Arc::new(MemState::default());
        let a = BucketSettings::new(state.clone());
        assert!(a.get("pub").await.unwrap().policy.is_none());
        a.put("pub", Setting::Policy, Some(POLICY.as_bytes().to_vec()))
            .await
            .unwrap();
        a.put("pub", Setting::Ownership, Some(b"ObjectWriter".to_vec()))
            .await
            .unwrap();
        assert_eq!(
            a.get("pub").await.unwrap().policy.as_ref().unwrap().0,
            POLICY
        );

        // Another gateway's copy, loaded from the records.
        let b = BucketSettings::new(state.clone());
        let got = b.get("pub").await.unwrap();
        assert_eq!(got.policy.as_ref().unwrap().0, POLICY);
        assert_eq!(got.ownership, Some(ObjectOwnership::ObjectWriter));
        assert!(b.get("other").await.unwrap().is_empty());

        a.clear("pub").await.unwrap();
        assert!(a.get("pub").await.unwrap().is_empty());
        assert!(state.scan(PREFIX).await.unwrap().is_empty());
        b.load(Duration::ZERO).await.unwrap();
        assert!(b.get("pub").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn write_settings_come_from_what_was_sealed() {
        let state: Arc<dyn StateStore> = Arc::new(MemState::default());
        let put = |key: &str, value: &[u8]| {
            let (state, key, value) = (state.clone(), key.to_string(), value.to_vec());
            async move { state.put(&key, Some(value)).await.unwrap() }
        };
        // A change stored but not sealed yet is not in force; the other settings are.
        put("buckets/logs/versioning", b"Suspended").await;
        put("buckets/logs/encryption", b"AES256").await;
        put("buckets/logs/ownership", b"ObjectWriter").await;
        let sealed = SealedWrites {
            version: 3,
            writes: saker_rpc::BucketWrites {
                versioning: saker_rpc::Versioning::Enabled,
                ..Default::default()
            },
        };
        let json = serde_json::to_vec(&sealed).unwrap();
        put(&saker_rpc::sealed_record("logs"), &json).await;
        // A bucket whose settings predate seals has its records, under version 0.
        put("buckets/old/versioning", b"Enabled").await;
        let copy = BucketSettings::new(state.clone());
        let logs = copy.get("logs").await.unwrap();
        assert_eq!(logs.versioning, saker_rpc::Versioning::Enabled);
        assert_eq!(logs.encryption, None);
        assert_eq!(logs.settings_version, 3);
        assert_eq!(logs.ownership, Some(ObjectOwnership::ObjectWriter));
        let old = copy.get("old").await.unwrap();
        assert_eq!(
            (old.versioning, old.settings_version),
            (saker_rpc::Versioning::Enabled, 0)
        );
        // Cleared, a sealed bucket keeps its version (the seal record is not a setting).
        copy.clear("logs").await.unwrap();
        assert_eq!(copy.get("logs").await.unwrap().settings_version, 3);
        assert!(!state.scan("buckets/logs/writes").await.unwrap().is_empty());
    }
}
