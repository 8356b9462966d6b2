//! The TOML file of one process of a multi-process cluster (`saker server --config FILE`): the
//! roles it runs, its listeners, its data directory, and where every role of the cluster runs.
//!
//! ```toml
//! roles = ["mnode"]                 # any of gateway, mnode, coordinator, chunkstore
//! data_dir = "/var/lib/saker/mnode2"
//! rpc_addr = "127.0.0.1:9912"       # this process's RPC listener (required unless gateway-only)
//! group = 2                         # mnode: the MNode group this process hosts
//! # s3_addr = "127.0.0.1:9900"      # gateway: the S3 listener
//! # admin_addr = "127.0.0.1:9901"   # optional: /health and /metrics (+ admin API on a gateway)
//!
//! [cluster]                         # the same in every process's file
//! credential = "/etc/saker/cluster-credential.json"  # saker admin cluster-credential create
//! coordinator = "127.0.0.1:9910"
//! mnodes = ["127.0.0.1:9911", "127.0.0.1:9912", "127.0.0.1:9913"]  # groups 1, 2, 3
//! chunkstores = ["127.0.0.1:9914"]
//! ```
//!
//! A replicated cluster is described by its nodes instead: every node hosts a replica of the
//! groups placed on it, and each group has `replication` voters on distinct nodes (group g on
//! nodes g, g+1, ... modulo the node count):
//!
//! ```toml
//! roles = ["gateway", "mnode", "coordinator", "chunkstore"]
//! node = 1                          # this process is node 1 of [cluster] nodes
//! data_dir = "/var/lib/saker/node1"
//! rpc_addr = "127.0.0.1:9902"       # node 1's address in [cluster] nodes
//! s3_addr = "127.0.0.1:9900"
//!
//! [cluster]
//! credential = "/etc/saker/cluster-credential.json"
//! nodes = ["127.0.0.1:9902", "127.0.0.1:9912", "127.0.0.1:9922"]
//! groups = 4                        # MNode groups, fixed at creation
//! replication = 3                   # voters per group and copies per chunk (1..=nodes)
//! chunkstores = ["127.0.0.1:9902", "127.0.0.1:9912", "127.0.0.1:9922"]
//! # zones = ["rack1", "rack2", "rack3"]  # node i's zone: voters and copies go to distinct zones
//! ```
//!
//! Zones (failure domains: racks, rooms) are optional: with them each group's voters and
//! each chunk's copies go to distinct zones whenever there are at least as many zones as
//! copies ([`crate::spread`], `saker_chunkstore::placement`). A node's own `zone = "rack1"`
//! (or `saker server --zone`) must agree with `[cluster] zones`; a node added later is given
//! its zone by its own file or by `saker admin node add --zone`.
//!
//! A node keeps its identity in its data directory, not in its address: started with
//! another `rpc_addr` (one no other node has), it tells its groups and the chunkstore record
//! where it is now, and the other processes find it there without a restart.
//!
//! Every node may run the coordinator role: its coordinator is active while the node leads
//! group 1, whose state machine keeps the coordinator's state.
//!
//! Addresses in `rpc_addr` and `[cluster]` are `host:port`, the host an IP address or a DNS
//! name (a StatefulSet pod's, say); a process whose `rpc_addr` names a host binds
//! `rpc_listen` (e.g. `0.0.0.0:9902`) and is reached at `rpc_addr`.
//!
//! Every process must be given the same `[cluster]` table, and the number of MNode groups is
//! fixed when the MNodes' data directories are created. `nodes` places the groups when the
//! cluster is created; a node numbered beyond it starts empty and is given replicas by
//! `saker admin node add`, and `saker admin node remove` moves a node's replicas away (the
//! replicas a node hosts are kept in its data directory, `groups.json`). `chunkstores` is the
//! list the cluster starts with; node changes keep it as a record from then on
//! ([`crate::chunk_members`]), so an added node's chunkstore need not be listed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context};
use saker_mnode::RING_VNODES;
use saker_rpc::{ClusterMap, Endpoints};
use serde::Deserialize;

/// A role a process can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Gateway,
    Mnode,
    Coordinator,
    Chunkstore,
}

