//! The multi-process shape: a coordinator, three MNode processes (one group each), a chunkstore
//! and a gateway, each a `saker server --config FILE` process on loopback.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, StalledStreamProtectionConfig};
use aws_sdk_s3::Client;

use super::{
    create_credential, free_ports, install_credential, saker_bin, wait_ready, Want, ROOT_AK,
    ROOT_SK,
};

/// The processes of a cluster, by name (`coordinator`, `mnode1` … `mnode3`, `chunkstore`,
/// `gateway`), each with its config file and data directory under one temp dir.
pub struct LocalCluster {
    dir: tempfile::TempDir,
    procs: BTreeMap<String, Proc>,
    /// RPC address of each process but the gateway.
    pub rpc: BTreeMap<String, String>,
    /// The gateway's S3 endpoint.
    pub s3: String,
    /// Environment of every process started.
    env: Vec<(String, String)>,
}

struct Proc {
    child: Option<Child>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for p in self.procs.values_mut() {
            if let Some(mut c) = p.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl LocalCluster {
    pub fn start() -> LocalCluster {
        Self::start_with_env(&[])
    }

    /// Like `start`, every process with the environment variables `env` too.
    pub fn start_with_env(env: &[(&str, &str)]) -> LocalCluster {
        let dir = tempfile::Builder::new()
            .prefix("saker-multiproc-")
            .tempdir()
            .unwrap();
        let ports = free_ports(5);
        let names = ["coordinator", "mnode1", "mnode2", "mnode3", "chunkstore"];
        let rpc: BTreeMap<String, String> = names
            .iter()
            .zip(&ports)
            .map(|(n, p)| (n.to_string(), format!("127.0.0.1:{p}")))
            .collect();
        let credential = dir.path().join("cluster-credential.json");
        create_credential(&credential);
        install_credential(&credential);
        let cluster = format!(
            "[cluster]\ncredential = \"{}\"\ncoordinator = \"{}\"\n\
             mnodes = [\"{}\", \"{}\", \"{}\"]\nchunkstores = [\"{}\"]\n",
            credential.display(),
            rpc["coordinator"],
            rpc["mnode1"],
            rpc["mnode2"],
            rpc["mnode3"],
            rpc["chunkstore"]
        );
        let data = |n: &str| dir.path().join(n).display().to_string();
        let mut files = vec![
            (
                "coordinator".to_string(),
                format!(
                    "roles = [\"coordinator\"]\ndata_dir = \"{}\"\nrpc_addr = \"{}\"\n",
                    data("coordinator"),
                    rpc["coordinator"]
                ),
            ),
            (
                "chunkstore".to_string(),
                format!(
                    "roles = [\"chunkstore\"]\ndata_dir = \"{}\"\nrpc_addr = \"{}\"\n",
                    data("chunkstore"),
                    rpc["chunkstore"]
                ),
            ),
            (
                "gateway".to_string(),
                format!(
                    "roles = [\"gateway\"]\ndata_dir = \"{}\"\ns3_addr = \"127.0.0.1:0\"\n",
                    data("gateway")
                ),
            ),
        ];
        for g in 1..=3 {
            let name = format!("mnode{g}");
            files.push((
                name.clone(),
                format!(
                    "roles = [\"mnode\"]\ndata_dir = \"{}\"\nrpc_addr = \"{}\"\ngroup = {g}\n",
                    data(&name),
                    rpc[&name]
                ),
            ));
        }
        for (name, head) in &files {
            std::fs::write(config_path(dir.path(), name), format!("{head}\n{cluster}")).unwrap();
        }
        let mut c = LocalCluster {
            dir,
            procs: BTreeMap::new(),
            rpc,
            s3: String::new(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        for name in ["coordinator", "mnode1", "mnode2", "mnode3", "chunkstore"] {
            c.spawn(name);
        }
        c.spawn("gateway");
        c
    }

    /// Starts process `name` from its config file and waits until it is ready.
    pub fn spawn(&mut self, name: &str) {
        self.spawn_env(name, &[]);
    }

    /// Like `spawn`, with extra environment variables (e.g. `SAKER_FAILPOINT`).
    pub fn spawn_env(&mut self, name: &str, env: &[(&str, &str)]) {
        let mut child = Command::new(saker_bin())
            .args(["server", "--config"])
            .arg(config_path(self.dir.path(), name))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(env.iter().copied())
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the saker binary");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut wanted = vec![("data dir:", Want::Text)];
        if name == "gateway" {
            wanted.push(("S3 endpoint:", Want::Url));
        }
        let found = wait_ready(&mut child, &stderr, &wanted);
        if name == "gateway" {
            self.s3 = found[1].clone();
        }
        self.procs.insert(
            name.to_string(),
            Proc {
                child: Some(child),
                stderr,
            },
        );
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self, name: &str) {
        let p = self.procs.get_mut(name).expect("a known process");
        let mut c = p.child.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Waits (at most 30 s) until process `name` ends by itself.
    pub fn wait_exit(&mut self, name: &str) -> std::process::ExitStatus {
        let p = self.procs.get_mut(name).expect("a known process");
        let c = p.child.as_mut().expect("running");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                p.child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "{name} did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr(&self, name: &str) -> String {
        self.procs[name].stderr.lock().unwrap().join("\n")
    }

    pub fn client(&self, retry: bool) -> Client {
        let mut b = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(ROOT_AK, ROOT_SK, None, None, "saker-mp"))
            .endpoint_url(&self.s3)
            .force_path_style(true)
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
        if !retry {
            b = b.retry_config(RetryConfig::disabled());
        }
        Client::from_conf(b.build())
    }
}

fn config_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.toml"))
}
