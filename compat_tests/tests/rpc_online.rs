//! Online credential changes on a 3-node cluster under S3 load, no node restarted: the
//! upgrade from a version-1 credential (plaintext RPC with tokens) to mutual TLS, and a CA
//! rotation. Each step is written to the (shared) credential file with the CLI and applied
//! node by node with `cluster-credential reload`, so the cluster spends a while half at one
//! step and half at the next. Throughout, three writers PUT through the three gateways and a
//! reader GETs through all of them, without retries: not one request may fail, and every
//! acknowledged object reads back afterwards. Once the upgrade is done, the old-format token
//! is refused over plaintext, on a new connection and on one opened before.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::*;
use common::*;
use saker_rpc::auth::{install, install_insecure, Credential};
use saker_rpc::{MetaError, RpcChannel};

const BUCKET: &str = "online";
/// Acknowledged writes each writer must add after each node's reload.
const PROGRESS: usize = 5;

/// The S3 load: a writer per gateway, and a reader of seeded objects through every gateway.
struct Load {
    writers: Vec<(Writer, Progress)>,
    stop: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<(u64, Vec<String>)>,
    reads: Arc<AtomicU64>,
}

impl Load {
    async fn start(nodes: &Nodes) -> Load {
        let s3 = nodes.client(0, true);
        eventually("create the bucket", || {
            s3.create_bucket().bucket(BUCKET).send()
        })
        .await;
        let mut seeded = Vec::new();
        for n in 0..8 {
            let key = format!("seed/{n}");
            let data = random_bytes(if n % 2 == 0 { 1000 } else { 200 * 1024 });
            put(&s3, BUCKET, &key, &data).await;
            seeded.push((key, data));
        }
        let writers = (0..3)
            .map(|i| {
                let acks = Progress::default();
                let w = Writer::start_under(
                    nodes.client(i, false),
                    BUCKET,
                    &format!("w{i}"),
                    acks.clone(),
                );
                (w, acks)
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let clients: Vec<_> = (0..3).map(|i| nodes.client(i, false)).collect();
        let (flag, count) = (stop.clone(), reads.clone());
        let reader = tokio::spawn(async move {
            let mut failed = Vec::new();
            let mut n = 0usize;
            while !flag.load(Ordering::Relaxed) {
                let (key, data) = &seeded[n % seeded.len()];
                let c = &clients[n % 3];
                n += 1;
                match c.get_object().bucket(BUCKET).key(key).send().await {
                    Ok(o) => match o.body.collect().await.map(|b| b.into_bytes()) {
                        Ok(b) if b.as_ref() == data.as_slice() => {}
                        Ok(_) => failed.push(format!("{key}: other bytes")),
                        Err(e) => failed.push(format!("{key}: body: {e}")),
                    },
                    Err(e) => failed.push(format!(
                        "{key} through node {}: {:?}",
                        (n - 1) % 3 + 1,
                        aws_sdk_s3::error::DisplayErrorContext(&e)
                    )),
                }
                count.fetch_add(1, Ordering::Relaxed);
            }
            (n as u64, failed)
        });
        Load {
            writers,
            stop,
            reader,
            reads,
        }
    }

    /// Waits until every writer acknowledged `PROGRESS` more writes, and the reader read more.
    async fn progress(&self, nodes: &Nodes) {
        let reads = self.reads.load(Ordering::Relaxed);
        for (_, acks) in &self.writers {
            let since = acks.lock().unwrap().0;
            writes_resume(nodes, acks, since, PROGRESS).await;
        }
        let more = poll_until(Duration::from_secs(60), || async {
            self.reads.load(Ordering::Relaxed) > reads + 3
        })
        .await;
        assert!(more, "reads stalled\n{}", nodes.logs());
    }

    /// Stops the load; panics if any request failed, else checks every acknowledged object
    /// reads back through every node. Returns (writes, reads) made.
    async fn finish(self, nodes: &Nodes) -> (usize, u64) {
        let mut acked = std::collections::BTreeMap::new();
        let mut writes = 0;
        let mut failed = Vec::new();
        for (w, acks) in self.writers {
            let (ledger, attempts) = w.finish().await;
            writes += attempts.len();
            let bad = attempts.iter().filter(|(_, ok)| !ok).count();
            if bad > 0 {
                failed.push(format!(
                    "{bad} PUTs failed, the last: {}",
                    acks.lock().unwrap().1
                ));
            }
            acked.extend(ledger);
        }
        self.stop.store(true, Ordering::Relaxed);
        let (reads, read_failures) = self.reader.await.unwrap();
        failed.extend(read_failures);
        assert!(
            failed.is_empty(),
            "requests failed during the transition ({writes} PUTs, {reads} GETs): {failed:#?}\n{}",
            nodes.logs()
        );
        for i in 0..3 {
            verify(nodes, i, BUCKET, &acked).await;
        }
        (writes, reads)
    }
}

/// Runs `saker admin cluster-credential ARGS FILE` (offline, on the file).
fn rewrite(args: &[&str], file: &Path) -> String {
    let out = std::process::Command::new(saker_bin())
        .args(["admin", "cluster-credential"])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cluster-credential {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The file rewritten to `step` (`upgrade` or `rotate`), then each node reloaded in turn,
/// the load making progress after each; returns each node's state as it answered.
async fn step(nodes: &Nodes, load: &Load, file: &Path, command: &str, step: &str) -> Vec<String> {
    rewrite(&[command, "--step", step], file);
    let mut states = Vec::new();
    for i in 0..3 {
        let state = nodes.admin(i, &["cluster-credential", "reload"]);
        states.push(state);
        load.progress(nodes).await;
    }
    states
}

async fn health(nodes: &Nodes, i: usize) -> String {
    reqwest::get(format!("{}/health", nodes.nodes[i].admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn map_from(ch: &RpcChannel) -> Result<(), MetaError> {
    ch.cluster_map().await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_upgrades_from_tokens_to_mutual_tls_online_under_load() {
    let v1 = format!(
        "{{\"version\":1,\"kind\":\"node\",\"secret\":\"{}\"}}",
        hex_secret()
    );
    let old = Credential::decode(v1.as_bytes()).unwrap();
    let write = |p: &Path| std::fs::write(p, &v1).unwrap();
    let nodes = Nodes::start_with_credential(&["--insecure-rpc"], &write);
    let file = nodes.dir.path().join("cluster-credential.json");
    install_insecure(old.clone());
    nodes.wait_voters(&[]).await;
    let load = Load::start(&nodes).await;
    load.progress(&nodes).await;

    // Step 1: every node takes TLS too (and warns, on /health), still calls in plaintext.
    // A node that skips a step is refused: it would call TLS to nodes that take none.
    rewrite(&["upgrade", "--step", "accept-tls"], &file);
    let skipped = rewrite(&["upgrade", "--step", "dial-tls"], &file);
    assert!(skipped.contains("dial-tls"), "{skipped}");
    let refused = reload_refused(&nodes, 0);
    assert!(refused.contains("skips a step"), "{refused}");
    rewrite_back_to_accept(&file, &old);
    let states = {
        let mut s = Vec::new();
        for i in 0..3 {
            s.push(nodes.admin(i, &["cluster-credential", "reload"]));
            load.progress(&nodes).await;
        }
        s
    };
    for (i, s) in states.iter().enumerate() {
        assert!(s.contains("accept-tls"), "node {}: {s}", i + 1);
        assert!(health(&nodes, i).await.contains("accepts plaintext"));
    }
    // Step 2: every node calls over TLS. A caller in plaintext with the old token is still
    // served (nodes at step 1 call so): the channel opened here is used again at the end.
    let plaintext_before = plaintext_requests(&nodes).await;
    assert!(plaintext_before > 0.0, "no node served plaintext");
    let states = step(&nodes, &load, &file, "upgrade", "dial-tls").await;
    assert!(states.iter().all(|s| s.contains("dial-tls")), "{states:?}");
    // No node calls in plaintext any more: under the load, no plaintext request is served.
    let plaintext = plaintext_requests(&nodes).await;
    load.progress(&nodes).await;
    assert_eq!(plaintext_requests(&nodes).await, plaintext);
    install_insecure(old.clone());
    let captured = RpcChannel::connect(&nodes.rpc[1]).await.unwrap();
    map_from(&captured).await.unwrap();
    let before = handshakes_refused(&nodes, 0).await;

    // Step 3: mutual TLS only.
    let states = step(&nodes, &load, &file, "upgrade", "done").await;
    for (i, s) in states.iter().enumerate() {
        assert!(s.starts_with("rpc mutual-tls"), "node {}: {s}", i + 1);
        assert_eq!(health(&nodes, i).await, "ok\n");
    }
    let (writes, reads) = load.finish(&nodes).await;
    println!("upgrade: {writes} PUTs and {reads} GETs during the transition, none failed");

    // The old-format token over plaintext is refused: on the connection opened before the
    // last step (closed by the reload), and on a new one (at the handshake).
    let r = map_from(&captured).await;
    assert!(
        r.is_err(),
        "an open plaintext connection still served: {r:?}"
    );
    for rpc in &nodes.rpc {
        let r = match RpcChannel::connect(rpc).await {
            Ok(ch) => map_from(&ch).await,
            Err(e) => Err(e),
        };
        assert!(r.is_err(), "{rpc} served a replayed token: {r:?}");
    }
    assert!(handshakes_refused(&nodes, 0).await > before);
    // The upgraded credential (same file) is what the cluster serves now.
    install(Credential::load(&file).unwrap());
    for rpc in &nodes.rpc {
        map_from(&RpcChannel::connect(rpc).await.unwrap())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_rotates_its_ca_online_under_load() {
    let nodes = Nodes::start(&[]);
    let file = nodes.dir.path().join("cluster-credential.json");
    let before = Credential::load(&file).unwrap();
    nodes.wait_voters(&[]).await;
    let old_client = nodes.dir.path().join("old-client.json");
    export_client(&nodes, &old_client);
    let load = Load::start(&nodes).await;
    load.progress(&nodes).await;

    // A node cannot jump to the new CA before its peers trust it.
    let text = rewrite(&["rotate", "--step", "trust-new"], &file);
    assert!(text.contains("export client credentials anew"), "{text}");
    rewrite(&["rotate", "--step", "present-new"], &file);
    let refused = reload_refused(&nodes, 0);
    assert!(refused.contains("rotation step"), "{refused}");
    std::fs::remove_file(&file).unwrap();
    before.save(&file).unwrap();

    let states = step(&nodes, &load, &file, "rotate", "trust-new").await;
    assert!(
        states.iter().all(|s| s.contains("rotation trust-new")),
        "{states:?}"
    );
    assert!(health(&nodes, 2).await.contains("CA rotation"));
    // Clients exported now: signed by the new CA, trusting both.
    let new_client = nodes.dir.path().join("new-client.json");
    export_client(&nodes, &new_client);
    let states = step(&nodes, &load, &file, "rotate", "present-new").await;
    assert!(
        states.iter().all(|s| s.contains("rotation present-new")),
        "{states:?}"
    );
    let states = step(&nodes, &load, &file, "rotate", "done").await;
    assert!(
        states.iter().all(|s| s.contains("rotation none")),
        "{states:?}"
    );
    let (writes, reads) = load.finish(&nodes).await;
    println!("rotation: {writes} PUTs and {reads} GETs during the transition, none failed");

    // The old CA is gone: its node credential and its clients are refused; the client
    // exported during the rotation and the new node credential are served.
    let after = Credential::load(&file).unwrap();
    assert_ne!(after.tls, before.tls);
    for (case, cred, served) in [
        ("the old node credential", before, false),
        (
            "a client of the old CA",
            Credential::load(&old_client).unwrap(),
            false,
        ),
        (
            "a client exported at trust-new",
            Credential::load(&new_client).unwrap(),
            true,
        ),
        ("the new node credential", after, true),
    ] {
        install(cred);
        for rpc in &nodes.rpc {
            let r = match RpcChannel::connect(rpc).await {
                Ok(ch) => map_from(&ch).await,
                Err(e) => Err(e),
            };
            assert_eq!(r.is_ok(), served, "{case} at {rpc}: {r:?}");
        }
    }
}

fn hex_secret() -> String {
    "5a".repeat(32)
}

/// `cluster-credential reload` at node `i`, which must be refused; its message.
fn reload_refused(nodes: &Nodes, i: usize) -> String {
    let out = std::process::Command::new(saker_bin())
        .args(["admin", "cluster-credential", "reload"])
        .args(["--admin-endpoint", &nodes.nodes[i].admin])
        .env("SAKER_ACCESS_KEY", ROOT_AK)
        .env("SAKER_SECRET_KEY", ROOT_SK)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the reload was taken");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Puts the file back at step accept-tls (after a test of a skipped step), the CA it made
/// at that step kept.
fn rewrite_back_to_accept(file: &Path, old: &Credential) {
    let now = Credential::load(file).unwrap();
    let mut v: serde_json::Value = serde_json::to_value(&now).unwrap();
    v["transition"] = "accept-tls".into();
    assert_eq!(now.token(1), old.token(1), "the secret is kept");
    std::fs::remove_file(file).unwrap();
    Credential::decode(v.to_string().as_bytes())
        .unwrap()
        .save(file)
        .unwrap();
}

fn export_client(nodes: &Nodes, file: &Path) {
    nodes.admin(
        0,
        &[
            "cluster-credential",
            "export",
            file.to_str().unwrap(),
            "--client",
        ],
    );
}

async fn handshakes_refused(nodes: &Nodes, i: usize) -> f64 {
    nodes.metric(i, "saker_rpc_handshakes_refused_total").await
}

/// Plaintext requests served by all three nodes so far.
async fn plaintext_requests(nodes: &Nodes) -> f64 {
    let mut sum = 0.0;
    for i in 0..3 {
        sum += nodes.metric(i, "saker_rpc_plaintext_requests_total").await;
    }
    sum
}
