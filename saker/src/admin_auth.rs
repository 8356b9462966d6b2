//! Signing of admin API requests with the root key: HMAC-SHA256 over method, path, a timestamp
//! and the body's SHA-256. The secret never travels; a signature is valid for five minutes.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub const HEADER_KEY: &str = "x-saker-access-key";
pub const HEADER_DATE: &str = "x-saker-date";
pub const HEADER_SIGNATURE: &str = "x-saker-signature";
const MAX_SKEW_SECS: i64 = 300;

pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

fn mac(secret: &str, method: &str, path: &str, date: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(
        format!(
            "{method}\n{path}\n{date}\n{}",
            hex::encode(Sha256::digest(body))
        )
        .as_bytes(),
    );
    mac
}

pub fn sign(secret: &str, method: &str, path: &str, date: i64, body: &[u8]) -> String {
    hex::encode(
        mac(secret, method, path, date, body)
            .finalize()
            .into_bytes(),
    )
}

/// Checks a signature in constant time and the timestamp's freshness.
pub fn verify(
    secret: &str,
    method: &str,
    path: &str,
    date: i64,
    body: &[u8],
    signature: &str,
) -> bool {
    if (now_secs() - date).abs() > MAX_SKEW_SECS {
        return false;
    }
    let Ok(sig) = hex::decode(signature) else {
        return false;
    };
    mac(secret, method, path, date, body)
        .verify_slice(&sig)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_binds_every_field() {
        let now = now_secs();
        let sig = sign("s3cret", "POST", "/admin/keys", now, b"{}");
        assert!(verify("s3cret", "POST", "/admin/keys", now, b"{}", &sig));
        assert!(!verify("other", "POST", "/admin/keys", now, b"{}", &sig));
        assert!(!verify("s3cret", "GET", "/admin/keys", now, b"{}", &sig));
        assert!(!verify("s3cret", "POST", "/admin/keys", now, b"{ }", &sig));
        let old = now - 3600;
        assert!(!verify(
            "s3cret",
            "POST",
            "/admin/keys",
            old,
            b"{}",
            &sign("s3cret", "POST", "/admin/keys", old, b"{}")
        ));
    }
}
