//! The TiKV the TiKV tests run against: a `saker-tikv-sim` process they start (next to the
//! `saker` binary under test), or, with `SAKER_TIKV_PD=HOST:PORT`, a real cluster's PD. A
//! started simulator can be stopped and resumed (SIGSTOP, SIGCONT: TiKV gone silent, then
//! back on the same address with everything it held).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use super::{eventually, saker_bin, Opts, Server};

/// The TiKV the tests use: a `saker-tikv-sim` they start, or, with `SAKER_TIKV_PD=HOST:PORT`,
/// a real cluster's PD (keyspaces then get a random suffix: a real TiKV keeps them).
pub struct Sim {
    child: Option<Child>,
    /// `127.0.0.1:PORT` of PD (and TiKV).
    pub pd: String,
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
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the sim's address");
        let pd = line
            .trim()
            .strip_prefix("pd ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Sim {
            child: Some(child),
            pd,
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
