//! The chunkstores of a replicated cluster as a replicated record: the list `[cluster]
//! chunkstores` started with (each in the zone `[cluster] zones` gives its node), as `saker
//! admin node add` and `node remove` changed it, and as the nodes reported their addresses.
//!
//! The record lives in group 1's state (with the coordinator's), and every process that
//! writes or reads chunks (each node's gateway, `saker mount`) follows it, at most
//! [`REFRESH`] behind: its [`ReplicatedChunkStore`] places new chunks on the members the
//! record lists as placing. Until a change is first recorded, the config's list holds.
//!
//! Each member has a stable id, which placement ranks: the address it was first listed at
//! (a member of a version-1 record keeps its address as its id). A node keeps its
//! chunkstore's id in its data directory ([`local_id`]) and, following the record, writes its
//! current address and zone into its entry when they differ: a node that comes back at
//! another address is found there by every gateway and mount, and no chunk moves.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use saker_chunkstore::{MemberInfo, ReplicatedChunkStore};
use saker_coordinator::StateStore;
use saker_rpc::CHUNKSTORES_RECORD as PREFIX;
use serde::{Deserialize, Serialize};

const KEY: &str = "chunkstores/members";
/// How far behind the record a process's member list may be.
pub const REFRESH: Duration = Duration::from_secs(2);
/// Members a record may list.
const MAX_MEMBERS: usize = 1024;
/// The record's encoding version (1: addresses only, before ids and zones).
const VERSION: u32 = 2;
/// Where a node keeps its chunkstore's id.
const ID_FILE: &str = "chunkstore-id";

/// One chunkstore: its id, where it is, its zone, and whether it takes new chunks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its id in placement, kept when its address changes.
    pub id: String,
    /// Its RPC address (`host:port`) now.
    pub addr: String,
    /// Its zone ("": none given).
    #[serde(default)]
    pub zone: String,
    /// Being drained before it is removed: it keeps what it holds but takes no new chunk.
    #[serde(default)]
    pub leaving: bool,
}

/// The cluster's chunkstores.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub members: Vec<Entry>,
}

/// The record as stored: its version, then the members.
#[derive(Serialize, Deserialize)]
struct Stored {
    version: u32,
    members: Vec<Entry>,
}

/// The first encoding: members by address, no version marker.
mod v1 {
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub struct Entry {
        pub addr: String,
        #[serde(default)]
        pub leaving: bool,
    }

    #[derive(Deserialize)]
    pub struct Membership {
        pub members: Vec<Entry>,
    }

    /// Each member keeps its address as its id, in no zone.
    pub fn migrate(m: Membership) -> super::Membership {
        let members = m
            .members
            .into_iter()
            .map(|e| super::Entry {
                id: e.addr.clone(),
                addr: e.addr,
                zone: String::new(),
                leaving: e.leaving,
            })
            .collect();
        super::Membership { members }
    }
}

/// Whether `zone` is a zone name: up to 64 of `[A-Za-z0-9._-]` ("" is no zone).
pub fn valid_zone(zone: &str) -> bool {
    zone.len() <= 64
        && zone
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Membership {
    /// The members of `store` as they are now.
    pub fn of(store: &ReplicatedChunkStore) -> Self {
        Self {
            members: store
                .members()
                .into_iter()
                .map(|m| Entry {
                    id: m.id,
                    addr: m.addr,
                    zone: m.zone,
                    leaving: !m.placing,
                })
                .collect(),
        }
    }

    /// As `set_members` takes it.
    pub fn list(&self) -> Vec<MemberInfo> {
        self.members
            .iter()
            .map(|e| MemberInfo {
                id: e.id.clone(),
                addr: e.addr.clone(),
                zone: e.zone.clone(),
                placing: !e.leaving,
            })
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

    /// The member at `addr`.
    pub fn position(&self, addr: &str) -> Option<usize> {
        self.members.iter().position(|e| e.addr == addr)
    }

    /// The zone of the member at `addr`, if one is there.
    pub fn zone_of(&self, addr: &str) -> Option<&str> {
        self.position(addr).map(|i| self.members[i].zone.as_str())
    }

    /// The distinct zones of the placing members.
    pub fn zones(&self) -> std::collections::BTreeSet<&str> {
        self.members
            .iter()
            .filter(|e| !e.leaving)
            .map(|e| e.zone.as_str())
            .collect()
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
                !e.id.is_empty() && e.id.len() <= 255,
                "chunkstore id {:?} is empty or too long",
                e.id
            );
            ensure!(valid_zone(&e.zone), "zone {:?} is not a zone name", e.zone);
            let before = &self.members[..i];
            ensure!(
                !before.iter().any(|o| o.addr == e.addr || o.id == e.id),
                "chunkstore {} ({}) listed twice",
                e.id,
                e.addr
            );
        }
        Ok(())
    }

    /// Parses a stored record, of this version or an older one.
    fn decode(bytes: &[u8]) -> anyhow::Result<Membership> {
        #[derive(Deserialize)]
        struct Marker {
            version: Option<u32>,
        }
        let marker: Marker = serde_json::from_slice(bytes)?;
        match marker.version {
            None => Ok(v1::migrate(serde_json::from_slice(bytes)?)),
            Some(VERSION) => {
                let s: Stored = serde_json::from_slice(bytes)?;
                Ok(Membership { members: s.members })
            }
            Some(v) => bail!("version {v} of the chunkstore record is newer than this binary's"),
        }
    }

    fn encode(&self) -> anyhow::Result<Vec<u8>> {
        Ok(serde_json::to_vec(&Stored {
            version: VERSION,
            members: self.members.clone(),
        })?)
    }
}

