//! Cluster authentication: who may call a node, and as what.
//!
//! A cluster has one credential, made when it is created (`saker admin cluster-credential
//! create FILE`, or by the all-in-one server in its data directory). It holds the cluster's CA
//! ([`crate::tls`]) and a secret. Every RPC connection is mutual TLS from that CA, and the
//! caller's [`Kind`] is the one its certificate names:
//!
//! - **node**: the cluster's own processes (raft traffic, the coordinator's calls, every
//!   control request). A node credential holds the CA key, from which the node mints its
//!   certificate at start.
//! - **client**: library clients (`saker mount --cluster`, `saker bench --cluster`), whose
//!   credential (`saker admin cluster-credential export FILE --client`) holds the CA
//!   certificate and the client's own certificate, signed by a node from the client's CSR:
//!   namespace operations and chunk reads and writes only.
//!
//! No bearer token travels on a TLS connection. Only behind `--insecure-rpc` (plaintext, for
//! a closed network; it warns at start and shows on `/health`) does a request carry the header
//! `saker-auth: <kind>.<unix seconds>.<HMAC-SHA256 of "saker-rpc:<kind>:<seconds>" under the
//! kind's key, hex>`, keys derived from the secret, accepted within [`MAX_SKEW`] of the
//! receiver's clock. Such a token can be replayed by whoever sees it, which is why it is not
//! the default. A process holds one credential ([`install`]), used by every channel it opens
//! and, on a node, to check what it serves.
//!
//! # Changing it online
//!
//! A running node replaces its credential with [`reload`] (`saker admin cluster-credential
//! reload`, after its file was rewritten and copied): from plaintext to mutual TLS through the
//! two [`Transition`] steps, or to a new CA through the three [`crate::tls::Rotation`] steps.
//! The steps are kept in the credential file, not in the node, so a node restarted halfway
//! comes back at the step its file says, and every step is one a cluster can take node by
//! node: [`check_step`] refuses a credential whose nodes would not understand those still at
//! the step before (a skipped step, another cluster's credential). After a reload, every
//! channel of the process dials again at its next call ([`generation`]), and each server
//! looks again at its open connections, closing those the new credential does not let in.

use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::tls::{ClusterTls, TlsError};

/// The request header carrying the token.
pub const AUTH_HEADER: &str = "saker-auth";
/// How far a token's time may be from the receiver's clock, in seconds.
pub const MAX_SKEW: i64 = 300;

/// What a credential may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Node,
    Client,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Node => "node",
            Kind::Client => "client",
        }
    }
}

/// A cluster credential: a node's (the CA with its key, and the cluster secret) or a
/// client's (the CA certificate, its own certificate and key, and the client key).
#[derive(Clone, Serialize, Deserialize)]
pub struct Credential {
    version: u32,
    pub kind: Kind,
    /// Hex: the cluster secret for a node credential, the client key for a client one; what
    /// tokens are made with under `--insecure-rpc` (a credential of version 1 has nothing else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    /// The token keys, derived once (every RPC makes or checks a token).
    #[serde(skip)]
    keys: OnceLock<Keys>,
    /// The cluster's CA (and a client's certificate): what every connection is made with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClusterTls>,
    /// A node credential during an online upgrade from plaintext to mutual TLS: the step
    /// ([`Transition`]); none once it is done (mutual TLS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition: Option<Transition>,
}

/// The two middle steps of an online upgrade from plaintext RPC with tokens
/// (`--insecure-rpc`, a credential of version 1) to mutual TLS, kept in the node credential
/// (`saker admin cluster-credential upgrade FILE --step S`). In both a node takes TLS and
/// plaintext with a token on its one port; it calls in plaintext in the first and over TLS
/// in the second. The cluster moves one step at a time, node by node (`cluster-credential
/// reload`): two nodes at neighbouring steps always understand each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transition {
    /// Step 1: serves TLS too; calls in plaintext with a token.
    AcceptTls,
    /// Step 2: calls over TLS; still serves plaintext with a token (peers at step 1 call so).
    DialTls,
}

/// The keys tokens are made with: the node key (a node credential's only) and the client key.
#[derive(Clone)]
struct Keys {
    node: Option<Vec<u8>>,
    client: Vec<u8>,
}

impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        (
            self.version,
            self.kind,
            &self.secret,
            &self.tls,
            self.transition,
        ) == (
            other.version,
            other.kind,
            &other.secret,
            &other.tls,
            other.transition,
        )
    }
}

impl Eq for Credential {}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("version", &self.version)
            .field("kind", &self.kind)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("transition", &self.transition)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error("cluster credential {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("cluster credential {path} is not one: {why}")]
    Invalid { path: String, why: String },
}

