//! The RPC transport against fake services on 127.0.0.1:0: what goes in comes out, errors
//! travel as values, transport failures are `Unavailable`, calls run concurrently.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use saker_namespace::{Exception, ExceptionTable, Route};
use saker_rpc::{
    fetch_cluster_map, Attr, ClientTag, ClusterMap, CoordinatorService, Cred, GroupCounters,
    MetaError, MetaRequest, MetaResponse, MetaService, NewObject, RaftService, RemoteMeta,
    RemoveCond, RpcChannel, RpcServer, Want,
};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Barrier};
use tokio::task::JoinHandle;

/// A group that answers from its arguments and records what it saw.
struct FakeGroup {
    id: u32,
    seen: Mutex<Vec<(ClientTag, MetaRequest)>>,
    /// When set, every call waits here (to prove calls overlap).
    barrier: Option<Arc<Barrier>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Set when a slow call finished.
    finished: AtomicBool,
}

impl FakeGroup {
    fn new(id: u32) -> Arc<Self> {
        Arc::new(Self {
            id,
            seen: Mutex::new(Vec::new()),
            barrier: None,
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            finished: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl MetaService for FakeGroup {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        self.seen.lock().push((tag, req.clone()));
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        if let Some(b) = &self.barrier {
            b.wait().await;
        }
        let out = match req {
            // Echo the group and the tag so the caller can check both arrived intact.
            MetaRequest::Counters => Ok(MetaResponse::Counters(GroupCounters {
                forwards: self.id as u64,
                remote_lookups: tag.seq,
                ..Default::default()
            })),
            MetaRequest::PutObject { path, obj, .. } => match path.last().map(String::as_str) {
                Some("conflict") => Err(MetaError::Conflict {
                    path: path.join("/"),
                }),
                Some("missing") => Err(MetaError::MissingParent { depth: 1 }),
                Some("slow") => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    self.finished.store(true, Ordering::SeqCst);
                    Ok(MetaResponse::Done)
                }
                // Hand the object back as a lookup would show it.
                _ => Ok(MetaResponse::Object(Box::new(saker_rpc::ObjectView {
                    attr: attr(obj.size, &obj.etag),
                    meta: Some(obj.meta),
                    data: obj.inline,
                    tags: Some(obj.tags),
                    version_id: None,
                    lock: None,
                    acl: obj.acl,
                    grants: Vec::new(),
                }))),
            },
            MetaRequest::DeleteBucket { name } => Err(MetaError::NotOwner {
                group: name.len() as u32,
            }),
            other => Err(MetaError::Invalid(format!("fake: {}", other.op_name()))),
        };
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

fn attr(size: u64, etag: &str) -> saker_rpc::Attr {
    saker_rpc::Attr {
        id: 7,
        kind: saker_rpc::FileKind::File,
        mode: 0o644,
        uid: 0,
        gid: 0,
        nlink: 1,
        size,
        atime_ns: 1,
        mtime_ns: 2,
        ctime_ns: 3,
        etag: etag.to_string(),
        implicit: false,
        children: 0,
        layout: saker_rpc::Layout::Inline,
        parts: vec![],
        s3_mtime_ns: 2,
        sealed: false,
    }
}

/// A rename the fake coordinator was asked for: (from, to, noreplace, cred).
type RenameCall = (Vec<String>, Vec<String>, bool, Cred);

#[derive(Default)]
struct FakeCoordinator {
    seen: Mutex<Vec<(Vec<String>, RemoveCond)>>,
    renames: Mutex<Vec<RenameCall>>,
    dir_attrs: Mutex<Vec<MetaRequest>>,
}

#[async_trait]
impl CoordinatorService for FakeCoordinator {
    async fn remove_dir(&self, path: Vec<String>, cond: RemoveCond) -> Result<(), MetaError> {
        self.seen.lock().push((path.clone(), cond));
        if path.last().is_some_and(|n| n == "full") {
            Err(MetaError::NotEmpty)
        } else {
            Ok(())
        }
    }

    async fn rename(
        &self,
        from: Vec<String>,
        to: Vec<String>,
        noreplace: bool,
        cred: Cred,
        _: saker_rpc::RenameVersioning,
    ) -> Result<Attr, MetaError> {
        self.renames
            .lock()
            .push((from, to.clone(), noreplace, cred));
        if noreplace {
            return Err(MetaError::Exists);
        }
        let mut a = attr(0, "");
        a.id = to.len() as u64;
        a.kind = saker_rpc::FileKind::Dir;
        Ok(a)
    }

    async fn link(
        &self,
        _from: Vec<String>,
        to: Vec<String>,
        expect: Option<u64>,
        _cred: Cred,
    ) -> Result<Attr, MetaError> {
        let mut a = attr(0, "");
        a.id = expect.unwrap_or(to.len() as u64);
        a.nlink = 2;
        Ok(a)
    }

    async fn set_dir_attr(&self, set: MetaRequest) -> Result<Attr, MetaError> {
        self.dir_attrs.lock().push(set.clone());
        match set {
            MetaRequest::SetAttr {
                mode: Some(mode), ..
            } => {
                let mut a = attr(0, "");
                a.kind = saker_rpc::FileKind::Dir;
                a.mode = mode;
                Ok(a)
            }
            _ => Err(MetaError::Invalid("not a chmod".into())),
        }
    }
}

fn map() -> ClusterMap {
    let mut exceptions = ExceptionTable::new();
    exceptions.set("train", Exception::PathWalk);
    ClusterMap {
        version: 5,
        groups: vec![1, 2],
        vnodes: 16,
        exceptions,
        endpoints: Default::default(),
    }
}

struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn stop(mut self) {
        let _ = self.stop.take().expect("stopped once").send(());
        self.task.await.unwrap().unwrap();
    }
}

async fn serve_on(
    listener: TcpListener,
    groups: &[Arc<FakeGroup>],
    coordinator: Arc<FakeCoordinator>,
) -> Running {
    // Server and client share this process's credential.
    saker_rpc::auth::ensure_installed();
    let services: BTreeMap<u32, Arc<dyn MetaService>> = groups
        .iter()
        .map(|g| (g.id, g.clone() as Arc<dyn MetaService>))
        .collect();
    run(listener, RpcServer::new(services, coordinator, map()))
}

/// Runs `server` on `listener` until [`Running::stop`].
fn run(listener: TcpListener, server: RpcServer) -> Running {
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(server.serve_with_shutdown(listener, async {
        let _ = rx.await;
    }));
    Running {
        addr,
        stop: Some(tx),
        task,
    }
}

/// Serves only `raft` (the raft messages of a process's replicas) on `listener`.
async fn serve_raft_on(listener: TcpListener, raft: Arc<FakeRaft>) -> Running {
    saker_rpc::auth::ensure_installed();
    let server =
        RpcServer::new(BTreeMap::new(), Arc::<FakeCoordinator>::default(), map()).with_raft(raft);
    run(listener, server)
}

async fn serve(groups: &[Arc<FakeGroup>], coordinator: Arc<FakeCoordinator>) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_on(listener, groups, coordinator).await
}

fn tag(seq: u64) -> ClientTag {
    ClientTag {
        client: 0xfeed_0000_0000_0000_0000_0000_0000_beef,
        seq,
    }
}

fn put(path: &[&str], data: &'static [u8]) -> MetaRequest {
    MetaRequest::PutObject {
        path: path.iter().map(|s| s.to_string()).collect(),
        obj: NewObject {
            size: data.len() as u64,
            etag: "etag-1".into(),
            inline: Some(Bytes::from_static(data)),
            tags: vec![("k".into(), "v".into())],
            ..Default::default()
        },
        cond: None,
        versioning: Default::default(),
    }
}

#[tokio::test]
async fn requests_reach_their_group_and_replies_come_back() {
    let (g1, g2) = (FakeGroup::new(1), FakeGroup::new(2));
    let server = serve(&[g1.clone(), g2.clone()], Arc::default()).await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();

    for (g, seq) in [(1u32, 11u64), (2, 12)] {
        let reply = ch.meta(g).call(tag(seq), MetaRequest::Counters).await;
        assert_eq!(
            reply,
            Ok(MetaResponse::Counters(GroupCounters {
                forwards: g as u64,
                remote_lookups: seq,
                ..Default::default()
            }))
        );
    }
    let req = put(&["bucket", "dir", "файл"], b"hello world");
    let reply = RemoteMeta::new(&ch, 2)
        .call(tag(13), req.clone())
        .await
        .unwrap();
    let MetaResponse::Object(view) = reply else {
        panic!("expected an object, got {reply:?}");
    };
    assert_eq!(view.data.as_deref(), Some(&b"hello world"[..]));
    assert_eq!(view.attr.size, 11);
    assert_eq!(view.attr.etag, "etag-1");
    assert_eq!(view.tags, Some(vec![("k".to_string(), "v".to_string())]));

    // The services saw exactly what was sent, tags included.
    assert_eq!(*g1.seen.lock(), vec![(tag(11), MetaRequest::Counters)]);
    assert_eq!(
        *g2.seen.lock(),
        vec![(tag(12), MetaRequest::Counters), (tag(13), req)]
    );
    server.stop().await;
}

#[tokio::test]
async fn errors_travel_as_values() {
    let g = FakeGroup::new(1);
    let server = serve(&[g], Arc::default()).await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    let m = ch.meta(1);
    assert_eq!(
        m.call(tag(1), put(&["b", "x", "conflict"], b"")).await,
        Err(MetaError::Conflict {
            path: "b/x/conflict".into()
        })
    );
    assert_eq!(
        m.call(tag(2), put(&["b", "x", "missing"], b"")).await,
        Err(MetaError::MissingParent { depth: 1 })
    );
    assert_eq!(
        m.call(
            tag(3),
            MetaRequest::DeleteBucket {
                name: "seven77".into()
            }
        )
        .await,
        Err(MetaError::NotOwner { group: 7 })
    );
    assert_eq!(
        m.call(
            tag(4),
            MetaRequest::Lookup {
                path: vec![],
                want: Want::ATTR
            }
        )
        .await,
        Err(MetaError::Invalid("fake: lookup".into()))
    );
    // A group this endpoint does not serve (no replica here, or not any more): not the
    // leader, so the caller tries the group's other replicas.
    let err = ch.meta(9).call(tag(5), MetaRequest::Counters).await;
    assert_eq!(err, Err(MetaError::NotLeader { leader: None }));
    server.stop().await;
}

#[tokio::test]
async fn the_coordinator_is_reached_through_the_same_address() {
    let coordinator = Arc::new(FakeCoordinator::default());
    let server = serve(&[FakeGroup::new(1)], coordinator.clone()).await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    let c = ch.coordinator();
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        c.remove_dir(path(&["b", "d"]), RemoveCond::Empty).await,
        Ok(())
    );
    assert_eq!(
        c.remove_dir(path(&["b", "full"]), RemoveCond::Bucket).await,
        Err(MetaError::NotEmpty)
    );
    assert_eq!(
        *coordinator.seen.lock(),
        vec![
            (path(&["b", "d"]), RemoveCond::Empty),
            (path(&["b", "full"]), RemoveCond::Bucket)
        ]
    );
    let cred = Cred {
        uid: 7,
        gid: 8,
        groups: vec![9],
    };
    let moved = c
        .rename(
            path(&["b", "x"]),
            path(&["b", "y", "z"]),
            false,
            cred.clone(),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!((moved.id, moved.kind), (3, saker_rpc::FileKind::Dir));
    assert_eq!(
        c.rename(
            path(&["b", "x"]),
            path(&["b", "w"]),
            true,
            Cred::ROOT,
            Default::default()
        )
        .await,
        Err(MetaError::Exists)
    );
    assert_eq!(
        *coordinator.renames.lock(),
        vec![
            (path(&["b", "x"]), path(&["b", "y", "z"]), false, cred),
            (path(&["b", "x"]), path(&["b", "w"]), true, Cred::ROOT)
        ]
    );
    let chmod = MetaRequest::chmod(path(&["b", "d"]), 0o700, Cred::ROOT);
    assert_eq!(c.set_dir_attr(chmod.clone()).await.unwrap().mode, 0o700);
    let not_chmod = MetaRequest::Counters;
    assert!(matches!(
        c.set_dir_attr(not_chmod.clone()).await,
        Err(MetaError::Invalid(_))
    ));
    assert_eq!(*coordinator.dir_attrs.lock(), vec![chmod, not_chmod]);
    let linked = c
        .link(
            vec!["b".into(), "f".into()],
            vec!["b".into(), "g".into()],
            Some(77),
            Cred::ROOT,
        )
        .await
        .unwrap();
    assert_eq!((linked.id, linked.nlink), (77, 2));
    server.stop().await;
}

#[tokio::test]
async fn the_cluster_map_is_served() {
    let server = serve(&[FakeGroup::new(1), FakeGroup::new(2)], Arc::default()).await;
    let got = fetch_cluster_map(&server.addr.to_string()).await.unwrap();
    assert_eq!(got, map());
    let router = got.router().unwrap();
    assert_eq!(router.ring().groups(), &[1, 2]);
    assert_eq!(router.route_name("train"), Route::PathWalk);
    // A URI works as well as host:port.
    let got = fetch_cluster_map(&format!("http://{}", server.addr))
        .await
        .unwrap();
    assert_eq!(got.version, 5);
    server.stop().await;
}

/// An address nobody listens on (bound, then released).
async fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    addr.to_string()
}

#[tokio::test]
async fn an_unreachable_address_is_unavailable() {
    saker_rpc::auth::ensure_installed();
    let addr = dead_addr().await;
    let err = fetch_cluster_map(&addr).await;
    assert!(matches!(err, Err(MetaError::Unavailable(_))), "{err:?}");
    assert!(matches!(
        RpcChannel::connect(&addr).await,
        Err(MetaError::Unavailable(_))
    ));
    let ch = RpcChannel::lazy(&addr).unwrap();
    let err = ch.meta(1).call(tag(1), MetaRequest::Counters).await;
    assert!(matches!(err, Err(MetaError::Unavailable(_))), "{err:?}");
    let err = ch
        .coordinator()
        .remove_dir(vec!["b".into()], RemoveCond::Empty)
        .await;
    assert!(matches!(err, Err(MetaError::Unavailable(_))), "{err:?}");
    assert!(matches!(
        RpcChannel::lazy("not an address"),
        Err(MetaError::Invalid(_))
    ));
}

#[tokio::test]
async fn concurrent_calls_overlap_on_one_channel() {
    const N: usize = 64;
    let mut g = FakeGroup::new(1);
    // Every call waits until all N are inside the service: serialised calls would hang.
    Arc::get_mut(&mut g).unwrap().barrier = Some(Arc::new(Barrier::new(N)));
    let server = serve(std::slice::from_ref(&g), Arc::default()).await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    let calls = (0..N as u64).map(|seq| {
        let m = ch.meta(1);
        async move { (seq, m.call(tag(seq), MetaRequest::Counters).await) }
    });
    let replies = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(calls))
        .await
        .expect("all calls are in the service at once");
    for (seq, reply) in replies {
        assert_eq!(
            reply,
            Ok(MetaResponse::Counters(GroupCounters {
                forwards: 1,
                remote_lookups: seq,
                ..Default::default()
            }))
        );
    }
    assert_eq!(g.max_in_flight.load(Ordering::SeqCst), N);
    server.stop().await;
}

