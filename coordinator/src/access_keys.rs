//! Access keys: id, secret and the POSIX identity S3 requests act as.
//!
//! Persisted as a versioned JSON file, written durably (tmp file, fsync, rename, fsync dir).
//! Secrets never appear in `Debug` output or logs.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::RwLock;
use rand::Rng;
use serde::{Deserialize, Serialize};

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
    #[error("the root key cannot be deleted")]
    Root,
}

#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AccessKey {
    pub access_key: String,
    pub secret_key: String,
    pub uid: u32,
    pub gid: u32,
    /// The root key may administer keys.
    pub root: bool,
}

impl fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessKey")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .field("root", &self.root)
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
struct FileV1 {
    version: u32,
    keys: Vec<AccessKey>,
}

const FILE_VERSION: u32 = 1;

pub struct AccessKeyStore {
    path: PathBuf,
    keys: RwLock<BTreeMap<String, AccessKey>>,
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
        };
        store.set_root(root)?;
        Ok(store)
    }

    /// The root key recorded at `path`, if any (nothing is created).
    pub fn recorded_root(path: &Path) -> Result<Option<AccessKey>, KeyError> {
        Ok(Self::load(path)?.into_values().find(|k| k.root))
    }

    fn load(path: &Path) -> Result<BTreeMap<String, AccessKey>, KeyError> {
        let mut keys = BTreeMap::new();
        match fs::read(path) {
            Ok(bytes) => {
                let file: FileV1 =
                    serde_json::from_slice(&bytes).map_err(|e| KeyError::Corrupt(e.to_string()))?;
                if file.version != FILE_VERSION {
                    return Err(KeyError::Corrupt(format!(
                        "unknown version {}",
                        file.version
                    )));
                }
                for k in file.keys {
                    keys.insert(k.access_key.clone(), k);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(keys)
    }

    fn set_root(&self, root: Option<(String, String)>) -> Result<(), KeyError> {
        let store = self;
        let has_root = store.keys.read().values().any(|k| k.root);
        match root {
            Some((ak, sk)) => {
                validate(&ak, &sk)?;
                let mut keys = store.keys.write();
                keys.retain(|_, k| !k.root);
                keys.insert(
                    ak.clone(),
                    AccessKey {
                        access_key: ak,
                        secret_key: sk,
                        uid: 0,
                        gid: 0,
                        root: true,
                    },
                );
            }
            None if !has_root => {
                let ak = generate_access_key();
                store.keys.write().insert(
                    ak.clone(),
                    AccessKey {
                        access_key: ak,
                        secret_key: generate_secret_key(),
                        uid: 0,
                        gid: 0,
                        root: true,
                    },
                );
            }
            None => {}
        }
        store.persist()
    }

    fn persist(&self) -> Result<(), KeyError> {
        let keys = self.keys.read();
        let file = FileV1 {
            version: FILE_VERSION,
            keys: keys.values().cloned().collect(),
        };
        let bytes =
            serde_json::to_vec_pretty(&file).map_err(|e| KeyError::Corrupt(e.to_string()))?;
        let tmp = self.path.with_extension("tmp");
        {
            let mut f = fs::OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(&tmp)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                f.set_permissions(fs::Permissions::from_mode(0o600))?;
            }
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    pub fn get(&self, access_key: &str) -> Option<AccessKey> {
        self.keys.read().get(access_key).cloned()
    }

    pub fn root(&self) -> AccessKey {
        self.keys
            .read()
            .values()
            .find(|k| k.root)
            .cloned()
            .expect("the store always has a root key")
    }

    /// All keys, secrets included (callers decide what to show).
    pub fn list(&self) -> Vec<AccessKey> {
        self.keys.read().values().cloned().collect()
    }

    pub fn create(&self, key: AccessKey) -> Result<(), KeyError> {
        validate(&key.access_key, &key.secret_key)?;
        {
            let mut keys = self.keys.write();
            if keys.contains_key(&key.access_key) {
                return Err(KeyError::Exists(key.access_key));
            }
            keys.insert(key.access_key.clone(), AccessKey { root: false, ..key });
        }
        self.persist()
    }

    pub fn delete(&self, access_key: &str) -> Result<(), KeyError> {
        {
            let mut keys = self.keys.write();
            match keys.get(access_key) {
                None => return Err(KeyError::NotFound(access_key.to_string())),
                Some(k) if k.root => return Err(KeyError::Root),
                Some(_) => {
                    keys.remove(access_key);
                }
            }
        }
        self.persist()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_key_is_generated_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let root = AccessKeyStore::open(&path, None).unwrap().root();
        let again = AccessKeyStore::open(&path, None).unwrap().root();
        assert_eq!(root, again);
        let forced =
            AccessKeyStore::open(&path, Some(("admin".into(), "secret-123".into()))).unwrap();
        assert_eq!(forced.root().access_key, "admin");
        assert_eq!(
            forced.list().iter().filter(|k| k.root).count(),
            1,
            "one root key only"
        );
    }

    #[test]
    fn create_delete_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        let s = AccessKeyStore::open(&path, None).unwrap();
        let k = AccessKey {
            access_key: "user1".into(),
            secret_key: "password1".into(),
            uid: 1000,
            gid: 1000,
            root: false,
        };
        s.create(k.clone()).unwrap();
        assert!(matches!(s.create(k.clone()), Err(KeyError::Exists(_))));
        assert!(matches!(
            s.create(AccessKey {
                access_key: "a b".into(),
                ..k.clone()
            }),
            Err(KeyError::Invalid(_))
        ));
        assert_eq!(
            AccessKeyStore::open(&path, None).unwrap().get("user1"),
            Some(k)
        );
        assert!(matches!(
            s.delete(&s.root().access_key),
            Err(KeyError::Root)
        ));
        s.delete("user1").unwrap();
        assert!(matches!(s.delete("user1"), Err(KeyError::NotFound(_))));
        assert_eq!(
            AccessKeyStore::open(&path, None).unwrap().get("user1"),
            None
        );
        assert!(
            !format!("{:?}", s.root()).contains(&s.root().secret_key),
            "Debug hides the secret"
        );
    }
}
