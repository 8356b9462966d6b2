//! The `saker admin` commands: each calls the admin API of a running server.

use anyhow::Context;
use axum::http::Method;
use clap::Subcommand;

use crate::admin::request::send;
use crate::status;

#[derive(Subcommand)]
pub enum AdminCommand {
    /// Manage access keys.
    Key {
        #[command(subcommand)]
        command: crate::admin::keys::KeyCommand,
    },
    /// Show or change the exception table (which MNode group owns a file name).
    Exception {
        #[command(subcommand)]
        command: crate::admin::exceptions::ExceptionCommand,
    },
    /// Every MNode group's replicas: state, term, log and applied index, and lag behind the
    /// leader.
    Status {
        /// Print the JSON the admin API answers instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create or export the cluster credential every RPC must carry.
    ClusterCredential {
        #[command(subcommand)]
        command: crate::cluster_credential::CredentialCommand,
    },
    /// Write a new SSE-S3 master key to FILE (mode 600) for `saker server --sse-key-file`;
    /// keep it outside the data directory, and keep a copy: objects stored with SSE-S3 cannot
    /// be read without it.
    MasterKey {
        /// Where to write the key (an existing file is never replaced).
        file: std::path::PathBuf,
    },
    /// Add a new random SSE-KMS key named ID to the keyring FILE (made with mode 600 when
    /// missing) for `saker server --sse-kms-keyring`.
    KmsKey {
        file: std::path::PathBuf,
        id: String,
    },
    /// SSE-S3 master key rotation: rotate, rewrap, retire-previous.
    Sse {
        #[command(subcommand)]
        command: crate::admin::sse::SseCommand,
    },
    /// Run one chunk scrub now (read every copy of every referenced chunk, checking its
    /// CRC32C, and rewrite bad copies from good ones) and print what it found and did.
    Scrub,
    /// Remote archive tiers: add, list, remove.
    Tier {
        #[command(subcommand)]
        command: crate::admin::tiers::TierCommand,
    },
    /// A bucket's storage classes: which objects are erasure-coded.
    Bucket {
        #[command(subcommand)]
        command: crate::admin::ec::BucketCommand,
    },
    /// Erasure coding: code now what the buckets' storage classes ask for.
    Ec {
        #[command(subcommand)]
        command: crate::admin::ec::EcCommand,
    },
    /// Bucket notifications: targets (add, list, remove) and the consumer's status.
    Notify {
        #[command(subcommand)]
        command: crate::admin::notify::NotifyCommand,
    },
    /// Lifecycle rules: run a pass now, or show the last one.
    Lifecycle {
        #[command(subcommand)]
        command: LifecycleCommand,
    },
    /// Run one chunk repair pass now (every referenced chunk to all its replicas) and print
    /// what it found and did; `--noted`: only the chunks writes noted as short of replicas.
    Repair {
        #[arg(long)]
        noted: bool,
    },
    /// Write a backup of the metadata (every MNode group and the coordinator's records) into
    /// DIR, for `saker server --restore DIR`. File data (chunks) is not in it.
    Backup { dir: std::path::PathBuf },
    /// Grow or shrink a replicated cluster: move group replicas onto a node or off it.
    Node {
        #[command(subcommand)]
        command: crate::admin::nodes::NodeCommand,
    },
    /// Move the metadata store of a stopped server to another engine.
    Store {
        #[command(subcommand)]
        command: crate::store_migrate::StoreCommand,
    },
    /// Run one balancing round now and print what it did (`balance stats`: what the groups'
    /// work cost).
    #[command(args_conflicts_with_subcommands = true)]
    Balance {
        #[command(subcommand)]
        command: Option<crate::admin::balance::BalanceCommand>,
        #[arg(long, default_value_t = 0.01)]
        epsilon: f64,
        #[arg(long, default_value_t = 16)]
        max_entries: usize,
    },
}

#[derive(Subcommand)]
pub enum LifecycleCommand {
    /// Run a pass now over every bucket with rules, or only BUCKET; waits for it to end and
    /// prints what it did as JSON.
    Run { bucket: Option<String> },
    /// The lifecycle day's length and what the last pass did.
    Status,
}

pub async fn run_client(endpoint: &str, cmd: AdminCommand) -> anyhow::Result<()> {
    let command = match cmd {
        AdminCommand::Key { command } => command,
        AdminCommand::Exception { command } => {
            return crate::admin::exceptions::run(endpoint, command).await
        }
        AdminCommand::Tier { command } => return crate::admin::tiers::run(endpoint, command).await,
        AdminCommand::Bucket { command } => {
            return crate::admin::ec::bucket_command(endpoint, command).await
        }
        AdminCommand::Ec { command } => {
            return crate::admin::ec::ec_command(endpoint, command).await
        }
        AdminCommand::Notify { command } => {
            return crate::admin::notify::run(endpoint, command).await
        }
        AdminCommand::Store { command } => return crate::store_migrate::run(command).await,
        AdminCommand::Status { json } => {
            let text = send(endpoint, Method::GET, "/admin/status", Vec::new()).await?;
            if json {
                println!("{}", text.trim());
            } else {
                let groups: Vec<status::GroupStatus> =
                    serde_json::from_str(&text).context("unexpected reply")?;
                print!("{}", status::render(&groups));
                crate::admin::nodes::print_placement(endpoint).await?;
                let path = "/admin/chunk-passes";
                let text = send(endpoint, Method::GET, path, Vec::new()).await?;
                let passes: crate::admin::chunks::Passes =
                    serde_json::from_str(&text).context("unexpected reply")?;
                print!("{}", passes.render());
            }
            return Ok(());
        }
        AdminCommand::ClusterCredential { command } => {
            let call = |method: Method, path: String, body: Vec<u8>| async move {
                send(endpoint, method, &path, body).await
            };
            return crate::cluster_credential::run(command, call).await;
        }
        AdminCommand::MasterKey { file } => {
            saker_client::sealed::WrappingKey::create(&file)
                .with_context(|| format!("cannot create {}", file.display()))?;
            println!("wrote a new master key to {}", file.display());
            return Ok(());
        }
        AdminCommand::Sse { command } => return crate::admin::sse::run(endpoint, command).await,
        AdminCommand::KmsKey { file, id } => {
            saker_client::sealed::Keyring::add(&file, &id)
                .with_context(|| format!("cannot add key {id} to {}", file.display()))?;
            println!("added the key {id} to {}", file.display());
            return Ok(());
        }
        AdminCommand::Repair { .. } | AdminCommand::Scrub => {
            let path = match cmd {
                AdminCommand::Repair { noted: false } => "/admin/repair",
                AdminCommand::Repair { noted: true } => "/admin/repair/noted",
                _ => "/admin/scrub",
            };
            let text = send(endpoint, Method::POST, path, Vec::new()).await?;
            println!("{}", text.trim());
            return Ok(());
        }
        AdminCommand::Backup { dir } => {
            return crate::admin::backup::run_client(endpoint, &dir).await
        }
        AdminCommand::Lifecycle { command } => {
            let text = match command {
                LifecycleCommand::Run { bucket } => {
                    let path = match bucket {
                        Some(b) => format!("/admin/lifecycle/{b}"),
                        None => "/admin/lifecycle".to_string(),
                    };
                    send(endpoint, Method::POST, &path, Vec::new()).await?
                }
                LifecycleCommand::Status => {
                    send(endpoint, Method::GET, "/admin/lifecycle", Vec::new()).await?
                }
            };
            println!("{}", text.trim());
            return Ok(());
        }
        AdminCommand::Node { command } => return crate::admin::nodes::run(endpoint, command).await,
        AdminCommand::Balance {
            command,
            epsilon,
            max_entries,
        } => return crate::admin::balance::command(endpoint, command, epsilon, max_entries).await,
    };
    crate::admin::keys::run(endpoint, command).await
}
