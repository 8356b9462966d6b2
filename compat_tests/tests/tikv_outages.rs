//! A TiKV that is not there, is something else, is half up, or goes away in service
//! (`saker server --store tikv` against `saker-tikv-sim` and tiny fakes in this file):
//! at start the server exits non-zero within 60 s with a message naming every PD endpoint
//! tried and what it did; in service (TiKV silent, refusing connections, or down behind a
//! live PD) S3 requests get a 503 with a message (not a hang, not a 500), `/health` says why,
//! and once TiKV answers again the server serves again, without a restart. Never a panic.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::tikv::{serving, Sim};
use common::*;

/// What a fake endpoint does with the connections it accepts.
#[derive(Clone, Copy)]
enum Fake {
    /// Closes each at once.
    Close,
    /// Keeps each open and never answers (a hung process, a half-open proxy).
    Silent,
    /// Answers any request with an HTTP/1.1 200 (some other web service).
    Http,
}

/// A fake endpoint on a free loopback port, for as long as the test process lives.
fn fake(kind: Fake) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut kept: Vec<TcpStream> = Vec::new();
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            match kind {
                Fake::Close => drop(conn),
                Fake::Silent => kept.push(conn),
                Fake::Http => {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 4096];
                        let _ = conn.read(&mut buf);
                        let _ = conn.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        );
                    });
                }
            }
        }
    });
    addr
}

/// Starts a server on `pd` that must refuse to: its stderr, after checking that it exited
/// within 60 s, did not panic, and named the endpoints it tried.
fn refused_start(pd: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = server_refuses(
        dir.path(),
        &["--store", "tikv", "--pd", pd, "--tikv-keyspace", "t"].map(std::ffi::OsStr::new),
    );
    let took = started.elapsed();
    assert!(!err.contains("panicked"), "{pd}: a panic:\n{err}");
    assert!(took < Duration::from_secs(60), "{pd}: took {took:?}\n{err}");
    assert!(
        err.contains(&format!(
            "cannot reach TiKV through PD {}",
            pd.replace(',', ", ")
        )),
        "{pd}: the error does not name what was tried:\n{err}"
    );
    err
}

#[test]
fn a_server_that_cannot_reach_tikv_at_start_exits_with_a_clear_error() {
    let silent = fake(Fake::Silent);
    // A gRPC service that is not PD (an OTLP trace collector).
    let rt = tokio::runtime::Runtime::new().unwrap();
    let grpc = rt.block_on(common::otlp_sink::OtlpSink::start());
    let grpc_addr = grpc.endpoint.trim_start_matches("http://").to_string();
    // PD answers; the TiKV store it hands out refuses connections, or never answers.
    let no_store = Sim::spawn_with("127.0.0.1:0", &["--advertise-store", "127.0.0.1:1"]);
    let silent_store = Sim::spawn_with("127.0.0.1:0", &["--advertise-store", &silent]);
    // PD answers, advertising a client URL this host cannot resolve (a container's name).
    let container_pd =
        Sim::spawn_with("127.0.0.1:0", &["--advertise-pd", "pd-in-a-container:2379"]);
    let cases: Vec<(String, Vec<String>)> = vec![
        // Nothing there.
        (
            "127.0.0.1:1".into(),
            vec!["127.0.0.1:1: cannot connect".into()],
        ),
        // Something listens, but no PD: it hangs up, it never answers, it is a web server or
        // another gRPC service.
        (
            fake(Fake::Close),
            vec!["does not answer as PD (GetMembers)".into()],
        ),
        (
            silent.clone(),
            vec![format!(
                "{silent}: accepts connections but did not answer a PD request"
            )],
        ),
        (
            fake(Fake::Http),
            vec!["does not answer as PD (GetMembers)".into()],
        ),
        (
            grpc_addr,
            vec!["does not answer as PD (GetMembers): Unimplemented".into()],
        ),
        // Half up.
        (
            no_store.pd.clone(),
            vec![
                format!("PD {} answered, but TiKV did not", no_store.pd),
                "TiKV store 1 at 127.0.0.1:1: cannot connect".into(),
            ],
        ),
        (
            silent_store.pd.clone(),
            vec![
                format!("PD {} answered, but TiKV did not", silent_store.pd),
                format!("TiKV store 1 at {silent}"),
            ],
        ),
        (
            container_pd.pd.clone(),
            vec!["advertises are not reachable from here (http://pd-in-a-container:2379".into()],
        ),
        // Several endpoints: each is named with what it did.
        (
            format!("127.0.0.1:1,{silent}"),
            vec![
                "127.0.0.1:1: cannot connect".into(),
                format!("{silent}: accepts connections but did not answer"),
            ],
        ),
    ];
    // All at once: each waits for its own timeouts.
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(pd, wanted)| {
            std::thread::spawn(move || {
                let err = refused_start(&pd);
                for w in &wanted {
                    assert!(err.contains(w.as_str()), "{pd}: no {w:?} in\n{err}");
                }
            })
        })
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

