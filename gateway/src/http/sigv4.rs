//! SigV4's signature of a canonical request, for the code that signs or checks one itself
//! (s3s checks the requests the gateway serves): the scope-region rewrite and the benchmark
//! client.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The key `secret` signs with in the scope `date/region/service`.
fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> Vec<u8> {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date);
    let k_region = hmac(&k_date, region);
    let k_service = hmac(&k_region, service);
    hmac(&k_service, "aws4_request")
}

/// The signature (hex) by `secret` of the canonical request `canonical`, made at `amz_date`
/// (`YYYYMMDDTHHMMSSZ`) in the scope `date/region/service`.
pub fn signature(
    secret: &str,
    amz_date: &str,
    date: &str,
    region: &str,
    service: &str,
    canonical: &str,
) -> String {
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let hashed = hex::encode(Sha256::digest(canonical.as_bytes()));
    let to_sign = format!("AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashed}");
    let key = signing_key(secret, date, region, service);
    hex::encode(hmac(&key, &to_sign))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signing key of the SigV4 documentation's example, which it gives exactly.
    #[test]
    fn the_signing_key_of_awss_example_comes_out() {
        let key = signing_key(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "20120215",
            "us-east-1",
            "iam",
        );
        assert_eq!(
            hex::encode(key),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
        );
    }
}