#[tokio::test]
async fn large_bodies_pass() {
    let server = serve(&[FakeGroup::new(1)], Arc::default()).await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    // Above tonic's 4 MiB default limit.
    let data: &'static [u8] = Vec::leak((0..9 * 1024 * 1024).map(|i| i as u8).collect());
    let reply = ch
        .meta(1)
        .call(tag(1), put(&["b", "big"], data))
        .await
        .unwrap();
    let MetaResponse::Object(view) = reply else {
        panic!("expected an object");
    };
    assert_eq!(view.data.as_deref(), Some(data));
    server.stop().await;
}

#[tokio::test]
async fn a_call_runs_to_completion_when_the_caller_gives_up() {
    let g = FakeGroup::new(1);
    let server = serve(std::slice::from_ref(&g), Arc::default()).await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    let m = ch.meta(1);
    let call = m.call(tag(1), put(&["b", "slow"], b"x"));
    assert!(tokio::time::timeout(Duration::from_millis(50), call)
        .await
        .is_err());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(g.finished.load(Ordering::SeqCst));
    server.stop().await;
}

#[tokio::test]
async fn a_channel_recovers_when_the_server_comes_back() {
    let g = FakeGroup::new(1);
    let server = serve(std::slice::from_ref(&g), Arc::default()).await;
    let addr = server.addr;
    let ch = RpcChannel::connect(&addr.to_string()).await.unwrap();
    assert!(ch.meta(1).call(tag(1), MetaRequest::Counters).await.is_ok());

    server.stop().await;
    let err = ch.meta(1).call(tag(2), MetaRequest::Counters).await;
    assert!(matches!(err, Err(MetaError::Unavailable(_))), "{err:?}");

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    let server = serve_on(socket.listen(64).unwrap(), &[g], Arc::default()).await;
    let mut ok = false;
    for _ in 0..50 {
        if ch.meta(1).call(tag(3), MetaRequest::Counters).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "the channel reconnected");
    server.stop().await;
}

