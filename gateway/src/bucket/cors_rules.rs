//! A bucket's CORS rules as stored (a bucket setting, so [`crate::bucket::settings`] keeps
//! them parsed): parsed from a PutBucketCors configuration, checked as S3 checks them, and
//! matched against a request's origin, method and headers. Pure rules, no I/O; the S3 side is
//! [`crate::bucket::cors`].

use http::{HeaderMap, HeaderValue};
use s3s::dto::*;
use s3s::{s3_error, S3Result};
use serde::{Deserialize, Serialize};

/// One CORS rule as stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: Option<String>,
    pub origins: Vec<String>,
    pub methods: Vec<String>,
    pub headers: Vec<String>,
    pub expose: Vec<String>,
    pub max_age: Option<i32>,
}

/// S3's limit on the rules of one configuration.
const MAX_RULES: usize = 100;

const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];

pub fn rules_from(c: CORSConfiguration) -> S3Result<Vec<Rule>> {
    if c.cors_rules.is_empty() || c.cors_rules.len() > MAX_RULES {
        return Err(s3_error!(
            MalformedXML,
            "A CORS configuration has 1 to {MAX_RULES} rules"
        ));
    }
    c.cors_rules
        .into_iter()
        .map(|r| {
            if let Some(m) = r
                .allowed_methods
                .iter()
                .find(|m| !METHODS.contains(&m.as_str()))
            {
                return Err(s3_error!(
                    InvalidRequest,
                    "Found unsupported HTTP method in CORS config. Unsupported method is {m}"
                ));
            }
            let one_star = |v: &String| v.matches('*').count() <= 1;
            if !r.allowed_origins.iter().all(one_star) {
                return Err(s3_error!(
                    InvalidRequest,
                    "An AllowedOrigin can not have more than one wildcard"
                ));
            }
            let headers = r.allowed_headers.unwrap_or_default();
            if !headers.iter().all(one_star) {
                return Err(s3_error!(
                    InvalidRequest,
                    "An AllowedHeader can not have more than one wildcard"
                ));
            }
            Ok(Rule {
                id: r.id,
                origins: r.allowed_origins,
                methods: r.allowed_methods,
                headers,
                expose: r.expose_headers.unwrap_or_default(),
                max_age: r.max_age_seconds,
            })
        })
        .collect()
}

/// `pattern` with at most one `*` matching any run of characters.
fn wildcard(pattern: &str, value: &str, fold_case: bool) -> bool {
    let (p, v) = if fold_case {
        (pattern.to_ascii_lowercase(), value.to_ascii_lowercase())
    } else {
        (pattern.to_string(), value.to_string())
    };
    match p.split_once('*') {
        None => p == v,
        Some((head, tail)) => {
            v.len() >= head.len() + tail.len() && v.starts_with(head) && v.ends_with(tail)
        }
    }
}

/// The first rule that allows `origin` to use `method` with `headers`.
pub fn matching<'a>(
    rules: &'a [Rule],
    origin: &str,
    method: &str,
    headers: &[&str],
) -> Option<&'a Rule> {
    rules.iter().find(|r| {
        r.origins.iter().any(|o| wildcard(o, origin, false))
            && r.methods.iter().any(|m| m == method)
            && headers
                .iter()
                .all(|h| r.headers.iter().any(|p| wildcard(p, h, true)))
    })
}

/// The `Access-Control-*` headers a matching rule gives a response.
pub fn allow(rule: &Rule, origin: &str, out: &mut HeaderMap, preflight_headers: Option<&str>) {
    let any = rule.origins.iter().any(|o| o == "*");
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            out.insert(name, v);
        }
    };
    put(
        "access-control-allow-origin",
        if any { "*" } else { origin },
    );
    if !any {
        put("access-control-allow-credentials", "true");
    }
    put("access-control-allow-methods", &rule.methods.join(", "));
    if let Some(h) = preflight_headers.filter(|h| !h.is_empty()) {
        put("access-control-allow-headers", h);
    }
    if !rule.expose.is_empty() {
        put("access-control-expose-headers", &rule.expose.join(", "));
    }
    if let Some(age) = rule.max_age {
        put("access-control-max-age", &age.to_string());
    }
    put(
        "vary",
        "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> Rule {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        Rule {
            origins: v(origins),
            methods: v(methods),
            headers: v(headers),
            ..Default::default()
        }
    }

    #[test]
    fn origins_match_with_one_wildcard_methods_exactly_headers_without_case() {
        let rules = [
            rule(&["*suffix"], &["GET"], &[]),
            rule(&["start*end"], &["GET"], &[]),
            rule(&["prefix*"], &["GET"], &["x-amz-*"]),
            rule(&["*.put"], &["PUT"], &[]),
        ];
        let m = |o: &str, meth: &str| matching(&rules, o, meth, &[]).is_some();
        assert!(m("foo.suffix", "GET"));
        assert!(!m("foo.suffix.get", "GET"));
        assert!(m("startend", "GET") && m("start12end", "GET"));
        assert!(!m("0start12end", "GET"));
        assert!(m("prefix", "GET") && !m("bla.prefix", "GET"));
        assert!(!m("foo.put", "GET") && m("foo.put", "PUT"));
        assert!(!m("foo.suffix", "PUT"));
        assert!(matching(&rules, "prefix.x", "GET", &["X-Amz-Meta-A"]).is_some());
        assert!(matching(&rules, "foo.suffix", "GET", &["x-amz-meta-a"]).is_none());
        // "*" alone matches every origin; the overlapping "st*ts" needs four characters.
        assert!(wildcard("*", "anything", false));
        assert!(!wildcard("st*ts", "sts", false));
    }

    #[test]
    fn configurations_s3_refuses_are_refused() {
        let cfg = |methods: Vec<String>, origins: Vec<String>| CORSConfiguration {
            cors_rules: vec![CORSRule {
                allowed_methods: methods,
                allowed_origins: origins,
                ..Default::default()
            }],
        };
        assert!(rules_from(cfg(vec!["GET".into()], vec!["*".into()])).is_ok());
        assert!(rules_from(cfg(vec!["PATCH".into()], vec!["*".into()])).is_err());
        assert!(rules_from(cfg(vec!["GET".into()], vec!["*a*".into()])).is_err());
        assert!(rules_from(CORSConfiguration { cors_rules: vec![] }).is_err());
    }
}
