//! Kill loops: three replicated nodes under mixed S3 and FUSE load while a random node, or
//! the leader of a random group, is SIGKILLed and restarted, round after round (the seed is
//! printed; `KILL_LOOP_SEED` replays one).
//!
//! Three S3 workers PUT (inline and chunked objects), overwrite, DELETE and GET their own keys,
//! each through its own node's gateway or another node's while that one is down; a FUSE worker
//! writes and removes files through a `saker mount` of the cluster. Every operation goes into
//! one ledger: an acknowledged write fixes what its key holds, one that failed adds what it may
//! have left (until the key's next acknowledged write: raft orders a failed write's entry, if
//! it commits at all, before any entry proposed after it failed). The S3 clients retry as the
//! SDK does by default, so only requests cut by the kill itself end without an answer. Every GET during the load, and every key after each round (the load paused),
//! must read back one of the states the ledger allows, byte for byte.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_s3::Client;
use common::cluster::*;
use common::fuse::*;
use common::*;
use rand::{Rng, SeedableRng};
use tokio::sync::RwLock;

const ROUNDS: usize = 6;
/// Keys per S3 worker: few, so most PUTs overwrite and DELETEs hit.
const KEYS: usize = 16;
/// Acknowledged operations to wait for before and after each kill.
const PROGRESS: u64 = 25;
const BUCKET: &str = "killloop";

/// What a key may hold: each state the ledger allows (`None`: absent).
type States = Vec<Option<Vec<u8>>>;

#[derive(Default)]
struct Ledger {
    keys: BTreeMap<String, States>,
    acked: u64,
    /// Of `acked`: through the mount.
    by_mount: u64,
    unknown: u64,
    reads: u64,
}

impl Ledger {
    /// An acknowledged write: `key` now holds `state`, nothing else.
    fn acked(&mut self, key: &str, state: Option<Vec<u8>>) {
        self.keys.insert(key.to_string(), vec![state]);
        self.acked += 1;
    }

    /// A write that failed: it may have left any of `states` (besides what was allowed).
    fn unknown(&mut self, key: &str, states: impl IntoIterator<Item = Option<Vec<u8>>>) {
        let allowed = self.keys.entry(key.to_string()).or_insert(vec![None]);
        for s in states {
            if !allowed.contains(&s) {
                allowed.push(s);
            }
        }
        self.unknown += 1;
    }

    /// Panics unless `got` is a state `key` may hold.
    fn check(&mut self, key: &str, got: &Option<Vec<u8>>, through: &str) {
        let none = vec![None];
        let allowed = self.keys.get(key).unwrap_or(&none);
        assert!(
            allowed.contains(got),
            "{key} through {through}: read {}, the ledger allows {:?}",
            describe(got),
            allowed.iter().map(describe).collect::<Vec<_>>()
        );
        self.reads += 1;
    }
}

fn describe(s: &Option<Vec<u8>>) -> String {
    match s {
        None => "absent".into(),
        Some(b) => format!("{} bytes {:02x?}", b.len(), &b[..b.len().min(4)]),
    }
}

/// The load's shared state: the ledger, each node's client (`None` while it is down), and the
/// gate every operation holds for reading, which the checker takes for writing to pause it.
struct Load {
    ledger: Mutex<Ledger>,
    clients: Mutex<Vec<Option<Client>>>,
    gate: RwLock<()>,
    stop: AtomicBool,
}

impl Load {
    fn acked(&self) -> u64 {
        self.ledger.lock().unwrap().acked
    }

    /// Node `i`'s client, or the next running node's while `i` is down.
    fn client(&self, i: usize) -> (usize, Client) {
        let clients = self.clients.lock().unwrap();
        (0..clients.len())
            .map(|d| (i + d) % clients.len())
            .find_map(|j| clients[j].clone().map(|c| (j, c)))
            .expect("a node runs")
    }
}