fn derive(secret: &[u8], label: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(label.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

const CLIENT_LABEL: &str = "saker client credential v1";
const NODE_LABEL: &str = "saker node credential v1";
/// Version 2: mutual TLS. Version 1 (tokens, the CA optional and without client
/// certificates) still loads: such a node serves only with `--insecure-rpc` until upgraded.
const VERSION: u32 = 2;

impl Credential {
    /// A new cluster's node credential: a new CA and a fresh random secret.
    pub fn generate() -> Self {
        Self::try_generate().expect("a new CA can always be made")
    }

    /// [`Credential::generate`], failing rather than panicking if the CA cannot be made.
    pub fn try_generate() -> Result<Self, TlsError> {
        let secret: [u8; 32] = rand::random();
        Ok(Self {
            tls: Some(ClusterTls::generate()?),
            ..Self::new(Kind::Node, Some(hex::encode(secret)))
        })
    }

    fn new(kind: Kind, secret: Option<String>) -> Self {
        Self {
            version: VERSION,
            kind,
            secret,
            keys: OnceLock::new(),
            tls: None,
            transition: None,
        }
    }

    /// Whether this credential can make mutual-TLS connections: a node's has the CA key, a
    /// client's a certificate of its own.
    pub fn mutual_tls(&self) -> bool {
        self.version >= VERSION && self.tls.is_some()
    }

    fn keys(&self) -> Option<&Keys> {
        let secret = self.secret.as_deref()?;
        Some(self.keys.get_or_init(|| {
            let secret = hex::decode(secret).expect("checked when loaded");
            match self.kind {
                Kind::Node => Keys {
                    node: Some(derive(&secret, NODE_LABEL)),
                    client: derive(&secret, CLIENT_LABEL),
                },
                Kind::Client => Keys {
                    node: None,
                    client: secret,
                },
            }
        }))
    }

    /// The client key, hex (what a client credential of this cluster carries for
    /// `--insecure-rpc`).
    pub fn client_secret(&self) -> Option<String> {
        self.keys().map(|k| hex::encode(&k.client))
    }

    /// A client credential of this node credential's cluster, its certificate made here
    /// (valid for [`crate::tls::CLIENT_CERT_DAYS`]): for in-process clients and tests; a
    /// client host asks a node to sign its own key instead ([`Credential::client_signed`]).
    pub fn client(&self) -> Result<Self, TlsError> {
        let tls = match &self.tls {
            Some(tls) if tls.has_ca_key() => Some(tls.for_client(crate::tls::CLIENT_CERT_DAYS)?),
            Some(_) => return Err(TlsError::NoCaKey),
            None => None,
        };
        Ok(Self {
            tls,
            version: if self.mutual_tls() { VERSION } else { 1 },
            ..Self::new(Kind::Client, self.client_secret())
        })
    }

    /// A client credential from what a node answered to its CSR: `tls` with the client's
    /// certificate and key, and the client key if the node hands it out.
    pub fn client_signed(tls: ClusterTls, secret: Option<String>) -> Self {
        Self {
            tls: Some(tls),
            ..Self::new(Kind::Client, secret)
        }
    }

    /// The key tokens of `kind` are made with, if this credential has it.
    fn key(&self, kind: Kind) -> Option<&[u8]> {
        let keys = self.keys()?;
        match kind {
            Kind::Node => keys.node.as_deref(),
            Kind::Client => Some(&keys.client),
        }
    }

    /// The token for a request sent at `now` (unix seconds), if this credential can make one.
    pub fn token(&self, now: i64) -> Option<String> {
        let key = self.key(self.kind)?;
        let sig = mac(key, self.kind, now).finalize().into_bytes();
        Some(format!("{}.{now}.{}", self.kind.as_str(), hex::encode(sig)))
    }

    /// The kind a request's `token` proves, checked against this (node) credential at `now`.
    pub fn verify(&self, token: &str, now: i64) -> Result<Kind, String> {
        let mut parts = token.splitn(3, '.');
        let (Some(kind), Some(secs), Some(sig)) = (parts.next(), parts.next(), parts.next()) else {
            return Err("malformed credential token".into());
        };
        let kind = match kind {
            "node" => Kind::Node,
            "client" => Kind::Client,
            other => return Err(format!("unknown credential kind '{other}'")),
        };
        let secs: i64 = secs.parse().map_err(|_| "malformed credential token")?;
        if (now - secs).abs() > MAX_SKEW {
            return Err(format!(
                "credential token expired or from the future ({} s off; clocks must agree within \
                 {MAX_SKEW} s)",
                now - secs
            ));
        }
        let sig = hex::decode(sig).map_err(|_| "malformed credential token")?;
        let key = self
            .key(kind)
            .ok_or("this process cannot check tokens of that kind")?;
        mac(key, kind, secs)
            .verify_slice(&sig)
            .map_err(|_| "the credential is not this cluster's".to_string())?;
        Ok(kind)
    }

    /// Reads a credential file.
    pub fn load(path: &Path) -> Result<Self, CredentialError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| CredentialError::Io {
            path: shown.clone(),
            source,
        })?;
        Self::decode(&bytes).map_err(|why| CredentialError::Invalid { path: shown, why })
    }

    /// A credential from its file's bytes, checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let c: Credential = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if c.version != VERSION && c.version != 1 {
            return Err(format!("unknown version {}", c.version));
        }
        match c.secret.as_deref().map(hex::decode) {
            Some(Ok(s)) if s.len() == 32 => {}
            None if c.version == VERSION => {}
            _ => return Err("the secret is not 32 bytes of hex".into()),
        }
        if c.version == VERSION {
            match (&c.tls, c.kind) {
                (None, _) => return Err("no cluster CA".into()),
                (Some(t), Kind::Node) if !t.has_ca_key() => {
                    return Err("a node credential without the CA key".into())
                }
                _ => {}
            }
        }
        if c.transition.is_some() && (c.version != VERSION || c.kind != Kind::Node) {
            return Err("only a node credential of version 2 is upgraded online".into());
        }
        if c.transition.is_some() && c.secret.is_none() {
            return Err("an upgrade step needs the secret (plaintext callers send tokens)".into());
        }
        Ok(c)
    }

    /// Writes the credential to `path`, readable by its owner only, creating it; refuses to
    /// replace an existing file.
    pub fn save(&self, path: &Path) -> Result<(), CredentialError> {
        self.write(path).map_err(|source| CredentialError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Replaces the credential at `path` with this one, durably: a private temporary file,
    /// synced, renamed over it, the directory synced.
    pub fn replace(&self, path: &Path) -> Result<(), CredentialError> {
        let body = serde_json::to_vec_pretty(self).expect("credentials serialize");
        saker_durable::replace_private_file(path, &body).map_err(|source| CredentialError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        let body = serde_json::to_vec_pretty(self).expect("credentials serialize");
        f.write_all(&body)?;
        f.sync_all()
    }

    /// This node credential as one for mutual TLS: a credential of version 1 gets a new CA
    /// (or keeps the one it was made with by `create --tls`) and keeps its secret.
    pub fn upgraded(&self) -> Result<Self, String> {
        if self.kind != Kind::Node {
            return Err(
                "a client credential cannot be upgraded: export a new one with \
                 `saker admin cluster-credential export FILE --client`"
                    .into(),
            );
        }
        if self.mutual_tls() {
            return Err("already a credential for mutual TLS".into());
        }
        let tls = match &self.tls {
            Some(tls) if tls.has_ca_key() => tls.clone(),
            _ => ClusterTls::generate().map_err(|e| e.to_string())?,
        };
        Ok(Self {
            tls: Some(tls),
            ..Self::new(Kind::Node, self.secret.clone())
        })
    }

    /// This node credential at step `to` of the online upgrade (`None`: done, mutual TLS
    /// only). The first step takes a credential of version 1 (given a new CA) or one of a
    /// cluster running `--insecure-rpc`; each other step follows the one before only. The
    /// secret is kept throughout: plaintext callers' tokens stay good until the last step.
    pub fn upgrade_step(&self, to: Option<Transition>) -> Result<Self, String> {
        if self.kind != Kind::Node {
            return Err("a client credential is not upgraded: export a new one".into());
        }
        let name = |t: Option<Transition>| match t {
            Some(Transition::AcceptTls) => "accept-tls",
            Some(Transition::DialTls) => "dial-tls",
            None => "done",
        };
        let from = match to {
            Some(Transition::AcceptTls) => {
                if self.transition.is_some() {
                    return Err(format!(
                        "accept-tls is the first step; this credential is at {}",
                        name(self.transition)
                    ));
                }
                let mut up = if self.mutual_tls() {
                    self.clone()
                } else {
                    self.upgraded()?
                };
                if up.secret.is_none() {
                    return Err("a credential without a secret never served plaintext".into());
                }
                up.transition = to;
                return Ok(up);
            }
            Some(Transition::DialTls) => Some(Transition::AcceptTls),
            None => Some(Transition::DialTls),
        };
        if self.transition != from {
            return Err(format!(
                "the step {} follows {} only; this credential is at {}",
                name(to),
                name(from),
                if self.mutual_tls() {
                    name(self.transition)
                } else {
                    "version 1 (plaintext only)"
                }
            ));
        }
        Ok(Self {
            transition: to,
            ..self.clone()
        })
    }

    /// This node credential at step `to` of a CA rotation ([`crate::tls::Rotation`]).
    pub fn rotation_step(&self, to: crate::tls::Rotation) -> Result<Self, String> {
        if self.kind != Kind::Node {
            return Err("a client credential is not rotated: export a new one".into());
        }
        if self.transition.is_some() || !self.mutual_tls() {
            return Err("finish the upgrade to mutual TLS before rotating the CA".into());
        }
        let tls = self
            .tls
            .as_ref()
            .expect("a version 2 credential has its CA");
        let tls = tls.rotated(to).map_err(|e| e.to_string())?;
        Ok(Self {
            tls: Some(tls),
            ..self.clone()
        })
    }

    /// The credential at `path`, created (a new cluster's) if there is none.
    pub fn load_or_create(path: &Path) -> Result<Self, CredentialError> {
        if !path.exists() {
            let made = Self::try_generate().map_err(|e| CredentialError::Invalid {
                path: path.display().to_string(),
                why: e.to_string(),
            })?;
            match made.save(path) {
                Err(CredentialError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                other => other?,
            }
        }
        Self::load(path)
    }
}

/// The MAC of a token of `kind` made at `secs`, before finalizing (made, or checked in
/// constant time).
fn mac(key: &[u8], kind: Kind, secs: i64) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(format!("saker-rpc:{}:{secs}", kind.as_str()).as_bytes());
    m
}

/// How this process's RPC connections are secured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Mutual TLS from the cluster CA; the kind is the certificate's, no token is sent or
    /// taken. The default.
    MutualTls,
    /// Upgrade step 1 ([`Transition::AcceptTls`]): serves TLS and plaintext with tokens,
    /// calls in plaintext with a token.
    AcceptTls,
    /// Upgrade step 2 ([`Transition::DialTls`]): serves TLS and plaintext with tokens, calls
    /// over TLS.
    DialTls,
    /// Plaintext, every request with a token (`--insecure-rpc`: a closed network only).
    Insecure,
}

impl Transport {
    /// How a node runs with `credential`: as its upgrade step says, else in plaintext when
    /// `insecure` (`--insecure-rpc`), else mutual TLS.
    pub fn of(credential: &Credential, insecure: bool) -> Self {
        match credential.transition {
            Some(Transition::AcceptTls) => Transport::AcceptTls,
            Some(Transition::DialTls) => Transport::DialTls,
            None if insecure => Transport::Insecure,
            None => Transport::MutualTls,
        }
    }

    /// Whether a node takes plaintext connections (with a token on every request).
    pub fn serves_plaintext(self) -> bool {
        self != Transport::MutualTls
    }

    /// Whether a node takes TLS connections.
    pub fn serves_tls(self) -> bool {
        self != Transport::Insecure
    }

    /// Whether this process calls over TLS.
    pub fn dials_tls(self) -> bool {
        matches!(self, Transport::MutualTls | Transport::DialTls)
    }

    /// The upgrade's steps in order: 0 (plaintext) to 3 (mutual TLS).
    fn step(self) -> u8 {
        match self {
            Transport::Insecure => 0,
            Transport::AcceptTls => 1,
            Transport::DialTls => 2,
            Transport::MutualTls => 3,
        }
    }

    /// As `/health`, the admin API and the CLI name it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::MutualTls => "mutual-tls",
            Transport::AcceptTls => "upgrade step accept-tls",
            Transport::DialTls => "upgrade step dial-tls",
            Transport::Insecure => "insecure-rpc",
        }
    }
}

