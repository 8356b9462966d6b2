//! The SSE-S3 master keys of a node (`--sse-key-file`): the current key, which wraps every
//! new data key, and the previous ones, kept after a rotation until `saker admin sse rewrap`
//! has wrapped every stored data key under the current one.
//!
//! The key file holds one key a line (64 hex digits; `#` comments), the current one first.
//! No key id is stored with a wrapped record: unwrapping is AES-256-GCM, whose tag refuses
//! any other key, so [`MasterKeys::open`] tries the keys in order (the current one first,
//! which after a rewrap is the only one that opens anything). A file written before rotation
//! existed (one key) reads as a current key without previous ones.

use std::path::Path;

use saker_rpc::{PlainKey, Sse, SseKeys};

use crate::sealed::{parse_key, read_key_file, DataKey, SealError, WrappingKey};

/// The current master key and the previous ones.
pub struct MasterKeys {
    /// The current key first.
    keys: Vec<WrappingKey>,
}

impl std::fmt::Debug for MasterKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MasterKeys({} keys)", self.keys.len())
    }
}

impl MasterKeys {
    /// One current key and no previous ones.
    pub fn single(key: WrappingKey) -> Self {
        Self { keys: vec![key] }
    }

    /// Reads the key file at `path` (kept as [`WrappingKey::load`] keeps it: mode 600,
    /// outside `data_dir`).
    pub fn load(path: &Path, data_dir: Option<&Path>) -> Result<Self, SealError> {
        let text = read_key_file(path, data_dir)?;
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            keys.push(parse_key(line).map_err(|reason| SealError::KeyFile {
                path: path.to_path_buf(),
                reason: format!("line {}: {reason}", n + 1),
            })?);
        }
        if keys.is_empty() {
            return Err(SealError::KeyFile {
                path: path.to_path_buf(),
                reason: "holds no key".into(),
            });
        }
        Ok(Self { keys })
    }

    /// The key new data keys are wrapped under.
    pub fn current(&self) -> &WrappingKey {
        &self.keys[0]
    }

    /// Previous keys still held (0 once a rewrapped cluster's old keys are retired).
    pub fn previous(&self) -> usize {
        self.keys.len() - 1
    }

    /// A new data key and its SSE-S3 record, under the current key.
    pub fn new_data_key(&self) -> (DataKey, Sse) {
        self.current().new_data_key(None, None)
    }

    /// The data key of `sse`, under whichever of the keys wrapped it.
    pub fn open(&self, sse: &Sse) -> Result<DataKey, SealError> {
        self.keys
            .iter()
            .find_map(|k| k.open(sse).ok())
            .ok_or(SealError::WrongKey)
    }

    /// `sse`'s data key wrapped under the current key (what its record's `wrapped` becomes),
    /// or `None` when it is under the current key already.
    pub fn rewrapped(&self, sse: &Sse) -> Result<Option<Vec<u8>>, SealError> {
        if self.current().open(sse).is_ok() {
            return Ok(None);
        }
        let key = self.open(sse)?;
        Ok(Some(self.current().rewrap(&key, sse)))
    }

    /// Makes a new current key in the key file at `path`, keeping the others as previous
    /// keys (written whole to a new file, synced and renamed over the old one, mode 600).
    pub fn rotate(path: &Path) -> std::io::Result<()> {
        let old = std::fs::read_to_string(path)?;
        let key: [u8; 32] = rand::random();
        saker_durable::replace_private_file(path, format!("{}\n{old}", hex::encode(key)).as_bytes())
    }

    /// Drops every key but the current one from the key file at `path` (after a rewrap);
    /// answers how many went.
    pub fn retire_previous(path: &Path) -> std::io::Result<usize> {
        let text = std::fs::read_to_string(path)?;
        let mut keys = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim())
            .filter(|l| !l.is_empty());
        let current = keys
            .next()
            .ok_or_else(|| std::io::Error::other("the key file holds no key"))?;
        let dropped = keys.count();
        saker_durable::replace_private_file(path, format!("{current}\n").as_bytes())?;
        Ok(dropped)
    }
}

impl SseKeys for MasterKeys {
    fn open(&self, sse: &Sse) -> Option<PlainKey> {
        MasterKeys::open(self, sse).ok().map(|k| k.to_plain())
    }

    fn fresh(&self) -> (PlainKey, Sse) {
        let (key, sse) = self.new_data_key();
        (key.to_plain(), sse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_file_opens_old_records_and_rewraps_them_under_the_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master.key");
        WrappingKey::create(&path).unwrap();
        let before = MasterKeys::load(&path, None).unwrap();
        assert_eq!(before.previous(), 0);
        let (key, mut sse) = before.new_data_key();
        assert_eq!(before.rewrapped(&sse).unwrap(), None);

        MasterKeys::rotate(&path).unwrap();
        let after = MasterKeys::load(&path, None).unwrap();
        assert_eq!(after.previous(), 1);
        // Old records still open; new ones are under the new key, which the old file lacks.
        assert_eq!(after.open(&sse).unwrap().to_plain(), key.to_plain());
        let (_, new) = after.new_data_key();
        assert!(before.open(&new).is_err());
        // Rewrapped, the record opens under the current key alone.
        sse.wrapped = after.rewrapped(&sse).unwrap().expect("under the old key");
        assert_eq!(after.rewrapped(&sse).unwrap(), None);
        assert_eq!(MasterKeys::retire_previous(&path).unwrap(), 1);
        let retired = MasterKeys::load(&path, None).unwrap();
        assert_eq!(retired.previous(), 0);
        assert_eq!(retired.open(&sse).unwrap().to_plain(), key.to_plain());
        assert!(retired.open(&before.new_data_key().1).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn an_empty_or_garbled_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        saker_durable::replace_private_file(&path, b"# nothing\n").unwrap();
        assert!(MasterKeys::load(&path, None).is_err());
        saker_durable::replace_private_file(&path, b"abc\n").unwrap();
        let err = MasterKeys::load(&path, None).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}