/// A GET: the bytes, `None` on 404, `Err` on anything else (a node going down).
async fn read(c: &Client, key: &str) -> Result<Option<Vec<u8>>, String> {
    match c.get_object().bucket(BUCKET).key(key).send().await {
        Ok(out) => match out.body.collect().await {
            Ok(b) => Ok(Some(b.into_bytes().to_vec())),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => {
            let status = e.raw_response().map(|r| r.status().as_u16());
            if status == Some(404) {
                Ok(None)
            } else {
                Err(format!("{:?}", aws_sdk_s3::error::DisplayErrorContext(&e)))
            }
        }
    }
}

/// One S3 worker: PUTs (inline and chunked sizes), DELETEs and GETs of its own keys.
async fn s3_worker(load: Arc<Load>, i: usize, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    while !load.stop.load(Ordering::Relaxed) {
        let _op = load.gate.read().await;
        let (node, c) = load.client(i);
        let key = format!("s{i}/k{}", rng.gen_range(0..KEYS));
        let roll = rng.gen_range(0..100);
        let ok = if roll < 55 {
            let n = if rng.gen_bool(0.5) {
                rng.gen_range(100..2_000)
            } else {
                rng.gen_range(20_000..160_000)
            };
            let data = random_bytes(n);
            let r = c
                .put_object()
                .bucket(BUCKET)
                .key(&key)
                .body(body(&data))
                .send()
                .await;
            let mut ledger = load.ledger.lock().unwrap();
            match r {
                Ok(_) => ledger.acked(&key, Some(data)),
                Err(_) => ledger.unknown(&key, [Some(data)]),
            }
            r.is_ok()
        } else if roll < 70 {
            let r = c.delete_object().bucket(BUCKET).key(&key).send().await;
            let mut ledger = load.ledger.lock().unwrap();
            match r {
                Ok(_) => ledger.acked(&key, None),
                Err(_) => ledger.unknown(&key, [None]),
            }
            r.is_ok()
        } else {
            match read(&c, &key).await {
                Ok(got) => {
                    let through = format!("node {} during the load", node + 1);
                    load.ledger.lock().unwrap().check(&key, &got, &through);
                    true
                }
                Err(_) => false,
            }
        };
        drop(_op);
        if !ok {
            // A node went down under this request: pace the retries.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The FUSE worker: new files written whole (a close acknowledges them), and now and then one
/// removed, through the mount at `dir` (the bucket's directory).
fn fuse_worker(load: Arc<Load>, dir: PathBuf, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut written: Vec<String> = Vec::new();
    let mut n = 0;
    while !load.stop.load(Ordering::Relaxed) {
        let _op = load.gate.blocking_read();
        let ok = if written.len() > 4 && rng.gen_range(0..100) < 20 {
            let name = written.swap_remove(rng.gen_range(0..written.len()));
            let r = std::fs::remove_file(dir.join(&name));
            let key = format!("f/{name}");
            let mut ledger = load.ledger.lock().unwrap();
            match &r {
                Ok(()) => {
                    ledger.acked(&key, None);
                    ledger.by_mount += 1;
                }
                Err(_) => ledger.unknown(&key, [None]),
            }
            r.is_ok()
        } else {
            n += 1;
            let name = format!("f{n}");
            let data = random_bytes(rng.gen_range(1..100_000));
            let r = std::fs::write(dir.join(&name), &data);
            let key = format!("f/{name}");
            let mut ledger = load.ledger.lock().unwrap();
            match &r {
                Ok(()) => {
                    ledger.acked(&key, Some(data));
                    ledger.by_mount += 1;
                    written.push(name);
                }
                // Created but not written, or not at all: a new file is all or nothing.
                Err(_) => ledger.unknown(&key, [None, Some(Vec::new()), Some(data)]),
            }
            r.is_ok()
        };
        drop(_op);
        if !ok {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Waits until `n` more operations are acknowledged.
async fn progress(nodes: &Nodes, load: &Load, n: u64, what: &str) {
    let since = load.acked();
    let ok = poll_until(Duration::from_secs(90), || async {
        load.acked() >= since + n
    })
    .await;
    assert!(
        ok,
        "{what}: fewer than {n} operations acknowledged in 90 s\n{}",
        nodes.logs()
    );
}

/// With the load paused: every key of the ledger reads back, through node `i`, as a state
/// the ledger allows. Answers the number of keys.
async fn check_all(nodes: &Nodes, load: &Load, i: usize) -> usize {
    let _paused = load.gate.write().await;
    let c = nodes.client(i, true);
    let keys: Vec<String> = load.ledger.lock().unwrap().keys.keys().cloned().collect();
    for key in &keys {
        let got = eventually(&format!("read {key} through node {}", i + 1), || {
            read(&c, key)
        })
        .await;
        let through = format!("node {} after a round", i + 1);
        load.ledger.lock().unwrap().check(key, &got, &through);
    }
    keys.len()
}

/// Mounts the cluster at `mnt` through node 1's RPC address, with the cluster's credential.
fn mount(nodes: &Nodes, mnt: &Path) -> std::process::Child {
    let credential = nodes.dir.path().join("cluster-credential.json");
    spawn_library_mount(mnt, &nodes.rpc[0], &credential, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_node_kills_under_s3_and_fuse_load_lose_no_acknowledged_write() {
    require_fuse();
    require_tool("fusermount3");
    let seed = std::env::var("KILL_LOOP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("kill loop seed {seed} (KILL_LOOP_SEED={seed} replays it)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    let mut nodes = Nodes::start(&[]);
    nodes.wait_voters(&[]).await;
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(BUCKET).send()
    })
    .await;
    let mnt = nodes.dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mut mounted = mount(&nodes, &mnt);
    let dir = mnt.join(BUCKET).join("f");
    std::fs::create_dir(&dir).unwrap();

    let load = Arc::new(Load {
        ledger: Mutex::default(),
        clients: Mutex::new((0..3).map(|i| Some(nodes.client(i, true))).collect()),
        gate: RwLock::new(()),
        stop: AtomicBool::new(false),
    });
    let workers: Vec<_> = (0..3)
        .map(|i| tokio::spawn(s3_worker(load.clone(), i, rng.gen())))
        .collect();
    let fuse = {
        let (load, seed) = (load.clone(), rng.gen());
        tokio::task::spawn_blocking(move || fuse_worker(load, dir, seed))
    };

    let mut checked = 0;
    for round in 0..ROUNDS {
        progress(&nodes, &load, PROGRESS, "before the kill").await;
        // Even rounds: a random node; odd rounds: the leader of a random group.
        let victim = if round % 2 == 0 {
            rng.gen_range(0..3)
        } else {
            nodes.leader(rng.gen_range(1..=GROUPS)).await
        };
        load.clients.lock().unwrap()[victim] = None;
        nodes.kill(victim);
        progress(&nodes, &load, PROGRESS, "with a node down").await;
        nodes.restart(victim);
        load.clients.lock().unwrap()[victim] = Some(nodes.client(victim, true));
        progress(&nodes, &load, PROGRESS, "after the restart").await;
        let keys = check_all(&nodes, &load, rng.gen_range(0..3)).await;
        checked += keys;
        eprintln!(
            "round {round}: killed node {}, {keys} keys checked",
            victim + 1
        );
    }
    load.stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    fuse.await.unwrap();
    // Every node, in turn, serves the same answers.
    for i in 0..3 {
        checked += check_all(&nodes, &load, i).await;
    }
    // The mount reads back what it wrote (its own caches are coherent with its own writes).
    let mut l = load.ledger.lock().unwrap();
    let files: Vec<String> = l
        .keys
        .keys()
        .filter(|k| k.starts_with("f/"))
        .cloned()
        .collect();
    for key in &files {
        let path = mnt.join(BUCKET).join(key);
        let got = match std::fs::read(&path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("read {} through the mount: {e}", path.display()),
        };
        l.check(key, &got, "the mount");
    }
    eprintln!(
        "{ROUNDS} rounds: {} operations acknowledged ({} through the mount), {} of unknown \
         outcome, {} reads checked ({checked} through S3 after rounds, {} through the mount), \
         nothing lost",
        l.acked,
        l.by_mount,
        l.unknown,
        l.reads,
        files.len()
    );
    assert!(l.acked >= (ROUNDS as u64) * 3 * PROGRESS);
    drop(l);
    mounted.kill().unwrap();
    mounted.wait().unwrap();
}
