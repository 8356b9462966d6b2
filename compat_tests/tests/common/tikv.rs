//! The TiKV the TiKV tests run against: a `saker-tikv-sim` process they start (next to the
//! `saker` binary under test), or, with `SAKER_TIKV_PD=HOST:PORT`, a real cluster's PD. A
//! started simulator can be stopped and resumed (SIGSTOP, SIGCONT: TiKV gone silent, then
//! back on the same address with everything it held), and tells its GC safe points and the
//! versions its keys hold ([`Sim::stats`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::{eventually, saker_bin, Opts, Server};

/// The TiKV the tests use: a `saker-tikv-sim` they start, or, with `SAKER_TIKV_PD=HOST:PORT`,
/// a real cluster's PD (keyspaces then get a random suffix: a real TiKV keeps them).
pub struct Sim {
    child: Option<Child>,
    /// `127.0.0.1:PORT` of PD (and TiKV).
    pub pd: String,
    /// `http://127.0.0.1:PORT` of a started simulator's stats page.
    stats: Option<String>,
    suffix: String,
}

impl Sim {
    /// Starts one whose regions split every 64 keys and which answers every 13th KV request
    /// with a region error (the client must retry through both).
    pub fn start() -> Sim {
        if let Ok(pd) = std::env::var("SAKER_TIKV_PD") {
            let suffix = format!("-{:08x}", rand::random::<u32>());
            return Sim {
                child: None,
                pd,
                stats: None,
                suffix,
            };
        }
        Sim::spawn("127.0.0.1:0")
    }

    /// Starts a `saker-tikv-sim` on `listen`, whatever `SAKER_TIKV_PD` says.
    pub fn spawn(listen: &str) -> Sim {
        Sim::spawn_with(listen, &[])
    }

    /// Starts a `saker-tikv-sim` on `listen` with more flags (`--advertise-store ADDR`, ...).
    pub fn spawn_with(listen: &str, extra: &[&str]) -> Sim {
        let bin =
            saker_bin().with_file_name(format!("saker-tikv-sim{}", std::env::consts::EXE_SUFFIX));
        assert!(
            bin.exists(),
            "{} missing: cargo build --workspace --bins",
            bin.display()
        );
        let mut child = Command::new(bin)
            .args(["--listen", listen, "--split-keys", "64"])
            .args(["--region-error-every", "13"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn saker-tikv-sim");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = || {
            let mut line = String::new();
            out.read_line(&mut line).expect("read the sim's addresses");
            line.trim().to_string()
        };
        let (pd, stats) = (line(), line());
        let after = |line: &str, label: &str| {
            line.strip_prefix(label)
                .unwrap_or_else(|| panic!("unexpected line {line:?}"))
                .to_string()
        };
        Sim {
            child: Some(child),
            pd: after(&pd, "pd "),
            stats: Some(after(&stats, "stats ")),
            suffix: String::new(),
        }
    }

    /// The keyspace `name` of this run.
    pub fn keyspace(&self, name: &str) -> String {
        format!("{name}{}", self.suffix)
    }

    /// A cluster node's flags for the keyspace `name` of this run.
    pub fn node_args(&self, name: &str) -> Vec<String> {
        let keyspace = self.keyspace(name);
        [
            "--store",
            "tikv",
            "--pd",
            &self.pd,
            "--tikv-keyspace",
            &keyspace,
        ]
        .map(String::from)
        .to_vec()
    }

    pub fn opts(&self, keyspace: &str) -> Opts {
        Opts::default()
            .arg("--store", "tikv")
            .arg("--pd", &self.pd)
            .arg("--tikv-keyspace", &self.keyspace(keyspace))
    }
}

impl Sim {
    /// Stops the simulator's process (SIGSTOP): connections stay open, nothing answers.
    pub fn stop(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Resumes a stopped simulator (SIGCONT): it answers again, on the same address.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, sig: i32) {
        let child = self
            .child
            .as_ref()
            .expect("a simulator this test started (not SAKER_TIKV_PD)");
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    }
}

/// What a simulator's stats page says ([`Sim::stats`]).
#[derive(Debug, Default)]
pub struct Stats {
    /// A fresh timestamp.
    pub now: u64,
    pub gc_safe_point: u64,
    /// Calls that moved the GC safe point.
    pub gc_safe_point_moves: u64,
    /// `ScanLock` calls answered (a GC worker resolving locks scans them).
    pub scan_lock_calls: u64,
    /// Service safe points by service id.
    pub services: BTreeMap<String, u64>,
    /// Records held and collected by GC, under the prefix asked for.
    pub held: u64,
    pub collected: u64,
    /// Per key (hex) with more than one record written: records held and collected.
    pub keys: BTreeMap<String, (u64, u64)>,
}

impl Stats {
    /// Records held and collected of `key` (`(0, 0)` if it has at most one).
    pub fn key(&self, key: &[u8]) -> (u64, u64) {
        self.keys
            .get(&hex::encode(key))
            .copied()
            .unwrap_or_default()
    }

    /// The physical milliseconds between two timestamps.
    pub fn ms_between(older: u64, newer: u64) -> i64 {
        (newer >> 18) as i64 - (older >> 18) as i64
    }
}

impl Sim {
    /// The stats page of the simulator this test started, for the keys under `prefix`.
    pub async fn stats(&self, prefix: &[u8]) -> Stats {
        let base = self.stats.as_ref().expect("a simulator this test started");
        let url = format!("{base}/stats?prefix={}", hex::encode(prefix));
        let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        let mut st = Stats::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let n = |i: usize| -> u64 { f[i].parse().unwrap_or_else(|_| panic!("{line:?}")) };
            match f[0] {
                "now" => st.now = n(1),
                "gc_safe_point" => st.gc_safe_point = n(1),
                "gc_safe_point_moves" => st.gc_safe_point_moves = n(1),
                "scan_lock_calls" => st.scan_lock_calls = n(1),
                "service" => {
                    st.services.insert(f[1].to_string(), n(2));
                }
                "held" => st.held = n(1),
                "collected" => st.collected = n(1),
                "key" => {
                    st.keys.insert(f[1].to_string(), (n(2), n(3)));
                }
                _ => {}
            }
        }
        st
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            // A stopped process dies of SIGKILL all the same.
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until the server serves S3 requests that touch every group (a restarted process
/// takes its groups' leases over once the old holder's lapse).
pub async fn serving(s: &Server, bucket: &str) {
    let c = s.client_no_retry();
    eventually("every group served", || {
        let c = c.clone();
        let bucket = bucket.to_string();
        async move {
            c.list_objects_v2()
                .bucket(&bucket)
                .send()
                .await
                .map_err(|e| format!("{e:?}"))?;
            for i in 0..16 {
                let r = c
                    .head_object()
                    .bucket(&bucket)
                    .key(format!("probe/{i}"))
                    .send()
                    .await;
                match r {
                    Ok(_) => {}
                    Err(e) if e.as_service_error().is_some_and(|se| se.is_not_found()) => {}
                    Err(e) => return Err(format!("{e:?}")),
                }
            }
            Ok(())
        }
    })
    .await;
}
