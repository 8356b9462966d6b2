//! A minimal AWS Signature V4 signer for the benchmark client (header auth, unsigned payload).

#[derive(Clone)]
pub struct Signer {
    pub access_key: String,
    pub secret_key: String,
    pub region: String,
}

/// Percent-encodes one path segment or query component as SigV4 requires.
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Signer {
    /// Headers to add to a request: (name, value) pairs including Authorization.
    /// `path` must already be URI-encoded; `query` is the canonical (sorted, encoded) query.
    pub fn sign(
        &self,
        method: &str,
        host: &str,
        path: &str,
        query: &str,
        now: time::OffsetDateTime,
    ) -> Vec<(String, String)> {
        let amz_date = format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            now.year(),
            now.month() as u8,
            now.day(),
            now.hour(),
            now.minute(),
            now.second()
        );
        let date = &amz_date[..8];
        let payload = "UNSIGNED-PAYLOAD";
        let canonical = format!(
            "{method}\n{path}\n{query}\nhost:{host}\nx-amz-content-sha256:{payload}\nx-amz-date:{amz_date}\n\nhost;x-amz-content-sha256;x-amz-date\n{payload}"
        );
        let scope = format!("{date}/{}/s3/aws4_request", self.region);
        let signature = saker_gateway::http::sigv4::signature(
            &self.secret_key,
            &amz_date,
            date,
            &self.region,
            "s3",
            &canonical,
        );
        vec![
            ("x-amz-date".into(), amz_date.clone()),
            ("x-amz-content-sha256".into(), payload.into()),
            (
                "authorization".into(),
                format!(
                    "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={signature}",
                    self.access_key
                ),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_sigv4() {
        assert_eq!(uri_encode("a b/c~d", true), "a%20b/c~d");
        assert_eq!(uri_encode("a/b", false), "a%2Fb");
    }
}
