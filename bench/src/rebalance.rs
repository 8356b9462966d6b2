//! `saker bench rebalance`: Origami's experiment on one machine. It starts its own all-in-one
//! server with `--groups` MNode groups, each limited to `--ops-limit` operations per second
//! (`--group-ops-limit`: a metadata server's capacity each, since here all groups share the
//! same cores), the chosen balancing policy acting every `--window`, and the balancer's
//! minimum namespace size lowered to nothing; builds the workload's tree ([`super::trace`]),
//! then replays its job with `--threads` workers and reports the job completion time, the
//! operations per second, the migrations and each group's share of the work.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use saker_client::Cluster;
use saker_rpc::{CostKind, MetaError, MetaRequest, MetaResponse, Want};
use serde::Serialize;

use super::trace::{generate, Op, Trace, Workload};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// No balancing.
    None,
    /// FalconFS's inode balancing.
    Even,
    /// Origami's benefit-driven moves.
    Benefit,
}

#[derive(Args, Debug)]
pub struct RebalanceBenchArgs {
    #[arg(long, value_enum)]
    workload: Workload,
    #[arg(long, value_enum, default_value = "benefit")]
    policy: Policy,
    /// MNode groups of the server it starts.
    #[arg(long, default_value_t = 4)]
    groups: u32,
    /// Operations per second each group may do.
    #[arg(long, default_value_t = 300)]
    ops_limit: u32,
    /// The groups' cost window, and the even policy's interval.
    #[arg(long, default_value = "1s", value_parser = crate::units::parse_duration)]
    window: Duration,
    /// Concurrent workers replaying the job.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Size of the trace (1.0: about ten thousand job operations).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Keep the server's data directory and log (its path is printed).
    #[arg(long)]
    keep: bool,
}

#[derive(Serialize)]
struct Report {
    workload: Workload,
    policy: Policy,
    groups: u32,
    ops_limit: u32,
    window_secs: f64,
    threads: usize,
    scale: f64,
    setup_secs: f64,
    /// Time to finish the replayed job.
    jct_secs: f64,
    phase_secs: Vec<f64>,
    ops: u64,
    errors: u64,
    ops_per_sec: f64,
    /// Exception-table changes the balancer made during the job, and the inodes they moved.
    migrations: u64,
    migrated_inodes: f64,
    exceptions: Vec<(String, String)>,
    /// Work each group did during the job (requests served, forwarded and lookups answered).
    per_group_ops: BTreeMap<u32, u64>,
    /// The balancer's own time: its rounds, and (benefit) its predicting and planning.
    balancer_round_secs: f64,
    balancer_plan_secs: f64,
    /// The benefit policy's predictors on held-out windows (mean absolute error over load).
    prediction_error_ewma: Option<f64>,
    prediction_error_model: Option<f64>,
}

