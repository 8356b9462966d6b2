//! A private RabbitMQ node for the notification tests, run as a plain process (no systemd,
//! nothing of the system's broker): its own node name, AMQP, distribution and epmd ports on
//! loopback, its data, logs, configuration and Erlang cookie (HOME) in a temporary
//! directory. It takes a core and several seconds to start, so a test starts one at most.
//! Stopped when dropped: the whole process tree, checked gone.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lapin::{Connection, ConnectionProperties};

use super::{free_ports, poll_until};

/// The broker's start script (Debian's `/usr/sbin/rabbitmq-server` wrapper would `su` to
/// the rabbitmq user; the script it runs does not).
fn rabbitmq_server_bin() -> PathBuf {
    let debian = PathBuf::from("/usr/lib/rabbitmq/bin/rabbitmq-server");
    if debian.is_file() {
        return debian;
    }
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("rabbitmq-server"))
                .find(|p| p.is_file())
        })
        .expect(
            "this test needs `rabbitmq-server` (Debian: apt-get install rabbitmq-server; \
             ./test.sh does)",
        )
}

/// The broker.
pub struct Rabbit {
    port: u16,
    node: String,
    dir: tempfile::TempDir,
    epmd: Child,
    broker: Option<Child>,
}

/// The live processes whose environment names node `node`: the start script, the Erlang VM
/// and its helpers (which set up sessions of their own, and outlive their parents briefly).
fn node_processes(node: &str) -> Vec<u32> {
    let mark = format!("RABBITMQ_NODENAME={node}");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == mark.as_bytes()) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().chars().next())
        })
        .is_some_and(|state| state != Some('Z'))
}

/// Sends `sig` to `pid` (a group when negative).
fn signal(pid: i32, sig: i32) {
    // SAFETY: a signal to a process (or group) this test started, or one of its children.
    unsafe { libc::kill(pid, sig) };
}

impl Rabbit {
    /// Starts the node and waits (with a deadline) until an AMQP connection opens.
    pub async fn start() -> Rabbit {
        let bin = rabbitmq_server_bin();
        let ports = free_ports(3);
        let (port, dist, epmd_port) = (ports[0], ports[1], ports[2]);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(d.join("rabbitmq-env.conf"), "").unwrap();
        std::fs::write(
            d.join("rabbitmq.conf"),
            format!("listeners.tcp.default = 127.0.0.1:{port}\n"),
        )
        .unwrap();
        let log = |name: &str| std::fs::File::create(d.join(name)).unwrap();
        // Our own epmd on its own port, in the foreground, so the node does not start a
        // daemon one that outlives the test.
        let epmd = Command::new("epmd")
            .args(["-port", &epmd_port.to_string()])
            .stdout(Stdio::null())
            .stderr(log("epmd.log"))
            .spawn()
            .expect("start epmd (Debian: erlang-base, a dependency of rabbitmq-server)");
        let node = format!("saker-test-{}-{port}@localhost", std::process::id());
        let env: Vec<(&str, String)> = vec![
            ("HOME", d.display().to_string()),
            ("RABBITMQ_NODENAME", node.clone()),
            ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
            ("RABBITMQ_NODE_PORT", port.to_string()),
            ("RABBITMQ_DIST_PORT", dist.to_string()),
            ("ERL_EPMD_PORT", epmd_port.to_string()),
            (
                "RABBITMQ_MNESIA_BASE",
                d.join("mnesia").display().to_string(),
            ),
            ("RABBITMQ_LOG_BASE", d.join("log").display().to_string()),
            (
                "RABBITMQ_CONFIG_FILE",
                d.join("rabbitmq.conf").display().to_string(),
            ),
            (
                "RABBITMQ_ENABLED_PLUGINS_FILE",
                d.join("enabled_plugins").display().to_string(),
            ),
            (
                "RABBITMQ_CONF_ENV_FILE",
                d.join("rabbitmq-env.conf").display().to_string(),
            ),
        ];
        let broker = Command::new(bin)
            .current_dir(d)
            .envs(env)
            .process_group(0)
            .stdout(log("broker.out"))
            .stderr(log("broker.err"))
            .spawn()
            .expect("start rabbitmq-server");
        let pid = broker.id();
        let mut r = Rabbit {
            port,
            node,
            dir,
            epmd,
            broker: Some(broker),
        };
        let url = r.url();
        let started = Instant::now();
        let ready = poll_until(Duration::from_secs(120), || async {
            if !alive(pid) {
                return true; // exited: reported below
            }
            let connect = Connection::connect(&url, ConnectionProperties::default());
            match tokio::time::timeout(Duration::from_secs(5), connect).await {
                Ok(Ok(c)) => {
                    let _ = c.close(200, "OK".into()).await;
                    true
                }
                _ => false,
            }
        })
        .await;
        let exited = r.broker.as_mut().and_then(|b| b.try_wait().ok().flatten());
        assert!(
            ready && exited.is_none(),
            "rabbitmq-server did not start ({exited:?}):\n{}",
            r.logs()
        );
        eprintln!("rabbitmq-server up in {:?}", started.elapsed());
        r
    }

    /// `amqp://guest:guest@127.0.0.1:PORT/%2f` (guest may log in from loopback).
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    pub async fn connect(&self) -> Connection {
        Connection::connect(&self.url(), ConnectionProperties::default())
            .await
            .expect("connect to rabbitmq")
    }

    /// The start script's output and the node's log.
    pub fn logs(&self) -> String {
        let d = self.dir.path();
        let mut out = String::new();
        for f in ["broker.out", "broker.err"] {
            out += &std::fs::read_to_string(d.join(f)).unwrap_or_default();
        }
        for e in std::fs::read_dir(d.join("log"))
            .into_iter()
            .flatten()
            .flatten()
        {
            out += &std::fs::read_to_string(e.path()).unwrap_or_default();
        }
        out
    }

    /// Stops the node (SIGTERM to its process group, SIGKILL past a deadline) and epmd, and
    /// checks that no process of theirs is left.
    pub fn stop(&mut self) {
        let Some(mut broker) = self.broker.take() else {
            return;
        };
        // Every process of the node seen, to wait for each to be gone (one that is exiting
        // no longer shows its environment).
        let mut seen = std::collections::BTreeSet::new();
        seen.extend(node_processes(&self.node));
        let group = -(broker.id() as i32);
        signal(group, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while broker.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            seen.extend(node_processes(&self.node));
            std::thread::sleep(Duration::from_millis(50));
        }
        signal(group, libc::SIGKILL);
        let _ = broker.kill();
        let _ = broker.wait();
        let _ = self.epmd.kill();
        let _ = self.epmd.wait();
        // The VM's helpers (erl_child_setup, inet_gethost, the disk monitor's sh) end with it.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            seen.extend(node_processes(&self.node));
            if !seen.iter().any(|p| alive(*p)) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let left: Vec<u32> = seen.into_iter().filter(|p| alive(*p)).collect();
        for p in &left {
            signal(*p as i32, libc::SIGKILL);
        }
        assert!(left.is_empty(), "broker processes left: {left:?}");
    }
}

impl Drop for Rabbit {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.stop();
            return;
        }
        if let Some(b) = &self.broker {
            signal(-(b.id() as i32), libc::SIGKILL);
        }
        for p in node_processes(&self.node) {
            signal(p as i32, libc::SIGKILL);
        }
        let _ = self.epmd.kill();
        let _ = self.epmd.wait();
    }
}
