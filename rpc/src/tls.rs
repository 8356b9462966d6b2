//! Mutual TLS for the cluster RPC: every connection between saker processes is TLS 1.3, and
//! both ends show a certificate of the cluster's CA.
//!
//! Every cluster has a CA, made with its credential (`saker admin cluster-credential create`):
//! its certificate is in every credential of the cluster, its key in node credentials only.
//!
//! - A **node** mints a certificate for [`NODE_NAME`] from the CA key when it starts (a new key
//!   pair, never written anywhere; valid for [`NODE_CERT_LIFETIME`] and re-minted long before
//!   it lapses), and shows it both when it serves and when it calls.
//! - A **client** (a library mount, a benchmark) holds a certificate for [`CLIENT_NAME`] that
//!   a node signed from the client's CSR (`cluster-credential export --client`): the client's
//!   key never leaves its host.
//!
//! A server learns the caller's [`Kind`] from the name in the caller's certificate
//! ([`kind_of_certificate`]), never from a header, so what a connection may do is fixed by
//! its handshake. A certificate of another CA, an expired one, or none at all ends the
//! handshake. The CA signs only these two shapes of certificate, and the names in a client's
//! CSR are ignored, so a client cannot obtain a node's certificate.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use serde::{Deserialize, Serialize};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::sign::CertifiedKey;

use crate::auth::Kind;

/// The name in every node's certificate; a caller checks that the server it reached has it.
/// The certificate proves membership of the cluster, not a host name (nodes move between
/// addresses).
pub const NODE_NAME: &str = "saker-node";
/// The name in every client's certificate.
pub const CLIENT_NAME: &str = "saker-client";
/// How long a node's minted certificate is valid.
pub const NODE_CERT_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// A node mints a new certificate once its current one is this old.
const NODE_CERT_RENEW: Duration = Duration::from_secs(24 * 3600);
/// How long a client certificate is valid unless asked otherwise.
pub const CLIENT_CERT_DAYS: u32 = 365;
/// Certificates are valid from this long before they were made (clocks differ a little).
const BACKDATE: Duration = Duration::from_secs(3600);

const CA_NAME: &str = "saker cluster CA";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cluster TLS: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("cluster TLS: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("cluster TLS: a client credential holds no CA key: it cannot serve RPC or sign")]
    NoCaKey,
    #[error("cluster TLS: this client credential has no certificate of its own (export a new one with `saker admin cluster-credential export FILE --client`)")]
    NoIdentity,
    #[error("cluster TLS: {0}")]
    Invalid(String),
}

/// A cluster's CA as a credential carries it, and a client's own certificate.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterTls {
    /// PEM.
    pub ca_cert: String,
    /// PEM; node credentials only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_key: Option<String>,
    /// PEM: a client's certificate, signed by the CA for [`CLIENT_NAME`]; client credentials
    /// only (a node mints its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cert: Option<String>,
    /// PEM: the key of `cert`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// During a CA rotation's first step (`trust-new`): the CA that replaces this one, with
    /// its key; trusted already, and what client certificates are signed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    next: Option<NextCa>,
    /// Certificates (PEM) of other CAs trusted too: during a rotation's second step
    /// (`present-new`), the CA being replaced; in a client's credential exported during a
    /// rotation, the CA its signer replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    also_trusted: Vec<String>,
}

/// The CA a rotation moves to, with its key (PEM both).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextCa {
    pub ca_cert: String,
    ca_key: String,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls")
            .field("ca", &fingerprint(&self.ca_cert))
            .field("ca_key", &self.ca_key.as_ref().map(|_| "<redacted>"))
            .field("cert", &self.cert.is_some())
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("next", &self.next.as_ref().map(|n| fingerprint(&n.ca_cert)))
            .field(
                "also_trusted",
                &self
                    .also_trusted
                    .iter()
                    .map(|c| fingerprint(c))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A new CA's parameters.
fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_NAME);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

