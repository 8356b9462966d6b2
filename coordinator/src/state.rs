//! Where the coordinator keeps its durable state: named records (its journals' intents, the
//! exception table, access keys). One process keeps them as files in a directory; a
//! replicated cluster keeps them in group 1's state machine, written through raft, so a
//! coordinator elected elsewhere finds them; tests keep them in memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use saker_rpc::{ClientTag, MetaError, MetaRequest, MetaResponse, MetaService};

use crate::journal::{io_err, JournalError};

/// A record store: keys are `/`-separated names, values opaque bytes.
#[async_trait]
pub trait StateStore: Send + Sync + 'static {
    /// Sets `key` to `value` durably, or drops it (`None`; dropping a missing key is fine).
    async fn put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), JournalError>;
    /// The records whose key starts with `prefix`, in key order.
    async fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, JournalError>;
    /// The term of the coordinator that writes here (0: one process, no terms): its calls to
    /// the MNodes carry it, so they refuse a coordinator that lost its place.
    fn term(&self) -> u64 {
        0
    }
}

/// Records in memory only.
#[derive(Default)]
pub struct MemState(Mutex<BTreeMap<String, Vec<u8>>>);

#[async_trait]
impl StateStore for MemState {
    async fn put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), JournalError> {
        let mut m = self.0.lock();
        match value {
            Some(v) => m.insert(key.to_string(), v),
            None => m.remove(key),
        };
        Ok(())
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, JournalError> {
        let m = self.0.lock();
        Ok(m.range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

/// Records as files under a directory: `a/b` is `DIR/a/b.json`, written to a temporary file,
/// synced and renamed into place.
pub struct DirState {
    dir: PathBuf,
}

impl DirState {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }
}

#[async_trait]
impl StateStore for DirState {
    async fn put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), JournalError> {
        let path = self.path(key);
        let dir = path
            .parent()
            .expect("a record has a directory")
            .to_path_buf();
        let Some(value) = value else {
            return match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_err(&path)(e)),
            };
        };
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        saker_durable::replace_file(&path, &value).map_err(io_err(&path))
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, JournalError> {
        let (sub, start) = prefix.rsplit_once('/').unwrap_or(("", prefix));
        let dir = self.dir.join(sub);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&dir)(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry.map_err(io_err(&dir))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !name.starts_with(start) {
                continue;
            }
            let Some(stem) = name.strip_suffix(".json") else {
                // A temporary file of an interrupted write: its record was never written (or
                // its previous version stands).
                if name.ends_with(".tmp") {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            };
            let key = if sub.is_empty() {
                stem.to_string()
            } else {
                format!("{sub}/{stem}")
            };
            out.push((key, std::fs::read(&path).map_err(io_err(&path))?));
        }
        out.sort();
        Ok(out)
    }
}

/// Records in group 1's replicated state machine ([`MetaRequest::CoordPut`]). Writes carry
/// `term`, the group-1 term the coordinator became active in, so a coordinator that lost its
/// place is refused ([`MetaError::Fenced`]); 0 writes unfenced.
pub struct GroupState {
    group: Arc<dyn MetaService>,
    term: u64,
}

impl GroupState {
    pub fn new(group: Arc<dyn MetaService>, term: u64) -> Self {
        Self { group, term }
    }
}

#[async_trait]
impl StateStore for GroupState {
    async fn put(&self, key: &str, value: Option<Vec<u8>>) -> Result<(), JournalError> {
        let req = MetaRequest::CoordPut {
            term: self.term,
            key: key.to_string(),
            value,
        };
        match self.group.call(crate::calls::tag(), req).await {
            Ok(_) => Ok(()),
            Err(e) => Err(JournalError::State(e)),
        }
    }

    async fn scan(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, JournalError> {
        let req = MetaRequest::CoordScan {
            prefix: prefix.to_string(),
        };
        let tag = ClientTag { client: 0, seq: 0 };
        match self.group.call(tag, req).await {
            Ok(MetaResponse::Records(r)) => Ok(r),
            Ok(other) => Err(JournalError::State(MetaError::Internal(format!(
                "CoordScan answered {other:?}"
            )))),
            Err(e) => Err(JournalError::State(e)),
        }
    }

    fn term(&self) -> u64 {
        self.term
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn exercise(s: &dyn StateStore) {
        s.put("renames/rename-2", Some(b"two".to_vec()))
            .await
            .unwrap();
        s.put("renames/rename-1", Some(b"one".to_vec()))
            .await
            .unwrap();
        s.put("links/link-1", Some(b"l".to_vec())).await.unwrap();
        s.put("exceptions", Some(b"t".to_vec())).await.unwrap();
        s.put("renames/rename-1", Some(b"uno".to_vec()))
            .await
            .unwrap();
        assert_eq!(
            s.scan("renames/rename-").await.unwrap(),
            vec![
                ("renames/rename-1".to_string(), b"uno".to_vec()),
                ("renames/rename-2".to_string(), b"two".to_vec())
            ]
        );
        s.put("renames/rename-2", None).await.unwrap();
        s.put("renames/rename-9", None).await.unwrap();
        assert_eq!(s.scan("renames/").await.unwrap().len(), 1);
        assert_eq!(
            s.scan("exceptions").await.unwrap(),
            vec![("exceptions".to_string(), b"t".to_vec())]
        );
        assert!(s.scan("keys/").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn memory_and_files_keep_the_same_records() {
        exercise(&MemState::default()).await;
        let dir = tempfile::tempdir().unwrap();
        exercise(&DirState::new(dir.path())).await;
        // The files are where the journals always kept them.
        assert!(dir.path().join("renames/rename-1.json").exists());
        assert!(dir.path().join("exceptions.json").exists());
    }
}