/// An S3 request's outcome within `within`: a 503 with an S3 error code and message (not a
/// hang, not a 500) while TiKV does not answer.
async fn unavailable<T: std::fmt::Debug, E>(
    what: &str,
    within: Duration,
    req: impl std::future::Future<
        Output = Result<T, aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>>,
    >,
) where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::fmt::Debug,
{
    let started = Instant::now();
    let Ok(r) = tokio::time::timeout(within, req).await else {
        panic!("{what}: no answer within {within:?}");
    };
    let f = failure(r);
    assert_eq!(f.status, 503, "{what}: {f:?}");
    assert!(
        matches!(f.code.as_deref(), Some("ServiceUnavailable" | "SlowDown")),
        "{what}: {f:?}"
    );
    assert!(
        f.message
            .as_deref()
            .is_some_and(|m| m.contains("try again")),
        "{what}: {f:?}"
    );
    eprintln!("{what}: {f:?} after {:?}", started.elapsed());
}

async fn health(admin: &str) -> (u16, String) {
    let r = reqwest::get(format!("{admin}/health")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Puts an object while TiKV answers, takes TiKV away (`away`), checks that `/health` says
/// why (naming PD `pd`) and that S3 requests get 503s with a message, brings it back (`back`)
/// and checks that the server serves again, unrestarted, with what it held.
async fn outage(s: &Server, pd: &str, away: impl FnOnce(), back: impl FnOnce()) {
    let c = s.client_no_retry();
    let bucket = new_bucket(&s.client(), "outage").await;
    put(&c, &bucket, "before", b"written before the outage").await;
    let (status, text) = health(&s.admin).await;
    assert_eq!(status, 200, "{text}");

    away();
    // A round against a silent TiKV fails after its call deadline (8 s).
    let why = eventually("/health saying TiKV is unreachable", || {
        let admin = s.admin.clone();
        async move {
            let (status, text) = health(&admin).await;
            if status == 503 && text.contains("TiKV (PD ") && text.contains("not answering") {
                Ok(text)
            } else {
                Err(format!("{status}\n{text}"))
            }
        }
    })
    .await;
    assert!(why.contains(pd), "{why}");
    eprintln!("/health while TiKV is away:\n{why}");
    let within = Duration::from_secs(30);
    let data = body(b"written during the outage");
    unavailable(
        "PUT",
        within,
        c.put_object()
            .bucket(&bucket)
            .key("during")
            .body(data)
            .send(),
    )
    .await;
    unavailable(
        "GET",
        within,
        c.get_object().bucket(&bucket).key("before").send(),
    )
    .await;
    unavailable("LIST", within, c.list_objects_v2().bucket(&bucket).send()).await;

    // Back on the same address: the server serves again, unrestarted.
    back();
    serving(s, &bucket).await;
    let ready = poll_until(Duration::from_secs(60), || {
        let admin = s.admin.clone();
        async move { health(&admin).await.0 == 200 }
    })
    .await;
    assert!(ready, "/health: {:?}", health(&s.admin).await);
    put(&c, &bucket, "after", b"written after the outage").await;
    assert_eq!(
        get_bytes(&c, &bucket, "before").await,
        b"written before the outage"
    );
    assert_eq!(
        get_bytes(&c, &bucket, "after").await,
        b"written after the outage"
    );
    let log = s.stderr_tail();
    assert!(!log.contains("panicked"), "{log}");
}

fn tikv_server(pd: &str) -> Server {
    Server::start(
        Opts::default()
            .arg("--store", "tikv")
            .arg("--pd", pd)
            .arg("--tikv-keyspace", "outage"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tikv_gone_silent_in_service_gives_503s_and_health_says_why_until_it_is_back() {
    let sim = Sim::spawn("127.0.0.1:0");
    // The first endpoint never answers: the start goes on through the second.
    let s = tikv_server(&format!("{},{}", fake(Fake::Silent), sim.pd));
    // Its process stopped: connections stay open, nothing answers; then it goes on.
    outage(&s, &sim.pd, || sim.stop(), || sim.resume()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tikv_refusing_connections_in_service_gives_503s_until_it_is_back() {
    behind_a_proxy(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tikv_down_behind_a_live_pd_in_service_gives_503s_until_it_is_back() {
    behind_a_proxy(false).await;
}

/// TiKV (and PD too with `pd_too`) behind a proxy, which PD advertises: cut, every connection
/// is dropped and new ones are refused; healed, it listens on the same address again.
async fn behind_a_proxy(pd_too: bool) {
    let proxy = Proxy::bind().await;
    let at = proxy.addr.to_string();
    let mut advertise = vec!["--advertise-store", at.as_str()];
    if pd_too {
        advertise.extend(["--advertise-pd", at.as_str()]);
    }
    let sim = Sim::spawn_with("127.0.0.1:0", &advertise);
    let proxy = proxy.serve(sim.pd.clone());
    let pd = if pd_too { at.clone() } else { sim.pd.clone() };
    let s = tikv_server(&pd);
    let (cut, heal) = (proxy.clone(), proxy.clone());
    outage(&s, &pd, move || cut.cut(), move || heal.heal()).await;
    proxy.cut();
}

/// A TCP proxy to one upstream address that can be cut and healed.
#[derive(Clone)]
struct Proxy {
    addr: std::net::SocketAddr,
    state: std::sync::Arc<std::sync::Mutex<ProxyState>>,
}

struct ProxyState {
    upstream: String,
    /// The accept loop, which owns every connection's task: aborted, they all go.
    task: Option<tokio::task::JoinHandle<()>>,
    listener: Option<tokio::net::TcpListener>,
}

impl Proxy {
    /// Listens on a free loopback port; forwards nothing until [`Proxy::serve`].
    async fn bind() -> Proxy {
        let listener = Self::listen("127.0.0.1:0".parse().unwrap());
        Proxy {
            addr: listener.local_addr().unwrap(),
            state: std::sync::Arc::new(std::sync::Mutex::new(ProxyState {
                upstream: String::new(),
                task: None,
                listener: Some(listener),
            })),
        }
    }

    fn listen(addr: std::net::SocketAddr) -> tokio::net::TcpListener {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        // Connections it dropped linger in TIME_WAIT on this port.
        socket.set_reuseaddr(true).unwrap();
        socket.bind(addr).unwrap();
        socket.listen(128).unwrap()
    }

    /// Forwards every connection to `upstream`.
    fn serve(self, upstream: String) -> Proxy {
        let mut st = self.state.lock().unwrap();
        st.upstream = upstream.clone();
        let listener = st.listener.take().expect("bound");
        st.task = Some(tokio::spawn(forward(listener, upstream)));
        drop(st);
        self
    }

    /// Drops every connection and refuses new ones.
    fn cut(&self) {
        if let Some(t) = self.state.lock().unwrap().task.take() {
            t.abort();
        }
    }

    /// Listens on the same address again.
    fn heal(&self) {
        let mut st = self.state.lock().unwrap();
        let listener = Self::listen(self.addr);
        st.task = Some(tokio::spawn(forward(listener, st.upstream.clone())));
    }
}

async fn forward(listener: tokio::net::TcpListener, upstream: String) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        let upstream = upstream.clone();
        conns.spawn(async move {
            if let Ok(mut out) = tokio::net::TcpStream::connect(&upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
            }
        });
        while conns.try_join_next().is_some() {}
    }
}
