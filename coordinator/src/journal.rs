//! Logged intents of the coordinator's multi-step protocols (renames, links): one record per
//! intent (`<prefix>-<seq>`) in the coordinator's [`StateStore`], replayed by the resolver
//! after a restart or a failover until each is resolved.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use saker_rpc::MetaError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::state::{MemState, StateStore};

pub struct Journal<T> {
    state: Arc<dyn StateStore>,
    /// Record key prefix of this journal's intents (`renames/rename`).
    prefix: String,
    pending: Mutex<(u64, BTreeMap<u64, T>)>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("coordinator state {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("coordinator record {key}: {source}")]
    Corrupt {
        key: String,
        source: serde_json::Error,
    },
    /// The replicated state could not be read or written.
    #[error("coordinator state: {0}")]
    State(MetaError),
}

impl From<JournalError> for MetaError {
    fn from(e: JournalError) -> Self {
        match e {
            JournalError::State(e) => e,
            e => MetaError::Unavailable(e.to_string()),
        }
    }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Decodes record `key`.
pub(crate) fn decode<T: DeserializeOwned>(key: &str, value: &[u8]) -> Result<T, JournalError> {
    serde_json::from_slice(value).map_err(|source| JournalError::Corrupt {
        key: key.to_string(),
        source,
    })
}

impl<T: Clone + Serialize + DeserializeOwned> Journal<T> {
    /// A journal that does not survive the process (tests, in-memory clusters).
    pub fn in_memory(prefix: &str) -> Self {
        Self {
            state: Arc::new(MemState::default()),
            prefix: prefix.to_string(),
            pending: Mutex::new((1, BTreeMap::new())),
        }
    }

    /// The journal of intents `<prefix>-<seq>` in `state`, with those a previous run left.
    pub async fn load(state: Arc<dyn StateStore>, prefix: &str) -> Result<Self, JournalError> {
        let mut pending = BTreeMap::new();
        let start = format!("{prefix}-");
        for (key, value) in state.scan(&start).await? {
            let Some(seq) = key[start.len()..].parse::<u64>().ok() else {
                continue;
            };
            pending.insert(seq, decode(&key, &value)?);
        }
        let next = pending.keys().next_back().map_or(1, |s| s + 1);
        Ok(Self {
            state,
            prefix: prefix.to_string(),
            pending: Mutex::new((next, pending)),
        })
    }

    fn key(&self, seq: u64) -> String {
        format!("{}-{seq}", self.prefix)
    }

    /// Logs `intent` durably; returns its sequence number.
    pub async fn log(&self, intent: &T) -> Result<u64, JournalError> {
        let seq = {
            let mut p = self.pending.lock();
            let seq = p.0;
            p.0 += 1;
            seq
        };
        self.write(seq, intent).await?;
        self.pending.lock().1.insert(seq, intent.clone());
        Ok(seq)
    }

    /// Replaces logged intent `seq` (a step's outcome recorded) durably.
    pub async fn rewrite(&self, seq: u64, intent: &T) -> Result<(), JournalError> {
        self.write(seq, intent).await?;
        self.pending.lock().1.insert(seq, intent.clone());
        Ok(())
    }

    async fn write(&self, seq: u64, intent: &T) -> Result<(), JournalError> {
        let body = serde_json::to_vec(intent).expect("intents serialize");
        self.state.put(&self.key(seq), Some(body)).await
    }

    /// Drops a resolved intent. If the record cannot be dropped, the intent is resolved again
    /// after a restart (resolving is idempotent).
    pub async fn done(&self, seq: u64) {
        if let Err(e) = self.state.put(&self.key(seq), None).await {
            tracing::warn!(key = %self.key(seq), error = %e, "cannot drop an intent");
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