/// What [`install`] set.
pub(crate) struct Process {
    credential: Arc<Credential>,
    transport: Transport,
    /// The calling side's TLS config, made at the first connection and shared by all (so
    /// their sessions resume).
    client_tls: OnceLock<Result<Arc<tokio_rustls::rustls::ClientConfig>, String>>,
    /// The serving side's, made at the first connection a server takes.
    server_tls: OnceLock<Result<crate::tls::ServerTls, String>>,
}

impl Process {
    fn new(credential: Credential, transport: Transport) -> Self {
        Self {
            credential: Arc::new(credential),
            transport,
            client_tls: OnceLock::new(),
            server_tls: OnceLock::new(),
        }
    }

    pub(crate) fn transport(&self) -> Transport {
        self.transport
    }

    pub(crate) fn kind(&self) -> Kind {
        self.credential.kind
    }

    /// The TLS side of a server with this credential; `None` if it serves plaintext only.
    pub(crate) fn server_tls(&self) -> Result<Option<&crate::tls::ServerTls>, String> {
        if !self.transport.serves_tls() {
            return Ok(None);
        }
        self.server_tls
            .get_or_init(|| match &self.credential.tls {
                Some(tls) if self.credential.mutual_tls() => {
                    tls.server().map_err(|e| e.to_string())
                }
                _ => Err(OLD_CREDENTIAL.to_string()),
            })
            .as_ref()
            .map(Some)
            .map_err(Clone::clone)
    }

