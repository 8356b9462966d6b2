//! Cluster authentication on a real `saker server`'s RPC listener, mutual TLS by default:
//! every kind of RPC is refused in plaintext (a valid token included), without a certificate,
//! with another cluster's, or with an expired one; a client certificate may send namespace
//! operations and chunk reads and writes, nothing else. Each test is its own process
//! (nextest), holding the credential it tests.

mod common;

use bytes::Bytes;
use common::*;
use saker_rpc::auth::{install, install_insecure, Credential, Kind};
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
            reader: None,
        },
        MetaRequest::Scan {
            dir: 1,
            start_after: Vec::new(),
            limit: 10,
            reader: Some(saker_rpc::ScanReader {
                path: Vec::new(),
                cred: user(),
            }),
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
            lifecycle: false,
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
            leaks: true,
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
        // Without a grant from an MNode: a node's read only.
        ChunkRequest::Get {
            id: 1,
            offset: 0,
            len: 1,
            grant: None,
        },
        ChunkRequest::Delete { id: 1 },
        // Shards are written by the nodes' encoder only.
        ChunkRequest::PutShard {
            shard: saker_rpc::ShardName {
                chunk: rand::random(),
                index: 0,
                data: 2,
                parity: 1,
                chunk_len: 2,
            },
            data: Bytes::from_static(&[0; 64]),
        },
        // Without a grant for the chunk: a node's read only.
        ChunkRequest::GetShard {
            chunk: 1,
            data: 2,
            parity: 1,
            index: 0,
            offset: 0,
            len: 1,
            grant: None,
        },
        ChunkRequest::GetCoded {
            read: saker_rpc::CodedRead {
                chunk: 1,
                data: 2,
                parity: 1,
                stored: 10,
                offset: 0,
                len: 1,
            },
            grant: None,
        },
        ChunkRequest::ListOlderThan {
            unix_ns: 0,
            after: None,
            limit: 10,
        },
    ]
}

/// Every kind of RPC to `addr`: (what, refused for lack of a credential that allows it, a
/// client may send it). Refused: `Unauthenticated`; with `or_cut`, also a connection the
/// server ends (a plaintext caller never gets a TLS session to be refused on).
async fn every_rpc(addr: &str, or_cut: bool) -> Vec<(String, bool, bool)> {
    let refused = move |e: &MetaError| {
        matches!(e, MetaError::Unauthenticated(_))
            || (or_cut && matches!(e, MetaError::Unavailable(_)))
    };
    let ch = match RpcChannel::connect(addr).await {
        Ok(ch) => ch,
        // This side refused the server (another cluster's CA): nothing was sent.
        Err(e) => {
            assert!(refused(&e), "{e:?}");
            return vec![("connect".into(), true, false)];
        }
    };
    fn refused_by<T>(r: &Result<T, MetaError>, f: impl Fn(&MetaError) -> bool) -> bool {
        r.as_ref().err().is_some_and(f)
    }
    let mut out = Vec::new();
    let map = ch.cluster_map().await;
    out.push(("cluster map".to_string(), refused_by(&map, refused), true));
    let tag = ClientTag {
        client: rand::random::<u128>() | 1,
        seq: 1,
    };
    for req in meta_requests() {
        let what = req.op_name().to_string();
        let client_ok = req.client_allowed();
        let r = ch.meta(1).call(tag, req).await;
        out.push((what, refused_by(&r, refused), client_ok));
    }
    let c = ch.coordinator();
    let r = c.remove_dir(vec!["nob".into()], RemoveCond::Bucket).await;
    out.push((
        "coordinator remove_dir".into(),
        refused_by(&r, refused),
        false,
    ));
    let r = c
        .rename(
            vec!["b".into(), "x".into()],
            vec!["b".into(), "y".into()],
            false,
            saker_rpc::Cred::ROOT,
            Default::default(),
        )
        .await;
    out.push(("coordinator rename".into(), refused_by(&r, refused), false));
    let r = c
        .link(
            vec!["b".into(), "x".into()],
            vec!["b".into(), "z".into()],
            None,
            saker_rpc::Cred::ROOT,
        )
        .await;
    out.push(("coordinator link".into(), refused_by(&r, refused), false));
    let r = ch
        .raft(
            1,
            bytes::Bytes::from_static(b"not a raft message"),
            std::time::Duration::from_secs(5),
        )
        .await;
    out.push(("raft".into(), refused_by(&r, refused), false));
    let call = saker_rpc::AdminCall {
        method: "GET".into(),
        path: "/admin/exceptions".into(),
        body: Vec::new(),
    };
    let r = ch.admin(&call).await;
    out.push(("admin".into(), refused_by(&r, refused), false));
    let tiered = saker_rpc::TierRef {
        tier: "COLD".into(),
        key: "k".into(),
        size: 10,
        crc32c: 0,
        restored: None,
    };
    // Without a grant from an MNode: a node's read only.
    let r = ch.tier_read(&tiered, 0, 10).await;
    out.push(("tier read".into(), refused_by(&r, refused), false));
    for req in chunk_requests() {
        let what = format!("chunk {req:?}").chars().take(40).collect();
        let client_ok = req.client_allowed()
            && !matches!(
                req,
                ChunkRequest::Get { grant: None, .. }
                    | ChunkRequest::GetShard { grant: None, .. }
                    | ChunkRequest::GetCoded { grant: None, .. }
            );
        let r = ch.chunk(req).await;
        out.push((
            what,
            match &r {
                Err(ChunkWireError::Refused(_)) => true,
                Err(ChunkWireError::Unavailable(_)) => or_cut,
                _ => false,
            },
            client_ok,
        ));
    }
    out
}

