//! Bucket CORS: the configuration round trip, preflight `OPTIONS` answered from it, and the
//! `Access-Control-*` headers of responses to cross-origin requests (errors included).

mod common;

use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::types::{CorsConfiguration, CorsRule};
use common::*;

fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> CorsRule {
    let v = |x: &[&str]| Some(x.iter().map(|s| s.to_string()).collect());
    CorsRule::builder()
        .set_allowed_origins(v(origins))
        .set_allowed_methods(v(methods))
        .set_allowed_headers(v(headers))
        .expose_headers("x-amz-meta-a")
        .max_age_seconds(600)
        .build()
        .unwrap()
}

fn allow_origin(r: &reqwest::Response) -> Option<String> {
    r.headers()
        .get("access-control-allow-origin")
        .map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test]
async fn cors_rules_answer_preflights_and_decorate_responses() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "cors").await;
    let http = reqwest::Client::new();
    let bucket_url = format!("{}/{b}", srv.endpoint);
    let preflight = |origin: Option<&str>, method: Option<&str>, headers: Option<&str>| {
        let mut r = http.request(reqwest::Method::OPTIONS, format!("{bucket_url}/k"));
        for (name, v) in [
            ("origin", origin),
            ("access-control-request-method", method),
            ("access-control-request-headers", headers),
        ] {
            if let Some(v) = v {
                r = r.header(name, v);
            }
        }
        r.send()
    };

    assert_fails(
        c.get_bucket_cors().bucket(&b).send().await,
        404,
        "NoSuchCORSConfiguration",
    );
    let r = preflight(Some("https://app.example"), Some("GET"), None)
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        403,
        "no CORS configuration: the preflight is refused"
    );

    let config = CorsConfiguration::builder()
        .cors_rules(rule(&["https://*.example"], &["GET", "PUT"], &["x-amz-*"]))
        .cors_rules(rule(&["*"], &["HEAD"], &[]))
        .build()
        .unwrap();
    c.put_bucket_cors()
        .bucket(&b)
        .cors_configuration(config)
        .send()
        .await
        .expect("put bucket cors");
    let got = c.get_bucket_cors().bucket(&b).send().await.unwrap();
    let rules = got.cors_rules();
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].allowed_origins(), ["https://*.example"]);
    assert_eq!(rules[0].allowed_methods(), ["GET", "PUT"]);
    assert_eq!(rules[0].max_age_seconds(), Some(600));

    // Preflights.
    let r = preflight(
        Some("https://app.example"),
        Some("PUT"),
        Some("X-Amz-Meta-A"),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(allow_origin(&r).as_deref(), Some("https://app.example"));
    let h = r.headers();
    assert_eq!(h["access-control-allow-methods"], "GET, PUT");
    assert_eq!(h["access-control-allow-headers"], "X-Amz-Meta-A");
    assert_eq!(h["access-control-max-age"], "600");
    let refused = [
        (Some("https://app.other"), Some("GET"), None),
        (Some("https://app.example"), Some("DELETE"), None),
        (
            Some("https://app.example"),
            Some("GET"),
            Some("content-md5"),
        ),
    ];
    for (o, m, hs) in refused {
        let r = preflight(o, m, hs).await.unwrap();
        assert_eq!(r.status(), 403, "{o:?} {m:?} {hs:?}");
        assert_eq!(allow_origin(&r), None);
    }
    let r = preflight(None, Some("GET"), None).await.unwrap();
    assert_eq!(r.status(), 400, "a preflight without Origin");
    let r = preflight(Some("https://x.example"), None, None)
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "a preflight without a method");
    let r = preflight(Some("https://elsewhere"), Some("HEAD"), None)
        .await
        .unwrap();
    assert_eq!(allow_origin(&r).as_deref(), Some("*"));

    // A signed (presigned) GET from an allowed origin gets the headers; another origin not.
    put(&c, &b, "k", b"hello").await;
    let url = c
        .get_object()
        .bucket(&b)
        .key("k")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(60)).unwrap())
        .await
        .unwrap()
        .uri()
        .to_string();
    let r = http
        .get(&url)
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(allow_origin(&r).as_deref(), Some("https://app.example"));
    assert_eq!(r.headers()["access-control-expose-headers"], "x-amz-meta-a");
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"hello");
    let r = http
        .get(&url)
        .header("origin", "https://app.other")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(allow_origin(&r), None);
    // An unsigned request is refused, with the headers a browser needs to read the error.
    let r = http
        .get(format!("{bucket_url}/k"))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(allow_origin(&r).as_deref(), Some("https://app.example"));

    // Bad configurations are refused and change nothing; deleting removes it.
    let bad = CorsConfiguration::builder()
        .cors_rules(rule(&["*"], &["PATCH"], &[]))
        .build()
        .unwrap();
    assert_fails(
        c.put_bucket_cors()
            .bucket(&b)
            .cors_configuration(bad)
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    assert_eq!(
        c.get_bucket_cors()
            .bucket(&b)
            .send()
            .await
            .unwrap()
            .cors_rules()
            .len(),
        2
    );
    c.delete_bucket_cors().bucket(&b).send().await.unwrap();
    assert_fails(
        c.get_bucket_cors().bucket(&b).send().await,
        404,
        "NoSuchCORSConfiguration",
    );
    let r = preflight(Some("https://app.example"), Some("GET"), None)
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}
