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

use std::sync::{Arc, OnceLock, RwLock};

/// The request header carrying the token.
pub const AUTH_HEADER: &str = "saker-auth";
/// How far a token's time may be from the receiver's clock, in seconds.
pub const MAX_SKEW: i64 = 300;

mod credential;
#[cfg(test)]
mod tests;

pub use credential::{Credential, CredentialError, Kind, Transition};

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
    Some(credential::derive(&secret, label))
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
    online with `upgrade FILE --step accept-tls` while the nodes run --insecure-rpc (the book, \
    docs/src/cookbook/credentials.md; a client: export a new one with \
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
