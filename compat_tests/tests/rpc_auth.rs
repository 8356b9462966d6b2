//! Cluster authentication on a real `saker server`'s RPC listener: every kind of RPC is refused
//! without the cluster's credential (or with another cluster's), and a client credential may
//! send namespace operations and chunk reads and writes, nothing else. Each test is its own
//! process (nextest), holding the credential it tests.

mod common;

use bytes::Bytes;
use common::*;
use saker_rpc::auth::{install, Credential};
use saker_rpc::{
    ChunkRequest, ChunkWireError, ClientTag, CoordinatorService, Cred, MetaError, MetaRequest,
    MetaResponse, MetaService, NewObject, RemoveCond, RpcChannel, Want,
};

/// A caller without any privilege here.
fn user() -> Cred {
    Cred {
        uid: 1000,
        gid: 1000,
        groups: vec![],
    }
}

/// One request of each kind a group takes (control requests and namespace operations).
fn meta_requests() -> Vec<MetaRequest> {
    let path = |p: &str| p.split('/').map(str::to_string).collect::<Vec<_>>();
    vec![
        MetaRequest::Lookup {
            path: path("b/k"),
            want: Want::ATTR,
        },
        MetaRequest::Scan {
            dir: 1,
            start_after: Vec::new(),
            limit: 10,
        },
        MetaRequest::CreateBucket {
            name: "authb".into(),
            uid: 0,
            gid: 0,
        },
        MetaRequest::DeleteBucket {
            name: "authb".into(),
        },
        MetaRequest::PutObject {
            path: path("b/k"),
            obj: NewObject {
                inline: Some(Bytes::new()),
                ..Default::default()
            },
            cond: None,
            versioning: Default::default(),
        },
        MetaRequest::DeleteObject {
            path: path("b/k"),
            dir_marker: false,
            cond: None,
            versioning: Default::default(),
            version_id: None,
            bypass_governance: false,
        },
        MetaRequest::PutTags {
            version_id: None,
            path: path("b/k"),
            dir_marker: false,
            tags: None,
        },
        MetaRequest::Access {
            path: path("b/k"),
            mask: 0,
            cred: user(),
            want: Want::ATTR,
        },
        MetaRequest::Mkdir {
            path: path("b/d"),
            mode: 0o755,
            uid: 1000,
            gid: 1000,
            cred: user(),
        },
        MetaRequest::Unlink {
            path: path("b/k"),
            cred: user(),
            versioning: saker_rpc::Versioning::Off,
        },
        MetaRequest::RaftStatus,
        MetaRequest::Exceptions,
        MetaRequest::Freeze {
            path: path("b/d"),
            coord: 0,
        },
        MetaRequest::ThawAll { coord: 0 },
        MetaRequest::SetExceptions {
            table: saker_namespace::ExceptionTable::new(),
        },
        MetaRequest::MigrateName {
            name: "n".into(),
            table: saker_namespace::ExceptionTable::new(),
        },
        MetaRequest::GcDue {
            now_ns: 0,
            limit: 1,
        },
        MetaRequest::ChunkRefs {
            after: None,
            limit: 10,
        },
        MetaRequest::CoordScan {
            prefix: "keys/".into(),
        },
        // The one record a client may read: the chunkstores it places file data on.
        MetaRequest::CoordScan {
            prefix: saker_rpc::CHUNKSTORES_RECORD.into(),
        },
        MetaRequest::CoordPut {
            term: 0,
            key: "keys/intruder".into(),
            value: Some(b"{}".to_vec()),
        },
        MetaRequest::JoinGroup {
            id: 99,
            addr: "127.0.0.1:1".into(),
        },
    ]
}

fn chunk_requests() -> Vec<ChunkRequest> {
    vec![
        ChunkRequest::Put {
            id: rand::random(),
            data: Bytes::from_static(b"chunk"),
        },
        ChunkRequest::Get {
            id: 1,
            offset: 0,
            len: 1,
        },
        ChunkRequest::Delete { id: 1 },
        ChunkRequest::ListOlderThan {
            unix_ns: 0,
            after: None,
            limit: 10,
        },
    ]
}

/// Every kind of RPC to `addr`: (what, refused for lack of a credential that allows it).
async fn every_rpc(addr: &str) -> Vec<(String, bool, bool)> {
    let ch = RpcChannel::connect(addr).await.unwrap();
    fn refused<T>(r: &Result<T, MetaError>) -> bool {
        matches!(r, Err(MetaError::Unauthenticated(_)))
    }
    let mut out = Vec::new();
    let map = ch.cluster_map().await;
    out.push(("cluster map".to_string(), refused(&map), true));
    let tag = ClientTag {
        client: rand::random::<u128>() | 1,
        seq: 1,
    };
    for req in meta_requests() {
        let what = req.op_name().to_string();
        let client_ok = req.client_allowed();
        let r = ch.meta(1).call(tag, req).await;
        out.push((what, refused(&r), client_ok));
    }
    let c = ch.coordinator();
    let r = c.remove_dir(vec!["nob".into()], RemoveCond::Bucket).await;
    out.push(("coordinator remove_dir".into(), refused(&r), false));
    let r = c
        .rename(
            vec!["b".into(), "x".into()],
            vec!["b".into(), "y".into()],
            false,
            saker_rpc::Cred::ROOT,
            Default::default(),
        )
        .await;
    out.push(("coordinator rename".into(), refused(&r), false));
    let r = c
        .link(
            vec!["b".into(), "x".into()],
            vec!["b".into(), "z".into()],
            None,
            saker_rpc::Cred::ROOT,
        )
        .await;
    out.push(("coordinator link".into(), refused(&r), false));
    let r = ch
        .raft(
            1,
            bytes::Bytes::from_static(b"not a raft message"),
            std::time::Duration::from_secs(5),
        )
        .await;
    out.push(("raft".into(), refused(&r), false));
    let call = saker_rpc::AdminCall {
        method: "GET".into(),
        path: "/admin/exceptions".into(),
        body: Vec::new(),
    };
    let r = ch.admin(&call).await;
    out.push(("admin".into(), refused(&r), false));
    let tiered = saker_rpc::TierRef {
        tier: "COLD".into(),
        key: "k".into(),
        size: 10,
        crc32c: 0,
        restored: None,
    };
    let r = ch.tier_read(&tiered, 0, 10).await;
    out.push(("tier read".into(), refused(&r), true));
    for req in chunk_requests() {
        let what = format!("chunk {req:?}").chars().take(40).collect();
        let client_ok = req.client_allowed();
        let r = ch.chunk(req).await;
        out.push((
            what,
            matches!(r, Err(ChunkWireError::Refused(_))),
            client_ok,
        ));
    }
    out
}