/// A leaf certificate's parameters: `kind`'s name, valid from a little before now for
/// `lifetime` (which may be negative in tests: an expired certificate).
fn leaf_params(
    kind: Kind,
    valid_from: time::OffsetDateTime,
    lifetime: time::Duration,
) -> CertificateParams {
    let name = match kind {
        Kind::Node => NODE_NAME,
        Kind::Client => CLIENT_NAME,
    };
    let mut p = CertificateParams::new(vec![name.to_string()]).expect("a valid DNS name");
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = match kind {
        Kind::Node => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        Kind::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.not_before = valid_from - BACKDATE;
    p.not_after = valid_from + lifetime;
    p
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn days(n: u32) -> time::Duration {
    time::Duration::days(i64::from(n))
}

/// A client's key and the CSR a node signs for it ([`ClusterTls::sign_client_csr`]), PEM.
pub fn client_csr() -> Result<(String, String), TlsError> {
    let key = KeyPair::generate()?;
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, CLIENT_NAME);
    let csr = p.serialize_request(&key)?;
    Ok((csr.pem()?, key.serialize_pem()))
}

impl ClusterTls {
    /// A new CA (ECDSA P-256).
    pub fn generate() -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let cert = ca_params().self_signed(&key)?;
        Ok(Self {
            ca_cert: cert.pem(),
            ca_key: Some(key.serialize_pem()),
            cert: None,
            key: None,
            next: None,
            also_trusted: Vec::new(),
        })
    }

    /// Whether this holds the CA key (a node's).
    pub fn has_ca_key(&self) -> bool {
        self.ca_key.is_some()
    }

    /// A client's: the CA certificate, and the client's certificate and key.
    pub fn client(ca_cert: String, cert: String, key: String) -> Self {
        Self {
            ca_cert,
            ca_key: None,
            cert: Some(cert),
            key: Some(key),
            next: None,
            also_trusted: Vec::new(),
        }
    }

    /// This (client's) credential also trusting the CAs of `others` (PEM; during a rotation).
    pub fn trusting(mut self, others: Vec<String>) -> Self {
        self.also_trusted = others;
        self
    }

    /// The CA as an issuer of certificates: the one this node's own certificates come from.
    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, TlsError> {
        let key = KeyPair::from_pem(self.ca_key.as_deref().ok_or(TlsError::NoCaKey)?)?;
        Ok(Issuer::from_ca_cert_pem(&self.ca_cert, key)?)
    }

    /// The CA client certificates are signed with: during a rotation's first step the new
    /// one (already trusted by every node once the step is done everywhere, and the only one
    /// trusted at its end), else this one.
    fn client_issuer(&self) -> Result<(Issuer<'static, KeyPair>, &str), TlsError> {
        match &self.next {
            Some(next) => {
                let key = KeyPair::from_pem(&next.ca_key)?;
                Ok((Issuer::from_ca_cert_pem(&next.ca_cert, key)?, &next.ca_cert))
            }
            None => Ok((self.issuer()?, &self.ca_cert)),
        }
    }

    /// The certificate (PEM) of the CA client certificates are signed with now, and those of
    /// the other CAs trusted (a client exported during a rotation trusts them all).
    pub fn client_cas(&self) -> (String, Vec<String>) {
        let signer = self.next.as_ref().map_or(&self.ca_cert, |n| &n.ca_cert);
        let others = self
            .trusted()
            .into_iter()
            .filter(|c| *c != signer)
            .cloned()
            .collect();
        (signer.clone(), others)
    }

    /// The certificates (PEM) of every CA this trusts: its own, the next one's during a
    /// rotation, and the ones it also trusts.
    pub fn trusted(&self) -> Vec<&String> {
        let mut all = vec![&self.ca_cert];
        all.extend(self.next.as_ref().map(|n| &n.ca_cert));
        all.extend(&self.also_trusted);
        all
    }

    /// Where a CA rotation stands in this (node) credential.
    pub fn rotation(&self) -> Rotation {
        match (&self.next, self.also_trusted.is_empty()) {
            (Some(_), _) => Rotation::TrustNew,
            (None, false) => Rotation::PresentNew,
            (None, true) => Rotation::None,
        }
    }

    /// The next step of a CA rotation of this node credential ([`Rotation`]): `TrustNew`
    /// makes the new CA, `PresentNew` makes it this node's own (the old one still trusted),
    /// `None` drops the old one. Each step follows the one before only.
    pub fn rotated(&self, to: Rotation) -> Result<Self, TlsError> {
        if self.ca_key.is_none() {
            return Err(TlsError::NoCaKey);
        }
        let step = |from: Rotation| {
            if self.rotation() == from {
                Ok(())
            } else {
                Err(TlsError::Invalid(format!(
                    "the rotation step {} follows {} only; this credential is at {}",
                    to.name(),
                    from.name(),
                    self.rotation().name()
                )))
            }
        };
        let mut new = self.clone();
        match to {
            Rotation::TrustNew => {
                step(Rotation::None)?;
                let ca = Self::generate()?;
                new.next = Some(NextCa {
                    ca_cert: ca.ca_cert,
                    ca_key: ca.ca_key.expect("a new CA has its key"),
                });
            }
            Rotation::PresentNew => {
                step(Rotation::TrustNew)?;
                let next = new.next.take().expect("checked");
                new.also_trusted = vec![std::mem::replace(&mut new.ca_cert, next.ca_cert)];
                new.ca_key = Some(next.ca_key);
            }
            Rotation::None => {
                step(Rotation::PresentNew)?;
                new.also_trusted.clear();
            }
        }
        Ok(new)
    }

    /// A client's credential made here, with a key made here (an in-process client of this
    /// node's cluster, or a test): valid for `days`.
    pub fn for_client(&self, days_valid: u32) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let (issuer, _) = self.client_issuer()?;
        let cert = leaf_params(Kind::Client, now(), days(days_valid)).signed_by(&key, &issuer)?;
        let (signer, others) = self.client_cas();
        Ok(Self::client(signer, cert.pem(), key.serialize_pem()).trusting(others))
    }

    /// A client certificate for the key of `csr_pem` (PEM), valid for `days`. Only the key is
    /// taken from the request: names, usages and constraints are the CA's choice.
    pub fn sign_client_csr(&self, csr_pem: &str, days_valid: u32) -> Result<String, TlsError> {
        let (issuer, _) = self.client_issuer()?;
        let mut csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| TlsError::Invalid(format!("not a certificate signing request: {e}")))?;
        csr.params = leaf_params(Kind::Client, now(), days(days_valid));
        Ok(csr.signed_by(&issuer)?.pem())
    }

    /// A certificate of `kind` from this CA whose validity ended `ago` ago (tests of refusal).
    #[doc(hidden)]
    pub fn expired(&self, kind: Kind, ago: Duration) -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let start = now() - time::Duration::days(30);
        let end = time::Duration::days(30) - time::Duration::try_from(ago).unwrap_or_default();
        let cert = leaf_params(kind, start, end).signed_by(&key, &self.issuer()?)?;
        Ok(Self::client(
            self.ca_cert.clone(),
            cert.pem(),
            key.serialize_pem(),
        ))
    }

    fn roots(&self) -> Result<Arc<rustls::RootCertStore>, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in self.trusted() {
            roots.add(pem_cert(ca)?)?;
        }
        Ok(Arc::new(roots))
    }

    /// Who this process is on a connection: a node mints (and renews) its certificate, a
    /// client shows the one it was given.
    fn identity(&self) -> Result<Arc<Identity>, TlsError> {
        if self.ca_key.is_some() {
            let issuer = self.issuer()?;
            let current = mint_node(&issuer)?;
            return Ok(Arc::new(Identity::Node {
                issuer: Box::new(issuer),
                current: RwLock::new((current, Instant::now())),
            }));
        }
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Err(TlsError::NoIdentity);
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pem_der(key, "PRIVATE KEY")?));
        let signer = rustls::crypto::ring::sign::any_supported_type(&key)?;
        Ok(Arc::new(Identity::Fixed(Arc::new(CertifiedKey::new(
            vec![pem_cert(cert)?],
            signer,
        )))))
    }

    /// The server side of a node: TLS 1.3, a client certificate of a trusted CA required.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        Ok(self.server()?.config)
    }

    /// [`ClusterTls::server_config`] and the check of its client certificates (to look again
    /// at a connection's certificate when what is trusted changes).
    pub fn server(&self) -> Result<ServerTls, TlsError> {
        if self.ca_key.is_none() {
            return Err(TlsError::NoCaKey);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            self.roots()?,
            provider.clone(),
        )
        .build()
        .map_err(|e| TlsError::Invalid(e.to_string()))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_client_cert_verifier(verifier.clone())
            .with_cert_resolver(self.identity()?);
        config.alpn_protocols = vec![b"h2".to_vec()];
        // Resumed sessions skip the certificate exchange: reconnects after a peer's restart
        // or an idle drop cost one round trip and no signatures.
        config.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
        Ok(ServerTls {
            config: Arc::new(config),
            verifier,
        })
    }

    /// The calling side: trusts this CA only, for [`NODE_NAME`], and shows this process's
    /// certificate. One config per process, so resumption tickets are shared by all its
    /// connections.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(self.roots()?)
            .with_client_cert_resolver(self.identity()?);
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A node's server side: its config, and the check of a client's certificate it makes.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
}

