//! `saker server`: the roles of one process. Without `--config` every role runs in this
//! process on an embedded store ([`all_in_one`]); with it, the roles its config file names,
//! wired to the other processes of the cluster ([`assemble`]).
//!
//! Layout of the data directory: `meta.redb` or `meta.fjall/` (raft log + state of every MNode
//! group), `chunks/` (the chunkstore), `access-keys.json`, `cluster.json` (the number of MNode
//! groups and the store engine, fixed at the first start).

pub mod all_in_one;
pub mod args;
pub mod assemble;
pub mod config;
mod incarnation;
pub mod listeners;
pub mod loops;
pub mod secrets;

pub use args::ServerArgs;

use config::ProcessConfig;

/// `saker server`: checks or runs the process `args` describe.
pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.config {
        let cfg = ProcessConfig::load_in_zone(path, args.zone.clone())?;
        if args.check_config {
            println!("{}: ok, {}", path.display(), cfg.summary());
            return Ok(());
        }
        return assemble::run(cfg, args).await;
    }
    all_in_one::run(args).await
}
