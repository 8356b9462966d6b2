//! This process's cluster credential ([`saker_rpc::auth`]): a node's from its config (a
//! cluster of processes) or its data directory (the all-in-one server, created at its first
//! start); a library client's from `--credential` or `SAKER_CLUSTER_CREDENTIAL`. And the
//! `saker admin cluster-credential` commands.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context};
use saker_rpc::auth::{self, Credential, Kind, Transition, Transport};
use saker_rpc::tls::Rotation;

/// The node credential's file and whether the node was started with `--insecure-rpc`
/// (what `cluster-credential reload` reads again).
static NODE_FILE: OnceLock<(PathBuf, bool)> = OnceLock::new();

/// The environment variable naming a client's credential file.
pub const ENV: &str = "SAKER_CLUSTER_CREDENTIAL";
/// The all-in-one server's credential, in its data directory.
pub const FILE_NAME: &str = "cluster-credential.json";

/// Installs the node credential at `path` (created first when `create`), over mutual TLS or,
/// with `insecure`, plaintext with tokens (which warns).
pub fn install_node(path: &Path, create: bool, insecure: bool) -> anyhow::Result<()> {
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
    let _ = NODE_FILE.set((path.to_path_buf(), insecure));
    if credential.transition.is_some() {
        // The upgrade step in the file decides; --insecure-rpc changes nothing then.
        let transport = Transport::of(&credential, insecure);
        warn_upgrade_step(transport);
        auth::install_as(credential, transport);
        return Ok(());
    }
    install(credential, insecure, path)
}

fn warn_upgrade_step(transport: Transport) {
    tracing::warn!(
        "the cluster credential is at {}: this node also takes plaintext RPC with replayable \
         tokens until the upgrade is done (`saker admin cluster-credential upgrade FILE --step \
         done`, then `reload` on every node)",
        transport.name()
    );
}

/// Reads the node credential's file again and runs with it from now on, if it is a step
/// the cluster can take node by node ([`auth::check_step`]); answers what the node now runs.
pub fn reload() -> Result<String, String> {
    let (path, insecure) = NODE_FILE
        .get()
        .ok_or("this process was not started with a node credential file")?;
    let credential = Credential::load(path).map_err(|e| e.to_string())?;
    if credential.kind != Kind::Node {
        return Err(format!("{} is not a node credential", path.display()));
    }
    // --insecure-rpc keeps a plaintext node plaintext; once it left plaintext, the file says.
    let was = auth::transport();
    let transport = Transport::of(&credential, *insecure && was == Transport::Insecure);
    auth::reload(credential, transport)?;
    if transport.serves_plaintext() && transport != Transport::Insecure {
        warn_upgrade_step(transport);
    }
    let mut answer = auth::describe();
    if *insecure && transport != Transport::Insecure {
        let note = "this node was started with --insecure-rpc: remove the flag from its command \
                    line (the credential file decides now; a restart with the flag and a \
                    credential at no upgrade step would run plaintext)";
        tracing::warn!("{note}");
        answer.push_str(&format!("\nnote: {note}"));
    }
    tracing::info!(state = %answer, "reloaded the cluster credential");
    Ok(answer)
}

/// What `cluster-credential status` shows for this node.
pub fn state() -> String {
    let mut text = auth::describe();
    if let Some(w) = auth::warning() {
        text.push('\n');
        text.push_str(&w);
    }
    text
}

/// The environment variable that makes a library client speak plaintext RPC with tokens to
/// a cluster running `--insecure-rpc` (`1`).
pub const INSECURE_ENV: &str = "SAKER_INSECURE_RPC";

/// Installs a library client's credential: `flag`, else `$SAKER_CLUSTER_CREDENTIAL`; in
/// plaintext with `insecure` or `$SAKER_INSECURE_RPC=1`.
pub fn install_client(flag: Option<&Path>, insecure: bool) -> anyhow::Result<()> {
    let insecure = insecure || std::env::var(INSECURE_ENV).is_ok_and(|v| v == "1");
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
    install(Credential::load(&path)?, insecure, &path)
}