/// The server this benchmark runs, stopped and its data removed when dropped.
struct Server {
    child: Child,
    dir: PathBuf,
    keep: bool,
    admin: String,
    rpc: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if self.keep {
            eprintln!("server data and log kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The value after `label` on a line the server prints at start (its bound addresses).
fn printed(line: &str, label: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix(label)?.trim();
    let addr = rest.split_whitespace().next()?;
    Some(addr.trim_start_matches("http://").to_string())
}

async fn start_server(args: &RebalanceBenchArgs) -> anyhow::Result<Server> {
    let dir = std::env::temp_dir().join(format!("saker-rebalance-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir)?;
    let window = format!("{}ms", args.window.as_millis());
    let mut cmd = Command::new(std::env::current_exe()?);
    // Ports of the system's choosing, read back from what the server prints.
    cmd.arg("server")
        .arg("--data-dir")
        .arg(&dir)
        .args(["--s3-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
        .args(["--rpc-addr", "127.0.0.1:0"])
        .args(["--mnodes", &args.groups.to_string()])
        .args(["--group-ops-limit", &args.ops_limit.to_string()])
        .args(["--load-window", &window])
        .args(["--balance-min-inodes", "0"]);
    match args.policy {
        Policy::None => cmd.args(["--balance-every", "0s"]),
        Policy::Even => cmd.args(["--balance-policy", "even", "--balance-every", &window]),
        Policy::Benefit => cmd.args(["--balance-policy", "benefit"]),
    };
    let log = std::fs::File::create(dir.join("server.log"))?;
    let mut child = cmd
        .env("SAKER_ACCESS_KEY", "rebalance-bench")
        .env("SAKER_SECRET_KEY", "rebalance-bench-secret")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .context("cannot start saker server")?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        // Read to the end (the server keeps writing after its addresses).
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut server = Server {
        child,
        dir,
        keep: args.keep,
        admin: String::new(),
        rpc: String::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.admin.is_empty() || server.rpc.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            bail!(
                "the server did not print its addresses (log: {})",
                server.dir.join("server.log").display()
            );
        };
        if let Some(a) = printed(&line, "admin:") {
            server.admin = format!("http://{a}");
        }
        if let Some(a) = printed(&line, "RPC (library clients):") {
            server.rpc = a;
        }
    }
    loop {
        let up = reqwest::get(format!("{}/health", server.admin)).await;
        if up.is_ok_and(|r| r.status().is_success()) {
            return Ok(server);
        }
        if Instant::now() > deadline || server.child.try_wait()?.is_some() {
            bail!(
                "the server did not become healthy (log: {})",
                server.dir.join("server.log").display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server's /metrics, as (name with labels, value).
async fn metrics(admin: &str) -> anyhow::Result<Vec<(String, f64)>> {
    let text = reqwest::get(format!("{admin}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect())
}

fn value(m: &[(String, f64)], key: &str) -> Option<f64> {
    m.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// Each group's work so far: requests served, forwarded and lookups answered.
fn group_work(m: &[(String, f64)]) -> BTreeMap<u32, f64> {
    let kinds = [
        CostKind::Read,
        CostKind::Write,
        CostKind::Forward,
        CostKind::LookupServed,
    ];
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let Some(labels) = k.strip_prefix("saker_mnode_cost_events_total{") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .map(|s| s.trim_end_matches(['"', '}']).to_string())
        };
        let (Some(g), Some(kind)) = (label("group"), label("kind")) else {
            continue;
        };
        if kinds.iter().any(|c| c.name() == kind) {
            *out.entry(g.parse().unwrap_or(0)).or_default() += v;
        }
    }
    out
}

struct Runner {
    cluster: Cluster,
    bucket: String,
    errors: AtomicU64,
}

impl Runner {
    fn full(&self, p: &[String]) -> Vec<String> {
        std::iter::once(self.bucket.clone())
            .chain(p.iter().cloned())
            .collect()
    }

    async fn run(&self, op: &Op) -> Result<(), MetaError> {
        let path = self.full(op.path());
        let req = match op {
            Op::Mkdir(_) => MetaRequest::Mkdir {
                path: path.clone(),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: saker_rpc::Cred::ROOT,
            },
            Op::Create(_) => MetaRequest::PutObject {
                path: path.clone(),
                obj: super::meta::empty_object(),
                cond: None,
                versioning: Default::default(),
            },
            Op::Stat(_) => MetaRequest::Lookup {
                path: path.clone(),
                want: Want::ATTR,
            },
        };
        self.cluster.call(&path, req).await.map(|_| ())
    }

    /// Runs `ops` with `threads` workers, each taking the next op; the time it took.
    async fn phase(self: &Arc<Self>, ops: Arc<Vec<Op>>, threads: usize) -> f64 {
        let next = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let workers = (0..threads).map(|_| {
            let (me, ops, next) = (self.clone(), ops.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(op) = ops.get(i) else { break };
                    if let Err(e) = me.run(op).await {
                        if me.errors.fetch_add(1, Ordering::Relaxed) < 5 {
                            eprintln!("{op:?}: {e}");
                        }
                    }
                }
            })
        });
        for w in futures::future::join_all(workers).await {
            w.expect("a worker panicked");
        }
        start.elapsed().as_secs_f64()
    }
}

async fn exceptions(cluster: &Cluster) -> anyhow::Result<saker_namespace::ExceptionTable> {
    match cluster.call_group(1, MetaRequest::Exceptions).await? {
        MetaResponse::Exceptions(t) => Ok(t),
        other => bail!("exceptions answered {other:?}"),
    }
}

pub async fn run(args: RebalanceBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.threads > 0 && args.groups > 0,
        "threads and groups must be > 0"
    );
    let trace: Trace = generate(args.workload, args.scale, args.seed);
    let server = start_server(&args).await?;
    crate::install_credential(Some(&server.dir.join("cluster-credential.json")), false)?;
    let channel = saker_rpc::RpcChannel::connect(&server.rpc).await?;
    let map = channel.cluster_map().await?;
    let pool = saker_rpc::ChannelPool::with(channel);
    let groups = saker_rpc::group_services(&map, &server.rpc, &pool, |_, _| None)?;
    let cluster = Cluster::new(
        map.router()?,
        groups,
        Arc::new(saker_chunkstore::MemChunkStore::new()),
        Default::default(),
    );
    let bucket = format!("rebalance-{:08x}", rand::random::<u32>());
    let create = MetaRequest::CreateBucket {
        name: bucket.clone(),
        uid: 0,
        gid: 0,
    };
    cluster.call(std::slice::from_ref(&bucket), create).await?;
    let runner = Arc::new(Runner {
        cluster,
        bucket,
        errors: AtomicU64::new(0),
    });

    // The tree: directories in order (parents first), then the files by all workers.
    let start = Instant::now();
    let (dirs, files): (Vec<Op>, Vec<Op>) = trace
        .setup
        .iter()
        .cloned()
        .partition(|op| matches!(op, Op::Mkdir(_)));
    for d in &dirs {
        match runner.run(d).await {
            Ok(()) | Err(MetaError::Exists) => {}
            Err(e) => bail!("cannot make {:?}: {e}", d.path()),
        }
    }
    runner.phase(Arc::new(files), args.threads).await;
    let setup_secs = start.elapsed().as_secs_f64();
    let setup_errors = runner.errors.swap(0, Ordering::Relaxed);
    anyhow::ensure!(setup_errors == 0, "{setup_errors} setup operations failed");

    let before = metrics(&server.admin).await?;
    let table_before = exceptions(&runner.cluster).await?;
    let start = Instant::now();
    let mut phase_secs = Vec::new();
    for phase in &trace.phases {
        phase_secs.push(runner.phase(Arc::new(phase.clone()), args.threads).await);
    }
    let jct_secs = start.elapsed().as_secs_f64();
    let after = metrics(&server.admin).await?;
    let table = exceptions(&runner.cluster).await?;

    let (w0, w1) = (group_work(&before), group_work(&after));
    let per_group_ops = w1
        .iter()
        .map(|(g, v)| (*g, (v - w0.get(g).copied().unwrap_or(0.0)).round() as u64))
        .collect();
    let delta = |key: &str| value(&after, key).unwrap_or(0.0) - value(&before, key).unwrap_or(0.0);
    let ops = trace.job_ops() as u64;
    let report = Report {
        workload: args.workload,
        policy: args.policy,
        groups: args.groups,
        ops_limit: args.ops_limit,
        window_secs: args.window.as_secs_f64(),
        threads: args.threads,
        scale: args.scale,
        setup_secs,
        jct_secs,
        phase_secs,
        ops,
        errors: runner.errors.load(Ordering::Relaxed),
        ops_per_sec: ops as f64 / jct_secs,
        migrations: table.version().saturating_sub(table_before.version()),
        migrated_inodes: delta("saker_mnode_migrated_inodes_total"),
        exceptions: table
            .iter()
            .map(|(n, e)| (n.to_string(), format!("{e:?}")))
            .collect(),
        per_group_ops,
        balancer_round_secs: delta(&format!(
            "saker_balance_round_seconds_total{{policy=\"{}\"}}",
            match args.policy {
                Policy::Benefit => "benefit",
                _ => "even",
            }
        )),
        balancer_plan_secs: delta("saker_balance_plan_seconds_total"),
        prediction_error_ewma: value(&after, "saker_balance_prediction_error{predictor=\"ewma\"}"),
        prediction_error_model: value(
            &after,
            "saker_balance_prediction_error{predictor=\"model\"}",
        ),
    };
    let json = serde_json::to_string_pretty(&report)?;
    println!("{json}");
    if let Some(path) = &args.json {
        std::fs::write(path, &json).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
