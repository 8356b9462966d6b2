//! The deploy files that cannot run on this machine (docker compose, Kubernetes, systemd) are
//! checked as far as they can be: the YAML parses, every saker config they mount or carry
//! passes `saker server --check-config` and describes the cluster the manifest runs, the
//! Kubernetes pieces refer to each other, the systemd unit passes `systemd-analyze verify`, and
//! the TiKV compose file advertises only addresses a client on the host reaches.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_yaml::Value;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");

/// `saker server --config FILE --check-config` must pass; its line.
fn check_config(path: &Path) -> String {
    let out = Command::new(saker_bin())
        .args(["server", "--check-config", "--config"])
        .arg(path)
        .output()
        .expect("run saker");
    ok_stdout(out, &format!("--check-config of {}", path.display()))
}

fn yaml_docs(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{DEPLOY}/{path}")).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

#[test]
fn a_bad_config_fails_the_check_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(format!("{DEPLOY}/local-cluster/node2.toml")).unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, text.replace("node = 2", "node = 3")).unwrap();
    let out = Command::new(saker_bin())
        .args(["server", "--check-config", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rpc_addr must be node 3's address"), "{err}");
    // A host name needs an address to bind.
    let hosted = dir.path().join("host.toml");
    std::fs::write(
        &hosted,
        text.replace(
            "rpc_addr = \"127.0.0.1:9912\"",
            "rpc_addr = \"node2.example:9912\"",
        )
        .replace("127.0.0.1:9912\"", "node2.example:9912\""),
    )
    .unwrap();
    let out = Command::new(saker_bin())
        .args(["server", "--check-config", "--config"])
        .arg(&hosted)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("rpc_listen"), "{err}");
    // Nothing was started or created.
    assert!(!dir.path().join("node2").exists());
}

#[test]
fn the_local_cluster_and_compose_configs_pass_the_check() {
    for i in 1..=4 {
        let line = check_config(&PathBuf::from(format!(
            "{DEPLOY}/local-cluster/node{i}.toml"
        )));
        assert!(line.contains(&format!("node {i} of 3")), "{line}");
    }
    let compose = yaml_docs("docker/docker-compose.yml").remove(0);
    let services = compose["services"].as_mapping().unwrap();
    assert_eq!(services.len(), 3);
    for (name, svc) in services {
        let command: Vec<&str> = svc["command"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(s)
            .collect();
        let config = command[command.iter().position(|a| *a == "--config").unwrap() + 1];
        // The mounted file behind the --config path, checked.
        let mounted: BTreeMap<&str, &str> = svc["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|v| {
                let mut parts = s(v).split(':');
                Some((parts.nth(1)?, s(v).split(':').next()?))
            })
            .collect();
        let local = mounted
            .get(config)
            .unwrap_or_else(|| panic!("{name:?}: {config} is not mounted"));
        let line = check_config(&Path::new(DEPLOY).join("docker").join(local));
        assert!(line.contains("replication 3"), "{line}");
    }
}

