//! A replicated cluster of `saker server` nodes on loopback for the tests: three nodes, each
//! with a replica of every MNode group (replication 3), a coordinator replica, a chunkstore
//! (every chunk on all three) and an S3 gateway; a fourth, empty node can join. Or more nodes
//! in zones ([`Nodes::start_zoned`]), three voters and copies each. A [`Writer`] PUTs through
//! one gateway and keeps a ledger of what was acknowledged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, StalledStreamProtectionConfig};
use aws_sdk_s3::Client;
use saker_rpc::{ClientTag, MetaRequest, MetaService, ReplicaStatus, RpcChannel};

use super::*;

pub const GROUPS: u32 = 3;

pub struct Node {
    pub child: Option<Child>,
    pub stderr: Arc<Mutex<Vec<String>>>,
    pub s3: String,
    pub admin: String,
}

/// Three nodes' listeners on loopback: free RPC ports, S3 and admin on any port.
fn loopback() -> Vec<Listen> {
    loopback_n(3)
}

/// `n` nodes' listeners on loopback.
fn loopback_n(n: usize) -> Vec<Listen> {
    free_ports(n)
        .into_iter()
        .map(|p| Listen {
            rpc: format!("127.0.0.1:{p}"),
            s3: "127.0.0.1:0".into(),
            admin: "127.0.0.1:0".into(),
        })
        .collect()
}

/// Three nodes, by index 0..3 (node ids 1..=3).
pub struct Nodes {
    /// Node i's zone, when the cluster has zones ([`Nodes::start_zoned`]).
    pub zones: Vec<String>,
    /// Small disks some nodes' data directories are on ([`Nodes::start_on_small_disks`]);
    /// unmounted before `dir` is removed.
    pub disks: Vec<super::Tmpfs>,
    pub dir: tempfile::TempDir,
    pub rpc: Vec<String>,
    pub nodes: Vec<Node>,
    pub extra_args: Vec<String>,
    /// `ip netns exec NS` of node i, when the nodes run in network namespaces
    /// ([`Nodes::start_in`]); empty on loopback.
    pub netns: Vec<Vec<String>>,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Where node i listens: RPC (also its address in `[cluster] nodes` and `chunkstores`), S3
/// and admin.
struct Listen {
    rpc: String,
    s3: String,
    admin: String,
}

impl Nodes {
    /// Three nodes on loopback (free ports; the S3 and admin listeners on any port).
    pub fn start(extra_args: &[&str]) -> Nodes {
        Self::start_with(loopback(), Vec::new(), extra_args, &[])
    }

    /// [`Nodes::start`] with the cluster credential `credential` writes (an old one, say)
    /// instead of a new one; this process installs none.
    pub fn start_with_credential(extra_args: &[&str], credential: &dyn Fn(&Path)) -> Nodes {
        Self::start_from(loopback(), Vec::new(), extra_args, &[], Some(credential))
    }

    /// Three nodes on loopback, the data directory of each node in `small` (0-based) on a
    /// tmpfs of its own of `size` (a small disk that fills up).
    pub fn start_on_small_disks(small: &[usize], size: &str, extra_args: &[&str]) -> Nodes {
        let disks: Vec<(usize, String)> = small.iter().map(|&i| (i, size.to_string())).collect();
        Self::start_with(loopback(), Vec::new(), extra_args, &disks)
    }

    /// Three nodes, node i in network namespace i of `netns` at its address there (fixed
    /// ports: each namespace has its own), so that `netns` can partition them. This process
    /// reaches every listener through the namespaces' bridge.
    pub fn start_in(netns: &super::netns::Netns, extra_args: &[&str]) -> Nodes {
        assert_eq!(netns.ips.len(), 3, "three namespaces");
        let listen = netns
            .ips
            .iter()
            .map(|ip| Listen {
                rpc: format!("{ip}:9001"),
                s3: format!("{ip}:9000"),
                admin: format!("{ip}:9002"),
            })
            .collect();
        let prefixes = (0..3).map(|i| netns.exec_prefix(i)).collect();
        Self::start_with(listen, prefixes, extra_args, &[])
    }

