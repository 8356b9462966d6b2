//! A real Kafka broker for the notification tests: Kafka 4.x in KRaft mode, one JVM that is
//! both broker and controller on free loopback ports (a plaintext listener, and SASL PLAIN
//! over TLS with a certificate from a test CA), its log in a temporary directory,
//! run from the jars `compat_tests/kafka/install.sh` puts in `$SAKER_KAFKA_HOME` (default
//! `~/.cache/saker-kafka/<version of kafka/pom.xml>`). It can be stopped (SIGTERM, its data
//! kept) and started again on the same ports; dropped, its process group is killed.
//! Topics are made and read with rskafka, the client saker's Kafka targets use.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use rskafka::client::partition::UnknownTopicHandling;
use rskafka::client::{Client, ClientBuilder};
use rskafka::BackoffConfig;

/// The one SASL PLAIN login the TLS listener takes.
pub const SASL_USER: &str = "saker";
pub const SASL_PASSWORD: &str = "saker-secret";

/// How long the broker may take to answer metadata after its start.
const START: Duration = Duration::from_secs(120);

/// One record read back: where it is, its key and value.
#[derive(Clone, Debug)]
pub struct Read {
    pub partition: i32,
    pub offset: i64,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

pub struct Broker {
    dir: tempfile::TempDir,
    home: PathBuf,
    pub port: u16,
    /// The SASL_SSL listener's port.
    pub secure_port: u16,
    child: Option<Child>,
}

/// Where install.sh put the jars; panics, saying how to install them, if they are not there.
fn home() -> PathBuf {
    let install = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafka/install.sh");
    let how = format!(
        "run {} (needs java 17+ and mvn: apt-get install openjdk-17-jre-headless maven); \
         ./test.sh does",
        install.display()
    );
    let java = Command::new("java").arg("-version").output();
    assert!(
        java.is_ok_and(|o| o.status.success()),
        "the Kafka test needs java on PATH: {how}"
    );
    let home = match std::env::var_os("SAKER_KAFKA_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            let pom = std::fs::read_to_string(install.with_file_name("pom.xml"))
                .expect("compat_tests/kafka/pom.xml");
            let version = pom
                .split("<kafka.version>")
                .nth(1)
                .and_then(|r| r.split("</kafka.version>").next())
                .expect("kafka.version in pom.xml");
            let user = std::env::var_os("HOME").expect("HOME");
            PathBuf::from(user).join(".cache/saker-kafka").join(version)
        }
    };
    assert!(
        home.join("libs/.complete").is_file() && home.join("log4j2.yaml").is_file(),
        "no Kafka jars in {}: {how}",
        home.display()
    );
    home
}

/// A client of `addr` whose requests give up after `patience` (not rskafka's endless retry).
pub async fn client(addr: &str, patience: Duration) -> Result<Client, String> {
    let build = ClientBuilder::new(vec![addr.to_string()])
        .backoff_config(BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
            base: 2.0,
            deadline: Some(patience),
        })
        .build();
    match tokio::time::timeout(patience * 2, build).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

