//! Cluster authentication: every RPC carries proof that its sender holds a cluster credential.
//!
//! A cluster has one secret, made when it is created (`saker credential create FILE`, or by
//! the all-in-one server in its data directory). Two keys are derived from it:
//!
//! - the **node** key, held by the cluster's own processes: raft traffic, the coordinator's
//!   calls and every control request;
//! - the **client** key, held by library clients (`saker mount --cluster`, `saker bench
//!   --cluster`), exported with `saker admin cluster-credential export --client`: namespace
//!   operations and chunk reads and writes only. A client file holds the client key alone, so it
//!   cannot be turned into a node credential.
//!
//! Each request carries the header `saker-auth: <kind>.<unix seconds>.<HMAC-SHA256 of
//! "saker-rpc:<kind>:<seconds>" under the kind's key, hex>`. A node accepts a token whose time
//! is within [`MAX_SKEW`] of its clock, compared in constant time; without a valid one it
//! answers `Unauthenticated` and serves nothing. The token proves possession of the key without
//! sending it; it does not hide or bind the body, so on an untrusted network the RPC runs over
//! TLS. A process holds one credential ([`install`]), used by every channel it opens and, on a
//! node, to check what it serves.

use std::path::Path;
use std::sync::{Arc, OnceLock, RwLock};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::tls::ClusterTls;

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

/// A cluster credential: the cluster secret (a node's) or the client key (a client's).
#[derive(Clone, Serialize, Deserialize)]
pub struct Credential {
    version: u32,
    pub kind: Kind,
    /// Hex: the cluster secret for a node credential, the client key for a client one.
    secret: String,
    /// The token keys, derived once (every RPC makes or checks a token).
    #[serde(skip)]
    keys: OnceLock<Keys>,
    /// The cluster's CA when its RPC runs over TLS ([`crate::tls`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClusterTls>,
}

/// The keys tokens are made with: the node key (a node credential's only) and the client key.
#[derive(Clone)]
struct Keys {
    node: Option<Vec<u8>>,
    client: Vec<u8>,
}

impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        (self.version, self.kind, &self.secret, &self.tls)
            == (other.version, other.kind, &other.secret, &other.tls)
    }
}

impl Eq for Credential {}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("kind", &self.kind)
            .field("secret", &"<redacted>")
            .field("tls", &self.tls.is_some())
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
const VERSION: u32 = 1;

impl Credential {
    /// A new cluster's node credential (a fresh random secret).
    pub fn generate() -> Self {
        let secret: [u8; 32] = rand::random();
        Self::new(Kind::Node, hex::encode(secret))
    }

    /// A new cluster's node credential whose RPC runs over TLS, with a new CA.
    pub fn generate_with_tls() -> Result<Self, crate::tls::TlsError> {
        Ok(Self {
            tls: Some(ClusterTls::generate()?),
            ..Self::generate()
        })
    }

    fn new(kind: Kind, secret: String) -> Self {
        Self {
            version: VERSION,
            kind,
            secret,
            keys: OnceLock::new(),
            tls: None,
        }
    }

    fn keys(&self) -> &Keys {
        self.keys.get_or_init(|| {
            let secret = hex::decode(&self.secret).expect("checked when loaded");
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
        })
    }

    /// The client credential of this node credential's cluster (itself if it is one).
    pub fn client(&self) -> Self {
        Self {
            tls: self.tls.as_ref().map(ClusterTls::for_client),
            ..Self::new(Kind::Client, hex::encode(&self.keys().client))
        }
    }

    /// The key tokens of `kind` are made with, if this credential has it.
    fn key(&self, kind: Kind) -> Option<&[u8]> {
        match kind {
            Kind::Node => self.keys().node.as_deref(),
            Kind::Client => Some(&self.keys().client),
        }
    }

    /// The token for a request sent at `now` (unix seconds).
    pub fn token(&self, now: i64) -> String {
        let key = self.key(self.kind).expect("a credential has its own key");
        let sig = mac(key, self.kind, now).finalize().into_bytes();
        format!("{}.{now}.{}", self.kind.as_str(), hex::encode(sig))
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
            .ok_or("this process cannot check node credentials")?;
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
        let invalid = |why: String| CredentialError::Invalid {
            path: shown.clone(),
            why,
        };
        let c: Credential = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        if c.version != VERSION {
            return Err(invalid(format!("unknown version {}", c.version)));
        }
        match hex::decode(&c.secret) {
            Ok(s) if s.len() == 32 => Ok(c),
            _ => Err(invalid("the secret is not 32 bytes of hex".into())),
        }
    }

    /// Writes the credential to `path`, readable by its owner only, creating it; refuses to
    /// replace an existing file.
    pub fn save(&self, path: &Path) -> Result<(), CredentialError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let shown = path.display().to_string();
        let io = |source| CredentialError::Io {
            path: shown.clone(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        let body = serde_json::to_vec_pretty(self).expect("credentials serialize");
        f.write_all(&body).map_err(io)?;
        f.sync_all().map_err(io)
    }

    /// The credential at `path`, created (a new cluster's) if there is none.
    pub fn load_or_create(path: &Path) -> Result<Self, CredentialError> {
        if !path.exists() {
            match Self::generate().save(path) {
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

static PROCESS: RwLock<Option<Arc<Credential>>> = RwLock::new(None);

/// Makes `credential` this process's: every channel sends its tokens, and an RPC server
/// started afterwards checks tokens with it. A process installs one at its start (a test that
/// talks to several clusters in turn installs each one's).
pub fn install(credential: Credential) {
    *PROCESS.write().expect("credential lock") = Some(Arc::new(credential));
}

/// This process's credential, if one was installed.
pub fn installed() -> Option<Arc<Credential>> {
    PROCESS.read().expect("credential lock").clone()
}

/// This process's credential, a new cluster's installed first if it has none (in-process
/// servers and clients of a test share it).
pub fn ensure_installed() -> Arc<Credential> {
    let mut set = PROCESS.write().expect("credential lock");
    set.get_or_insert_with(|| Arc::new(Credential::generate()))
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
        let client = node.client();
        let now = 1_800_000_000;
        assert_eq!(node.verify(&node.token(now), now), Ok(Kind::Node));
        assert_eq!(node.verify(&client.token(now), now + 10), Ok(Kind::Client));
        // A client credential cannot make a node token, nor pass one off as its own.
        let forged = client.token(now).replacen("client", "node", 1);
        assert!(node.verify(&forged, now).is_err());
        // Another cluster's credential, an expired token, garbage.
        let other = Credential::generate();
        assert!(node.verify(&other.token(now), now).is_err());
        assert!(node.verify(&other.client().token(now), now).is_err());
        assert!(node.verify(&node.token(now), now + MAX_SKEW + 1).is_err());
        assert!(node.verify(&node.token(now + MAX_SKEW + 1), now).is_err());
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
        assert_eq!(Credential::load_or_create(&path).unwrap(), made);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(made.save(&path).is_err(), "never replaced");
        assert!(!format!("{made:?}").contains(&made.secret));
        let client = dir.path().join("client.json");
        made.client().save(&client).unwrap();
        assert_eq!(Credential::load(&client).unwrap().kind, Kind::Client);
        std::fs::write(
            &path,
            b"{\"version\":1,\"kind\":\"node\",\"secret\":\"abcd\"}",
        )
        .unwrap();
        assert!(Credential::load(&path).is_err());
    }
}