    /// A node in each of `zones` (node i in `zones[i]`, `[cluster] zones`) on loopback.
    pub fn start_zoned(zones: &[&str], extra_args: &[&str]) -> Nodes {
        let zones: Vec<String> = zones.iter().map(|z| z.to_string()).collect();
        Self::start_in_zones(loopback_n(zones.len()), extra_args, zones)
    }

    fn start_with(
        listen: Vec<Listen>,
        netns: Vec<Vec<String>>,
        extra_args: &[&str],
        small_disks: &[(usize, String)],
    ) -> Nodes {
        Self::start_from(listen, netns, extra_args, small_disks, None)
    }

    fn start_from(
        listen: Vec<Listen>,
        netns: Vec<Vec<String>>,
        extra_args: &[&str],
        small_disks: &[(usize, String)],
        write_credential: Option<&dyn Fn(&Path)>,
    ) -> Nodes {
        let mut n = Self::prepare(
            listen,
            netns,
            extra_args,
            small_disks,
            write_credential,
            vec![],
        );
        n.launch_all();
        n
    }

    fn start_in_zones(listen: Vec<Listen>, extra_args: &[&str], zones: Vec<String>) -> Nodes {
        let mut n = Self::prepare(listen, Vec::new(), extra_args, &[], None, zones);
        n.launch_all();
        n
    }

    /// Writes the nodes' files (node i in `zones[i]`, if given).
    fn prepare(
        listen: Vec<Listen>,
        netns: Vec<Vec<String>>,
        extra_args: &[&str],
        small_disks: &[(usize, String)],
        write_credential: Option<&dyn Fn(&Path)>,
        zones: Vec<String>,
    ) -> Nodes {
        let dir = tempfile::Builder::new()
            .prefix("saker-replicated-")
            .tempdir()
            .unwrap();
        let disks = small_disks
            .iter()
            .map(|(i, size)| {
                let data = dir.path().join(format!("node{}", i + 1));
                std::fs::create_dir(&data).unwrap();
                super::Tmpfs::mount(&data, size)
            })
            .collect();
        let credential = dir.path().join("cluster-credential.json");
        match write_credential {
            Some(write) => write(&credential),
            None => {
                create_credential(&credential);
                install_credential(&credential);
            }
        }
        let nodes_list = listen
            .iter()
            .map(|l| format!("\"{}\"", l.rpc))
            .collect::<Vec<_>>()
            .join(", ");
        let zone_list = match zones.is_empty() {
            true => String::new(),
            false => {
                let z: Vec<String> = zones.iter().map(|z| format!("\"{z}\"")).collect();
                format!("zones = [{}]\n", z.join(", "))
            }
        };
        for (i, l) in listen.iter().enumerate() {
            let text = format!(
                "roles = [\"gateway\", \"mnode\", \"coordinator\", \"chunkstore\"]\n\
                 node = {}\ndata_dir = \"{}\"\nrpc_addr = \"{}\"\n\
                 s3_addr = \"{}\"\nadmin_addr = \"{}\"\n\n[cluster]\n\
                 credential = \"{}\"\nnodes = [{nodes_list}]\ngroups = {GROUPS}\n\
                 replication = 3\nchunkstores = [{nodes_list}]\n{zone_list}",
                i + 1,
                dir.path().join(format!("node{}", i + 1)).display(),
                l.rpc,
                l.s3,
                l.admin,
                credential.display(),
            );
            std::fs::write(dir.path().join(format!("node{}.toml", i + 1)), text).unwrap();
        }
        Nodes {
            zones,
            disks,
            dir,
            rpc: listen.into_iter().map(|l| l.rpc).collect(),
            nodes: Vec::new(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            netns,
        }
    }

    /// Starts every node: all at once, as an operator starts a cluster (a fresh node asks its
    /// peers whether they know it before it decides on its raft id).
    fn launch_all(&mut self) {
        let children: Vec<Child> = (0..self.rpc.len()).map(|i| self.launch(i)).collect();
        for child in children {
            let node = ready(child);
            self.nodes.push(node);
        }
    }

    /// Starts node 4, beyond `[cluster] nodes`: an empty node (its chunkstore listed nowhere
    /// yet) for `saker admin node add`.
    pub fn start_fourth(&mut self) {
        assert_eq!(self.nodes.len(), 3, "three nodes run");
        assert!(self.netns.is_empty(), "a fourth node runs on loopback only");
        let addr = format!("127.0.0.1:{}", free_ports(1)[0]);
        let text = std::fs::read_to_string(self.config(0))
            .unwrap()
            .replace("node = 1\n", "node = 4\n")
            .replace(
                &format!("rpc_addr = \"{}\"", self.rpc[0]),
                &format!("rpc_addr = \"{addr}\""),
            )
            .replace("node1", "node4");
        std::fs::write(self.config(3), text).unwrap();
        self.rpc.push(addr);
        let node = self.spawn(3);
        self.nodes.push(node);
    }

    pub fn spawn(&self, i: usize) -> Node {
        ready(self.launch(i))
    }

    pub fn launch(&self, i: usize) -> Child {
        // In a namespace: `ip netns exec NS saker …` (which execs saker: same pid).
        let mut cmd = match self.netns.get(i) {
            Some(prefix) => {
                let mut c = Command::new("ip");
                c.args(prefix).arg(saker_bin());
                c
            }
            None => Command::new(saker_bin()),
        };
        cmd.args(["server", "--config"])
            .arg(self.config(i))
            .args(&self.extra_args)
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the saker binary")
    }

    pub fn config(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node{}.toml", i + 1))
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self, i: usize) {
        let mut c = self.nodes[i].child.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }

    /// Deletes a stopped node's data directory (a lost disk).
    pub fn wipe(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {} runs", i + 1);
        std::fs::remove_dir_all(self.dir.path().join(format!("node{}", i + 1))).unwrap();
    }

    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {} runs", i + 1);
        self.nodes[i] = self.spawn(i);
    }