/// RPC connections the server at `admin` refused at the handshake so far.
async fn handshakes_refused(admin: &str) -> u64 {
    let text = metrics_text(admin).await;
    text.lines()
        .find_map(|l| l.strip_prefix("saker_rpc_handshakes_refused_total "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A TLS connection to `addr` trusting the cluster's CA but showing no certificate: the
/// server ends it before any request is read. Returns what the read after the HTTP/2
/// preface got.
async fn without_a_certificate(addr: &str, ca_pem: &str) -> std::io::Result<usize> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    let ca = pem::parse(ca_pem).unwrap();
    roots
        .add(rustls::pki_types::CertificateDer::from(ca.into_contents()))
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from(saker_rpc::tls::NODE_NAME).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await?;
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await?;
    let mut buf = [0u8; 64];
    tls.read(&mut buf).await
}

/// The table of the issue: plaintext (with a valid token), no certificate, another cluster's
/// CA, an expired certificate (client or node): every RPC refused, each at the handshake, and
/// what the refused calls would have done did not happen.
#[tokio::test]
async fn every_rpc_is_refused_without_a_valid_certificate_of_the_cluster() {
    let srv = Server::default_start();
    let node = Credential::load(&srv.credential_path()).unwrap();
    let ca = node.tls.clone().unwrap();
    let hour = std::time::Duration::from_secs(3600);
    let expired = |kind| Credential::client_signed(ca.expired(kind, hour).unwrap(), None);
    let before = handshakes_refused(&srv.admin).await;
    type SetUp<'a> = Box<dyn Fn() + 'a>;
    let cases: Vec<(&str, SetUp)> = vec![
        (
            "plaintext with a valid token",
            Box::new(|| install_insecure(node.clone())),
        ),
        (
            "another cluster's CA",
            Box::new(|| install(Credential::generate())),
        ),
        (
            "an expired client certificate",
            Box::new(|| install(expired(Kind::Client))),
        ),
        (
            "an expired node certificate",
            Box::new(|| install(expired(Kind::Node))),
        ),
    ];
    for (case, set_up) in &cases {
        set_up();
        for (what, refused, _) in every_rpc(&srv.rpc_addr, true).await {
            assert!(refused, "{case}: {what} was served");
        }
    }
    let r = without_a_certificate(&srv.rpc_addr, &ca.ca_cert).await;
    assert!(
        !matches!(r, Ok(n) if n > 0),
        "no certificate: the server answered: {r:?}"
    );
    let after = handshakes_refused(&srv.admin).await;
    assert!(
        after > before + cases.len() as u64,
        "the server refused {} handshakes for {} cases",
        after - before,
        cases.len() + 1
    );
    // What the refused calls would have done did not happen.
    let s3 = srv.client();
    assert_status(s3.head_bucket().bucket("authb").send().await, 404);
    // The cluster's own certificate is served.
    drop(cases);
    install(node);
    RpcChannel::connect(&srv.rpc_addr)
        .await
        .unwrap()
        .cluster_map()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_client_credential_may_send_namespace_operations_only() {
    let srv = Server::default_start();
    let node = Credential::load(&srv.credential_path()).unwrap();
    install(node.client().unwrap());
    let outcomes = every_rpc(&srv.rpc_addr, false).await;
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

    // Listings: a directory the caller may not read is refused, on every group; what a
    // listing answers a client holds no chunk ids.
    let big = random_bytes(300 * 1024);
    put(&srv.client(), "madebyclient", "d/big", &big).await;
    let path = |p: &str| p.split('/').map(str::to_string).collect::<Vec<String>>();
    let access = |p: &str| {
        let req = MetaRequest::Access {
            path: path(p),
            mask: 0,
            cred: Cred::ROOT,
            want: Want::ATTR,
        };
        let lib = &lib;
        let p = path(p);
        async move {
            match lib.call(&p, req).await.unwrap() {
                MetaResponse::Object(view) => view.attr,
                other => panic!("{other:?}"),
            }
        }
    };
    let dir = access("madebyclient/d").await;
    assert!(!access("madebyclient/d/big")
        .await
        .layout
        .chunks()
        .is_empty());
    let chmod = MetaRequest::chmod(path("madebyclient/d"), 0o700, Cred::ROOT);
    lib.call(&path("madebyclient/d"), chmod).await.unwrap();
    let scan_as = |cred: Cred| MetaRequest::Scan {
        dir: dir.id,
        start_after: Vec::new(),
        limit: 100,
        reader: Some(saker_rpc::ScanReader {
            path: path("madebyclient/d"),
            cred,
        }),
    };
    let mut listed = Vec::new();
    for (&g, _) in lib.groups() {
        let r = lib.call_group(g, scan_as(user())).await;
        assert!(
            matches!(r, Err(MetaError::AccessDenied)),
            "group {g}: {r:?}"
        );
        match lib.call_group(g, scan_as(Cred::ROOT)).await.unwrap() {
            MetaResponse::Entries(e) => listed.extend(e),
            other => panic!("{other:?}"),
        }
    }
    let entry = listed
        .iter()
        .find(|e| e.name == "big")
        .expect("big is listed");
    assert_eq!(entry.attr.size, big.len() as u64);
    assert!(
        entry.attr.layout.chunks().is_empty(),
        "a client's listing names chunks: {:?}",
        entry.attr.layout
    );
    // A wrong path for the directory is refused too.
    let wrong = MetaRequest::Scan {
        dir: dir.id,
        start_after: Vec::new(),
        limit: 100,
        reader: Some(saker_rpc::ScanReader {
            path: path("madebyclient"),
            cred: Cred::ROOT,
        }),
    };
    let first = *lib.groups().next().unwrap().0;
    let r = lib.call_group(first, wrong).await;
    assert!(matches!(r, Err(MetaError::NotFound)), "{r:?}");
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
    assert_eq!(exported.kind, Kind::Client);
    let tls = exported.tls.clone().unwrap();
    assert!(!tls.has_ca_key(), "a client credential holds no CA key");
    assert_eq!(tls.ca_cert, node.tls.as_ref().unwrap().ca_cert);
    assert_eq!(
        exported.token(0),
        None,
        "no token key from a mutual-TLS node"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // It works, as a client: the map is served, raft is not.
    install(exported);
    let ch = RpcChannel::connect(&srv.rpc_addr).await.unwrap();
    ch.cluster_map().await.unwrap();
    let r = ch
        .raft(
            1,
            Bytes::from_static(b"x"),
            std::time::Duration::from_secs(5),
        )
        .await;
    assert!(matches!(r, Err(MetaError::Unauthenticated(_))), "{r:?}");
    // The node credential comes over the loopback admin listener, CA key and all.
    let node_file = dir.path().join("node.json");
    let out = srv.admin_cmd(&["cluster-credential", "export", node_file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(Credential::load(&node_file).unwrap(), node);
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
        reader: None,
    };
    let tag = ClientTag { client: 0, seq: 0 };
    let r = ch.meta(1).call(tag, scan(u32::MAX)).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    let r = ch.meta(1).call(tag, scan(saker_rpc::MAX_PAGE + 1)).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    let r = ch.meta(1).call(tag, scan(saker_rpc::MAX_PAGE)).await;
    assert!(matches!(r, Ok(MetaResponse::Entries(_))), "{r:?}");
}

/// A node whose credential predates mutual TLS refuses to start (unless --insecure-rpc),
/// saying how to upgrade it; `cluster-credential upgrade` does, keeping the secret.
#[test]
fn an_old_credential_is_refused_until_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let file = data.join("cluster-credential.json");
    let secret = "ab".repeat(32);
    let v1 = format!("{{\"version\":1,\"kind\":\"node\",\"secret\":\"{secret}\"}}");
    std::fs::write(&file, &v1).unwrap();
    let err = server_refuses(&data, &[]);
    assert!(err.contains("cluster-credential upgrade"), "{err}");
    let out = std::process::Command::new(saker_bin())
        .args(["admin", "cluster-credential", "upgrade"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let up = Credential::load(&file).unwrap();
    assert!(up.mutual_tls());
    assert!(up.tls.as_ref().unwrap().has_ca_key());
    let old = Credential::decode(v1.as_bytes()).unwrap();
    assert_eq!(up.token(7), old.token(7), "the secret is kept");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}
