//! Access keys: id, secret and the POSIX identity S3 requests act as.
//!
//! Persisted as a versioned JSON file, written durably (tmp file, fsync, rename, fsync dir);
//! the encodings and their migrations are in [`stored`].
//! In a replicated cluster the keys are records of the coordinator's replicated state
//! (`keys/<access key>`) as well, so a key created at any node works at every node's
//! gateway: each node keeps a copy, looks a key it does not know up in the state at once
//! (at most every [`MISS_REFRESH`]) and refreshes the whole copy every [`REFRESH`], so a
//! deleted key stops working everywhere within that. The root key is the one the cluster was
//! bootstrapped with ([`AccessKeyStore::check_root`]). Secrets never appear in `Debug` output
//! or logs.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::state::StateStore;

mod canonical;
mod stored;
#[cfg(test)]
mod tests;

pub use canonical::{is_canonical_id, validate_display_name, CanonicalUser};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("access key store I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("access key store is corrupt: {0}")]
    Corrupt(String),
    #[error("access key '{0}' already exists")]
    Exists(String),
    #[error("no access key '{0}'")]
    NotFound(String),
    #[error("invalid access key: {0}")]
    Invalid(String),
    #[error("the root key cannot be deleted or given a policy")]
    Root,
    #[error("access keys unavailable: {0}")]
    State(#[from] crate::journal::JournalError),
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AccessKey {
    pub access_key: String,
    pub secret_key: String,
    pub uid: u32,
    pub gid: u32,
    /// The root key may administer keys.
    pub root: bool,
    /// The key's identity policy (IAM JSON), checked by the gateway; `None`: the key may do
    /// nothing but what bucket policies and ACLs grant it (deny by default; keys made before
    /// that decode with the `admin` policy). The root key has none: it may do everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The key is an account of its own: it owns the buckets it creates, and reaches other
    /// accounts' buckets only where their policies or ACLs grant it. Other keys belong to the
    /// root key's account.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub account: bool,
    /// The account's canonical user id and display name, what S3 shows as its owner id
    /// ([`canonical`]): the root key's and account keys' (made when the key is, derived for
    /// keys from before). `None` for other keys: theirs is the root key's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical: Option<CanonicalUser>,
}

impl fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessKey")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .field("root", &self.root)
            .field("policy", &self.policy.is_some())
            .field("account", &self.account)
            .field("canonical", &self.canonical)
            .finish()
    }
}

pub struct AccessKeyStore {
    path: PathBuf,
    keys: RwLock<BTreeMap<String, AccessKey>>,
    /// The root key's access key, fixed once the store is open (for lookups on every
    /// request, without a scan of the keys).
    root_ak: OnceLock<String>,
    /// The replicated state the keys are records of, in a replicated cluster.
    shared: Option<Shared>,
}

struct Shared {
    state: Arc<dyn StateStore>,
    /// When the copy was last refreshed (one refresh at a time).
    refreshed: tokio::sync::Mutex<Option<Instant>>,
}

/// How often a node refreshes its copy of a replicated key set.
pub const REFRESH: Duration = Duration::from_secs(2);
/// The least time between two refreshes for keys not found.
pub const MISS_REFRESH: Duration = Duration::from_millis(500);
/// Record key prefix of access keys in the coordinator's state.
const KEYS: &str = "keys/";

/// The record of access key `access_key` in the coordinator's state.
fn record(access_key: &str) -> String {
    format!("{KEYS}{access_key}")
}

/// The root key `ak`, `sk`, of the account `canonical`.
fn root_key(ak: String, sk: String, canonical: CanonicalUser) -> AccessKey {
    AccessKey {
        access_key: ak,
        secret_key: sk,
        uid: 0,
        gid: 0,
        root: true,
        policy: None,
        account: false,
        canonical: Some(canonical),
    }
}

/// A random string of `len` characters from `alphabet`.
fn random_string(alphabet: &[u8], len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| alphabet[rng.gen_range(0..alphabet.len())] as char)
        .collect()
}

pub fn generate_access_key() -> String {
    format!(
        "SK{}",
        random_string(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 18)
    )
}

pub fn generate_secret_key() -> String {
    random_string(
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        40,
    )
}

fn validate(access_key: &str, secret_key: &str) -> Result<(), KeyError> {
    if access_key.len() < 3
        || access_key.len() > 128
        || !access_key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(KeyError::Invalid(
            "access key must be 3-128 characters of [A-Za-z0-9-_.]".into(),
        ));
    }
    if secret_key.len() < 8
        || secret_key.len() > 128
        || !secret_key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(KeyError::Invalid(
            "secret key must be 8-128 printable ASCII characters".into(),
        ));
    }
    Ok(())
}