#[tokio::test]
async fn without_the_cluster_credential_every_rpc_is_refused() {
    let srv = Server::default_start();
    for (what, refused, _) in every_rpc(&srv.rpc_addr).await {
        assert!(refused, "{what} was served without a credential");
    }
    // What the refused calls would have done did not happen.
    let s3 = srv.client();
    assert_status(s3.head_bucket().bucket("authb").send().await, 404);
}

#[tokio::test]
async fn another_clusters_credential_is_refused() {
    let srv = Server::default_start();
    install(Credential::generate());
    for (what, refused, _) in every_rpc(&srv.rpc_addr).await {
        assert!(refused, "{what} was served to another cluster's credential");
    }
}

#[tokio::test]
async fn a_client_credential_may_send_namespace_operations_only() {
    let srv = Server::default_start();
    let node = Credential::load(&srv.credential_path()).unwrap();
    install(node.client());
    let outcomes = every_rpc(&srv.rpc_addr).await;
    for (what, refused, client_ok) in &outcomes {
        assert_eq!(
            *refused, !client_ok,
            "{what}: refused {refused}, a client may send it: {client_ok}"
        );
    }
    assert!(outcomes.iter().filter(|o| o.1).count() >= 10);
    // Its namespace operations do their work, as the identity they carry: a bucket made by
    // root, a directory in it refused to uid 1000 (S3-shaped requests, which carry no
    // identity, were refused above).
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let mkdir = |path: &str, cred: Cred| {
        let path: Vec<String> = path.split('/').map(str::to_string).collect();
        let req = MetaRequest::Mkdir {
            path: path.clone(),
            mode: 0o755,
            uid: cred.uid,
            gid: cred.gid,
            cred,
        };
        let lib = &lib;
        async move { lib.call(&path, req).await }
    };
    mkdir("madebyclient", Cred::ROOT).await.unwrap();
    srv.client()
        .head_bucket()
        .bucket("madebyclient")
        .send()
        .await
        .unwrap();
    let r = mkdir("madebyclient/d", user()).await;
    assert!(matches!(r, Err(MetaError::AccessDenied)), "{r:?}");
    mkdir("madebyclient/d", Cred::ROOT).await.unwrap();
}

/// The export command gives a client host what it needs, and only that.
#[tokio::test]
async fn the_exported_client_credential_is_a_client_one() {
    let srv = Server::default_start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("client.json");
    let out = srv.admin_cmd(&[
        "cluster-credential",
        "export",
        file.to_str().unwrap(),
        "--client",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported = Credential::load(&file).unwrap();
    let node = Credential::load(&srv.credential_path()).unwrap();
    assert_eq!(exported, node.client());
    assert_ne!(exported, node);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// Names the gateway would refuse are refused by the MNode too when they come over RPC.
#[tokio::test]
async fn bad_names_sent_over_rpc_are_refused() {
    let srv = Server::default_start();
    srv.use_credential();
    let s3 = srv.client();
    s3.create_bucket().bucket("names").send().await.unwrap();
    let ch = RpcChannel::connect(&srv.rpc_addr).await.unwrap();
    for bad in ["a/b", "..", ".", "", "nul\0byte", &"x".repeat(256)] {
        let req = MetaRequest::CreateBucket {
            name: bad.to_string(),
            uid: 0,
            gid: 0,
        };
        let tag = ClientTag { client: 9, seq: 1 };
        let r = ch.meta(1).call(tag, req).await;
        assert!(matches!(r, Err(MetaError::Invalid(_))), "{bad:?}: {r:?}");
        let req = MetaRequest::Lookup {
            path: vec!["names".into(), bad.to_string(), "x".into()],
            want: Want::ATTR,
        };
        let r = ch.meta(1).call(tag, req).await;
        assert!(matches!(r, Err(MetaError::Invalid(_))), "{bad:?}: {r:?}");
    }
    // Pages are capped: a peer may not have a whole directory built in memory at once.
    let scan = |limit| MetaRequest::Scan {
        dir: saker_namespace::ROOT_ID,
        start_after: Vec::new(),
        limit,
    };
    let tag = ClientTag { client: 0, seq: 0 };
    let r = ch.meta(1).call(tag, scan(u32::MAX)).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    let r = ch.meta(1).call(tag, scan(saker_rpc::MAX_PAGE + 1)).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    let r = ch.meta(1).call(tag, scan(saker_rpc::MAX_PAGE)).await;
    assert!(matches!(r, Ok(MetaResponse::Entries(_))), "{r:?}");
}
