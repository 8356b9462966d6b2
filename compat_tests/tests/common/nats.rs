//! A `nats-server` with JetStream for the notification tests: a real process on a free
//! loopback port, its store in a temporary directory, that can be stopped (SIGTERM: it
//! flushes its store) and started again on the same port and store. Reads back what a
//! stream holds.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::jetstream;

use super::webhook::Received;
use super::{free_ports, poll_until};

/// The `nats-server` binary: on PATH or where `go install` puts it.
pub fn nats_server_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(out) = Command::new("go").args(["env", "GOPATH"]).output() {
        let gopath = String::from_utf8_lossy(&out.stdout).trim().to_string();
        dirs.extend(std::env::split_paths(&gopath).map(|d| d.join("bin")));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
        .expect(
            "this test needs `nats-server` on PATH or in $(go env GOPATH)/bin: \
             go install github.com/nats-io/nats-server/v2@v2.15.3 (./test.sh does)",
        )
}

/// The server; stopped when dropped.
pub struct NatsServer {
    bin: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts it and waits until JetStream answers.
    pub async fn start() -> NatsServer {
        let mut s = NatsServer {
            bin: nats_server_bin(),
            port: free_ports(1)[0],
            dir: tempfile::tempdir().unwrap(),
            child: None,
        };
        s.up().await;
        s
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the process (same port, same store) and waits for JetStream.
    pub async fn up(&mut self) {
        assert!(self.child.is_none(), "nats-server runs already");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("nats.log"))
            .unwrap();
        let child = Command::new(&self.bin)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.dir.path().join("store"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        let url = self.url();
        let ready = poll_until(Duration::from_secs(30), || async {
            let Ok(client) = async_nats::connect(url.as_str()).await else {
                return false;
            };
            jetstream::new(client).query_account().await.is_ok()
        })
        .await;
        assert!(ready, "nats-server did not start:\n{}", self.log());
    }

    /// Stops the process (SIGTERM, so what it acknowledged is on disk) and waits for it.
    pub fn down(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: a signal to our own child, which we have not reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while child.try_wait().unwrap().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nats.log")).unwrap_or_default()
    }

    /// A JetStream context on a new connection.
    pub async fn jetstream(&self) -> jetstream::Context {
        let client = async_nats::connect(self.url())
            .await
            .expect("connect to nats-server");
        jetstream::new(client)
    }

    /// Makes stream `name` (file storage) over `subject`.
    pub async fn create_stream(&self, name: &str, subject: &str) {
        self.jetstream()
            .await
            .create_stream(jetstream::stream::Config {
                name: name.to_string(),
                subjects: vec![subject.to_string()],
                ..Default::default()
            })
            .await
            .expect("create the stream");
    }

    /// Every record of every message in stream `name`, in stream order, with the subject
    /// each came on as its path; and the bodies that are not S3 events.
    pub async fn records(&self, name: &str) -> (Vec<Received>, Vec<String>) {
        let js = self.jetstream().await;
        let mut stream = js.get_stream(name).await.expect("the stream");
        let last = stream
            .info()
            .await
            .expect("stream info")
            .state
            .last_sequence;
        let (mut got, mut bad) = (Vec::new(), Vec::new());
        for seq in 1..=last {
            let m = stream.get_raw_message(seq).await.expect("a stream message");
            match super::notify::parse_records(m.subject.as_str(), &m.payload) {
                Ok(r) => got.extend(r),
                Err(e) => bad.push(e),
            }
        }
        (got, bad)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.down();
    }
}