impl AccessKeyStore {
    /// Opens the store at `path`, creating it if missing. The root key is `root` when given
    /// (replacing a stored one), else the stored one, else a newly generated one.
    pub fn open(path: &Path, root: Option<(String, String)>) -> Result<Self, KeyError> {
        let store = Self {
            path: path.to_path_buf(),
            keys: RwLock::new(Self::load(path)?),
            root_ak: OnceLock::new(),
            shared: None,
        };
        store.set_root(root)?;
        Ok(store)
    }

    /// The keys of a replicated cluster: records in `state`, the root key `root` kept at
    /// `path` too (so a restart with another one is noticed). Call
    /// [`AccessKeyStore::check_root`] and run [`AccessKeyStore::follow`].
    pub fn replicated(
        path: &Path,
        root: (String, String),
        state: Arc<dyn StateStore>,
    ) -> Result<Self, KeyError> {
        let mut keys = Self::load(path)?;
        keys.retain(|_, k| k.root);
        let store = Self {
            path: path.to_path_buf(),
            keys: RwLock::new(keys),
            root_ak: OnceLock::new(),
            shared: Some(Shared {
                state,
                refreshed: tokio::sync::Mutex::new(None),
            }),
        };
        store.set_root(Some(root))?;
        Ok(store)
    }