/// Raft replicas that answer `group:body`: group 1 only once group 2 has answered, group 3
/// never.
#[derive(Default)]
struct FakeRaft {
    group2_answered: tokio::sync::Notify,
}

#[async_trait]
impl RaftService for FakeRaft {
    async fn raft(&self, group: u32, body: Bytes) -> Result<Vec<u8>, String> {
        match group {
            1 => self.group2_answered.notified().await,
            3 => std::future::pending::<()>().await,
            _ => {}
        }
        let answer = [format!("{group}:").as_bytes(), &body].concat();
        if group == 2 {
            self.group2_answered.notify_one();
        }
        Ok(answer)
    }
}

#[tokio::test]
async fn raft_answers_that_come_back_out_of_order_reach_their_callers() {
    let server = serve_raft_on(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::default(),
    )
    .await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    let t = Duration::from_secs(10);
    // Group 1's message goes first and is answered last.
    let (one, two) = tokio::join!(
        ch.raft(1, Bytes::from_static(b"first"), t),
        ch.raft(2, Bytes::from_static(b"second"), t)
    );
    assert_eq!(one.unwrap(), Bytes::from_static(b"1:first"));
    assert_eq!(two.unwrap(), Bytes::from_static(b"2:second"));
    server.stop().await;
}

#[tokio::test]
async fn an_unanswered_raft_message_times_out_alone() {
    let server = serve_raft_on(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::default(),
    )
    .await;
    let ch = RpcChannel::connect(&server.addr.to_string()).await.unwrap();
    let stuck = ch
        .raft(3, Bytes::from_static(b"x"), Duration::from_millis(200))
        .await;
    assert!(matches!(stuck, Err(MetaError::Unavailable(_))), "{stuck:?}");
    let ok = ch
        .raft(2, Bytes::from_static(b"y"), Duration::from_secs(10))
        .await;
    assert_eq!(ok.unwrap(), Bytes::from_static(b"2:y"));
    // The server stops although a message on the pipe was never answered.
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("an open raft pipe does not hold the shutdown");
}