    /// Whether a connection made earlier is still let in: a plaintext one (`chain` `None`)
    /// if plaintext is served, a TLS one if its certificate is still trusted.
    pub(crate) fn still_accepts(
        &self,
        chain: Option<&[tokio_rustls::rustls::pki_types::CertificateDer<'static>]>,
    ) -> bool {
        match chain {
            None => self.transport.serves_plaintext(),
            Some(chain) => matches!(self.server_tls(), Ok(Some(tls)) if tls.accepts(chain)),
        }
    }

    /// The kind a plaintext request's `token` proves, if plaintext is served.
    pub(crate) fn verify_plaintext(&self, token: Option<&str>) -> Result<Kind, String> {
        if !self.transport.serves_plaintext() {
            return Err(
                "this node serves mutual TLS only: plaintext RPC (and any token it \
                 carries) is refused"
                    .into(),
            );
        }
        let Some(token) = token else {
            return Err(
                "no cluster credential: this node serves only holders of its cluster's \
                 credential (saker admin cluster-credential export)"
                    .into(),
            );
        };
        self.credential.verify(token, now_secs())
    }
}

static PROCESS: RwLock<Option<Arc<Process>>> = RwLock::new(None);
/// The credential a node reloaded last ([`reload`]): what its servers follow.
static RELOADED: RwLock<Option<Arc<Process>>> = RwLock::new(None);

/// Counts every change of this process's credential (each [`install`] and [`reload`]):
/// a channel made under an older one dials again at its next call, so that what it shows
/// and trusts is the current credential's.
fn changes() -> &'static tokio::sync::watch::Sender<u64> {
    static CHANGES: OnceLock<tokio::sync::watch::Sender<u64>> = OnceLock::new();
    CHANGES.get_or_init(|| tokio::sync::watch::channel(0).0)
}

