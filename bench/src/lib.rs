//! `saker bench …`: load generators that write their results as JSON (a library the `saker`
//! binary calls).

mod balance;
mod empty;
mod fs;
mod meta;
mod multipart;
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
    }
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