/// One process's configuration file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessConfig {
    pub roles: Vec<Role>,
    pub data_dir: PathBuf,
    /// Where the other processes reach this one's RPC listener.
    pub rpc_addr: Option<Addr>,
    /// The address the RPC listener binds, when `rpc_addr` names a host rather than an IP
    /// address (default: `rpc_addr` itself).
    pub rpc_listen: Option<SocketAddr>,
    /// A process-per-group cluster: the group of this MNode process.
    pub group: Option<u32>,
    /// A replicated cluster: this process's node id (1-based position in `[cluster] nodes`).
    pub node: Option<u64>,
    /// A replicated cluster: this node's zone (failure domain), as `[cluster] zones` gives it
    /// for a node listed there.
    pub zone: Option<String>,
    pub s3_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    pub cluster: ClusterConfigFile,
}

/// Where the roles of the cluster run (RPC addresses).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfigFile {
    /// A process-per-group cluster: the coordinator's process. (A replicated cluster's
    /// coordinator is active on the node leading group 1.)
    pub coordinator: Option<Addr>,
    /// A process-per-group cluster: the process of MNode group i+1 is `mnodes[i]`.
    #[serde(default)]
    pub mnodes: Vec<Addr>,
    /// A replicated cluster: node i+1's RPC address is `nodes[i]`.
    #[serde(default)]
    pub nodes: Vec<Addr>,
    /// A replicated cluster: how many MNode groups.
    pub groups: Option<u32>,
    /// A replicated cluster: voters per group.
    pub replication: Option<u32>,
    pub chunkstores: Vec<Addr>,
    /// A replicated cluster: node i+1's zone is `zones[i]` (none: no zones), fixed at
    /// creation like `nodes`.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Names placed by hash(parent id, name) (`saker server --pathwalk`), fixed at creation.
    #[serde(default)]
    pub pathwalk: Vec<String>,
    /// The cluster's node credential (`saker admin cluster-credential create FILE`): every
    /// process of the cluster holds the same one, and serves only its holders.
    pub credential: PathBuf,
}

/// A `host:port` address another process dials: the host an IP address or a DNS name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addr(String);

impl Addr {
    pub fn parse(s: &str) -> anyhow::Result<Addr> {
        if s.parse::<SocketAddr>().is_ok() {
            return Ok(Addr(s.to_string()));
        }
        let Some((host, port)) = s.rsplit_once(':') else {
            bail!("'{s}' is not host:port");
        };
        ensure!(
            port.parse::<u16>().is_ok_and(|p| p > 0),
            "'{s}': the port must be 1..=65535"
        );
        let label_ok = |l: &str| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        ensure!(
            host.len() <= 253 && host.split('.').all(label_ok),
            "'{s}': the host must be an IP address or a DNS name"
        );
        Ok(Addr(s.to_string()))
    }

    /// The address as an IP socket address, if the host is one.
    pub fn socket(&self) -> Option<SocketAddr> {
        self.0.parse().ok()
    }
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Addr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Addr::parse(&s).map_err(|e| serde::de::Error::custom(format!("{e:#}")))
    }
}