#[test]
fn the_kubernetes_manifests_hang_together_and_their_configs_pass_the_check() {
    let docs = yaml_docs("kubernetes/saker.yaml");
    let kind = |k: &str| -> Vec<&Value> { docs.iter().filter(|d| s(&d["kind"]) == k).collect() };
    let set = kind("StatefulSet")[0];
    let replicas = set["spec"]["replicas"].as_u64().unwrap();
    assert_eq!(replicas, 3);
    // The headless service the StatefulSet names gives the pods their DNS names.
    let service = s(&set["spec"]["serviceName"]);
    let headless = kind("Service")
        .into_iter()
        .find(|svc| s(&svc["metadata"]["name"]) == service)
        .expect("the StatefulSet's service");
    assert_eq!(s(&headless["spec"]["clusterIP"]), "None");
    assert_eq!(
        headless["spec"]["publishNotReadyAddresses"].as_bool(),
        Some(true)
    );
    let pod = &set["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        s(&container["readinessProbe"]["httpGet"]["path"]),
        "/health"
    );
    assert_eq!(
        set["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
        "data"
    );
    // Every node's config, as the ConfigMap carries it, passes the check and is node i of
    // the StatefulSet's replicas, reached at pod saker-(i-1)'s name.
    let config_map = s(&pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["configMap"].is_mapping())
        .unwrap()["configMap"]["name"]);
    let cm = kind("ConfigMap")
        .into_iter()
        .find(|c| s(&c["metadata"]["name"]) == config_map)
        .expect("the mounted ConfigMap");
    let dir = tempfile::tempdir().unwrap();
    for i in 1..=replicas {
        let text = s(&cm["data"][format!("node{i}.toml").as_str()]);
        let file = dir.path().join(format!("node{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let line = check_config(&file);
        assert!(
            line.contains(&format!("node {i} of {replicas}"))
                && line.contains(&format!("RPC {service}-{}.{service}:9902", i - 1))
                && line.contains("binds 0.0.0.0:9902"),
            "{line}"
        );
    }
    // The command picks node N+1 for pod saker-N, and Kubernetes leaves `$((` alone.
    let args = s(&container["args"][0]);
    assert!(args.contains("$$((") && args.contains("--config"), "{args}");
}

#[test]
fn the_systemd_unit_verifies_and_its_config_passes_the_check() {
    let line = check_config(&PathBuf::from(format!("{DEPLOY}/systemd/node.toml")));
    assert!(line.contains("node 1 of 3"), "{line}");
    // systemd-analyze checks the unit's syntax and that its programs exist: point them at the
    // binary this test runs.
    let unit = std::fs::read_to_string(format!("{DEPLOY}/systemd/saker.service")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("saker.service");
    std::fs::write(
        &local,
        unit.replace("/usr/local/bin/saker", saker_bin().to_str().unwrap()),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&local)
        .output()
        .expect("systemd-analyze (the systemd package) is needed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    assert!(!err.contains("Unknown key"), "{err}");
}

/// Host and port of `addr` (`127.0.0.1:2379`, or a URL `http://127.0.0.1:2379`).
fn host_port(addr: &str) -> (String, u16) {
    let hp = addr.split_once("://").map_or(addr, |(_, rest)| rest);
    let (host, port) = hp
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("{addr}: no port"));
    (host.to_string(), port.parse().expect("a port"))
}

/// The TiKV compose file is usable from the host: every service runs in the host's network
/// namespace and listens on loopback, each on its own ports, and every address PD or a store
/// advertises, and every PD address a service dials, is one a service of the file listens on.
/// (A container name such as `pd:2379` is what a client on the host cannot resolve.)
#[test]
fn the_tikv_compose_file_advertises_addresses_the_host_reaches() {
    let doc = yaml_docs("docker/tikv-compose.yml").remove(0);
    let services = doc["services"].as_mapping().expect("services");
    let flags = |cmd: &Value| -> Vec<(String, String)> {
        let args: Vec<&str> = cmd
            .as_sequence()
            .expect("a command list")
            .iter()
            .map(s)
            .collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < args.len() {
            match args[i].split_once('=') {
                Some((k, v)) if k.starts_with("--") => out.push((k.into(), v.into())),
                _ if args[i].starts_with("--") && i + 1 < args.len() => {
                    out.push((args[i].into(), args[i + 1].into()));
                    i += 1;
                }
                _ => {}
            }
            i += 1;
        }
        out
    };
    let listening = [
        "--client-urls",
        "--peer-urls",
        "--addr",
        "--status-addr",
        "--s3-addr",
        "--admin-addr",
        "--rpc-addr",
    ];
    let advertised = [
        "--advertise-client-urls",
        "--advertise-peer-urls",
        "--advertise-addr",
    ];
    let mut listens: BTreeMap<(String, u16), String> = BTreeMap::new();
    let mut dials: Vec<(String, String, String)> = Vec::new();
    for (name, svc) in services {
        let name = s(name);
        // `<<: *tikv` merges the anchor's keys; serde_yaml leaves the merge key as is.
        let network = svc
            .get("network_mode")
            .or_else(|| svc.get("<<").and_then(|m| m.get("network_mode")));
        assert_eq!(
            network.map(s),
            Some("host"),
            "{name}: the host's network, so what it advertises is the host's"
        );
        for (flag, value) in flags(&svc["command"]) {
            if listening.contains(&flag.as_str()) {
                let (host, port) = host_port(&value);
                assert_eq!(host, "127.0.0.1", "{name} {flag}={value}: loopback only");
                let taken = listens.insert((host, port), format!("{name} {flag}"));
                assert!(taken.is_none(), "{name} {flag}={value}: port of {taken:?}");
            } else if advertised.contains(&flag.as_str()) || flag == "--pd" {
                dials.push((name.to_string(), flag, value));
            }
        }
    }
    assert!(
        dials.len() >= 7,
        "PD's two, three stores', three --pd: {dials:?}"
    );
    for (name, flag, value) in dials {
        for addr in value.split(',') {
            let (host, port) = host_port(addr);
            let owner = listens.get(&(host.clone(), port));
            assert!(
                owner.is_some(),
                "{name} {flag}={addr}: no service of the file listens there"
            );
            if flag == "--pd" {
                assert!(owner.unwrap().starts_with("pd "), "{name} {flag}={addr}");
            }
        }
    }
}
