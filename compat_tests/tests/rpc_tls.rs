//! The cluster RPC over TLS: a 3-node replicated cluster whose credential was made with
//! `cluster-credential create --tls` replicates metadata and chunks, fails over and serves
//! its library clients over TLS; a caller speaking plain HTTP/2, or trusting another CA, gets
//! nothing from any node.

mod common;

use common::cluster::*;
use common::*;
use saker_rpc::auth::{install, Credential};
use saker_rpc::tls::ClusterTls;
use saker_rpc::{MetaError, RpcChannel};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_made_with_tls_runs_its_rpc_over_it() {
    let mut nodes = Nodes::start_over_tls(&[]);
    let credential = Credential::load(&nodes.dir.path().join("cluster-credential.json")).unwrap();
    assert!(
        credential.tls.is_some(),
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

    // A library client with the exported client credential (CA certificate, no CA key).
    let client = credential.client();
    assert!(client.tls.is_some());
    install(client);
    let ch = RpcChannel::connect(&nodes.rpc[0]).await.unwrap();
    ch.cluster_map().await.unwrap();

    // Plain HTTP/2 with the right secret, or TLS trusting another CA: nothing, on any node.
    let mut plain = credential.clone();
    plain.tls = None;
    let mut stranger = credential.clone();
    stranger.tls = Some(ClusterTls::generate().unwrap().for_client());
    for wrong in [plain, stranger] {
        install(wrong);
        for rpc in &nodes.rpc {
            let r = match RpcChannel::connect(rpc).await {
                Ok(ch) => ch.cluster_map().await.map(|_| ()),
                Err(e) => Err(e),
            };
            assert!(matches!(r, Err(MetaError::Unavailable(_))), "{rpc}: {r:?}");
        }
    }
}