/// The count of [`changes`] now.
pub(crate) fn generation() -> u64 {
    *changes().borrow()
}

/// Wakes when this node reloads its credential (servers then look again at their open
/// connections).
pub(crate) fn reloads() -> tokio::sync::watch::Receiver<u64> {
    reloaded_tx().subscribe()
}

fn reloaded_tx() -> &'static tokio::sync::watch::Sender<u64> {
    static RELOADS: OnceLock<tokio::sync::watch::Sender<u64>> = OnceLock::new();
    RELOADS.get_or_init(|| tokio::sync::watch::channel(0).0)
}

fn set(credential: Credential, transport: Transport) -> Arc<Process> {
    let p = Arc::new(Process::new(credential, transport));
    *PROCESS.write().expect("credential lock") = Some(p.clone());
    changes().send_modify(|g| *g += 1);
    p
}

pub(crate) fn process() -> Option<Arc<Process>> {
    PROCESS.read().expect("credential lock").clone()
}

/// What a server started with `started` serves with now: the credential this node reloaded
/// last, if it did after the server started, else `started`.
pub(crate) fn serving(started: &Arc<Process>) -> Arc<Process> {
    match RELOADED.read().expect("credential lock").as_ref() {
        Some(p) => p.clone(),
        None => started.clone(),
    }
}

/// Makes `credential` this process's, over mutual TLS: every channel it opens shows its
/// certificate, and an RPC server started afterwards serves with it. A process installs one
/// at its start (a test that talks to several clusters in turn installs each one's).
pub fn install(credential: Credential) {
    set(credential, Transport::MutualTls);
}

/// [`install`] for plaintext RPC with tokens (`--insecure-rpc`).
pub fn install_insecure(credential: Credential) {
    set(credential, Transport::Insecure);
}

/// [`install`] with `transport`.
pub fn install_as(credential: Credential, transport: Transport) {
    set(credential, transport);
}

