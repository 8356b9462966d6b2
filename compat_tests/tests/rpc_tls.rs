//! The cluster RPC is mutual TLS by default: a 3-node replicated cluster made as the README
//! says replicates metadata and chunks, fails over and serves its library clients over it,
//! while a plaintext caller or one of another CA gets nothing from any node. Plaintext RPC
//! runs only behind `--insecure-rpc`, which warns at start and on `/health`. A node whose
//! admin listener is plaintext off loopback does not send the node credential (the CA key).

mod common;

use common::cluster::*;
use common::netns::Netns;
use common::*;
use saker_rpc::auth::{install, install_insecure, Credential};
use saker_rpc::{MetaError, RpcChannel};

/// `Ok` if `rpc` served the cluster map.
async fn map_from(rpc: &str) -> Result<(), MetaError> {
    RpcChannel::connect(rpc)
        .await?
        .cluster_map()
        .await
        .map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_runs_its_rpc_over_mutual_tls_by_default() {
    let mut nodes = Nodes::start(&[]);
    let credential = Credential::load(&nodes.dir.path().join("cluster-credential.json")).unwrap();
    assert!(
        credential.mutual_tls(),
        "the credential holds the cluster CA"
    );
    nodes.wait_voters(&[]).await;

    // Replicated writes through node 1 (metadata by raft, chunks to every store), read back
    // through node 3, before and after node 2 (a group leader, maybe) is killed.
    let s3 = nodes.client(0, true);
    eventually("create the bucket", || {
        s3.create_bucket().bucket("tls").send()
    })
    .await;
    let big = random_bytes(300 * 1024);
    put(&s3, "tls", "big", &big).await;
    put(&s3, "tls", "small", b"small").await;
    let other = nodes.client(2, true);
    assert_eq!(get_bytes(&other, "tls", "big").await, big);
    nodes.kill(1);
    put(&s3, "tls", "after", b"after the kill").await;
    assert_eq!(get_bytes(&other, "tls", "after").await, b"after the kill");
    nodes.restart(1);

    // A library client with an exported client credential: its own certificate, no CA key.
    let file = nodes.dir.path().join("client.json");
    nodes.admin(
        0,
        &[
            "cluster-credential",
            "export",
            file.to_str().unwrap(),
            "--client",
        ],
    );
    install(Credential::load(&file).unwrap());
    for rpc in &nodes.rpc {
        eventually("the map from every node", || map_from(rpc)).await;
    }

    // Plaintext HTTP/2 with the right secret, or TLS from another CA: nothing, on any node.
    for (case, wrong) in [
        ("plaintext", None),
        ("another CA", Some(Credential::generate())),
    ] {
        match wrong {
            None => install_insecure(credential.clone()),
            Some(c) => install(c),
        }
        for rpc in &nodes.rpc {
            let r = map_from(rpc).await;
            assert!(r.is_err(), "{case}: {rpc} served the map");
        }
    }
    let health = reqwest::get(format!("{}/health", nodes.nodes[0].admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!health.contains("plaintext"), "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn insecure_rpc_is_plaintext_behind_a_flag_that_warns() {
    let nodes = Nodes::start(&["--insecure-rpc"]);
    let credential = Credential::load(&nodes.dir.path().join("cluster-credential.json")).unwrap();
    install_insecure(credential.clone());
    nodes.wait_voters(&[]).await;
    let s3 = nodes.client(0, true);
    eventually("create the bucket", || {
        s3.create_bucket().bucket("plain").send()
    })
    .await;
    put(&s3, "plain", "k", b"over plaintext").await;
    assert_eq!(
        get_bytes(&nodes.client(2, true), "plain", "k").await,
        b"over plaintext"
    );
    for (i, rpc) in nodes.rpc.iter().enumerate() {
        map_from(rpc).await.unwrap();
        assert!(
            nodes.stderr(i).contains("--insecure-rpc"),
            "node {i} did not warn: {}",
            nodes.stderr(i)
        );
        let health = reqwest::get(format!("{}/health", nodes.nodes[i].admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(health.contains("plaintext (--insecure-rpc)"), "{health}");
    }
    // A caller over mutual TLS is not served by a plaintext node.
    install(credential);
    let r = map_from(&nodes.rpc[0]).await;
    assert!(r.is_err(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_node_credential_is_not_sent_over_a_plaintext_admin_listener_off_loopback() {
    // Declared first, dropped last: the servers are killed before their namespaces go.
    let net = Netns::new(3);
    let nodes = Nodes::start_in(&net, &[]);
    let dir = tempfile::tempdir().unwrap();
    let node_file = dir.path().join("node.json");
    let node_path = node_file.to_str().unwrap();
    let out = nodes.admin_output(0, &["cluster-credential", "export", node_path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exported: {stderr}");
    assert!(stderr.contains("plaintext admin listener"), "{stderr}");
    assert!(!node_file.exists(), "a node credential was written");
    // A client credential (its key made here, its CSR signed there) is no secret of the
    // cluster's: it still comes.
    let client_file = dir.path().join("client.json");
    nodes.admin(
        0,
        &[
            "cluster-credential",
            "export",
            client_file.to_str().unwrap(),
            "--client",
        ],
    );
    let client = Credential::load(&client_file).unwrap();
    assert_eq!(client.kind, saker_rpc::auth::Kind::Client);
}