impl ServerTls {
    /// Whether a caller showing `chain` (leaf first) would be let in now.
    pub fn accepts(&self, chain: &[CertificateDer<'static>]) -> bool {
        let Some((leaf, rest)) = chain.split_first() else {
            return false;
        };
        let now = rustls::pki_types::UnixTime::now();
        self.verifier.verify_client_cert(leaf, rest, now).is_ok()
    }
}

/// Where a CA rotation stands, the steps in their order (each safe to take node by node, the
/// cluster all at one step or the next).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// No rotation: one CA.
    None,
    /// Step 1: trust the new CA too (certificates still from the old one).
    TrustNew,
    /// Step 2: certificates from the new CA, the old one still trusted.
    PresentNew,
}

impl Rotation {
    /// The step's name, as the CLI takes it (`None` is the last step, `done`).
    pub fn name(self) -> &'static str {
        match self {
            Rotation::None => "done",
            Rotation::TrustNew => "trust-new",
            Rotation::PresentNew => "present-new",
        }
    }
}

/// A short name of a CA certificate (PEM): the first 8 bytes of the SHA-256 of its DER, hex.
pub fn fingerprint(ca_pem: &str) -> String {
    use sha2::Digest;
    match pem_der(ca_pem, "CERTIFICATE") {
        Ok(der) => hex::encode(&sha2::Sha256::digest(der)[..8]),
        Err(_) => "unreadable".into(),
    }
}

