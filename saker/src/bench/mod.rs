//! `saker bench …`: load generators that write their results as JSON.

mod s3;
mod sigv4;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// PUT, GET and mixed S3 load against an endpoint.
    S3(s3::S3BenchArgs),
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::S3(args) => s3::run(args).await,
    }
}
