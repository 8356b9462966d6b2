//! `saker-tikv-sim`: the PD + TiKV test server as a process, for tests and benchmarks that
//! run `saker server --store tikv` against it. Prints `pd 127.0.0.1:PORT` once it listens,
//! then `stats http://127.0.0.1:PORT` (its stats page).

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use saker_tikv_sim::{Faults, Options, Sim};

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
    /// Run the cluster's own GC worker (as TiDB's on a shared cluster) with this life time in
    /// milliseconds: it moves the GC safe point to now less the life time, never past a
    /// service safe point. Without it only a client's UpdateGCSafePoint moves it.
    #[arg(long)]
    gc_life_time_ms: Option<u64>,
    /// How often GC runs, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    gc_every_ms: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let options = Options {
        advertise_pd: args.advertise_pd,
        advertise_store: args.advertise_store,
        faults: Faults {
            split_keys: args.split_keys,
            region_error_every: args.region_error_every,
        },
        gc_life_time: args.gc_life_time_ms.map(Duration::from_millis),
        gc_every: Duration::from_millis(args.gc_every_ms.max(1)),
    };
    let sim = Sim::start_with(args.listen, options).await?;
    let mut out = std::io::stdout();
    writeln!(out, "pd {}", sim.addr)?;
    writeln!(out, "stats http://{}", sim.stats)?;
    out.flush()?;
    sim.wait().await?;
    Ok(())
}
