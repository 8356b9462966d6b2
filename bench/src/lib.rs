//! `saker bench …`: load generators that write their results as JSON (a library the `saker`
//! binary calls).

mod balance;
mod empty;
mod fs;
mod meta;
mod multipart;
mod notify;
mod rebalance;
mod s3;
mod sigv4;
mod sink;
mod trace;
mod traverse;
pub mod units;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// PUT, GET and mixed S3 load against an endpoint.
    S3(s3::S3BenchArgs),
    /// Metadata ops (create, stat, readdir, unlink, mkdir, rmdir) through the client library,
    /// with RPCs per op and server messages per op.
    Meta(meta::MetaBenchArgs),
    /// Inode balance over MNode groups on generated trees (FalconFS Tab. 3): a placement
    /// simulation with the production router and balancer.
    Balance(balance::BalanceBenchArgs),
    /// Build a directory tree, then read every file once in random order through a fresh
    /// client (FalconFS §6.4): files/s, RPCs per read, client memory.
    Traverse(traverse::TraverseBenchArgs),
    /// File-system ops (create, stat, write, read, readdir, unlink, copy) with plain file
    /// calls on any directory: a saker mount, another file system, a local disk.
    Fs(fs::FsBenchArgs),
    /// Origami's experiment: an all-in-one server with a fixed capacity per MNode group and a
    /// balancing policy (none, even, benefit) replays a generated metadata job (hotdir,
    /// hotname, shift, uniform): job completion time, ops/s, migrations, work per group.
    Rebalance(rebalance::RebalanceBenchArgs),
    /// An S3 endpoint that stores nothing, for `bench s3`: the loopback HTTP ceiling.
    Sink(sink::SinkArgs),
    /// 4 KiB PUTs on a plain and a notified bucket in alternating rounds, this benchmark the
    /// webhook target: the throughput each costs, and acknowledgement-to-event latency.
    Notify(notify::NotifyBenchArgs),
}

/// Installs a library client's cluster credential (`--credential`-style path, insecure): the
/// binary's, which the benchmarks that talk RPC call first.
pub type InstallCredential = fn(Option<&std::path::Path>, bool) -> anyhow::Result<()>;

static INSTALL_CREDENTIAL: std::sync::OnceLock<InstallCredential> = std::sync::OnceLock::new();

fn install_credential(flag: Option<&std::path::Path>, insecure: bool) -> anyhow::Result<()> {
    let install = INSTALL_CREDENTIAL
        .get()
        .expect("run() sets the credential installer first");
    install(flag, insecure)
}

/// Runs one benchmark; `install_credential` is the binary's cluster credential installer.
pub async fn run(cmd: BenchCommand, install_credential: InstallCredential) -> anyhow::Result<()> {
    let _ = INSTALL_CREDENTIAL.set(install_credential);
    match cmd {
        BenchCommand::S3(args) => s3::run(args).await,
        BenchCommand::Meta(args) => meta::run(args).await,
        BenchCommand::Traverse(args) => traverse::run(args).await,
        BenchCommand::Balance(args) => balance::run(args).await,
        BenchCommand::Fs(args) => fs::run(args).await,
        BenchCommand::Rebalance(args) => rebalance::run(args).await,
        BenchCommand::Sink(args) => sink::run(args).await,
        BenchCommand::Notify(args) => notify::run(args).await,
    }
}

/// The CPU time process `pid` has spent so far (user and system, threads that have exited
/// included), in microseconds; `None` once it is gone.
fn process_cpu_us(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14 and
    // stime 15, in clock ticks.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1_000_000 / hz)
}

/// The `p` quantile (0..=1, nearest rank) of latencies in microseconds, sorted ascending, in
/// milliseconds; 0 when there are none.
fn percentile_ms(sorted_us: &[u32], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() as f64 - 1.0) * p).round() as usize;
    sorted_us[i] as f64 / 1000.0
}
