//! `saker`: the one binary. `saker server` runs the roles, `saker admin …` talks to a running
//! server's admin API, `saker bench …` measures a running endpoint.

mod access_log;
mod admin;
mod backup;
mod chunk_members;
mod cli_doc;
mod cluster_credential;
mod coordinator_host;
mod data_dir;
mod disk_space;
mod drain;
mod hosting;
mod limits;
mod live_map;
mod mount;
mod mount_guard;
mod node_chunks;
mod nodes;
mod placement_status;
mod server;
mod signal;
mod spread;
mod sse_rewrap;
mod status;
mod store_migrate;
mod telemetry;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};
pub use saker_bench::units::{parse_duration, parse_size};

/// mimalloc instead of glibc's malloc: the server allocates and frees many small buffers per op
/// across its FUSE, tokio and fjall threads, and glibc's malloc took ~10% of the server's CPU in
/// a profile of the copy bench. Side by side (3 rounds, `bench fs --files 4000 --copy-files
/// 12000`): 16-thread create 1.22x, unlink 1.23x, copy 1.09x, CPU per op 6-22% lower; one-thread
/// readdir 0.87x. That loss was transparent huge pages: with mimalloc's THP advice, the first
/// readdir run after a cache drop took twice as long; the `no_thp` feature leaves them off.
/// jemalloc (LD_PRELOAD) won on small ops too but lost 18-21% on 64 KiB files. Measurements:
/// `compat_tests/bench/results/2026-11-25-session16-experiments.json`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "saker",
    version,
    about = "S3-compatible object gateway with a POSIX namespace"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: gateway, MNode, coordinator and chunkstore in one process, or the roles
    /// a --config file names.
    Server(Box<server::ServerArgs>),
    /// Mount a running cluster's namespace as a FUSE file system (until SIGINT/SIGTERM).
    Mount(mount::MountArgs),
    /// Detaches a mount once its serving process is gone (started by the mount itself).
    #[command(hide = true)]
    MountGuard(mount_guard::GuardArgs),
    /// Administer a running server.
    Admin {
        /// Admin endpoint of the server.
        #[arg(long, default_value = "http://127.0.0.1:9901", global = true)]
        admin_endpoint: String,
        /// Trust this CA certificate (PEM) for an https admin endpoint, besides the
        /// system's.
        #[arg(long, env = "SAKER_CA_CERT", global = true, value_name = "FILE")]
        ca_cert: Option<std::path::PathBuf>,
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Move everything under BUCKET/PREFIX to a remote tier now (a job on the server), with
    /// a progress bar; exits 0 once every object moved and its remote copy verified.
    Archive(admin::tiers::ArchiveArgs),
    /// Benchmarks against a running endpoint (results as JSON with --json).
    Bench {
        #[command(subcommand)]
        command: saker_bench::BenchCommand,
    },
    /// Print documentation made from this binary (for the book in `docs/`).
    #[command(hide = true)]
    Docs {
        #[command(subcommand)]
        command: DocsCommand,
    },
}

#[derive(Subcommand)]
enum DocsCommand {
    /// The command-line reference as Markdown: every visible command and flag with its help
    /// (`docs/gen-cli.sh` writes it to `docs/src/reference/cli.md`).
    Cli,
}

fn main() -> anyhow::Result<()> {
    // A panic anywhere ends the process: no half-dead task lingers holding locks or state.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::abort();
    }));
    // ring is the TLS crypto of every listener and client here; aws-sdk-s3 (the tier client)
    // brings aws-lc-rs too, and with two providers built in rustls no longer picks one.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match &cli.command {
        Command::MountGuard(args) => return mount_guard::run(args),
        Command::Docs {
            command: DocsCommand::Cli,
        } => {
            print!("{}", cli_doc::markdown(&Cli::command()));
            return Ok(());
        }
        _ => {}
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let exporting = match &cli.command {
            Command::Server(args) => Some(args.exporting()),
            Command::Mount(args) => Some(args.exporting()),
            _ => None,
        };
        let telemetry = telemetry::init(exporting)?;
        let result = run(cli.command).await;
        telemetry.shutdown().await;
        result
    })
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Server(args) => server::run(*args).await,
        Command::Mount(args) => mount::run(args).await,
        Command::MountGuard(args) => mount_guard::run(&args),
        Command::Docs { .. } => Ok(()),
        Command::Admin {
            admin_endpoint,
            ca_cert,
            command,
        } => {
            if let Some(ca) = ca_cert {
                admin::trust(&ca)?;
            }
            admin::run_client(&admin_endpoint, command).await
        }
        Command::Bench { command } => {
            saker_bench::run(command, cluster_credential::install_client).await
        }
        Command::Archive(args) => {
            anyhow::ensure!(
                admin::tiers::archive(args).await?,
                "the archive is incomplete: some objects did not move or verify (see the \
                 server's log); run the same command again"
            );
            Ok(())
        }
    }
}

/// Default data directory of the all-in-one server.
pub fn default_data_dir() -> PathBuf {
    PathBuf::from("./saker-data")
}

pub fn default_s3_addr() -> SocketAddr {
    "127.0.0.1:9900".parse().expect("valid literal")
}
