//! The chunkstores of a replicated cluster as a replicated record: the list `[cluster]
//! chunkstores` started with, as `saker admin node add` and `node remove` changed it.
//!
//! The record lives in group 1's state (with the coordinator's), and every process that
//! writes or reads chunks (each node's gateway, `saker mount`) follows it, at most
//! [`REFRESH`] behind: its [`ReplicatedChunkStore`] places new chunks on the members the
//! record lists as placing. Until a change is first recorded, the config's list holds.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use saker_chunkstore::ReplicatedChunkStore;
use saker_coordinator::StateStore;
use saker_rpc::CHUNKSTORES_RECORD as PREFIX;
use serde::{Deserialize, Serialize};

const KEY: &str = "chunkstores/members";
/// How far behind the record a process's member list may be.
pub const REFRESH: Duration = Duration::from_secs(2);
/// Members a record may list.
const MAX_MEMBERS: usize = 1024;

/// One chunkstore and whether it takes new chunks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its RPC address (`host:port`), its name in placement.
    pub addr: String,
    /// Being drained before it is removed: it keeps what it holds but takes no new chunk.
    #[serde(default)]
    pub leaving: bool,
}

/// The cluster's chunkstores.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub members: Vec<Entry>,
}

impl Membership {
    /// The members of `store` as they are now.
    pub fn of(store: &ReplicatedChunkStore) -> Self {
        Self {
            members: store
                .members()
                .into_iter()
                .map(|(addr, placing)| Entry {
                    addr,
                    leaving: !placing,
                })
                .collect(),
        }
    }

    /// As `set_members` takes it: (address, placing).
    pub fn list(&self) -> Vec<(String, bool)> {
        self.members
            .iter()
            .map(|e| (e.addr.clone(), !e.leaving))
            .collect()
    }

    /// The addresses of the members that take chunks.
    pub fn placing(&self) -> Vec<&str> {
        self.members
            .iter()
            .filter(|e| !e.leaving)
            .map(|e| e.addr.as_str())
            .collect()
    }

    pub fn position(&self, addr: &str) -> Option<usize> {
        self.members.iter().position(|e| e.addr == addr)
    }

    /// Checks a record read from the state (written by another node: checked, not trusted).
    pub fn check(&self) -> anyhow::Result<()> {
        ensure!(
            self.members.len() <= MAX_MEMBERS,
            "{} chunkstores listed, at most {MAX_MEMBERS}",
            self.members.len()
        );
        ensure!(
            self.members.iter().any(|e| !e.leaving),
            "no chunkstore takes chunks"
        );
        for (i, e) in self.members.iter().enumerate() {
            let Some((host, port)) = e.addr.rsplit_once(':') else {
                bail!("chunkstore address {:?} is not host:port", e.addr);
            };
            ensure!(
                !host.is_empty() && port.parse::<u16>().is_ok() && e.addr.len() <= 255,
                "chunkstore address {:?} is not host:port",
                e.addr
            );
            ensure!(
                !self.members[..i].iter().any(|o| o.addr == e.addr),
                "chunkstore {} listed twice",
                e.addr
            );
        }
        Ok(())
    }
}

/// The recorded membership, if a change was ever recorded.
pub async fn load(state: &dyn StateStore) -> anyhow::Result<Option<Membership>> {
    let records = state.scan(PREFIX).await?;
    let Some((_, value)) = records.into_iter().find(|(k, _)| k == KEY) else {
        return Ok(None);
    };
    let m: Membership =
        serde_json::from_slice(&value).context("the chunkstore record does not parse")?;
    m.check().context("the chunkstore record")?;
    Ok(Some(m))
}

/// Records `m` (checked first).
pub async fn store(state: &dyn StateStore, m: &Membership) -> anyhow::Result<()> {
    m.check()?;
    state.put(KEY, Some(serde_json::to_vec(m)?)).await?;
    Ok(())
}

/// Brings `chunks`' members to the record's now.
pub async fn refresh(state: &dyn StateStore, chunks: &ReplicatedChunkStore) -> anyhow::Result<()> {
    if let Some(m) = load(state).await? {
        chunks.set_members(&m.list())?;
    }
    Ok(())
}

/// Keeps `chunks`' members at the record's, every [`REFRESH`], for as long as the process
/// runs.
pub async fn follow(state: Arc<dyn StateStore>, chunks: Arc<ReplicatedChunkStore>) {
    loop {
        if let Err(e) = refresh(state.as_ref(), &chunks).await {
            tracing::debug!(error = %e, "chunkstore members not refreshed");
        }
        tokio::time::sleep(REFRESH).await;
    }
}

#[cfg(test)]
mod tests {
    use saker_coordinator::MemState;

    use super::*;

    fn entry(addr: &str, leaving: bool) -> Entry {
        Entry {
            addr: addr.into(),
            leaving,
        }
    }

    #[tokio::test]
    async fn a_record_round_trips_and_bad_ones_are_refused() {
        let state = MemState::default();
        assert_eq!(load(&state).await.unwrap(), None);
        let m = Membership {
            members: vec![entry("127.0.0.1:9902", false), entry("node-2:9912", true)],
        };
        store(&state, &m).await.unwrap();
        assert_eq!(load(&state).await.unwrap(), Some(m.clone()));
        assert_eq!(m.placing(), ["127.0.0.1:9902"]);
        assert_eq!(
            m.list(),
            [
                ("127.0.0.1:9902".into(), true),
                ("node-2:9912".into(), false)
            ]
        );
        for bad in [
            vec![entry("127.0.0.1:9902", true)],
            vec![entry("127.0.0.1", false)],
            vec![entry(":9902", false)],
            vec![entry("a:99999", false)],
            vec![entry("a:1", false), entry("a:1", false)],
        ] {
            let m = Membership { members: bad };
            assert!(store(&state, &m).await.is_err(), "{m:?}");
        }
        // A bad record already there (another node's) is refused on load.
        state
            .put(KEY, Some(br#"{"members":[]}"#.to_vec()))
            .await
            .unwrap();
        assert!(load(&state).await.is_err());
    }
}
