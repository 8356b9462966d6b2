//! Parsing and checking process files, and what they describe.

use super::*;

const CLUSTER: &str = r#"
[cluster]
credential = "/etc/saker/cluster-credential.json"
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
    assert_eq!(map.endpoints.mnode(3, "x"), ["127.0.0.1:9913"]);
    assert_eq!(cfg.hosted(), (1, vec![2]));
    assert_eq!(map.endpoints.coordinator("x"), "127.0.0.1:9910");
    assert_eq!(map.endpoints.chunkstores("x"), ["127.0.0.1:9914"]);
    assert_eq!(map.endpoints.chunk_replicas, 1);
    map.router().unwrap();
}

/// The shipped example clusters parse, and every file of one cluster describes the same
/// cluster: three nodes, each a replica of every group and of the coordinator, and a
/// chunkstore holding a copy of every chunk.
#[test]
fn the_deploy_configs_are_consistent() {
    let dirs = [
        [
            include_str!("../../../../deploy/local-cluster/node1.toml"),
            include_str!("../../../../deploy/local-cluster/node2.toml"),
            include_str!("../../../../deploy/local-cluster/node3.toml"),
        ],
        [
            include_str!("../../../../deploy/docker/node1.toml"),
            include_str!("../../../../deploy/docker/node2.toml"),
            include_str!("../../../../deploy/docker/node3.toml"),
        ],
    ];
    for files in dirs {
        let cfgs: Vec<ProcessConfig> = files
            .iter()
            .map(|t| ProcessConfig::parse(t).unwrap())
            .collect();
        let map = cfgs[0].cluster_map();
        assert!(cfgs.iter().all(|c| c.cluster_map() == map));
        for (i, c) in cfgs.iter().enumerate() {
            assert_eq!(c.hosted(), (i as u64 + 1, map.groups.clone()));
            assert!(c.has(Role::Gateway) && c.s3_addr.is_some());
        }
        assert!(cfgs
            .iter()
            .all(|c| c.has(Role::Coordinator) && c.has(Role::Chunkstore)));
        assert_eq!(map.endpoints.chunkstores.len(), 3);
        assert_eq!(map.endpoints.chunk_replicas, 3);
        // A node-shaped cluster names no coordinator process.
        let text = files[0].replace("[cluster]", "[cluster]\ncoordinator = \"127.0.0.1:9902\"");
        let err = format!("{:#}", ProcessConfig::parse(&text).unwrap_err());
        assert!(err.contains("group 1"), "{err}");
    }
}

/// Six nodes in three zones: every group's voters in three zones, the chunkstores in
/// their nodes' zones; a node's own zone must agree, and a node may move to an address
/// of its own.
#[test]
fn zones_spread_the_voters_and_a_node_may_move() {
    let six = include_str!("../../../../deploy/local-cluster/node1.toml")
        .replace(
            "nodes = [\"127.0.0.1:9902\", \"127.0.0.1:9912\", \"127.0.0.1:9922\"]",
            "nodes = [\"127.0.0.1:9902\", \"127.0.0.1:9912\", \"127.0.0.1:9922\", \
             \"127.0.0.1:9932\", \"127.0.0.1:9942\", \"127.0.0.1:9952\"]\n\
             zones = [\"a\", \"a\", \"b\", \"b\", \"c\", \"c\"]",
        )
        .replace("groups = 4", "groups = 6");
    let cfg = ProcessConfig::parse(&six).unwrap();
    assert_eq!(cfg.zone(), "a");
    assert!(
        cfg.summary().contains("node 1 of 6 in zone a"),
        "{}",
        cfg.summary()
    );
    let zone = |a: &Addr| {
        ["a", "a", "b", "b", "c", "c"][cfg.cluster.nodes.iter().position(|n| n == a).unwrap()]
    };
    for (g, voters) in cfg.cluster.placement() {
        let zones: std::collections::BTreeSet<&str> = voters.iter().map(|(_, a)| zone(a)).collect();
        assert_eq!(zones.len(), 3, "group {g}: {voters:?}");
    }
    let chunkstores = cfg.configured_chunkstores();
    assert_eq!(chunkstores.zone_of("127.0.0.1:9912"), Some("a"));
    assert_eq!(chunkstores.zone_of("127.0.0.1:9922"), Some("b"));
    // Its own zone agrees, or the file is refused.
    let own = six.replace("node = 1\n", "node = 1\nzone = \"a\"\n");
    ProcessConfig::parse(&own).unwrap();
    let other = six.replace("node = 1\n", "node = 1\nzone = \"b\"\n");
    let err = format!("{:#}", ProcessConfig::parse(&other).unwrap_err());
    assert!(err.contains("[cluster] zones gives"), "{err}");
    let short = six.replace("\"c\", \"c\"]", "\"c\"]");
    let err = format!("{:#}", ProcessConfig::parse(&short).unwrap_err());
    assert!(err.contains("one zone per node"), "{err}");
    // Node 1 moved to an address of its own; not to another node's.
    let moved = six.replace(
        "rpc_addr = \"127.0.0.1:9902\"",
        "rpc_addr = \"127.0.0.1:9972\"",
    );
    let cfg = ProcessConfig::parse(&moved).unwrap();
    assert!(cfg.moved());
    assert_eq!(cfg.created_at().as_deref(), Some("127.0.0.1:9902"));
    let taken = six.replace(
        "rpc_addr = \"127.0.0.1:9902\"",
        "rpc_addr = \"127.0.0.1:9912\"",
    );
    let err = format!("{:#}", ProcessConfig::parse(&taken).unwrap_err());
    assert!(err.contains("no other node has"), "{err}");
}

#[test]
fn a_node_beyond_the_created_ones_starts_empty_on_an_address_of_its_own() {
    let text = include_str!("../../../../deploy/local-cluster/node4.toml");
    let four = ProcessConfig::parse(text).unwrap();
    assert_eq!(four.hosted(), (4, vec![]));
    let one = ProcessConfig::parse(include_str!("../../../../deploy/local-cluster/node1.toml"));
    assert_eq!(four.cluster_map(), one.unwrap().cluster_map());
    let taken = text.replace("127.0.0.1:9932\"", "127.0.0.1:9912\"");
    let err = format!("{:#}", ProcessConfig::parse(&taken).unwrap_err());
    assert!(err.contains("an rpc_addr of its own"), "{err}");
    let far = text.replace("node = 4", "node = 65");
    let err = format!("{:#}", ProcessConfig::parse(&far).unwrap_err());
    assert!(err.contains("out of range"), "{err}");
}

#[test]
fn a_gateway_needs_no_rpc_listener_but_an_s3_one() {
    parse("roles = [\"gateway\"]\ndata_dir = \"/tmp/g\"\ns3_addr = \"127.0.0.1:9900\"").unwrap();
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