/// The recorded membership, if a change was ever recorded.
pub async fn load(state: &dyn StateStore) -> anyhow::Result<Option<Membership>> {
    let records = state.scan(PREFIX).await?;
    let Some((_, value)) = records.into_iter().find(|(k, _)| k == KEY) else {
        return Ok(None);
    };
    let m = Membership::decode(&value).context("the chunkstore record does not parse")?;
    m.check().context("the chunkstore record")?;
    Ok(Some(m))
}

/// Records `m` (checked first).
pub async fn store(state: &dyn StateStore, m: &Membership) -> anyhow::Result<()> {
    m.check()?;
    state.put(KEY, Some(m.encode()?)).await?;
    Ok(())
}

/// This node's chunkstore: its id (kept in the data directory), where it is now, its zone,
/// and the membership the configuration starts the cluster with.
#[derive(Clone, Debug)]
pub struct Me {
    pub id: String,
    pub addr: String,
    pub zone: String,
    pub configured: Membership,
}

impl Me {
    /// What the record should become for this node, if anything: the configured list when
    /// nothing was recorded and it carries zones or an address change, or the record with
    /// this node's entry brought to its address and zone (if it has one).
    fn update(&self, recorded: Option<&Membership>) -> Option<Membership> {
        let mut m = match recorded {
            Some(m) => m.clone(),
            None => self.configured.clone(),
        };
        let i = m.members.iter().position(|e| e.id == self.id)?;
        let e = &mut m.members[i];
        // A node without a zone of its own keeps the one `node add --zone` recorded.
        let zone = match self.zone.is_empty() {
            true => e.zone.clone(),
            false => self.zone.clone(),
        };
        let moved = e.addr != self.addr || e.zone != zone;
        e.addr = self.addr.clone();
        e.zone = zone;
        let zoned = m.members.iter().any(|e| !e.zone.is_empty());
        (moved || (recorded.is_none() && zoned)).then_some(m)
    }
}

