//! This process's cluster credential ([`saker_rpc::auth`]): a node's from its config (a
//! cluster of processes) or its data directory (the all-in-one server, created at its first
//! start); a library client's from `--credential` or `SAKER_CLUSTER_CREDENTIAL`. And the
//! `saker admin cluster-credential` commands.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use saker_rpc::auth::{self, Credential, Kind};

/// The environment variable naming a client's credential file.
pub const ENV: &str = "SAKER_CLUSTER_CREDENTIAL";
/// The all-in-one server's credential, in its data directory.
pub const FILE_NAME: &str = "cluster-credential.json";

/// Installs the node credential at `path` (created first when `create`).
pub fn install_node(path: &Path, create: bool) -> anyhow::Result<()> {
    let credential = if create {
        Credential::load_or_create(path)?
    } else {
        Credential::load(path).with_context(|| {
            format!(
                "a node needs its cluster's credential (make one for a new cluster with `saker \
                 admin cluster-credential create {}`)",
                path.display()
            )
        })?
    };
    if credential.kind != Kind::Node {
        bail!(
            "{} is a client credential; a node needs the node credential",
            path.display()
        );
    }
    auth::install(credential);
    Ok(())
}

/// Installs a library client's credential: `flag`, else `$SAKER_CLUSTER_CREDENTIAL`.
pub fn install_client(flag: Option<&Path>) -> anyhow::Result<()> {
    let path = match flag {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os(ENV) {
            Some(p) => PathBuf::from(p),
            None => bail!(
                "the cluster serves only holders of its credential: pass --credential FILE or \
                 set {ENV} (get one with `saker admin cluster-credential export FILE --client`)"
            ),
        },
    };
    auth::install(Credential::load(&path)?);
    Ok(())
}

/// `saker admin cluster-credential …`
#[derive(clap::Subcommand)]
pub enum CredentialCommand {
    /// Make a new cluster's node credential in FILE (offline; every node's config names it).
    Create {
        file: PathBuf,
        /// The cluster's RPC runs over TLS: the credential holds a new cluster CA, from which
        /// every node makes its certificate at start, and which every caller trusts.
        #[arg(long)]
        tls: bool,
    },
    /// Write the running cluster's credential to FILE: the client credential with --client
    /// (namespace operations only: for `saker mount --cluster` and benchmarks on another
    /// host), else the node credential (for a new node).
    Export {
        file: PathBuf,
        #[arg(long)]
        client: bool,
    },
}

/// Runs a `cluster-credential` command; `export` asks the admin API (`fetch`).
pub async fn run<F, Fut>(command: CredentialCommand, fetch: F) -> anyhow::Result<()>
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    match command {
        CredentialCommand::Create { file, tls } => {
            let credential = match tls {
                true => Credential::generate_with_tls()?,
                false => Credential::generate(),
            };
            credential.save(&file)?;
            println!("created the cluster credential {}", file.display());
        }
        CredentialCommand::Export { file, client } => {
            let kind = if client { "client" } else { "node" };
            let text = fetch(format!("/admin/cluster-credential/{kind}")).await?;
            let credential: Credential = serde_json::from_str(&text).context("unexpected reply")?;
            credential.save(&file)?;
            println!("wrote the {kind} credential to {}", file.display());
        }
    }
    Ok(())
}

/// The admin API's answer to an export of `kind`: this node's credential as that kind.
pub fn export(kind: &str) -> Result<String, String> {
    let node = auth::installed().ok_or("this process holds no cluster credential")?;
    let credential = match kind {
        "client" => node.client(),
        "node" if node.kind == Kind::Node => (*node).clone(),
        "node" => return Err("this process holds a client credential only".into()),
        other => return Err(format!("no credential kind '{other}' (node or client)")),
    };
    Ok(serde_json::to_string_pretty(&credential).expect("credentials serialize"))
}