    pub fn client(&self, i: usize, retry: bool) -> Client {
        self.client_as(i, retry, ROOT_AK, ROOT_SK)
    }

    pub fn client_as(&self, i: usize, retry: bool, ak: &str, sk: &str) -> Client {
        let mut b = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(ak, sk, None, None, "saker-rep"))
            .endpoint_url(&self.nodes[i].s3)
            .force_path_style(true)
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
        if !retry {
            b = b.retry_config(RetryConfig::disabled());
        }
        Client::from_conf(b.build())
    }

    /// A root client of node `i`'s gateway that never retries and gives up on an operation
    /// after `timeout` (for requests that may hang, e.g. at a node cut off from the others).
    pub fn client_timeout(&self, i: usize, timeout: Duration) -> Client {
        let b = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new(ROOT_AK, ROOT_SK, None, None, "saker-rep"))
            .endpoint_url(&self.nodes[i].s3)
            .force_path_style(true)
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .retry_config(RetryConfig::disabled())
            .timeout_config(TimeoutConfig::builder().operation_timeout(timeout).build());
        Client::from_conf(b.build())
    }

    /// Runs `saker admin ARGS` against node `i`'s admin listener, whatever its outcome.
    pub fn admin_output(&self, i: usize, args: &[&str]) -> std::process::Output {
        Command::new(saker_bin())
            .arg("admin")
            .args(args)
            .args(["--admin-endpoint", &self.nodes[i].admin])
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .stdin(Stdio::null())
            .output()
            .expect("run saker admin")
    }

    /// Runs `saker admin ARGS` against node `i`'s admin listener; panics unless it succeeds.
    pub fn admin(&self, i: usize, args: &[&str]) -> String {
        let out = self.admin_output(i, args);
        assert!(
            out.status.success(),
            "saker admin {args:?} at node {}: {}\nlogs:\n{}",
            i + 1,
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The node whose replica of `g` serves (asked directly, replica by replica: a follower
    /// answers not-leader), waiting out an election.
    pub async fn leader(&self, g: u32) -> usize {
        eventually(&format!("a leader of group {g}"), || async move {
            for (i, addr) in self.rpc.iter().enumerate() {
                if self.nodes[i].child.is_none() {
                    continue;
                }
                let Ok(ch) = RpcChannel::connect(addr).await else {
                    continue;
                };
                let tag = ClientTag { client: 0, seq: 0 };
                if ch.meta(g).call(tag, MetaRequest::Exceptions).await.is_ok() {
                    return Ok(i);
                }
            }
            Err("no replica serves")
        })
        .await
    }

    /// The raft state of node `i`'s replica of group `g`.
    pub async fn replica(&self, i: usize, g: u32) -> Result<ReplicaStatus, String> {
        let ch = RpcChannel::connect(&self.rpc[i])
            .await
            .map_err(|e| e.to_string())?;
        saker_rpc::raft_status(&ch.meta(g), Duration::from_secs(5))
            .await
            .map_err(|e| e.to_string())
    }

    /// Waits until every group's leader counts three voters, none of them `stale` (a raft id
    /// whose data is gone).
    pub async fn wait_voters(&self, stale: &[u64]) {
        for g in 1..=GROUPS {
            let what = format!("three voters in group {g}; logs:\n{}", self.logs());
            eventually(&what, || async move {
                let leader = self.leader(g).await;
                let s = self.replica(leader, g).await?;
                let ids: Vec<u64> = s.voters.iter().map(|(id, _)| *id).collect();
                if ids.len() == 3 && !ids.iter().any(|id| stale.contains(id)) {
                    Ok(())
                } else {
                    Err(format!("voters {ids:?}"))
                }
            })
            .await;
        }
    }

    /// A node's /metrics sample `name{labels}`, summed over matching lines.
    pub async fn metric(&self, i: usize, name_and_labels: &str) -> f64 {
        super::metric(&self.nodes[i].admin, name_and_labels).await
    }

    pub fn stderr(&self, i: usize) -> String {
        self.nodes[i].stderr.lock().unwrap().join("\n")
    }

    pub fn logs(&self) -> String {
        (0..self.nodes.len())
            .map(|i| format!("--- node {}:\n{}\n", i + 1, self.stderr(i)))
            .collect()
    }
}

/// Waits until a launched node is ready.
pub fn ready(mut child: Child) -> Node {
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let found = wait_ready(
        &mut child,
        &stderr,
        &[
            ("data dir:", Want::Text),
            ("S3 endpoint:", Want::Url),
            ("admin:", Want::Url),
        ],
    );
    Node {
        child: Some(child),
        stderr,
        s3: found[1].clone(),
        admin: found[2].clone(),
    }
}

/// What a writer's PUTs left: the acknowledged objects, and when each attempt ended and
/// whether it succeeded.
pub type Ledger = (BTreeMap<String, Vec<u8>>, Vec<(Instant, bool)>);

/// PUTs small objects through one gateway until stopped.
pub struct Writer {
    pub stop: Arc<AtomicBool>,
    pub task: tokio::task::JoinHandle<Ledger>,
}

impl Writer {
    /// Counts each acknowledgement in `acks` as it comes.
    pub fn start(client: Client, bucket: &str, acks: Progress) -> Writer {
        Self::start_under(client, bucket, "w", acks)
    }

    /// Writes keys under `prefix/` (writers sharing a bucket need prefixes of their own).
    pub fn start_under(client: Client, bucket: &str, prefix: &str, acks: Progress) -> Writer {
        Self::start_sized(client, bucket, prefix, acks, (200, 700))
    }

    /// Writes objects of `min` to `min + spread` bytes (above the inline threshold: chunks).
    pub fn start_sized(
        client: Client,
        bucket: &str,
        prefix: &str,
        acks: Progress,
        (min, spread): (usize, usize),
    ) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (bucket, flag) = (bucket.to_string(), stop.clone());
        let prefix = prefix.to_string();
        let task = tokio::spawn(async move {
            let mut acked = BTreeMap::new();
            let mut attempts = Vec::new();
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                n += 1;
                let key = format!("{prefix}/d{}/obj-{n:05}", n % 5);
                let data = random_bytes(min + (n as usize % spread));
                let r = client
                    .put_object()
                    .bucket(&bucket)
                    .key(&key)
                    .body(body(&data))
                    .send()
                    .await;
                attempts.push((Instant::now(), r.is_ok()));
                match r {
                    Ok(_) => {
                        acked.insert(key, data);
                        acks.lock().unwrap().0 += 1;
                    }
                    Err(e) => {
                        acks.lock().unwrap().1 =
                            format!("{key}: {:?}", aws_sdk_s3::error::DisplayErrorContext(&e));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            (acked, attempts)
        });
        Writer { stop, task }
    }

    pub async fn finish(self) -> Ledger {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// A writer's acknowledgements so far and its last error.
pub type Progress = Arc<Mutex<(usize, String)>>;

/// Waits until the writer's ledger grows by `n` acknowledged writes after `since`.
pub async fn writes_resume(nodes: &Nodes, acks: &Progress, since: usize, n: usize) {
    let ok = poll_until(Duration::from_secs(60), || async {
        acks.lock().unwrap().0 >= since + n
    })
    .await;
    if !ok {
        let logs = nodes.logs();
        let last = acks.lock().unwrap().1.clone();
        panic!("writes did not resume within 60 s (at {since} acks; last error {last})\n{logs}");
    }
}

/// The longest stretch without a successful write between `from` and `to`.
pub fn longest_gap(attempts: &[(Instant, bool)], from: Instant, to: Instant) -> Duration {
    let mut last_ok = from;
    let mut gap = Duration::ZERO;
    for (t, ok) in attempts {
        if *t < from || *t > to || !ok {
            continue;
        }
        gap = gap.max(t.duration_since(last_ok));
        last_ok = *t;
    }
    gap
}

/// Every acknowledged object reads back with its bytes and is listed, through node `i`.
pub async fn verify(nodes: &Nodes, i: usize, bucket: &str, acked: &BTreeMap<String, Vec<u8>>) {
    use futures::StreamExt;
    // The bytes are compared whole below (a CRC mismatch would hide whose bytes came back).
    let c = nodes.client(i, true);
    let c = Client::from_conf(
        c.config()
            .to_builder()
            .response_checksum_validation(
                aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired,
            )
            .build(),
    );
    // A few GETs at a time: a long ledger is read back in seconds.
    let reads = futures::stream::iter(acked)
        .map(|(key, data)| {
            let c = &c;
            async move { (key, data, get_bytes(c, bucket, key).await) }
        })
        .buffer_unordered(8);
    futures::pin_mut!(reads);
    while let Some((key, data, got)) = reads.next().await {
        if &got != data {
            let whose: Vec<&String> = acked
                .iter()
                .filter(|(_, d)| d.starts_with(&got))
                .map(|(k, _)| k)
                .collect();
            panic!(
                "{key} through node {}: {} bytes, {} expected, the bytes begin those of {whose:?}\nlogs:\n{}",
                i + 1,
                got.len(),
                data.len(),
                nodes.logs()
            );
        }
    }
    let listed = list_all(&c, bucket, None).await;
    for key in acked.keys() {
        assert!(
            listed.contains(key),
            "{key} not listed through node {}",
            i + 1
        );
    }
}

/// Every chunk id the groups reference as replicated chunks (through a library client of the
/// cluster behind `rpc`).
pub async fn referenced_chunks(rpc: &str) -> Vec<u128> {
    let lib = saker_client::Cluster::connect_all(rpc, Default::default())
        .await
        .unwrap();
    let groups: Vec<u32> = lib.groups().map(|(g, _)| *g).collect();
    let mut ids = Vec::new();
    for g in groups {
        let req = MetaRequest::ChunkRefs {
            after: None,
            limit: saker_rpc::MAX_LIST_PAGE,
            leaks: false,
        };
        match lib.call_group(g, req).await.unwrap() {
            saker_rpc::MetaResponse::ChunkIds(c) => ids.extend(c),
            other => panic!("ChunkRefs answered {other:?}"),
        }
    }
    ids
}

/// The chunk ids the chunkstore at `rpc` holds.
pub async fn chunks_held(rpc: &str) -> std::collections::HashSet<u128> {
    let store = saker_chunkstore::RemoteChunkStore::new(RpcChannel::connect(rpc).await.unwrap());
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    saker_chunkstore::ChunkStore::list_older_than(&store, later)
        .await
        .unwrap_or_else(|e| panic!("chunks at {rpc}: {e}"))
        .into_iter()
        .map(|c| c.0)
        .collect()
}
