//! The members of a replicated chunk store: each a stable id (what placement ranks,
//! [`crate::placement`]), the RPC address it is reached at now, and its zone.

use std::sync::Arc;

use crate::error::ChunkError;
use crate::store::ChunkStore;

/// One chunkstore of the cluster.
#[derive(Clone)]
pub struct Member {
    /// Its id in placement: the same in every process, and kept when its address changes.
    pub name: String,
    /// Where it is reached (its RPC address; the id of a member listed before ids existed).
    pub addr: String,
    /// Its failure domain: copies of a chunk go to distinct zones when there are enough.
    pub zone: String,
    pub store: Arc<dyn ChunkStore>,
    /// In this process: read first.
    pub local: bool,
    /// New chunks may be placed here (false: it is being drained before it leaves).
    pub placing: bool,
}

impl Member {
    /// A member that takes new chunks, in no zone, its address its id.
    pub fn placing(name: impl Into<String>, store: Arc<dyn ChunkStore>, local: bool) -> Self {
        let name = name.into();
        Self {
            addr: name.clone(),
            name,
            zone: String::new(),
            store,
            local,
            placing: true,
        }
    }
}

/// A member as a member list names it (no store yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// Its stable id ([`Member::name`]).
    pub id: String,
    pub addr: String,
    pub zone: String,
    pub placing: bool,
}

impl MemberInfo {
    /// A placing member in no zone whose id is its address (a list from a configuration).
    pub fn at(addr: &str) -> Self {
        Self {
            id: addr.to_string(),
            addr: addr.to_string(),
            zone: String::new(),
            placing: true,
        }
    }

    pub fn of(m: &Member) -> Self {
        Self {
            id: m.name.clone(),
            addr: m.addr.clone(),
            zone: m.zone.clone(),
            placing: m.placing,
        }
    }
}

/// Members for `list`: the store already `known` under the id at the same address, this
/// process's own (`local`: its id and store), or one reached through `pool` (a member that
/// moved to another address is dialled there).
pub(crate) fn members_for(
    list: &[MemberInfo],
    known: &[Member],
    local: Option<&(String, Arc<dyn ChunkStore>)>,
    pool: Option<&saker_rpc::ChannelPool>,
) -> Result<Vec<Member>, ChunkError> {
    let mut members = Vec::with_capacity(list.len());
    for info in list {
        let here = local.filter(|(id, _)| *id == info.id);
        let store = if let Some((_, s)) = here {
            s.clone()
        } else if let Some(m) = known
            .iter()
            .find(|m| m.name == info.id && m.addr == info.addr)
        {
            m.store.clone()
        } else {
            let pool = pool.ok_or_else(|| {
                ChunkError::Unavailable(format!("no way to reach chunkstore {}", info.id))
            })?;
            let channel = pool
                .get(&info.addr)
                .map_err(|e| ChunkError::Unavailable(e.to_string()))?;
            Arc::new(crate::RemoteChunkStore::new(channel)) as Arc<dyn ChunkStore>
        };
        members.push(Member {
            name: info.id.clone(),
            addr: info.addr.clone(),
            zone: info.zone.clone(),
            store,
            local: here.is_some(),
            placing: info.placing,
        });
    }
    Ok(members)
}