impl ProcessConfig {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let cfg: ProcessConfig = toml::from_str(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// [`ProcessConfig::load`], in `zone` if one is given (`saker server --zone`).
    pub fn load_in_zone(path: &Path, zone: Option<String>) -> anyhow::Result<Self> {
        let mut cfg = Self::load(path)?;
        if zone.is_some() {
            cfg.zone = zone;
            cfg.validate()
                .with_context(|| format!("--zone with {}", path.display()))?;
        }
        Ok(cfg)
    }

    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// What the file describes, in a line (`saker server --check-config`).
    pub fn summary(&self) -> String {
        let roles: Vec<String> = self
            .roles
            .iter()
            .map(|r| format!("{r:?}").to_lowercase())
            .collect();
        let c = &self.cluster;
        let place = match (self.node, self.group) {
            (Some(n), _) => format!(
                "node {n} of {}{}, {} groups, replication {}",
                c.nodes.len(),
                match self.zone().as_str() {
                    "" => String::new(),
                    z => format!(" in zone {z}"),
                },
                c.groups.unwrap_or(0),
                c.replication.unwrap_or(1)
            ),
            (None, Some(g)) => format!("group {g} of {}", c.mnodes.len()),
            (None, None) => "no MNode".to_string(),
        };
        let rpc = match (&self.rpc_addr, self.rpc_bind()) {
            (Some(a), Some(b)) if a.socket() == Some(b) => format!(", RPC {a}"),
            (Some(a), Some(b)) => format!(", RPC {a} (binds {b})"),
            _ => String::new(),
        };
        format!("roles {}: {place}{rpc}", roles.join(","))
    }

    /// The address the RPC listener binds (`rpc_listen`, else `rpc_addr`).
    pub fn rpc_bind(&self) -> Option<SocketAddr> {
        self.rpc_listen
            .or_else(|| self.rpc_addr.as_ref().and_then(Addr::socket))
    }

    fn validate(&self) -> anyhow::Result<()> {
        ensure!(!self.roles.is_empty(), "`roles` names no role");
        let c = &self.cluster;
        c.validate()?;
        ensure!(
            !c.chunkstores.is_empty(),
            "[cluster] chunkstores lists no address"
        );
        let serves_rpc = self.roles.iter().any(|r| *r != Role::Gateway);
        if serves_rpc && self.rpc_addr.is_none() {
            bail!("`rpc_addr` is required for the mnode, coordinator and chunkstore roles");
        }
        if let Some(a) = self.rpc_addr.as_ref().filter(|_| self.rpc_bind().is_none()) {
            bail!("rpc_addr {a} names a host: set `rpc_listen` to the address to bind (e.g. 0.0.0.0:9902)");
        }
        ensure!(
            self.rpc_listen.is_none() || self.rpc_addr.is_some(),
            "`rpc_listen` without `rpc_addr` (the address the others reach it at)"
        );
        let here = self.rpc_addr.as_ref();
        if !c.nodes.is_empty() {
            ensure!(
                self.group.is_none(),
                "`group` in a cluster of [cluster] nodes (use `node`)"
            );
            if self.has(Role::Mnode) {
                let Some(n) = self.node else {
                    bail!("the mnode role needs `node` (its position in [cluster] nodes)");
                };
                if n as usize <= c.nodes.len() && !self.moved() {
                    listed_at(here, &c.nodes, n as usize, "node", "nodes")?;
                } else if n as usize <= c.nodes.len() {
                    // A node that came back at another address: one of its own.
                    ensure!(
                        here.is_some_and(|a| !c.nodes.contains(a)),
                        "rpc_addr must be node {n}'s address in [cluster] nodes ({}), or one \
                         no other node has (a node that moved)",
                        c.nodes[n as usize - 1]
                    );
                } else {
                    // A node added later (saker admin node add): it starts with no replica.
                    ensure!(n <= MAX_NODE, "node {n} is out of range 1..={}", MAX_NODE);
                    ensure!(
                        here.is_some_and(|a| !c.nodes.contains(a)),
                        "node {n} (beyond [cluster] nodes, added with saker admin node add) \
                         needs an rpc_addr of its own"
                    );
                }
            }
        } else if self.has(Role::Mnode) {
            ensure!(self.node.is_none(), "`node` without [cluster] nodes");
            let Some(g) = self.group else {
                bail!("the mnode role needs `group`");
            };
            listed_at(here, &c.mnodes, g as usize, "group", "mnodes")?;
        } else {
            ensure!(self.group.is_none(), "`group` without the mnode role");
        }
        match (c.nodes.is_empty(), &c.coordinator) {
            (true, None) => bail!("[cluster] coordinator is required (the coordinator's address)"),
            (true, Some(addr)) => ensure!(
                !self.has(Role::Coordinator) || here == Some(addr),
                "rpc_addr must be [cluster] coordinator ({addr}) in the coordinator's process"
            ),
            (false, Some(_)) => bail!(
                "[cluster] coordinator in a cluster of [cluster] nodes: its coordinator is \
                 active on the node that leads group 1 (remove the line)"
            ),
            (false, None) => ensure!(
                !self.has(Role::Coordinator) || self.has(Role::Mnode),
                "a node's coordinator role needs the mnode role (it is active with group 1's \
                 leader)"
            ),
        }
        // A node added later takes chunks once `saker admin node add` records it.
        let added = self.node.is_some_and(|n| n as usize > c.nodes.len());
        if self.has(Role::Chunkstore) && !added && !self.moved() {
            ensure!(
                here.is_some_and(|a| c.chunkstores.contains(a)),
                "rpc_addr must be listed in [cluster] chunkstores in a chunkstore's process"
            );
        }
        if let Some(z) = &self.zone {
            ensure!(
                crate::chunk_members::valid_zone(z),
                "zone {z:?}: up to 64 letters, digits, '.', '_' or '-'"
            );
            ensure!(
                self.node.is_some(),
                "`zone` without `node` (zones are a node's)"
            );
            let listed = self
                .node
                .and_then(|n| c.zones.get((n as usize).checked_sub(1)?));
            if let Some(listed) = listed {
                ensure!(
                    listed == z,
                    "zone {z:?}, but [cluster] zones gives this node {listed:?}"
                );
            }
        }
        if self.has(Role::Gateway) {
            ensure!(self.s3_addr.is_some(), "the gateway role needs `s3_addr`");
        } else {
            ensure!(self.s3_addr.is_none(), "`s3_addr` without the gateway role");
        }
        Ok(())
    }

    /// Whether this is a node of `[cluster] nodes` at another address than the one listed
    /// there (it moved since the cluster was created).
    pub fn moved(&self) -> bool {
        let c = &self.cluster;
        match (self.node, &self.rpc_addr) {
            (Some(n), Some(here)) => c
                .nodes
                .get((n as usize).wrapping_sub(1))
                .is_some_and(|listed| listed != here),
            _ => false,
        }
    }

    /// The RPC address this node was created at, if it is one of `[cluster] nodes`.
    pub fn created_at(&self) -> Option<String> {
        let n = self.node? as usize;
        self.cluster
            .nodes
            .get(n.checked_sub(1)?)
            .map(Addr::to_string)
    }

    /// This node's zone: its own `zone`, else the one `[cluster] zones` gives it, else none.
    pub fn zone(&self) -> String {
        let listed = self
            .node
            .and_then(|n| self.cluster.zones.get((n as usize).checked_sub(1)?));
        self.zone.clone().or(listed.cloned()).unwrap_or_default()
    }

    /// The chunkstores the cluster is created with, each in its node's zone.
    pub fn configured_chunkstores(&self) -> crate::chunk_members::Membership {
        let c = &self.cluster;
        let members = c
            .chunkstores
            .iter()
            .map(|a| {
                let zone = c
                    .nodes
                    .iter()
                    .position(|n| n == a)
                    .and_then(|i| c.zones.get(i));
                crate::chunk_members::Entry {
                    id: a.to_string(),
                    addr: a.to_string(),
                    zone: zone.cloned().unwrap_or_default(),
                    leaving: false,
                }
            })
            .collect();
        crate::chunk_members::Membership { members }
    }

    /// This process's raft node id and the groups it hosts a replica of (none without the
    /// mnode role).
    pub fn hosted(&self) -> (u64, Vec<u32>) {
        if !self.has(Role::Mnode) {
            return (0, vec![]);
        }
        match (self.node, self.group) {
            (Some(node), _) => {
                let groups = self
                    .cluster
                    .placement()
                    .into_iter()
                    .filter(|(_, voters)| voters.iter().any(|(id, _)| *id == node))
                    .map(|(g, _)| g)
                    .collect();
                (node, groups)
            }
            (None, Some(g)) => (1, vec![g]),
            (None, None) => (0, vec![]),
        }
    }

    /// The cluster map every process of this cluster serves.
    pub fn cluster_map(&self) -> ClusterMap {
        let c = &self.cluster;
        let placement = c.placement();
        let groups: Vec<u32> = placement.keys().copied().collect();
        let mnodes: BTreeMap<u32, Vec<String>> = placement
            .into_iter()
            .map(|(g, voters)| (g, voters.iter().map(|(_, a)| a.to_string()).collect()))
            .collect();
        ClusterMap {
            version: 1,
            groups,
            vnodes: RING_VNODES,
            exceptions: pathwalk_table(&c.pathwalk),
            endpoints: Endpoints {
                mnodes,
                coordinator: c.coordinator.as_ref().map(Addr::to_string),
                chunkstores: c.chunkstores.iter().map(|a| a.to_string()).collect(),
                chunk_replicas: c.replication.filter(|_| !c.nodes.is_empty()).unwrap_or(1),
            },
        }
    }
}

/// Checks that `what` `i` (1-based) is in `[cluster] list` and that `here` is its address.
fn listed_at(
    here: Option<&Addr>,
    addrs: &[Addr],
    i: usize,
    what: &str,
    list: &str,
) -> anyhow::Result<()> {
    ensure!(
        i >= 1 && i <= addrs.len(),
        "{what} {i} is not in [cluster] {list} ({what}s 1..={})",
        addrs.len()
    );
    ensure!(
        here == Some(&addrs[i - 1]),
        "rpc_addr must be {what} {i}'s address in [cluster] {list} ({})",
        addrs[i - 1]
    );
    Ok(())
}

impl ClusterConfigFile {
    fn validate(&self) -> anyhow::Result<()> {
        if self.nodes.is_empty() {
            ensure!(
                (1..=256).contains(&self.mnodes.len()),
                "[cluster] mnodes must list 1..=256 addresses (or use nodes)"
            );
            ensure!(
                self.groups.is_none() && self.replication.is_none(),
                "[cluster] groups and replication go with nodes, not mnodes"
            );
            return Ok(());
        }
        ensure!(
            self.mnodes.is_empty(),
            "[cluster] lists both mnodes and nodes: use one"
        );
        ensure!(
            self.nodes.len() <= 64,
            "[cluster] nodes lists more than 64 nodes"
        );
        let groups = self.groups.unwrap_or(0);
        ensure!(
            (1..=256).contains(&groups),
            "[cluster] groups must be 1..=256"
        );
        let r = self.replication.unwrap_or(0) as usize;
        ensure!(
            r >= 1 && r <= self.nodes.len(),
            "[cluster] replication must be 1..={} (the node count)",
            self.nodes.len()
        );
        ensure!(
            self.zones.is_empty() || self.zones.len() == self.nodes.len(),
            "[cluster] zones must give one zone per node ({} nodes, {} zones)",
            self.nodes.len(),
            self.zones.len()
        );
        if let Some(z) = self
            .zones
            .iter()
            .find(|z| !crate::chunk_members::valid_zone(z))
        {
            bail!("[cluster] zones: {z:?} is not up to 64 letters, digits, '.', '_' or '-'");
        }
        Ok(())
    }