fn install(credential: Credential, insecure: bool, path: &Path) -> anyhow::Result<()> {
    if insecure {
        if credential.token(0).is_none() {
            bail!(
                "{} holds no token key, which --insecure-rpc needs (a client exported from a \
                 node running without --insecure-rpc)",
                path.display()
            );
        }
        tracing::warn!(
            "--insecure-rpc: cluster RPC runs in plaintext with replayable tokens; anyone on \
             the network can read it and, with one captured token, act as its sender for {} s",
            auth::MAX_SKEW
        );
        auth::install_insecure(credential);
    } else {
        if !credential.mutual_tls() {
            bail!("{}: {}", path.display(), auth::OLD_CREDENTIAL);
        }
        auth::install(credential);
    }
    Ok(())
}

/// `saker admin cluster-credential …`
#[derive(clap::Subcommand)]
pub enum CredentialCommand {
    /// Make a new cluster's node credential in FILE (offline; every node's config names it):
    /// a new cluster CA, from which every node makes its certificate at start.
    Create {
        file: PathBuf,
        /// Accepted for old scripts: every credential has a CA now.
        #[arg(long, hide = true)]
        tls: bool,
    },
    /// Write a credential of the running cluster to FILE. With --client: a new key made here
    /// and a certificate a node signs for it (namespace operations only: for `saker mount
    /// --cluster` and benchmarks on another host). Without: the node credential, CA key
    /// included (for a new node); refused over a plaintext admin listener that is not on
    /// loopback.
    Export {
        file: PathBuf,
        #[arg(long)]
        client: bool,
        /// Days the client certificate is valid.
        #[arg(long, default_value_t = saker_rpc::tls::CLIENT_CERT_DAYS, requires = "client")]
        days: u32,
    },
    /// Rewrite FILE, a node credential made before mutual TLS, with a new cluster CA (the
    /// secret kept, for --insecure-rpc). Without --step: copy the result to every node and
    /// restart them. With --step, online (no restart): the steps accept-tls, dial-tls and
    /// done in turn, each copied to every node and applied there with `reload`, node by
    /// node, before the next.
    Upgrade {
        file: PathBuf,
        /// The online upgrade step to rewrite FILE to.
        #[arg(long, value_enum)]
        step: Option<UpgradeStep>,
    },
    /// Rewrite FILE, the node credential, to the next step of a CA rotation (online): trust-new
    /// (a new CA, trusted besides the old), present-new (nodes' certificates from the new
    /// one), done (the old one dropped). Each step: copy FILE to every node and `reload` each,
    /// before the next. Re-export client credentials once every node is at trust-new:
    /// clients of the old CA are refused after done.
    Rotate {
        file: PathBuf,
        #[arg(long, value_enum)]
        step: RotateStep,
    },
    /// Make the node behind --admin-endpoint read its credential file again and run with it
    /// (an upgrade or rotation step; refused unless its peers at the step before or after
    /// still understand it).
    Reload,
    /// What the node behind --admin-endpoint runs its RPC as: plaintext, an upgrade step or
    /// mutual TLS, and the CAs it uses (fingerprints).
    Status,
}

/// `upgrade --step`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum UpgradeStep {
    /// Step 1: nodes take TLS too, still call in plaintext.
    AcceptTls,
    /// Step 2: nodes call over TLS, still take plaintext.
    DialTls,
    /// Step 3: mutual TLS only; plaintext and tokens refused.
    Done,
}

/// `rotate --step`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum RotateStep {
    TrustNew,
    PresentNew,
    Done,
}

/// What a client sends to have its key signed.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ClientRequest {
    /// PEM.
    pub csr: String,
    /// How long the certificate is valid.
    pub days: u32,
}

/// What a node answers to a client's CSR.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct SignedClient {
    pub ca_cert: String,
    pub cert: String,
    /// Other CAs the client trusts (during a CA rotation: the one being replaced).
    #[serde(default)]
    pub also_trusted: Vec<String>,
    /// The client key, for a cluster running --insecure-rpc.
    #[serde(default)]
    pub secret: Option<String>,
}

