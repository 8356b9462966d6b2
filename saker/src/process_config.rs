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
//! coordinator = "127.0.0.1:9910"
//! mnodes = ["127.0.0.1:9911", "127.0.0.1:9912", "127.0.0.1:9913"]  # groups 1, 2, 3
//! chunkstores = ["127.0.0.1:9914"]
//! ```
//!
//! Membership is static: every process must be given the same `[cluster]` table, and the number
//! of MNode groups is fixed when the MNodes' data directories are created.

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
    pub rpc_addr: Option<SocketAddr>,
    pub group: Option<u32>,
    pub s3_addr: Option<SocketAddr>,
    pub admin_addr: Option<SocketAddr>,
    pub cluster: ClusterConfigFile,
}

/// Where the roles of the cluster run (RPC addresses).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfigFile {
    pub coordinator: SocketAddr,
    /// The process of MNode group i+1 is `mnodes[i]`.
    pub mnodes: Vec<SocketAddr>,
    pub chunkstores: Vec<SocketAddr>,
    /// Names placed by hash(parent id, name) (`saker server --pathwalk`), fixed at creation.
    #[serde(default)]
    pub pathwalk: Vec<String>,
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

    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    fn validate(&self) -> anyhow::Result<()> {
        ensure!(!self.roles.is_empty(), "`roles` names no role");
        let c = &self.cluster;
        ensure!(
            (1..=256).contains(&c.mnodes.len()),
            "[cluster] mnodes must list 1..=256 addresses"
        );
        ensure!(
            !c.chunkstores.is_empty(),
            "[cluster] chunkstores lists no address"
        );
        let serves_rpc = self.roles.iter().any(|r| *r != Role::Gateway);
        if serves_rpc && self.rpc_addr.is_none() {
            bail!("`rpc_addr` is required for the mnode, coordinator and chunkstore roles");
        }
        let here = self.rpc_addr;
        if self.has(Role::Mnode) {
            let Some(g) = self.group else {
                bail!("the mnode role needs `group`");
            };
            ensure!(
                g >= 1 && (g as usize) <= c.mnodes.len(),
                "group {g} is not in [cluster] mnodes (groups 1..={})",
                c.mnodes.len()
            );
            ensure!(
                here == Some(c.mnodes[g as usize - 1]),
                "rpc_addr must be group {g}'s address in [cluster] mnodes ({})",
                c.mnodes[g as usize - 1]
            );
        } else {
            ensure!(self.group.is_none(), "`group` without the mnode role");
        }
        if self.has(Role::Coordinator) {
            ensure!(
                here == Some(c.coordinator),
                "rpc_addr must be [cluster] coordinator ({}) in the coordinator's process",
                c.coordinator
            );
        }
        if self.has(Role::Chunkstore) {
            ensure!(
                here.is_some_and(|a| c.chunkstores.contains(&a)),
                "rpc_addr must be listed in [cluster] chunkstores in a chunkstore's process"
            );
        }
        if self.has(Role::Gateway) {
            ensure!(self.s3_addr.is_some(), "the gateway role needs `s3_addr`");
        } else {
            ensure!(self.s3_addr.is_none(), "`s3_addr` without the gateway role");
        }
        Ok(())
    }

    /// The cluster map every process of this cluster serves.
    pub fn cluster_map(&self) -> ClusterMap {
        let c = &self.cluster;
        let groups: Vec<u32> = (1..=c.mnodes.len() as u32).collect();
        let mnodes: BTreeMap<u32, String> = groups
            .iter()
            .map(|&g| (g, c.mnodes[g as usize - 1].to_string()))
            .collect();
        ClusterMap {
            version: 1,
            groups,
            vnodes: RING_VNODES,
            exceptions: crate::server::pathwalk_table(&c.pathwalk),
            endpoints: Endpoints {
                mnodes,
                coordinator: Some(c.coordinator.to_string()),
                chunkstores: c.chunkstores.iter().map(|a| a.to_string()).collect(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = r#"
[cluster]
coordinator = "127.0.0.1:9910"
mnodes = ["127.0.0.1:9911", "127.0.0.1:9912", "127.0.0.1:9913"]
chunkstores = ["127.0.0.1:9914"]
"#;

    fn parse(head: &str) -> anyhow::Result<ProcessConfig> {
        ProcessConfig::parse(&format!("{head}\n{CLUSTER}"))
    }

    #[test]
    fn an_mnode_process_parses_and_maps_every_group() {
        let cfg = parse(
            r#"roles = ["mnode"]
data_dir = "/tmp/m2"
rpc_addr = "127.0.0.1:9912"
group = 2"#,
        )
        .unwrap();
        assert!(cfg.has(Role::Mnode) && !cfg.has(Role::Gateway));
        let map = cfg.cluster_map();
        assert_eq!(map.groups, vec![1, 2, 3]);
        assert_eq!(map.endpoints.mnode(3, "x"), "127.0.0.1:9913");
        assert_eq!(map.endpoints.coordinator("x"), "127.0.0.1:9910");
        assert_eq!(map.endpoints.chunkstore("x"), "127.0.0.1:9914");
        map.router().unwrap();
    }

    /// The shipped example clusters parse, and every file of one cluster describes the same
    /// cluster with each role exactly once.
    #[test]
    fn the_deploy_configs_are_consistent() {
        let dirs = [
            [
                include_str!("../../deploy/local-cluster/coordinator.toml"),
                include_str!("../../deploy/local-cluster/mnode1.toml"),
                include_str!("../../deploy/local-cluster/mnode2.toml"),
                include_str!("../../deploy/local-cluster/mnode3.toml"),
                include_str!("../../deploy/local-cluster/chunkstore.toml"),
                include_str!("../../deploy/local-cluster/gateway.toml"),
            ],
            [
                include_str!("../../deploy/docker/coordinator.toml"),
                include_str!("../../deploy/docker/mnode1.toml"),
                include_str!("../../deploy/docker/mnode2.toml"),
                include_str!("../../deploy/docker/mnode3.toml"),
                include_str!("../../deploy/docker/chunkstore.toml"),
                include_str!("../../deploy/docker/gateway.toml"),
            ],
        ];
        for files in dirs {
            let cfgs: Vec<ProcessConfig> = files
                .iter()
                .map(|t| ProcessConfig::parse(t).unwrap())
                .collect();
            let map = cfgs[0].cluster_map();
            assert!(cfgs.iter().all(|c| c.cluster_map() == map));
            let groups: Vec<u32> = cfgs.iter().filter_map(|c| c.group).collect();
            assert_eq!(groups, vec![1, 2, 3]);
            for role in [Role::Gateway, Role::Coordinator, Role::Chunkstore] {
                assert_eq!(cfgs.iter().filter(|c| c.has(role)).count(), 1, "{role:?}");
            }
        }
    }

    #[test]
    fn a_gateway_needs_no_rpc_listener_but_an_s3_one() {
        parse("roles = [\"gateway\"]\ndata_dir = \"/tmp/g\"\ns3_addr = \"127.0.0.1:9900\"")
            .unwrap();
        let err = parse("roles = [\"gateway\"]\ndata_dir = \"/tmp/g\"").unwrap_err();
        assert!(err.to_string().contains("s3_addr"), "{err}");
    }

    #[test]
    fn inconsistent_files_are_refused_with_the_reason() {
        let cases = [
            // group out of range
            (
                "roles = [\"mnode\"]\ndata_dir = \"/d\"\nrpc_addr = \"127.0.0.1:9911\"\ngroup = 4",
                "group 4",
            ),
            // listener is not the group's address
            (
                "roles = [\"mnode\"]\ndata_dir = \"/d\"\nrpc_addr = \"127.0.0.1:9911\"\ngroup = 2",
                "group 2's address",
            ),
            (
                "roles = [\"mnode\"]\ndata_dir = \"/d\"\nrpc_addr = \"127.0.0.1:9911\"",
                "needs `group`",
            ),
            (
                "roles = [\"coordinator\"]\ndata_dir = \"/d\"\nrpc_addr = \"127.0.0.1:9911\"",
                "coordinator",
            ),
            ("roles = [\"chunkstore\"]\ndata_dir = \"/d\"", "rpc_addr"),
            ("roles = []\ndata_dir = \"/d\"", "no role"),
            ("roles = [\"mdnoe\"]\ndata_dir = \"/d\"", "unknown variant"),
            (
                "roles = [\"gateway\"]\ndata_dir = \"/d\"\ns3_addr = \"127.0.0.1:1\"\nport = 3",
                "unknown field",
            ),
        ];
        for (head, why) in cases {
            let err = format!("{:#}", parse(head).unwrap_err());
            assert!(err.contains(why), "{head:?}: {err}");
        }
    }
}