impl Broker {
    /// Formats a new log directory and starts the broker; answers once it serves metadata.
    pub async fn start() -> Broker {
        let home = home();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ports = super::free_ports(3);
        let (port, controller, secure) = (ports[0], ports[1], ports[2]);
        let data = dir.path().join("data");
        super::certs::make_certificates(dir.path());
        let keystore = dir.path().join("keystore.pem");
        let key = std::fs::read_to_string(dir.path().join("server.key")).unwrap();
        let cert = std::fs::read_to_string(dir.path().join("server.pem")).unwrap();
        std::fs::write(&keystore, key + &cert).unwrap();
        let properties = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.bootstrap.servers=127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},\
             SASL_SSL://127.0.0.1:{secure}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure}\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=PLAINTEXT\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,\
             SASL_SSL:SASL_SSL\n\
             sasl.enabled.mechanisms=PLAIN\n\
             listener.name.sasl_ssl.plain.sasl.jaas.config=\
             org.apache.kafka.common.security.plain.PlainLoginModule required \
             user_{SASL_USER}=\"{SASL_PASSWORD}\";\n\
             listener.name.sasl_ssl.ssl.keystore.type=PEM\n\
             listener.name.sasl_ssl.ssl.keystore.location={}\n\
             log.dirs={}\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             offsets.topic.replication.factor=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n",
            keystore.display(),
            data.display()
        );
        std::fs::write(dir.path().join("server.properties"), properties).unwrap();
        let cluster_id =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
        let format = java(&home, dir.path())
            .args(["kafka.tools.StorageTool", "format", "-t", &cluster_id])
            .args(["-c", "server.properties", "--standalone"])
            .output()
            .expect("run java (kafka.tools.StorageTool)");
        assert!(
            format.status.success(),
            "formatting Kafka's storage failed:\n{}{}",
            String::from_utf8_lossy(&format.stdout),
            String::from_utf8_lossy(&format.stderr)
        );
        let mut broker = Broker {
            dir,
            home,
            port,
            secure_port: secure,
            child: None,
        };
        broker.run().await;
        broker
    }

    /// `127.0.0.1:PORT`, the bootstrap address.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `127.0.0.1:PORT` of the SASL_SSL listener.
    pub fn secure_addr(&self) -> String {
        format!("127.0.0.1:{}", self.secure_port)
    }

    /// The PEM file of the CA that signed the TLS listener's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Starts the JVM on the existing log directory and waits until it answers metadata.
    async fn run(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("broker.log"))
            .unwrap();
        let child = java(&self.home, self.dir.path())
            .args(["kafka.Kafka", "server.properties"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start java (kafka.Kafka)");
        self.child = Some(child);
        let end = Instant::now() + START;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the Kafka broker exited ({status}):\n{}", self.log_tail());
            }
            if let Ok(c) = client(&self.addr(), Duration::from_secs(1)).await {
                if c.list_topics().await.is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < end,
                "the Kafka broker did not answer within {START:?}:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops the broker (SIGTERM to its process group, SIGKILL past 30 s); its data stays.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(&child, libc::SIGTERM);
        let end = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > end {
                signal(&child, libc::SIGKILL);
                child.wait().unwrap();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the stopped broker again on the same ports and data.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "the broker is running");
        self.run().await;
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("broker.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Creates `topic` with `partitions` partitions (replication 1) and waits until the
    /// metadata shows it.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let c = client(&self.addr(), Duration::from_secs(10)).await.unwrap();
        c.controller_client()
            .unwrap()
            .create_topic(topic, partitions, 1, 10_000)
            .await
            .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
        let shown = super::poll_until(Duration::from_secs(30), || async {
            c.list_topics().await.is_ok_and(|ts| {
                ts.iter()
                    .any(|t| t.name == topic && t.partitions.len() == partitions as usize)
            })
        })
        .await;
        assert!(shown, "topic {topic} not in the metadata");
    }

    /// Every record of `topic` now, partition by partition in offset order.
    pub async fn read_all(&self, topic: &str) -> Vec<Read> {
        let c = client(&self.addr(), Duration::from_secs(10)).await.unwrap();
        let partitions = c
            .list_topics()
            .await
            .unwrap()
            .into_iter()
            .find(|t| t.name == topic)
            .unwrap_or_else(|| panic!("no topic {topic}"))
            .partitions;
        let mut out = Vec::new();
        for p in partitions {
            let pc = c
                .partition_client(topic, p, UnknownTopicHandling::Retry)
                .await
                .unwrap();
            let mut offset = 0;
            loop {
                let (records, high) = pc.fetch_records(offset, 1..4_000_000, 100).await.unwrap();
                for r in records {
                    offset = offset.max(r.offset + 1);
                    out.push(Read {
                        partition: p,
                        offset: r.offset,
                        key: r.record.key.unwrap_or_default(),
                        value: r.record.value.unwrap_or_default(),
                    });
                }
                if offset >= high {
                    break;
                }
            }
        }
        out
    }
}

fn java(home: &Path, dir: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("java");
    cmd.current_dir(dir)
        .args([
            "-Xmx512m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
        ])
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            home.join("log4j2.yaml").display()
        ))
        .arg("-cp")
        .arg(format!("{}/*", home.join("libs").display()))
        // Its own process group, so a kill reaches every process it starts.
        .process_group(0);
    cmd
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the process group this test started.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), sig);
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
    }
}