/// Runs a `cluster-credential` command; `export` asks the admin API (`call(method, path,
/// body)`).
pub async fn run<F, Fut>(command: CredentialCommand, call: F) -> anyhow::Result<()>
where
    F: FnOnce(http::Method, String, Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    match command {
        CredentialCommand::Create { file, tls: _ } => {
            Credential::try_generate()?.save(&file)?;
            println!("created the cluster credential {}", file.display());
        }
        CredentialCommand::Export {
            file,
            client: true,
            days,
        } => {
            let (csr, key) = saker_rpc::tls::client_csr()?;
            let path = "/admin/cluster-credential/client".to_string();
            let body = serde_json::to_vec(&ClientRequest { csr, days }).expect("serializes");
            let text = call(http::Method::POST, path, body).await?;
            let signed: SignedClient = serde_json::from_str(&text).context("unexpected reply")?;
            let tls = saker_rpc::tls::ClusterTls::client(signed.ca_cert, signed.cert, key)
                .trusting(signed.also_trusted);
            Credential::client_signed(tls, signed.secret).save(&file)?;
            println!(
                "wrote a client credential to {} (certificate valid for {days} days)",
                file.display()
            );
        }
        CredentialCommand::Export { file, .. } => {
            let path = "/admin/cluster-credential/node".to_string();
            let text = call(http::Method::GET, path, Vec::new()).await?;
            let credential = Credential::decode(text.as_bytes())
                .map_err(|e| anyhow::anyhow!("unexpected reply: {e}"))?;
            credential.save(&file)?;
            println!("wrote the node credential to {}", file.display());
        }
        CredentialCommand::Upgrade {
            file,
            step: Some(step),
        } => {
            let to = match step {
                UpgradeStep::AcceptTls => Some(Transition::AcceptTls),
                UpgradeStep::DialTls => Some(Transition::DialTls),
                UpgradeStep::Done => None,
            };
            let new = Credential::load(&file)?
                .upgrade_step(to)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            new.replace(&file)?;
            println!(
                "{}: upgrade step {}. Copy it to every node, then `saker admin \
                 cluster-credential reload` on each in turn; once every node reports it, the \
                 next step.",
                file.display(),
                clap::ValueEnum::to_possible_value(&step)
                    .expect("named")
                    .get_name()
            );
        }
        CredentialCommand::Rotate { file, step } => {
            let to = match step {
                RotateStep::TrustNew => Rotation::TrustNew,
                RotateStep::PresentNew => Rotation::PresentNew,
                RotateStep::Done => Rotation::None,
            };
            let new = Credential::load(&file)?
                .rotation_step(to)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            new.replace(&file)?;
            println!(
                "{}: CA rotation step {}. Copy it to every node, then `saker admin \
                 cluster-credential reload` on each in turn.{}",
                file.display(),
                to.name(),
                if to == Rotation::TrustNew {
                    " Once every node is at trust-new, export client credentials anew: those \
                     of the old CA are refused once the rotation is done."
                } else {
                    ""
                }
            );
        }
        CredentialCommand::Reload => {
            let path = "/admin/cluster-credential/reload".to_string();
            let text = call(http::Method::POST, path, Vec::new()).await?;
            println!("{}", text.trim());
        }
        CredentialCommand::Status => {
            let path = "/admin/cluster-credential/state".to_string();
            let text = call(http::Method::GET, path, Vec::new()).await?;
            println!("{}", text.trim());
        }
        CredentialCommand::Upgrade { file, step: None } => {
            let old = Credential::load(&file)?;
            let new = old
                .upgraded()
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            new.replace(&file)?;
            println!(
                "upgraded {}: copy it to every node and restart them",
                file.display()
            );
        }
    }
    Ok(())
}

/// The admin API's answer to an export of the node credential.
pub fn export_node() -> Result<String, String> {
    let node = auth::installed().ok_or("this process holds no cluster credential")?;
    if node.kind != Kind::Node {
        return Err("this process holds a client credential only".into());
    }
    Ok(serde_json::to_string_pretty(&*node).expect("credentials serialize"))
}

/// The longest a client certificate may be valid.
const MAX_CLIENT_DAYS: u32 = 3650;

/// The admin API's answer to a client's CSR: its certificate, valid for `days`.
pub fn sign_client(csr: &str, days: u32) -> Result<String, String> {
    if days == 0 || days > MAX_CLIENT_DAYS {
        return Err(format!("days must be 1 to {MAX_CLIENT_DAYS}"));
    }
    let node = auth::installed().ok_or("this process holds no cluster credential")?;
    let tls = node
        .tls
        .as_ref()
        .filter(|t| t.has_ca_key())
        .ok_or(auth::OLD_CREDENTIAL)?;
    let cert = tls.sign_client_csr(csr, days).map_err(|e| e.to_string())?;
    let (ca_cert, also_trusted) = tls.client_cas();
    let signed = SignedClient {
        ca_cert,
        also_trusted,
        cert,
        secret: auth::transport()
            .serves_plaintext()
            .then(|| node.client_secret())
            .flatten(),
    };
    Ok(serde_json::to_string_pretty(&signed).expect("serializes"))
}