    /// Records this node's root key as the cluster's if there is none yet, and fails if the
    /// cluster has another one (`Invalid`, naming its access key).
    pub async fn check_root(&self) -> Result<(), KeyError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let root = self.root();
        let recorded = shared.state.scan(KEYS).await?;
        let theirs = recorded
            .iter()
            .filter_map(|(k, v)| stored::decode_record(k, v).ok())
            .find(|k| k.root);
        match theirs {
            Some(k) if k.access_key == root.access_key && k.secret_key == root.secret_key => {
                self.adopt_root_account(k.canonical)
            }
            Some(k) => Err(KeyError::Invalid(format!(
                "the cluster's root key is {}, not this node's {}: the root key is fixed at \
                 bootstrap",
                k.access_key, root.access_key
            ))),
            None => {
                let body = stored::encode_record(&root);
                Ok(shared
                    .state
                    .put(&record(&root.access_key), Some(body))
                    .await?)
            }
        }
    }

    /// Makes `canonical`, the root account's in the cluster's state, this node's too (they
    /// differ only where nodes bootstrapped at once from files of another root account).
    fn adopt_root_account(&self, canonical: Option<CanonicalUser>) -> Result<(), KeyError> {
        let Some(canonical) = canonical else {
            return Ok(());
        };
        {
            let mut keys = self.keys.write();
            let root = keys
                .get_mut(self.root_ak.get().expect("the store always has a root key"))
                .expect("the store always has a root key");
            if root.canonical.as_ref() == Some(&canonical) {
                return Ok(());
            }
            root.canonical = Some(canonical);
        }
        self.persist()
    }

    /// Refreshes a replicated key set every [`REFRESH`], for ever.
    pub async fn follow(self: Arc<Self>) {
        loop {
            if let Err(e) = self.refresh(Duration::ZERO).await {
                tracing::debug!(error = %e, "access keys not refreshed");
            }
            tokio::time::sleep(REFRESH).await;
        }
    }

    /// Replaces the copy of a replicated key set with the state's, unless it was refreshed
    /// less than `min_age` ago.
    async fn refresh(&self, min_age: Duration) -> Result<(), KeyError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let mut last = shared.refreshed.lock().await;
        if last.is_some_and(|t| t.elapsed() < min_age) {
            return Ok(());
        }
        let mut fresh = BTreeMap::new();
        let mut root_account = None;
        for (key, value) in shared.state.scan(KEYS).await? {
            let k = stored::decode_record(&key, &value)?;
            if !k.root {
                fresh.insert(k.access_key.clone(), k);
            } else if k.access_key == self.root_account() {
                root_account = k.canonical;
            }
        }
        self.adopt_root_account(root_account)?;
        let mut keys = self.keys.write();
        keys.retain(|_, k| k.root);
        for (ak, k) in fresh {
            keys.entry(ak).or_insert(k);
        }
        *last = Some(Instant::now());
        Ok(())
    }

    /// The key `access_key`, looked up in the replicated state if this copy lacks it.
    pub async fn lookup(&self, access_key: &str) -> Option<AccessKey> {
        if let Some(k) = self.get(access_key) {
            return Some(k);
        }
        self.shared.as_ref()?;
        if let Err(e) = self.refresh(MISS_REFRESH).await {
            tracing::warn!(error = %e, "access keys not refreshed");
        }
        self.get(access_key)
    }

    /// The root key recorded at `path`, if any (nothing is created).
    pub fn recorded_root(path: &Path) -> Result<Option<AccessKey>, KeyError> {
        Ok(Self::load(path)?.into_values().find(|k| k.root))
    }

    fn load(path: &Path) -> Result<BTreeMap<String, AccessKey>, KeyError> {
        let mut keys = BTreeMap::new();
        match fs::read(path) {
            Ok(bytes) => {
                for k in stored::decode_file(&bytes)? {
                    keys.insert(k.access_key.clone(), k);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(keys)
    }

    /// Sets the root key (once, at open: it stays for the store's life).
    fn set_root(&self, root: Option<(String, String)>) -> Result<(), KeyError> {
        let stored = self.keys.read().values().find(|k| k.root).cloned();
        let new = match (root, stored) {
            (Some((ak, sk)), stored) => {
                validate(&ak, &sk)?;
                // The root account keeps its canonical user when its key is replaced.
                let canonical = stored
                    .and_then(|k| k.canonical)
                    .unwrap_or_else(|| CanonicalUser::derived(&ak, &sk));
                Some(root_key(ak, sk, canonical))
            }
            (None, None) => {
                let (ak, sk) = (generate_access_key(), generate_secret_key());
                let canonical = CanonicalUser::derived(&ak, &sk);
                Some(root_key(ak, sk, canonical))
            }
            (None, Some(_)) => None,
        };
        if let Some(new) = new {
            let mut keys = self.keys.write();
            keys.retain(|_, k| !k.root);
            keys.insert(new.access_key.clone(), new);
        }
        let root = self
            .keys
            .read()
            .values()
            .find(|k| k.root)
            .map(|k| k.access_key.clone());
        let _ = self.root_ak.set(root.expect("a root key was just made"));
        self.persist()
    }

    fn persist(&self) -> Result<(), KeyError> {
        let keys = self.keys.read();
        // A replicated key set keeps only the root here.
        let kept = keys.values().filter(|k| k.root || self.shared.is_none());
        let bytes = stored::encode_file(kept.cloned().collect())?;
        saker_durable::replace_private_file(&self.path, &bytes)?;
        Ok(())
    }

    pub fn get(&self, access_key: &str) -> Option<AccessKey> {
        self.keys.read().get(access_key).cloned()
    }

    /// `f` of the key `access_key`, without copying it (for checks on every request).
    pub fn with<T>(&self, access_key: &str, f: impl FnOnce(&AccessKey) -> T) -> Option<T> {
        self.keys.read().get(access_key).map(f)
    }

    /// The account `access_key` belongs to, as saker records owners (bucket settings, ACLs):
    /// the key itself for an account key, the root key for every other key (`None`: no such
    /// key). S3 is shown the account's canonical user instead ([`Self::canonical_user`]).
    pub fn account_of(&self, access_key: &str) -> Option<String> {
        let keys = self.keys.read();
        let key = keys.get(access_key)?;
        if key.account {
            return Some(key.access_key.clone());
        }
        Some(self.root_account())
    }

    /// The canonical user S3 shows for `account` (an account as [`Self::account_of`] names
    /// it; a key of the root's account is shown as that): the key's, looked up in the
    /// replicated state if this copy lacks it, else (an account deleted since) a stand-in
    /// derived from it keyed by the root key's secret, stable and telling nothing of it.
    pub async fn canonical_user(&self, account: &str) -> CanonicalUser {
        if let Some(c) = self.canonical_of(account) {
            return c;
        }
        if self.lookup(account).await.is_some() {
            if let Some(c) = self.canonical_of(account) {
                return c;
            }
        }
        CanonicalUser::unknown(&self.root().secret_key, account)
    }

    /// The canonical user of `account` in this copy (see [`Self::canonical_user`]).
    pub fn canonical_of(&self, account: &str) -> Option<CanonicalUser> {
        let keys = self.keys.read();
        let key = keys.get(account)?;
        if let Some(c) = &key.canonical {
            return Some(c.clone());
        }
        keys.get(self.root_ak.get()?)?.canonical.clone()
    }

    /// The account whose canonical user id is `id`, looked up in the replicated state if
    /// this copy has none (`None`: no account has it).
    pub async fn account_with_id(&self, id: &str) -> Option<String> {
        let find = || {
            self.keys
                .read()
                .values()
                .find(|k| k.canonical.as_ref().is_some_and(|c| c.id == id))
                .map(|k| k.access_key.clone())
        };
        if let Some(account) = find() {
            return Some(account);
        }
        self.shared.as_ref()?;
        if let Err(e) = self.refresh(MISS_REFRESH).await {
            tracing::warn!(error = %e, "access keys not refreshed");
        }
        find()
    }

    /// The root key's access key: the id of the account every non-account key belongs to.
    pub fn root_account(&self) -> String {
        self.root_ak
            .get()
            .expect("the store always has a root key")
            .clone()
    }

    pub fn root(&self) -> AccessKey {
        self.get(&self.root_account())
            .expect("the store always has a root key")
    }

    /// All keys, a replicated set refreshed first (secrets included: callers decide what to
    /// show).
    pub async fn current(&self) -> Result<Vec<AccessKey>, KeyError> {
        self.refresh(Duration::ZERO).await?;
        Ok(self.list())
    }

    /// All keys of this copy, secrets included (callers decide what to show).
    pub fn list(&self) -> Vec<AccessKey> {
        self.keys.read().values().cloned().collect()
    }

    /// Adds `key` (never as a root key) and returns it as stored. An account key has the
    /// canonical user it comes with (a canonical id no other account has, a valid display
    /// name) or a new one ([`CanonicalUser::generate`]); other keys have none (theirs is the
    /// root account's).
    pub async fn create(&self, key: AccessKey) -> Result<AccessKey, KeyError> {
        validate(&key.access_key, &key.secret_key)?;
        let canonical = match (key.account, key.canonical) {
            (true, Some(c)) => {
                if !is_canonical_id(&c.id) {
                    return Err(KeyError::Invalid(
                        "a canonical user id is 64 lowercase hex digits".into(),
                    ));
                }
                validate_display_name(&c.display_name)?;
                Some(c)
            }
            (true, None) => Some(CanonicalUser::generate(None)?),
            (false, None) => None,
            (false, Some(_)) => {
                return Err(KeyError::Invalid(
                    "only an account (--account) has a canonical user id and display name".into(),
                ))
            }
        };
        let key = AccessKey {
            root: false,
            canonical,
            ..key
        };
        let id_taken = |keys: &BTreeMap<String, AccessKey>| {
            let id = key.canonical.as_ref().map(|c| &c.id);
            id.is_some()
                && keys
                    .values()
                    .any(|k| k.canonical.as_ref().map(|c| &c.id) == id)
        };
        let id_exists = || KeyError::Exists("an account of that canonical user id".into());
        if let Some(shared) = &self.shared {
            self.refresh(Duration::ZERO).await?;
            if self.get(&key.access_key).is_some() {
                return Err(KeyError::Exists(key.access_key));
            }
            if id_taken(&self.keys.read()) {
                return Err(id_exists());
            }
            let body = stored::encode_record(&key);
            shared
                .state
                .put(&record(&key.access_key), Some(body))
                .await?;
            self.keys
                .write()
                .insert(key.access_key.clone(), key.clone());
            return Ok(key);
        }
        {
            let mut keys = self.keys.write();
            if keys.contains_key(&key.access_key) {
                return Err(KeyError::Exists(key.access_key));
            }
            if id_taken(&keys) {
                return Err(id_exists());
            }
            keys.insert(key.access_key.clone(), key.clone());
        }
        self.persist()?;
        Ok(key)
    }

    pub async fn delete(&self, access_key: &str) -> Result<(), KeyError> {
        if self.shared.is_some() {
            self.refresh(Duration::ZERO).await?;
        }
        match self.get(access_key) {
            None => return Err(KeyError::NotFound(access_key.to_string())),
            Some(k) if k.root => return Err(KeyError::Root),
            Some(_) => {}
        }
        if let Some(shared) = &self.shared {
            shared.state.put(&record(access_key), None).await?;
            self.keys.write().remove(access_key);
            return Ok(());
        }
        self.keys.write().remove(access_key);
        self.persist()
    }
}

impl AccessKeyStore {
    /// Replaces the identity policy of key `access_key` (`None` removes it: the key may do
    /// nothing). The root key has none: it may do everything.
    pub async fn set_policy(
        &self,
        access_key: &str,
        policy: Option<String>,
    ) -> Result<(), KeyError> {
        if self.shared.is_some() {
            self.refresh(Duration::ZERO).await?;
        }
        let mut key = match self.get(access_key) {
            None => return Err(KeyError::NotFound(access_key.to_string())),
            Some(k) if k.root => return Err(KeyError::Root),
            Some(k) => k,
        };
        key.policy = policy;
        if let Some(shared) = &self.shared {
            let body = stored::encode_record(&key);
            shared.state.put(&record(access_key), Some(body)).await?;
            self.keys.write().insert(key.access_key.clone(), key);
            return Ok(());
        }
        self.keys.write().insert(key.access_key.clone(), key);
        self.persist()
    }
}
