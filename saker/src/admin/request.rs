//! Signed admin requests from the `saker admin` commands to a server's admin API.

use anyhow::{bail, Context};
use axum::http::Method;

use crate::admin::auth::{self, HEADER_DATE, HEADER_KEY, HEADER_NONCE, HEADER_SIGNATURE};

fn root_from_env() -> anyhow::Result<(String, String)> {
    let ak = std::env::var("SAKER_ACCESS_KEY")
        .context("set SAKER_ACCESS_KEY to the server's root access key")?;
    let sk = std::env::var("SAKER_SECRET_KEY")
        .context("set SAKER_SECRET_KEY to the server's root secret key")?;
    Ok((ak, sk))
}

/// The CA certificate `--ca-cert` names, trusted by admin requests besides the system's.
static CA_CERT: std::sync::OnceLock<reqwest::Certificate> = std::sync::OnceLock::new();

/// Trusts the CA certificate in PEM file `path` for admin requests.
pub fn trust(path: &std::path::Path) -> anyhow::Result<()> {
    let pem = std::fs::read(path)
        .with_context(|| format!("cannot read the CA certificate {}", path.display()))?;
    let cert = reqwest::Certificate::from_pem(&pem)
        .with_context(|| format!("{} is not a PEM certificate", path.display()))?;
    let _ = CA_CERT.set(cert);
    Ok(())
}

/// Sends a signed admin request; the response, if it succeeded.
pub(crate) async fn request(
    endpoint: &str,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<reqwest::Response> {
    let (ak, sk) = root_from_env()?;
    let url = format!("{}{}", endpoint.trim_end_matches('/'), path);
    let parsed =
        reqwest::Url::parse(&url).with_context(|| format!("bad admin endpoint {endpoint}"))?;
    // The Host header as the client sends it: host, and the port unless it is the default.
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => bail!("no host in the admin endpoint {endpoint}"),
    };
    let date = auth::now_secs();
    let nonce = auth::nonce();
    let sig = auth::Signed {
        method: method.as_str(),
        host: &host,
        path,
        date,
        nonce: &nonce,
        body: &body,
    }
    .sign(&sk);
    let mut client = reqwest::Client::builder();
    if let Some(ca) = CA_CERT.get() {
        client = client.add_root_certificate(ca.clone());
    }
    let resp = client
        .build()
        .context("cannot set up the HTTP client")?
        .request(method, parsed)
        .header(HEADER_KEY, ak)
        .header(HEADER_DATE, date.to_string())
        .header(HEADER_NONCE, nonce)
        .header(HEADER_SIGNATURE, sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach the admin endpoint {endpoint}"))?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        bail!("{}: {}", status, text.trim());
    }
    Ok(resp)
}

/// Sends a signed admin request; the response's text, if it succeeded.
pub(crate) async fn send(
    endpoint: &str,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<String> {
    let resp = request(endpoint, method, path, body).await?;
    Ok(resp.text().await.unwrap_or_default())
}