/// Replaces a running node's credential with `credential` run as `transport`, if that is a
/// step a cluster can take node by node ([`check_step`]): channels dial again at their next
/// call, servers take new connections as it says, and open connections it no longer lets in
/// (plaintext after the upgrade, certificates of a CA no longer trusted) are closed.
pub fn reload(credential: Credential, transport: Transport) -> Result<(), String> {
    let Some(old) = process() else {
        return Err("this process holds no cluster credential".into());
    };
    check_step(&old.credential, old.transport, &credential, transport)?;
    let p = set(credential, transport);
    *RELOADED.write().expect("credential lock") = Some(p);
    reloaded_tx().send_modify(|g| *g += 1);
    Ok(())
}

/// Whether a node running `old` as `old_t` may switch to `new` as `new_t` while its peers
/// run either: the same cluster (the same secret, or a CA in common), at most one upgrade
/// step away, and, over TLS, each side's certificate trusted by the other (a CA rotation
/// one step at a time).
pub fn check_step(
    old: &Credential,
    old_t: Transport,
    new: &Credential,
    new_t: Transport,
) -> Result<(), String> {
    if new.kind != Kind::Node {
        return Err("a node runs with a node credential".into());
    }
    if new_t.serves_tls() && !new.mutual_tls() {
        return Err(OLD_CREDENTIAL.into());
    }
    if new_t.serves_plaintext() && new.secret.is_none() {
        return Err(
            "plaintext callers need the cluster secret, which this credential lacks".into(),
        );
    }
    let cas = |c: &Credential| -> Vec<String> {
        c.tls
            .as_ref()
            .filter(|_| c.mutual_tls())
            .map(|t| t.trusted().into_iter().cloned().collect())
            .unwrap_or_default()
    };
    let (old_cas, new_cas) = (cas(old), cas(new));
    let same_secret = old.secret.is_some() && old.secret == new.secret;
    if !same_secret && !old_cas.iter().any(|c| new_cas.contains(c)) {
        return Err("not this cluster's credential (neither its secret nor a CA in common)".into());
    }
    if old_t.step().abs_diff(new_t.step()) > 1 {
        return Err(format!(
            "from {} to {} skips a step: every node must be at the step between first",
            old_t.name(),
            new_t.name()
        ));
    }
    if old_t.serves_tls() && new_t.serves_tls() {
        let presented = |c: &Credential| c.tls.as_ref().map(|t| t.ca_cert.clone());
        let (old_p, new_p) = (presented(old), presented(new));
        if !new_p.is_some_and(|p| old_cas.contains(&p))
            || !old_p.is_some_and(|p| new_cas.contains(&p))
        {
            return Err(
                "this CA change skips a rotation step: nodes still at the old step would not \
                 trust this one's certificate, or it theirs (cluster-credential rotate FILE \
                 --step trust-new, present-new, done, each on every node before the next)"
                    .into(),
            );
        }
    }
    Ok(())
}

/// This process's credential, if one was installed.
pub fn installed() -> Option<Arc<Credential>> {
    process().map(|p| p.credential.clone())
}

/// How this process's RPC runs (mutual TLS unless installed otherwise).
pub fn transport() -> Transport {
    process().map_or(Transport::MutualTls, |p| p.transport)
}

/// A line for `/health` when this node's RPC is not mutual TLS only, or trusts more than
/// one CA.
pub fn warning() -> Option<String> {
    let p = process()?;
    match p.transport {
        Transport::Insecure => {
            Some("warning: the cluster RPC runs in plaintext (--insecure-rpc)".into())
        }
        Transport::AcceptTls | Transport::DialTls => Some(format!(
            "warning: the cluster RPC also accepts plaintext with replayable tokens ({}; \
             finish with `saker admin cluster-credential upgrade FILE --step done`)",
            p.transport.name()
        )),
        Transport::MutualTls => {
            let tls = p.credential.tls.as_ref()?;
            (tls.rotation() != crate::tls::Rotation::None).then(|| {
                format!(
                    "note: a CA rotation is under way (step {}; this node trusts {} CAs)",
                    tls.rotation().name(),
                    tls.trusted().len()
                )
            })
        }
    }
}

/// What this process's RPC runs as, one line (`cluster-credential status`, `reload`): the
/// transport, the CA its certificates come from and the CAs it trusts (fingerprints).
pub fn describe() -> String {
    let Some(p) = process() else {
        return "no cluster credential".into();
    };
    let mut line = format!("rpc {}", p.transport.name());
    if let Some(tls) = p
        .credential
        .tls
        .as_ref()
        .filter(|_| p.credential.mutual_tls())
    {
        let trusted: Vec<String> = tls
            .trusted()
            .into_iter()
            .map(|c| crate::tls::fingerprint(c))
            .collect();
        line.push_str(&format!(
            "; certificates from CA {}; trusts {}; rotation {}",
            crate::tls::fingerprint(&tls.ca_cert),
            trusted.join(", "),
            match tls.rotation() {
                crate::tls::Rotation::None => "none",
                r => r.name(),
            }
        ));
    }
    line
}

