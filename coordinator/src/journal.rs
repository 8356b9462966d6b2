//! Logged intents of the coordinator's multi-step protocols (renames, links): one durable JSON
//! file per intent (`<prefix>-<seq>.json`, written to a temporary file, synced and renamed),
//! replayed by the resolver after a restart until each is resolved, or in memory only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use saker_rpc::MetaError;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub struct Journal<T> {
    dir: Option<PathBuf>,
    /// File name prefix of this journal's intents.
    prefix: &'static str,
    pending: Mutex<(u64, BTreeMap<u64, T>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("coordinator journal {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("coordinator journal entry {path}: {source}")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl From<JournalError> for MetaError {
    fn from(e: JournalError) -> Self {
        MetaError::Unavailable(e.to_string())
    }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl<T: Clone + Serialize + DeserializeOwned> Journal<T> {
    /// A journal that does not survive the process (tests, in-memory clusters).
    pub fn in_memory(prefix: &'static str) -> Self {
        Self {
            dir: None,
            prefix,
            pending: Mutex::new((1, BTreeMap::new())),
        }
    }

    /// Opens (creating) the journal in `dir` and loads the intents a previous run left.
    pub fn open(dir: &Path, prefix: &'static str) -> Result<Self, JournalError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut pending = BTreeMap::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let path = entry.map_err(io_err(dir))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let Some(rest) = name.strip_prefix(prefix).and_then(|n| n.strip_prefix('-')) else {
                continue;
            };
            let Some(seq) = rest
                .strip_suffix(".json")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                // A temporary file of an interrupted write: its intent was never logged (or
                // its previous version stands).
                if rest.ends_with(".tmp") {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            };
            let text = std::fs::read(&path).map_err(io_err(&path))?;
            let intent = serde_json::from_slice(&text).map_err(|source| JournalError::Corrupt {
                path: path.clone(),
                source,
            })?;
            pending.insert(seq, intent);
        }
        let next = pending.keys().next_back().map_or(1, |s| s + 1);
        Ok(Self {
            dir: Some(dir.to_path_buf()),
            prefix,
            pending: Mutex::new((next, pending)),
        })
    }

    /// Logs `intent` durably; returns its sequence number.
    pub fn log(&self, intent: &T) -> Result<u64, JournalError> {
        let seq = {
            let mut p = self.pending.lock();
            let seq = p.0;
            p.0 += 1;
            seq
        };
        self.write(seq, intent)?;
        self.pending.lock().1.insert(seq, intent.clone());
        Ok(seq)
    }

    /// Replaces logged intent `seq` (a step's outcome recorded) durably.
    pub fn rewrite(&self, seq: u64, intent: &T) -> Result<(), JournalError> {
        self.write(seq, intent)?;
        self.pending.lock().1.insert(seq, intent.clone());
        Ok(())
    }

    fn write(&self, seq: u64, intent: &T) -> Result<(), JournalError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = dir.join(format!("{}-{seq}.json", self.prefix));
        let tmp = dir.join(format!("{}-{seq}.tmp", self.prefix));
        let body = serde_json::to_vec(intent).expect("intents serialize");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
            f.write_all(&body).map_err(io_err(&tmp))?;
            f.sync_all().map_err(io_err(&tmp))?;
        }
        std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(dir))
    }

    /// Drops a resolved intent.
    pub fn done(&self, seq: u64) {
        if let Some(dir) = &self.dir {
            let path = dir.join(format!("{}-{seq}.json", self.prefix));
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "cannot drop an intent");
                }
            }
        }
        self.pending.lock().1.remove(&seq);
    }

    /// Intent `seq` as logged now, if it is still pending.
    pub fn get(&self, seq: u64) -> Option<T> {
        self.pending.lock().1.get(&seq).cloned()
    }

    pub fn is_pending(&self, seq: u64) -> bool {
        self.pending.lock().1.contains_key(&seq)
    }

    /// The intents not resolved yet, oldest first.
    pub fn pending(&self) -> Vec<(u64, T)> {
        self.pending
            .lock()
            .1
            .iter()
            .map(|(s, i)| (*s, i.clone()))
            .collect()
    }

    pub(crate) fn pending_values(&self) -> Vec<T> {
        self.pending.lock().1.values().cloned().collect()
    }
}
