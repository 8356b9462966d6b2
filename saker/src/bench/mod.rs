//! `saker bench …`: load generators that write their results as JSON.

mod meta;
mod s3;
mod sigv4;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// PUT, GET and mixed S3 load against an endpoint.
    S3(s3::S3BenchArgs),
    /// Metadata ops (create, stat, readdir, unlink, mkdir, rmdir) through the client library,
    /// with RPCs per op and server messages per op.
    Meta(meta::MetaBenchArgs),
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::S3(args) => s3::run(args).await,
        BenchCommand::Meta(args) => meta::run(args).await,
    }
}