/// The kind a peer's (verified) certificate proves: by the name the CA put in it.
pub fn kind_of_certificate(der: &[u8]) -> Option<Kind> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    let mut kind = None;
    for name in &san.value.general_names {
        match name {
            x509_parser::extensions::GeneralName::DNSName(NODE_NAME) => return Some(Kind::Node),
            x509_parser::extensions::GeneralName::DNSName(CLIENT_NAME) => kind = Some(Kind::Client),
            _ => {}
        }
    }
    kind
}

fn pem_der(pem_text: &str, what: &str) -> Result<Vec<u8>, TlsError> {
    let block = pem::parse(pem_text).map_err(|e| TlsError::Invalid(format!("bad PEM: {e}")))?;
    if !block.tag().ends_with(what) {
        return Err(TlsError::Invalid(format!(
            "PEM holds {}, not {what}",
            block.tag()
        )));
    }
    Ok(block.into_contents())
}

fn pem_cert(pem_text: &str) -> Result<CertificateDer<'static>, TlsError> {
    Ok(CertificateDer::from(pem_der(pem_text, "CERTIFICATE")?))
}

/// A node certificate and its key, new.
fn mint_node(issuer: &Issuer<'static, KeyPair>) -> Result<Arc<CertifiedKey>, TlsError> {
    let key = KeyPair::generate()?;
    let lifetime = time::Duration::try_from(NODE_CERT_LIFETIME).expect("fits");
    let cert = leaf_params(Kind::Node, now(), lifetime).signed_by(&key, issuer)?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signer = rustls::crypto::ring::sign::any_supported_type(&der)?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}

