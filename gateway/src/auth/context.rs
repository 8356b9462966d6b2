//! The condition context of one request: what a policy condition may read, filled in only
//! for the keys the policies of a decision read ([`Wanted`]).

use s3s::S3Request;
use saker_policy::{Policy, Request};

use crate::http::path::query_pairs;
use crate::Peer;

/// The condition keys of one request that do not depend on the action.
pub struct Context<'a> {
    pub peer: Option<Peer>,
    pub query: Option<&'a str>,
    pub headers: &'a http::HeaderMap,
    /// The tags of the object the request names, where a policy reads
    /// `s3:ExistingObjectTag/<key>` (looked up by [`Access::authorize`]).
    pub existing_tags: Option<&'a [(String, String)]>,
    /// The ACL of the object the request names, where policies alone would refuse an action
    /// an object ACL can grant (looked up by [`Access::authorize`]).
    pub object_acl: Option<&'a saker_policy::Acl>,
}

/// The condition keys the policies of one decision read: only those are filled in (most
/// requests need two or none; building all of them was a tenth of a small GET's cost).
pub(super) struct Wanted<'a> {
    policies: [Option<&'a Policy>; 2],
    /// A policy substitutes variables, which may read any key.
    all: bool,
}

impl<'a> Wanted<'a> {
    pub(super) fn new(policies: [Option<&'a Policy>; 2]) -> Self {
        let all = policies.iter().flatten().any(|p| p.uses_variables());
        Wanted { policies, all }
    }

    /// Whether condition key `key` (lowercase) is read.
    pub(super) fn has(&self, key: &str) -> bool {
        self.all
            || self
                .policies
                .iter()
                .flatten()
                .any(|p| p.condition_keys().any(|k| k == key))
    }

    pub(super) fn any(&self, keys: &[&str]) -> bool {
        keys.iter().any(|k| self.has(k))
    }

    /// Whether a key starting with `prefix` (lowercase) is read.
    pub(super) fn has_prefix(&self, prefix: &str) -> bool {
        self.all
            || self
                .policies
                .iter()
                .flatten()
                .any(|p| p.condition_keys().any(|k| k.starts_with(prefix)))
    }
}

/// Condition keys read from a request header as it is: (lowercase key, header).
const HEADER_KEYS: [(&str, &str); 13] = [
    ("s3:x-amz-acl", "x-amz-acl"),
    (
        "s3:x-amz-server-side-encryption",
        "x-amz-server-side-encryption",
    ),
    (
        "s3:x-amz-server-side-encryption-customer-algorithm",
        "x-amz-server-side-encryption-customer-algorithm",
    ),
    (
        "s3:x-amz-server-side-encryption-aws-kms-key-id",
        "x-amz-server-side-encryption-aws-kms-key-id",
    ),
    ("s3:x-amz-content-sha256", "x-amz-content-sha256"),
    ("s3:x-amz-grant-full-control", "x-amz-grant-full-control"),
    ("s3:x-amz-grant-read", "x-amz-grant-read"),
    ("s3:x-amz-grant-write", "x-amz-grant-write"),
    ("s3:x-amz-grant-read-acp", "x-amz-grant-read-acp"),
    ("s3:x-amz-grant-write-acp", "x-amz-grant-write-acp"),
    ("s3:x-amz-metadata-directive", "x-amz-metadata-directive"),
    ("aws:referer", "referer"),
    ("aws:useragent", "user-agent"),
];

pub(super) fn fill_context(req: &mut Request, cx: &Context<'_>, wanted: &Wanted<'_>) {
    if let Some(peer) = cx.peer {
        if wanted.has("aws:sourceip") {
            req.set("aws:SourceIp", [peer.addr.ip().to_string()]);
        }
        if wanted.has("aws:securetransport") {
            req.set("aws:SecureTransport", [peer.secure.to_string()]);
        }
    }
    let header = |n: &str| cx.headers.get(n).and_then(|v| v.to_str().ok());
    for (key, h) in HEADER_KEYS {
        if wanted.has(key) {
            if let Some(v) = header(h) {
                req.set(key, [v]);
            }
        }
    }
    if wanted.has("s3:x-amz-copy-source") {
        // `bucket/key` as the header names it (percent-decoded, without a leading `/` or a
        // `?versionId=`).
        if let Some(v) = header("x-amz-copy-source") {
            let v = v.split_once("?versionId=").map_or(v, |(p, _)| p);
            let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy();
            req.set("s3:x-amz-copy-source", [v.trim_start_matches('/')]);
        }
    }
    if let Some(tags) = cx.existing_tags {
        for (k, v) in tags {
            req.set(&format!("s3:ExistingObjectTag/{k}"), [v.as_str()]);
        }
    }
    if wanted.has_prefix("s3:requestobjecttag/") {
        if let Some(tags) = header("x-amz-tagging") {
            for (k, v) in query_pairs(tags) {
                req.set(&format!("s3:RequestObjectTag/{k}"), [v]);
            }
        }
    }
    let from_query = ["s3:prefix", "s3:delimiter", "s3:max-keys", "s3:authtype"];
    if !wanted.any(&from_query) && !wanted.has("s3:signatureversion") {
        return;
    }
    let mut presigned = false;
    for (k, v) in cx.query.map(query_pairs).into_iter().flatten() {
        match k.as_str() {
            "prefix" => {
                req.set("s3:prefix", [v]);
            }
            "delimiter" => {
                req.set("s3:delimiter", [v]);
            }
            "max-keys" => {
                req.set("s3:max-keys", [v]);
            }
            "X-Amz-Signature" => presigned = true,
            _ => {}
        }
    }
    req.set("s3:signatureversion", ["AWS4-HMAC-SHA256"]);
    req.set(
        "s3:authType",
        [if presigned {
            "REST-QUERY-STRING"
        } else {
            "REST-HEADER"
        }],
    );
}

/// The access key (`None`: anonymous) and condition context of a request.
pub fn parts<T>(req: &S3Request<T>) -> (Option<&str>, Context<'_>) {
    let cx = Context {
        peer: peer_of(&req.extensions),
        query: req.uri.query(),
        headers: &req.headers,
        existing_tags: None,
        object_acl: None,
    };
    (req.credentials.as_ref().map(|c| c.access_key.as_str()), cx)
}

pub fn peer_of(ext: &http::Extensions) -> Option<Peer> {
    ext.get::<Peer>().copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use saker_policy::{Principal, Resource};

    #[test]
    fn context_keys_reach_the_conditions() {
        let headers = http::HeaderMap::new();
        let cx = Context {
            peer: Some(Peer {
                addr: "10.1.2.3:5555".parse().unwrap(),
                secure: true,
            }),
            query: Some("prefix=home%2Fbob%2F"),
            headers: &headers,
            existing_tags: None,
            object_acl: None,
        };
        let mut req = Request::new(
            Principal::key("AK"),
            "s3:ListBucket",
            Resource::Bucket("b".into()),
        );
        let everything = Policy::parse_identity(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*",
                "Resource":"arn:aws:s3:::${aws:username}"}]}"#,
        )
        .unwrap();
        fill_context(&mut req, &cx, &Wanted::new([Some(&everything), None]));
        assert_eq!(req.get("aws:SourceIp"), Some(&["10.1.2.3".to_string()][..]));
        assert_eq!(
            req.get("aws:securetransport"),
            Some(&["true".to_string()][..])
        );
        assert_eq!(req.get("s3:prefix"), Some(&["home/bob/".to_string()][..]));
        assert_eq!(req.get("aws:username"), Some(&["AK".to_string()][..]));
    }

    #[test]
    fn only_the_keys_a_policy_reads_are_filled() {
        let headers = http::HeaderMap::new();
        let cx = Context {
            peer: Some(Peer {
                addr: "10.1.2.3:5555".parse().unwrap(),
                secure: false,
            }),
            query: Some("prefix=a"),
            headers: &headers,
            existing_tags: None,
            object_acl: None,
        };
        let p = Policy::parse_bucket(
            r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"*","Resource":"*",
                "Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}"#,
        )
        .unwrap();
        let mut req = Request::new(Principal::key("AK"), "s3:ListBucket", Resource::Service);
        fill_context(&mut req, &cx, &Wanted::new([None, Some(&p)]));
        assert_eq!(req.get("aws:SourceIp"), Some(&["10.1.2.3".to_string()][..]));
        assert_eq!(req.get("s3:prefix"), None);
        assert_eq!(req.get("aws:SecureTransport"), None);
    }
}
