//! The S3 listener's limits against a real server: a client that sends its headers one byte
//! at a time, and an idle keep-alive connection, are cut after `--header-timeout`; past
//! `--max-connections` a connection waits until another closes; one key's flood past
//! `--key-max-inflight` gets 503 SlowDown while another key is served, and so does a key past
//! `--key-max-rate`. An early error answered to a client that waits for `100 Continue` closes
//! the connection instead of reading a body that is not coming.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::Client;
use common::*;

fn s3_addr(srv: &Server) -> String {
    srv.endpoint.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (or `limit` passes: `None`).
fn closed_within(conn: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    conn.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(start.elapsed())
            }
            Err(_) => return None,
        }
    }
}

/// One request on a fresh connection, answered: the status line.
fn status_line(conn: &mut TcpStream, request: &str, limit: Duration) -> Option<String> {
    conn.write_all(request.as_bytes()).unwrap();
    conn.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(2).any(|w| w == b"\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got).to_string();
    text.lines().next().map(str::to_string)
}

const HEALTHY_GET: &str = "GET /nobucket HTTP/1.1\r\nHost: s3\r\n\r\n";

#[test]
fn a_slow_client_and_an_idle_connection_are_cut_after_the_header_timeout() {
    let srv = Server::start(Opts::default().arg("--header-timeout", "2s"));
    let addr = s3_addr(&srv);

    // Headers one byte every 200 ms: 60 bytes would take 12 s.
    let mut slow = TcpStream::connect(&addr).unwrap();
    let request = "GET /nobucket HTTP/1.1\r\nHost: s3\r\nX-Pad: aaaaaaaaaaaaaaaaaa\r\n\r\n";
    let start = Instant::now();
    let mut cut_after = None;
    for b in request.bytes() {
        if slow.write_all(&[b]).is_err() {
            cut_after = Some(start.elapsed());
            break;
        }
        // Not synchronisation: this is the slow client's pace.
        std::thread::sleep(Duration::from_millis(200));
        slow.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        let r = slow.read(&mut buf);
        slow.set_nonblocking(false).unwrap();
        let cut = match r {
            Ok(0) => true,
            // A server may say why before it closes; nothing else may come back.
            Ok(n) => {
                let said = String::from_utf8_lossy(&buf[..n]).to_string();
                assert!(said.starts_with("HTTP/1.1 408"), "answered early: {said}");
                true
            }
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        };
        if cut {
            cut_after = Some(start.elapsed());
            break;
        }
    }
    let cut_after = cut_after.expect("a client sending a byte every 200 ms was never cut");
    assert!(
        cut_after >= Duration::from_millis(1800) && cut_after < Duration::from_secs(8),
        "cut after {cut_after:?} with a 2 s header timeout"
    );

    // A keep-alive connection left idle after a request is closed too.
    let mut idle = TcpStream::connect(&addr).unwrap();
    let line = status_line(&mut idle, HEALTHY_GET, Duration::from_secs(10)).unwrap();
    assert!(line.starts_with("HTTP/1.1 404"), "{line}");
    let closed = closed_within(&mut idle, Duration::from_secs(10))
        .expect("an idle keep-alive connection stayed open past the header timeout");
    assert!(
        closed >= Duration::from_millis(1500),
        "closed after {closed:?}"
    );

    // Meanwhile others are served as ever.
    let mut fresh = TcpStream::connect(&addr).unwrap();
    let line = status_line(&mut fresh, HEALTHY_GET, Duration::from_secs(10)).unwrap();
    assert!(line.starts_with("HTTP/1.1 404"), "{line}");
}

#[test]
fn past_the_connection_cap_a_connection_waits_for_another_to_close() {
    let srv = Server::start(Opts::default().arg("--max-connections", "2"));
    let addr = s3_addr(&srv);
    let mut first = TcpStream::connect(&addr).unwrap();
    let mut second = TcpStream::connect(&addr).unwrap();
    for c in [&mut first, &mut second] {
        let line = status_line(c, HEALTHY_GET, Duration::from_secs(10)).unwrap();
        assert!(line.starts_with("HTTP/1.1 404"), "{line}");
    }
    // The third is accepted by the kernel, not served by saker while two are open.
    let mut third = TcpStream::connect(&addr).unwrap();
    let waited = status_line(&mut third, HEALTHY_GET, Duration::from_millis(1500));
    assert_eq!(waited, None, "a third connection was served past the cap");
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(2).any(|w| w == b"\r\n") {
        let n = third.read(&mut buf).expect("served once the first closed");
        assert!(n > 0, "closed instead of served");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 404"), "{got:?}");
}

fn no_retry(srv: &Server, ak: &str, sk: &str) -> Client {
    Client::from_conf(
        srv.config_with(ak, sk)
            .retry_config(RetryConfig::disabled())
            .build(),
    )
}

fn create_key(srv: &Server, ak: &str, sk: &str) {
    ok_stdout(
        srv.admin_cmd(&[
            "key",
            "create",
            "--access-key",
            ak,
            "--secret-key",
            sk,
            "--policy",
            "admin",
        ]),
        "key create",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_keys_flood_gets_slow_down_while_another_key_is_served() {
    let srv = Server::start(Opts::default().arg("--key-max-inflight", "4"));
    create_key(&srv, "AKFLOOD", "flood-secret-123");
    create_key(&srv, "AKCALM", "calm-secret-1234");
    let root = srv.client();
    create_bucket(&root, "limits").await;
    let data = random_bytes(64 * 1024);
    put(&root, "limits", "obj", &data).await;

    // 64 PUTs of 256 KiB by one key at once: at most 4 are served at a time, the others
    // refused.
    let flood = no_retry(&srv, "AKFLOOD", "flood-secret-123");
    let calm = no_retry(&srv, "AKCALM", "calm-secret-1234");
    let big = random_bytes(256 * 1024);
    let flooding: Vec<_> = (0..64)
        .map(|i| {
            let (c, body) = (flood.clone(), big.clone());
            tokio::spawn(async move {
                c.put_object()
                    .bucket("limits")
                    .key(format!("flood/{i}"))
                    .body(body.into())
                    .send()
                    .await
            })
        })
        .collect();
    // The other key keeps being served in full, every request, during the flood.
    for _ in 0..8 {
        assert_eq!(get_bytes(&calm, "limits", "obj").await, data);
    }
    let (mut served, mut slowed) = (Vec::new(), 0);
    for (i, f) in flooding.into_iter().enumerate() {
        match f.await.unwrap() {
            Ok(_) => served.push(format!("flood/{i}")),
            Err(e) => {
                let f = assert_fails::<(), _>(Err(e), 503, "SlowDown");
                assert!(f.message.is_some(), "{f:?}");
                slowed += 1;
            }
        }
    }
    assert!(served.len() >= 4, "served {}", served.len());
    assert!(
        slowed >= 1,
        "64 PUTs at once were all served with a limit of 4"
    );
    // What was acknowledged is stored whole; what was refused is not.
    assert_eq!(list_all(&root, "limits", Some("flood/")).await, {
        let mut s = served.clone();
        s.sort();
        s
    });
    for key in &served {
        assert_eq!(get_bytes(&root, "limits", key).await, big);
    }
    // The budget is given back: sequential requests pass again.
    for _ in 0..10 {
        assert_eq!(get_bytes(&flood, "limits", "obj").await, data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_past_its_rate_gets_slow_down() {
    let srv = Server::start(Opts::default().arg("--key-max-rate", "5"));
    create_key(&srv, "AKRATE", "rate-secret-1234");
    let root = srv.client();
    create_bucket(&root, "rated").await;
    let fast = no_retry(&srv, "AKRATE", "rate-secret-1234");
    let (mut ok, mut slowed) = (0, 0);
    let start = Instant::now();
    for i in 0..30 {
        match fast
            .put_object()
            .bucket("rated")
            .key(format!("k{i}"))
            .body(b"x".to_vec().into())
            .send()
            .await
        {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_fails::<(), _>(Err(e), 503, "SlowDown");
                slowed += 1;
            }
        }
    }
    // 30 PUTs back to back: at most a second's 5 plus 5 per second elapsed pass.
    let allowed = 5 + (start.elapsed().as_secs_f64() * 5.0).ceil() as i32;
    assert!(ok <= allowed, "{ok} passed in {:?}", start.elapsed());
    assert!(slowed >= 1, "{ok} ok, none refused");
    // The root key has its own budget; what passed is stored.
    let listed = list_all(&root, "rated", None).await;
    assert_eq!(listed.len(), ok as usize);
}

#[test]
fn an_early_answer_to_an_expect_continue_request_closes_the_connection() {
    let srv = Server::default_start();
    let mut conn = TcpStream::connect(s3_addr(&srv)).unwrap();
    // The client holds its body back until told to continue; the answer comes first.
    let request = "PUT /no-such-bucket/k HTTP/1.1\r\nHost: s3\r\nContent-Length: 3\r\n\
                   Expect: 100-continue\r\n\r\n";
    conn.write_all(request.as_bytes()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got)
        .expect("the server answers and closes the connection");
    let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 404"), "{text}");
    assert!(text.contains("connection: close"), "{text}");
    // Not told to continue after its answer (the next request would be read as the body).
    assert!(!text.contains("100 continue"), "{text}");
}