/// The certificate this process shows, serving or calling.
enum Identity {
    /// A node's, minted from the CA key and renewed after [`NODE_CERT_RENEW`].
    Node {
        issuer: Box<Issuer<'static, KeyPair>>,
        current: RwLock<(Arc<CertifiedKey>, Instant)>,
    },
    /// A client's, from its credential.
    Fixed(Arc<CertifiedKey>),
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Node { .. } => f.write_str("Identity::Node"),
            Identity::Fixed(_) => f.write_str("Identity::Fixed"),
        }
    }
}

impl Identity {
    fn current(&self) -> Arc<CertifiedKey> {
        match self {
            Identity::Fixed(key) => key.clone(),
            Identity::Node { issuer, current } => {
                let (key, made) = current.read().expect("identity lock").clone();
                if made.elapsed() < NODE_CERT_RENEW {
                    return key;
                }
                match mint_node(issuer) {
                    Ok(new) => {
                        *current.write().expect("identity lock") = (new.clone(), Instant::now());
                        new
                    }
                    Err(e) => {
                        // The current one stays valid for days yet; try again next time.
                        tracing::warn!(error = %e, "cannot renew this node's RPC certificate");
                        key
                    }
                }
            }
        }
    }
}

impl rustls::server::ResolvesServerCert for Identity {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl rustls::client::ResolvesClientCert for Identity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf_der(tls: &ClusterTls) -> Vec<u8> {
        pem_der(tls.cert.as_deref().unwrap(), "CERTIFICATE").unwrap()
    }

    #[test]
    fn certificates_name_their_kind_and_need_the_ca_key() {
        let ca = ClusterTls::generate().unwrap();
        assert!(ca.ca_cert.starts_with("-----BEGIN CERTIFICATE-----"));
        let node = mint_node(&ca.issuer().unwrap()).unwrap();
        assert_eq!(kind_of_certificate(&node.cert[0]), Some(Kind::Node));
        let client = ca.for_client(1).unwrap();
        assert_eq!(kind_of_certificate(&leaf_der(&client)), Some(Kind::Client));
        assert!(matches!(client.issuer(), Err(TlsError::NoCaKey)));
        assert!(matches!(client.server_config(), Err(TlsError::NoCaKey)));
        assert!(!format!("{ca:?}{client:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_csr_gets_a_client_certificate_whatever_names_it_asks_for() {
        let ca = ClusterTls::generate().unwrap();
        // A CSR asking for the node name gets a client certificate all the same.
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec![NODE_NAME.to_string()]).unwrap();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let csr = p.serialize_request(&key).unwrap().pem().unwrap();
        let cert = ca.sign_client_csr(&csr, 10).unwrap();
        let der = pem_der(&cert, "CERTIFICATE").unwrap();
        assert_eq!(kind_of_certificate(&der), Some(Kind::Client));
        assert!(ca.sign_client_csr("not a csr", 10).is_err());
        let (csr, key) = client_csr().unwrap();
        let cert = ca.sign_client_csr(&csr, 10).unwrap();
        let client = ClusterTls::client(ca.ca_cert.clone(), cert, key);
        client.client_config().unwrap();
    }
}