/// The token a request sent now carries: when this process calls in plaintext only (over
/// mutual TLS the certificate speaks, and no bearer token goes on the wire).
pub(crate) fn request_token() -> Option<String> {
    let p = process().filter(|p| !p.transport.dials_tls())?;
    p.credential.token(now_secs())
}

/// A key for `label` derived from the cluster secret of this process's node credential (what
/// MNodes sign for clients with, [`crate::capability`]); `None` without one.
pub fn node_key(label: &str) -> Option<Vec<u8>> {
    let p = process().filter(|p| p.credential.kind == Kind::Node)?;
    let secret = hex::decode(p.credential.secret.as_deref()?).ok()?;
    Some(derive(&secret, label))
}

/// The TLS config this process calls with; `None` when it calls in plaintext.
pub(crate) fn client_tls() -> Result<Option<Arc<tokio_rustls::rustls::ClientConfig>>, String> {
    let Some(p) = process() else {
        return Err("this process holds no cluster credential".into());
    };
    if !p.transport.dials_tls() {
        return Ok(None);
    }
    p.client_tls
        .get_or_init(|| match &p.credential.tls {
            Some(tls) if p.credential.mutual_tls() => {
                tls.client_config().map_err(|e| e.to_string())
            }
            _ => Err(OLD_CREDENTIAL.to_string()),
        })
        .clone()
        .map(Some)
}

/// Why a credential of version 1 cannot make mutual-TLS connections.
pub const OLD_CREDENTIAL: &str = "this cluster credential predates mutual TLS: upgrade it with \
    `saker admin cluster-credential upgrade FILE` (offline: every node restarted with it), or \
    online with `upgrade FILE --step accept-tls` while the nodes run --insecure-rpc (README, \
    Cluster credential; a client: export a new one with \
    `saker admin cluster-credential export FILE --client`), or run with --insecure-rpc";

