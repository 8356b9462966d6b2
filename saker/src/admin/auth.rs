//! Signing of admin API requests with the root key: HMAC-SHA256 over method, the host:port the
//! request is addressed to, path, a timestamp, a random nonce and the body's SHA-256. The
//! secret never travels; a signature is valid for five minutes, at the node it was made for,
//! once ([`Nonces`] remembers what each node has seen for that long), so a captured request
//! cannot be replayed, here or at another node.

use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub const HEADER_KEY: &str = "x-saker-access-key";
pub const HEADER_DATE: &str = "x-saker-date";
pub const HEADER_NONCE: &str = "x-saker-nonce";
pub const HEADER_SIGNATURE: &str = "x-saker-signature";
const MAX_SKEW_SECS: i64 = 300;

pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// What a signature covers.
pub struct Signed<'a> {
    pub method: &'a str,
    /// The `Host` the request is addressed to (`host:port`).
    pub host: &'a str,
    pub path: &'a str,
    pub date: i64,
    pub nonce: &'a str,
    pub body: &'a [u8],
}

impl Signed<'_> {
    fn mac(&self, secret: &str) -> Hmac<Sha256> {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
        mac.update(
            format!(
                "{}\n{}\n{}\n{}\n{}\n{}",
                self.method,
                self.host,
                self.path,
                self.date,
                self.nonce,
                hex::encode(Sha256::digest(self.body))
            )
            .as_bytes(),
        );
        mac
    }

    pub fn sign(&self, secret: &str) -> String {
        hex::encode(self.mac(secret).finalize().into_bytes())
    }

    /// Checks a signature in constant time, and the timestamp's freshness.
    pub fn verify(&self, secret: &str, signature: &str) -> bool {
        if (now_secs() - self.date).abs() > MAX_SKEW_SECS || self.nonce.len() < 16 {
            return false;
        }
        let Ok(sig) = hex::decode(signature) else {
            return false;
        };
        self.mac(secret).verify_slice(&sig).is_ok()
    }
}

/// A fresh random nonce.
pub fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// The nonces of the signed requests a node took, for as long as their signatures are valid.
#[derive(Default)]
pub struct Nonces(Mutex<HashMap<String, i64>>);

impl Nonces {
    /// Takes `nonce` (of a request dated `date`) once: false if it was seen before.
    pub fn first_use(&self, nonce: &str, date: i64) -> bool {
        let mut seen = self.0.lock().expect("nonce lock");
        let now = now_secs();
        seen.retain(|_, d| (now - *d).abs() <= MAX_SKEW_SECS);
        seen.insert(nonce.to_string(), date).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(method: &'a str, host: &'a str, body: &'a [u8], date: i64) -> Signed<'a> {
        Signed {
            method,
            host,
            path: "/admin/keys",
            date,
            nonce: "00112233445566778899aabbccddeeff",
            body,
        }
    }

    #[test]
    fn signature_binds_every_field() {
        let now = now_secs();
        let sig = req("POST", "127.0.0.1:9901", b"{}", now).sign("s3cret");
        assert!(req("POST", "127.0.0.1:9901", b"{}", now).verify("s3cret", &sig));
        assert!(!req("POST", "127.0.0.1:9901", b"{}", now).verify("other", &sig));
        assert!(!req("GET", "127.0.0.1:9901", b"{}", now).verify("s3cret", &sig));
        assert!(!req("POST", "127.0.0.1:9911", b"{}", now).verify("s3cret", &sig));
        assert!(!req("POST", "127.0.0.1:9901", b"{ }", now).verify("s3cret", &sig));
        let other_nonce = Signed {
            nonce: "ffeeddccbbaa99887766554433221100",
            ..req("POST", "127.0.0.1:9901", b"{}", now)
        };
        assert!(!other_nonce.verify("s3cret", &sig));
        let old = now - 3600;
        let old_sig = req("POST", "127.0.0.1:9901", b"{}", old).sign("s3cret");
        assert!(!req("POST", "127.0.0.1:9901", b"{}", old).verify("s3cret", &old_sig));
    }

    #[test]
    fn a_nonce_is_taken_once() {
        let nonces = Nonces::default();
        let now = now_secs();
        assert!(nonces.first_use("a1", now));
        assert!(!nonces.first_use("a1", now));
        assert!(nonces.first_use("b2", now));
        // Entries past the window are forgotten (their signatures are refused by date).
        assert!(nonces.first_use("old", now - 1000));
        assert!(nonces.first_use("c3", now));
        assert!(nonces.first_use("old", now - 1000));
    }
}
