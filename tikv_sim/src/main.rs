//! `saker-tikv-sim`: the PD + TiKV test server as a process, for tests and benchmarks that
//! run `saker server --store tikv` against it. Prints `pd 127.0.0.1:PORT` once it listens.

use std::io::Write;
use std::net::SocketAddr;

use clap::Parser;
use saker_tikv_sim::{Faults, Sim};

#[derive(Parser)]
#[command(about = "A PD + TiKV test server (in memory) speaking the kvproto gRPC")]
struct Args {
    /// Where PD and TiKV listen (one port for both).
    #[arg(long, default_value = "127.0.0.1:2379")]
    listen: SocketAddr,
    /// Split a region once it holds more than this many keys (0: one region forever).
    #[arg(long, default_value_t = 0)]
    split_keys: usize,
    /// Answer every N-th KV request with a retryable region error (0: never).
    #[arg(long, default_value_t = 0)]
    region_error_every: u64,
    /// The PD client URL PD hands out (`host:port`; default: where it listens).
    #[arg(long)]
    advertise_pd: Option<String>,
    /// The TiKV store address PD hands out (`host:port`; default: where it listens).
    #[arg(long)]
    advertise_store: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let faults = Faults {
        split_keys: args.split_keys,
        region_error_every: args.region_error_every,
    };
    let sim = Sim::start_advertising(args.listen, args.advertise_pd, args.advertise_store, faults)
        .await?;
    let mut out = std::io::stdout();
    writeln!(out, "pd {}", sim.addr)?;
    out.flush()?;
    sim.wait().await?;
    Ok(())
}
