//! `saker bench …`: load generators that write their results as JSON.

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {}
}