/// The id of the chunkstore in `data_dir`: the one kept there, else `addr` (kept from now on).
pub fn local_id(data_dir: &Path, addr: &str) -> anyhow::Result<String> {
    let path = data_dir.join(ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) => Ok(id.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            saker_durable::replace_file(&path, addr.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(addr.to_string())
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Brings `chunks`' members to the record's now, first writing this node's address and zone
/// into it (`me`) where they differ.
pub async fn refresh(
    state: &dyn StateStore,
    chunks: &ReplicatedChunkStore,
    me: Option<&Me>,
) -> anyhow::Result<()> {
    let mut recorded = load(state).await?;
    if let Some(m) = me.and_then(|me| me.update(recorded.as_ref())) {
        store(state, &m).await?;
        tracing::info!(members = ?m.members, "recorded this node's chunkstore address and zone");
        recorded = Some(m);
    }
    if let Some(m) = recorded {
        chunks.set_members(&m.list())?;
    }
    Ok(())
}

/// Keeps `chunks`' members at the record's, every [`REFRESH`], for as long as the process
/// runs (and this node's entry in it, `me`).
pub async fn follow(state: Arc<dyn StateStore>, chunks: Arc<ReplicatedChunkStore>, me: Option<Me>) {
    loop {
        if let Err(e) = refresh(state.as_ref(), &chunks, me.as_ref()).await {
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
            id: addr.into(),
            addr: addr.into(),
            zone: String::new(),
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
        let list = m.list();
        assert_eq!(list.len(), 2);
        assert!(list[0].placing && !list[1].placing);
        assert_eq!(list[1].id, "node-2:9912");
        let mut zoned = entry("a:2", false);
        zoned.zone = "rack/1".into();
        let mut same_id = entry("a:3", false);
        same_id.id = "a:1".into();
        for bad in [
            vec![entry("127.0.0.1:9902", true)],
            vec![entry("127.0.0.1", false)],
            vec![entry(":9902", false)],
            vec![entry("a:99999", false)],
            vec![entry("a:1", false), entry("a:1", false)],
            vec![entry("a:1", false), same_id],
            vec![zoned],
        ] {
            let m = Membership { members: bad };
            assert!(store(&state, &m).await.is_err(), "{m:?}");
        }
        // A bad record already there (another node's) is refused on load.
        state
            .put(KEY, Some(br#"{"version":2,"members":[]}"#.to_vec()))
            .await
            .unwrap();
        assert!(load(&state).await.is_err());
        // So is one of a later version.
        let later = br#"{"version":3,"members":[{"id":"a:1","addr":"a:1"}]}"#;
        state.put(KEY, Some(later.to_vec())).await.unwrap();
        let err = format!("{:#}", load(&state).await.unwrap_err());
        assert!(err.contains("newer"), "{err}");
    }

    #[tokio::test]
    async fn a_version_1_record_keeps_addresses_as_ids() {
        let state = MemState::default();
        let v1 = br#"{"members":[{"addr":"127.0.0.1:9902"},{"addr":"n2:9912","leaving":true}]}"#;
        state.put(KEY, Some(v1.to_vec())).await.unwrap();
        let m = load(&state).await.unwrap().unwrap();
        assert_eq!(
            m.members,
            [entry("127.0.0.1:9902", false), entry("n2:9912", true)]
        );
        // Written back, it carries its version.
        store(&state, &m).await.unwrap();
        let raw = state.scan(PREFIX).await.unwrap().remove(0).1;
        assert!(raw.starts_with(br#"{"version":2,"#), "{raw:?}");
    }

    #[test]
    fn a_node_writes_its_new_address_and_its_zone_into_its_entry() {
        let configured = Membership {
            members: vec![entry("h:1", false), entry("h:2", false)],
        };
        let me = |addr: &str, zone: &str| Me {
            id: "h:2".into(),
            addr: addr.into(),
            zone: zone.into(),
            configured: configured.clone(),
        };
        // Nothing to say: same address, no zones anywhere.
        assert_eq!(me("h:2", "").update(None), None);
        assert_eq!(me("h:2", "").update(Some(&configured)), None);
        // Moved: the entry keeps its id and takes the address.
        let moved = me("h:7", "").update(Some(&configured)).unwrap();
        assert_eq!(
            (moved.members[1].id.as_str(), moved.members[1].addr.as_str()),
            ("h:2", "h:7")
        );
        // Zones configured and nothing recorded: the configured list is recorded.
        let mut zoned = configured.clone();
        zoned.members[0].zone = "a".into();
        let first = Me {
            configured: zoned,
            ..me("h:2", "b")
        };
        let m = first.update(None).unwrap();
        assert_eq!(m.zones().into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(first.update(Some(&m)), None);
        // A node without a zone of its own keeps the recorded one.
        assert_eq!(me("h:2", "").update(Some(&m)), None);
        // A node the record does not list (removed) writes nothing.
        let gone = Me {
            id: "h:9".into(),
            ..me("h:9", "z")
        };
        assert_eq!(gone.update(Some(&configured)), None);
    }

    #[test]
    fn a_data_directory_keeps_its_chunkstore_id() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(local_id(dir.path(), "h:1").unwrap(), "h:1");
        assert_eq!(local_id(dir.path(), "h:5").unwrap(), "h:1");
    }
}
