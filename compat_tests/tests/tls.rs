//! TLS on the S3 and admin listeners (`--tls-cert`/`--tls-key`): aws-sdk-s3 talks to the
//! server over https with a certificate from a test CA, the admin commands too (`--ca-cert`),
//! and a client that does not trust the CA, or speaks plain HTTP, gets nothing.

mod common;

use std::process::Command;

use common::certs::make_certificates;
use common::*;

#[tokio::test]
async fn s3_and_admin_serve_https_with_the_configured_certificate() {
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let ca = certs.path().join("ca.pem");
    // aws-sdk-s3's HTTPS client trusts what SSL_CERT_FILE names (this test process only).
    std::env::set_var("SSL_CERT_FILE", &ca);
    let srv = Server::start(
        Opts::default()
            .arg(
                "--tls-cert",
                certs.path().join("server.pem").to_str().unwrap(),
            )
            .arg(
                "--tls-key",
                certs.path().join("server.key").to_str().unwrap(),
            ),
    );
    assert!(srv.endpoint.starts_with("https://"), "{}", srv.endpoint);
    assert!(srv.admin.starts_with("https://"), "{}", srv.admin);

    // Signed S3 requests over TLS.
    let c = srv.client();
    let b = new_bucket(&c, "tls").await;
    let data = random_bytes(300_000);
    put(&c, &b, "big", &data).await;
    assert_eq!(get_bytes(&c, &b, "big").await, data);

    // A client that does not trust the CA is refused at the handshake; plain HTTP on the
    // TLS port gets no S3 answer.
    let untrusting = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .build()
        .unwrap();
    let err = untrusting
        .get(format!("{}/{b}/big", srv.endpoint))
        .send()
        .await
        .expect_err("an unknown issuer is refused");
    assert!(err.is_connect(), "{err:?}");
    let plain = srv.endpoint.replacen("https://", "http://", 1);
    let r = reqwest::get(format!("{plain}/{b}/big")).await;
    assert!(
        r.as_ref().map_or(true, |r| !r.status().is_success()),
        "plain HTTP on the TLS port: {r:?}"
    );
    let trusting = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap())
        .build()
        .unwrap();
    let health = trusting
        .get(format!("{}/health", srv.admin))
        .send()
        .await
        .expect("health over TLS");
    assert_eq!(health.status().as_u16(), 200);

    // The admin commands over https: with the CA trusted, and refused without it (with
    // only the system's roots: SSL_CERT_FILE, set above for the SDK, is not passed on).
    let admin = |args: &[&str]| {
        Command::new(saker_bin())
            .arg("admin")
            .args(args)
            .args(["--admin-endpoint", &srv.admin])
            .env("SAKER_ACCESS_KEY", ROOT_AK)
            .env("SAKER_SECRET_KEY", ROOT_SK)
            .env_remove("SSL_CERT_FILE")
            .output()
            .expect("run saker admin")
    };
    let listed = admin(&["key", "list", "--ca-cert", ca.to_str().unwrap()]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(String::from_utf8_lossy(&listed.stdout).contains(ROOT_AK));
    let refused = admin(&["key", "list"]);
    assert!(
        !refused.status.success(),
        "an untrusted admin certificate is refused"
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("cannot reach the admin endpoint"), "{err}");

    // aws:SecureTransport is true over TLS: a bucket policy denying insecure requests lets
    // a key's requests through (s3_policy.rs shows it denying them over plain HTTP).
    let made = admin(&[
        "key",
        "create",
        "--access-key",
        "AKTLSUSER",
        "--secret-key",
        "tls-user-secret",
        "--policy",
        "admin",
        "--ca-cert",
        ca.to_str().unwrap(),
    ]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    c.put_bucket_policy()
        .bucket(&b)
        .policy(insecure_denied(&b))
        .send()
        .await
        .unwrap();
    let user = srv.client_with("AKTLSUSER", "tls-user-secret");
    assert_eq!(get_bytes(&user, &b, "big").await, data);
}

#[test]
fn a_certificate_without_its_key_is_refused_at_start() {
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let data = tempfile::tempdir().unwrap();
    // The CA's key does not go with the server's certificate.
    let (cert, key) = (certs.path().join("server.pem"), certs.path().join("ca.key"));
    let err = server_refuses(
        data.path(),
        &[
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ],
    );
    assert!(err.contains("do not go together"), "{err}");
}