/// This process's credential, a new cluster's installed first if it has none (in-process
/// servers and clients of a test share it).
pub fn ensure_installed() -> Arc<Credential> {
    let mut set = PROCESS.write().expect("credential lock");
    set.get_or_insert_with(|| Arc::new(Process::new(Credential::generate(), Transport::MutualTls)))
        .credential
        .clone()
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_prove_the_kind_and_nothing_more() {
        let node = Credential::generate();
        let client = node.client().unwrap();
        let now = 1_800_000_000;
        let tok = |c: &Credential, at| c.token(at).unwrap();
        assert_eq!(node.verify(&tok(&node, now), now), Ok(Kind::Node));
        assert_eq!(node.verify(&tok(&client, now), now + 10), Ok(Kind::Client));
        // A client credential cannot make a node token, nor pass one off as its own.
        let forged = tok(&client, now).replacen("client", "node", 1);
        assert!(node.verify(&forged, now).is_err());
        // Another cluster's credential, an expired token, garbage.
        let other = Credential::generate();
        assert!(node.verify(&tok(&other, now), now).is_err());
        assert!(node
            .verify(&tok(&other.client().unwrap(), now), now)
            .is_err());
        assert!(node.verify(&tok(&node, now), now + MAX_SKEW + 1).is_err());
        assert!(node.verify(&tok(&node, now + MAX_SKEW + 1), now).is_err());
        for junk in ["", "node", "node.1", "node.x.00", "root.1.00", "node.1.zz"] {
            assert!(node.verify(junk, now).is_err(), "{junk}");
        }
    }

    #[test]
    fn files_are_private_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cred.json");
        let made = Credential::load_or_create(&path).unwrap();
        assert!(made.mutual_tls() && made.tls.as_ref().unwrap().has_ca_key());
        assert_eq!(Credential::load_or_create(&path).unwrap(), made);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(made.save(&path).is_err(), "never replaced");
        let shown = format!("{made:?}");
        assert!(!shown.contains(made.secret.as_deref().unwrap()));
        assert!(!shown.contains("PRIVATE"));
        let client = dir.path().join("client.json");
        made.client().unwrap().save(&client).unwrap();
        let loaded = Credential::load(&client).unwrap();
        assert_eq!(loaded.kind, Kind::Client);
        assert!(loaded.mutual_tls() && !loaded.tls.unwrap().has_ca_key());
        std::fs::write(
            &path,
            b"{\"version\":1,\"kind\":\"node\",\"secret\":\"abcd\"}",
        )
        .unwrap();
        assert!(Credential::load(&path).is_err());
        // A version 2 node credential must hold its CA key.
        let mut no_ca = serde_json::to_value(&made).unwrap();
        no_ca["tls"] = serde_json::to_value(made.client().unwrap().tls).unwrap();
        no_ca["kind"] = "node".into();
        assert!(Credential::decode(no_ca.to_string().as_bytes()).is_err());
    }

    #[test]
    fn a_version_1_credential_still_loads_but_cannot_make_mutual_tls() {
        let v1 = format!(
            "{{\"version\":1,\"kind\":\"node\",\"secret\":\"{}\"}}",
            "ab".repeat(32)
        );
        let c = Credential::decode(v1.as_bytes()).unwrap();
        assert!(!c.mutual_tls());
        assert!(c.token(1).is_some());
        assert!(!c.client().unwrap().mutual_tls());
        let up = c.upgraded().unwrap();
        assert!(up.mutual_tls() && up.tls.as_ref().unwrap().has_ca_key());
        assert_eq!(up.secret, c.secret, "the secret is kept for --insecure-rpc");
        assert!(up.upgraded().is_err(), "already upgraded");
        assert!(
            up.client().unwrap().upgraded().is_err(),
            "a client is exported anew"
        );
    }

    #[test]
    fn upgrade_steps_go_one_at_a_time_and_keep_the_secret() {
        let v1 = format!(
            "{{\"version\":1,\"kind\":\"node\",\"secret\":\"{}\"}}",
            "cd".repeat(32)
        );
        let v1 = Credential::decode(v1.as_bytes()).unwrap();
        let t = Transport::of;
        assert_eq!(t(&v1, true), Transport::Insecure);
        assert!(v1.upgrade_step(Some(Transition::DialTls)).is_err());
        let accept = v1.upgrade_step(Some(Transition::AcceptTls)).unwrap();
        assert_eq!(t(&accept, true), Transport::AcceptTls, "the file decides");
        assert_eq!(accept.token(5), v1.token(5));
        let dial = accept.upgrade_step(Some(Transition::DialTls)).unwrap();
        assert!(accept.upgrade_step(None).is_err(), "done follows dial-tls");
        let done = dial.upgrade_step(None).unwrap();
        assert_eq!(t(&done, false), Transport::MutualTls);
        assert!(done.upgrade_step(None).is_err());
        // Saved and loaded, the step is kept.
        let text = serde_json::to_vec(&dial).unwrap();
        assert_eq!(Credential::decode(&text).unwrap(), dial);

        // Neighbouring steps only, of the same cluster.
        let steps = [
            (&v1, Transport::Insecure),
            (&accept, Transport::AcceptTls),
            (&dial, Transport::DialTls),
            (&done, Transport::MutualTls),
        ];
        for (i, (a, ta)) in steps.iter().enumerate() {
            for (j, (b, tb)) in steps.iter().enumerate() {
                let r = check_step(a, *ta, b, *tb);
                assert_eq!(r.is_ok(), i.abs_diff(j) <= 1, "{ta:?} -> {tb:?}: {r:?}");
            }
        }
        let other = Credential::generate().upgrade_step(Some(Transition::AcceptTls));
        let r = check_step(
            &v1,
            Transport::Insecure,
            &other.unwrap(),
            Transport::AcceptTls,
        );
        assert!(r.unwrap_err().contains("not this cluster's"));
    }

    #[test]
    fn rotation_steps_keep_each_neighbour_trusting_the_other() {
        use crate::tls::Rotation;
        let a = Credential::generate();
        let t = Transport::MutualTls;
        let trust = a.rotation_step(Rotation::TrustNew).unwrap();
        assert!(a.rotation_step(Rotation::PresentNew).is_err());
        let present = trust.rotation_step(Rotation::PresentNew).unwrap();
        let done = present.rotation_step(Rotation::None).unwrap();
        let steps = [&a, &trust, &present, &done];
        for (i, x) in steps.iter().enumerate() {
            for (j, y) in steps.iter().enumerate() {
                let r = check_step(x, t, y, t);
                assert_eq!(r.is_ok(), i.abs_diff(j) <= 1, "{i} -> {j}: {r:?}");
            }
        }
        // A client exported at trust-new is signed by the new CA and trusts both.
        let client = trust.client().unwrap();
        let ctls = client.tls.as_ref().unwrap();
        assert_eq!(ctls.ca_cert, done.tls.as_ref().unwrap().ca_cert);
        assert_eq!(ctls.trusted().len(), 2);
        assert_eq!(done.tls.as_ref().unwrap().trusted().len(), 1);
        assert_eq!(done.token(9), a.token(9), "the secret is kept");
    }
}