#[tokio::test]
async fn the_raft_pipe_opens_again_after_the_server_comes_back() {
    let server = serve_raft_on(
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
        Arc::default(),
    )
    .await;
    let addr = server.addr;
    let ch = RpcChannel::connect(&addr.to_string()).await.unwrap();
    let t = Duration::from_secs(5);
    assert!(ch.raft(2, Bytes::from_static(b"a"), t).await.is_ok());
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("an open raft pipe does not hold the shutdown");
    let down = ch.raft(2, Bytes::from_static(b"b"), t).await;
    assert!(matches!(down, Err(MetaError::Unavailable(_))), "{down:?}");

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    let server = serve_raft_on(socket.listen(64).unwrap(), Arc::default()).await;
    let mut answer = None;
    for _ in 0..50 {
        if let Ok(a) = ch.raft(2, Bytes::from_static(b"c"), t).await {
            answer = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        answer,
        Some(Bytes::from_static(b"2:c")),
        "the pipe reopened"
    );
    server.stop().await;
}

/// An online upgrade's middle step on one port: a node at `accept-tls` takes TLS and
/// plaintext with a token (the acceptor peeks at the first byte), refuses a plaintext caller
/// of another cluster, refuses a reload that skips a step, and once at mutual TLS refuses
/// the same plaintext token, on a new connection as on the one opened before.
#[tokio::test]
async fn a_node_in_the_upgrade_takes_both_then_refuses_plaintext() {
    use saker_rpc::auth::{self, Credential, Transition, Transport};
    let node = Credential::generate();
    let accept = node.upgrade_step(Some(Transition::AcceptTls)).unwrap();
    auth::install_as(accept.clone(), Transport::AcceptTls);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = run(
        listener,
        RpcServer::new(BTreeMap::new(), Arc::<FakeCoordinator>::default(), map()),
    );
    let addr = running.addr.to_string();
    let map_from = |ch: RpcChannel| async move { ch.cluster_map().await.map(|_| ()) };
    // The server takes its credential when it starts serving: at this first call (a node at
    // accept-tls calls in plaintext).
    map_from(RpcChannel::connect(&addr).await.unwrap())
        .await
        .unwrap();

    auth::install(node.clone());
    map_from(RpcChannel::connect(&addr).await.unwrap())
        .await
        .unwrap();
    auth::install_insecure(node.clone());
    let plaintext = RpcChannel::connect(&addr).await.unwrap();
    map_from(plaintext.clone()).await.unwrap();
    auth::install_insecure(Credential::generate());
    let other = map_from(RpcChannel::connect(&addr).await.unwrap()).await;
    assert!(
        matches!(other, Err(MetaError::Unauthenticated(_))),
        "{other:?}"
    );

    // From accept-tls straight to mutual TLS skips dial-tls: refused.
    auth::install_as(accept.clone(), Transport::AcceptTls);
    let done = node.clone();
    let r = auth::reload(done.clone(), Transport::MutualTls);
    assert!(r.unwrap_err().contains("skips a step"));
    let dial = accept.upgrade_step(Some(Transition::DialTls)).unwrap();
    auth::reload(dial, Transport::DialTls).unwrap();
    auth::reload(done, Transport::MutualTls).unwrap();
    assert!(auth::warning().is_none());

    // The plaintext token is refused now, on a new connection and through the channel made
    // before (which dials again: this process's credential changed since).
    auth::install_insecure(node.clone());
    let r = match RpcChannel::connect(&addr).await {
        Ok(ch) => map_from(ch).await,
        Err(e) => Err(e),
    };
    assert!(r.is_err(), "{r:?}");
    let r = map_from(plaintext).await;
    assert!(r.is_err(), "{r:?}");
    auth::install(node);
    map_from(RpcChannel::connect(&addr).await.unwrap())
        .await
        .unwrap();
    running.stop().await;
}
