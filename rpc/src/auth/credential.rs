//! The cluster credential: its file, the keys derived from its secret, the online upgrade
//! steps it records ([`Transition`]), and the tokens of plaintext RPC.

use std::path::Path;
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::MAX_SKEW;
use crate::tls::{ClusterTls, TlsError};

/// What a credential may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Node,
    Client,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
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
    pub(super) secret: Option<String>,
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

pub(super) fn derive(secret: &[u8], label: &str) -> Vec<u8> {
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
