//! TLS for the cluster RPC. A cluster made with `saker admin cluster-credential create FILE
//! --tls` has a CA of its own: its certificate is in every credential of the cluster, its key
//! in node credentials only. A node's RPC server mints a certificate for [`SERVER_NAME`],
//! signed by the CA, each time it starts (a new key, never written anywhere); a caller trusts
//! that CA alone and checks that name. So a process holding a client credential can read and
//! write over TLS but cannot pose as a node, and nobody on the network reads or changes the
//! calls. The HMAC tokens of [`crate::auth`] still authenticate every call.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use serde::{Deserialize, Serialize};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// The name every node's certificate is made for and every caller checks: the certificate
/// proves membership of the cluster, not a host name (nodes move between addresses).
pub const SERVER_NAME: &str = "saker-node";

const CA_NAME: &str = "saker cluster CA";

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cluster TLS: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("cluster TLS: a client credential holds no CA key, so it cannot serve RPC")]
    NoCaKey,
}

/// A cluster's CA, as a credential carries it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterTls {
    /// PEM.
    pub ca_cert: String,
    /// PEM; node credentials only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_key: Option<String>,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls")
            .field("ca_key", &self.ca_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The CA's parameters: the same each time, so that the CA key alone (with these) signs
/// certificates whose issuer is the stored CA certificate.
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

impl ClusterTls {
    /// A new CA (ECDSA P-256).
    pub fn generate() -> Result<Self, TlsError> {
        let key = KeyPair::generate()?;
        let cert = ca_params().self_signed(&key)?;
        Ok(Self {
            ca_cert: cert.pem(),
            ca_key: Some(key.serialize_pem()),
        })
    }

    /// What a client credential carries: the CA certificate alone.
    pub fn for_client(&self) -> Self {
        Self {
            ca_cert: self.ca_cert.clone(),
            ca_key: None,
        }
    }

    /// A new certificate and key (PEM) for [`SERVER_NAME`], signed by the CA.
    pub fn mint_server(&self) -> Result<(String, String), TlsError> {
        let ca_key = KeyPair::from_pem(self.ca_key.as_deref().ok_or(TlsError::NoCaKey)?)?;
        let issuer = Issuer::new(ca_params(), ca_key);
        let key = KeyPair::generate()?;
        let mut p = CertificateParams::new(vec![SERVER_NAME.to_string()])?;
        p.distinguished_name.push(DnType::CommonName, SERVER_NAME);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = p.signed_by(&key, &issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The server side: a freshly minted certificate.
    pub fn server_config(&self) -> Result<ServerTlsConfig, TlsError> {
        let (cert, key) = self.mint_server()?;
        Ok(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
    }

    /// The caller side: trust this CA only, for [`SERVER_NAME`].
    pub fn client_config(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.ca_cert))
            .domain_name(SERVER_NAME)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_certificate_needs_the_ca_key_and_is_for_the_node_name() {
        let ca = ClusterTls::generate().unwrap();
        assert!(ca.ca_cert.starts_with("-----BEGIN CERTIFICATE-----"));
        let (cert, key) = ca.mint_server().unwrap();
        assert!(cert.contains("BEGIN CERTIFICATE") && key.contains("PRIVATE KEY"));
        assert_ne!(ca.mint_server().unwrap().1, key, "a new key each time");
        let client = ca.for_client();
        assert_eq!(client.ca_cert, ca.ca_cert);
        assert!(matches!(client.mint_server(), Err(TlsError::NoCaKey)));
        assert!(!format!("{ca:?}").contains("PRIVATE"));
    }
}
