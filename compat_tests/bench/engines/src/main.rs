//! Benchmarks behind two storage decisions: the MNode's metadata store engine (redb against
//! fjall, through the `MetaStore` trait) and the chunk layout (a file per chunk against
//! append-only volumes with group commit, through the `ChunkStore` trait). See README.md.

mod chunk_bench;
mod hist;
mod meta_bench;
mod report;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use report::RunFile;

#[derive(Parser)]
#[command(about = "Store engine and chunk layout benchmarks for saker")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One run of the metadata store workload against one engine.
    Meta {
        #[arg(long, value_enum)]
        engine: meta_bench::Engine,
        /// Scratch directory (deleted first and after); put it on the file system under test.
        #[arg(long)]
        dir: PathBuf,
        /// Where to write this run's JSON.
        #[arg(long)]
        out: PathBuf,
        /// Run number, recorded in the JSON.
        #[arg(long, default_value_t = 1)]
        run: u32,
        /// Keys loaded before measuring (a multiple of 100).
        #[arg(long, default_value_t = 1_000_000)]
        keys: u64,
        /// Seconds per measured cell.
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
        #[arg(long, value_delimiter = ',', default_value = "1,4")]
        threads: Vec<usize>,
        /// Write batch sizes (ops per write call).
        #[arg(long, value_delimiter = ',', default_value = "1,16,128")]
        batches: Vec<usize>,
    },
    /// One run of the chunk workload against one layout.
    Chunks {
        #[arg(long, value_enum)]
        layout: chunk_bench::Layout,
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 1)]
        run: u32,
        /// Chunk sizes: bytes, or with a KiB / MiB suffix.
        #[arg(long, value_delimiter = ',', default_value = "32KiB,256KiB,1MiB,8MiB", value_parser = parse_size)]
        sizes: Vec<u64>,
        #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
        concurrency: Vec<usize>,
        #[arg(long, default_value_t = 5.0)]
        secs: f64,
        /// Data read back by the read cells, per size (at least 64 chunks).
        #[arg(long, default_value_t = 512)]
        read_set_mib: u64,
    },
    /// Medians over run files and candidate/baseline ratios, as JSON and a markdown table.
    Summarize {
        #[arg(long)]
        baseline: String,
        #[arg(long)]
        candidate: String,
        #[arg(long)]
        out: PathBuf,
        files: Vec<PathBuf>,
    },
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = if let Some(n) = s.strip_suffix("MiB") {
        (n, 1 << 20)
    } else if let Some(n) = s.strip_suffix("KiB") {
        (n, 1 << 10)
    } else {
        (s, 1)
    };
    num.trim()
        .parse::<u64>()
        .map(|n| n * mult)
        .map_err(|e| format!("bad size {s:?}: {e}"))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Meta {
            engine,
            dir,
            out,
            run,
            keys,
            secs,
            threads,
            batches,
        } => {
            let p = meta_bench::Params {
                engine,
                dir: dir.clone(),
                keys,
                secs,
                threads,
                batches,
            };
            std::fs::create_dir_all(&dir)?;
            let filesystem = report::filesystem_of(&dir);
            let (unix_time, loadavg_start) = (now(), report::loadavg());
            let cells = meta_bench::run(&p)?;
            let file = RunFile {
                bench: "meta".into(),
                subject: serde_json::to_value(engine)?
                    .as_str()
                    .context("engine name")?
                    .into(),
                run,
                unix_time,
                data_dir: dir.display().to_string(),
                filesystem,
                loadavg_start,
                loadavg_end: report::loadavg(),
                params: serde_json::json!({
                    "keys": keys, "secs": secs, "threads": p.threads, "batches": p.batches,
                    "value_bytes": 200, "dir_entries": meta_bench::DIR_ENTRIES,
                }),
                cells,
            };
            file.write(&out)?;
            report::print_run(&file);
        }
        Cmd::Chunks {
            layout,
            dir,
            out,
            run,
            sizes,
            concurrency,
            secs,
            read_set_mib,
        } => {
            std::fs::create_dir_all(&dir)?;
            let filesystem = report::filesystem_of(&dir);
            let (unix_time, loadavg_start) = (now(), report::loadavg());
            let p = chunk_bench::Params {
                layout,
                dir: dir.clone(),
                sizes,
                concurrency,
                secs,
                read_set_mib,
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let cells = rt.block_on(chunk_bench::run(&p))?;
            let file = RunFile {
                bench: "chunks".into(),
                subject: serde_json::to_value(layout)?
                    .as_str()
                    .context("layout name")?
                    .into(),
                run,
                unix_time,
                data_dir: dir.display().to_string(),
                filesystem,
                loadavg_start,
                loadavg_end: report::loadavg(),
                params: serde_json::json!({
                    "sizes": p.sizes, "concurrency": p.concurrency, "secs": secs,
                    "read_set_mib": read_set_mib, "runtime_worker_threads": 2,
                }),
                cells,
            };
            file.write(&out)?;
            report::print_run(&file);
        }
        Cmd::Summarize {
            baseline,
            candidate,
            out,
            files,
        } => report::summarize(&baseline, &candidate, &files, &out)?,
    }
    Ok(())
}