    /// Every group's voters in placement order: raft node id and RPC address (spread over
    /// `zones`, [`crate::spread::initial`]).
    pub fn placement(&self) -> BTreeMap<u32, Vec<(u64, Addr)>> {
        if self.nodes.is_empty() {
            return (1..=self.mnodes.len() as u32)
                .map(|g| (g, vec![(1, self.mnodes[g as usize - 1].clone())]))
                .collect();
        }
        let r = self.replication.unwrap_or(1) as usize;
        let zones = match self.zones.is_empty() {
            true => vec![String::new(); self.nodes.len()],
            false => self.zones.clone(),
        };
        let groups = self.groups.unwrap_or(1);
        crate::spread::initial(&zones, groups, r)
            .into_iter()
            .zip(1..=groups)
            .map(|(nodes, g)| {
                let voters = nodes
                    .into_iter()
                    .map(|i| (i as u64 + 1, self.nodes[i].clone()))
                    .collect();
                (g, voters)
            })
            .collect()
    }
}

/// Raft ids of one node's incarnations: its position, plus this for each lost disk.
pub(crate) const INCARNATION_STEP: u64 = 64;
/// The highest node number (position).
pub const MAX_NODE: u64 = INCARNATION_STEP;
/// The node (position in `[cluster] nodes`) whose incarnation raft id `id` is.
pub(crate) fn position_of(id: u64) -> u64 {
    (id - 1) % INCARNATION_STEP + 1
}

/// The exception table that places `names` by path walk.
pub(crate) fn pathwalk_table(names: &[String]) -> saker_namespace::ExceptionTable {
    let mut t = saker_namespace::ExceptionTable::new();
    for n in names {
        t.set(n.clone(), saker_namespace::Exception::PathWalk);
    }
    t
}

#[cfg(test)]
mod tests;
