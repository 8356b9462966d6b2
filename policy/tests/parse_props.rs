//! Property tests: the parser never panics on arbitrary input, and no document parses into
//! a policy that allows a request without an applicable `Allow` statement.

use proptest::prelude::*;
use saker_policy::{evaluate, Decision, Effect, Policy, Principal, Request, Resource, Sources};
use serde_json::{json, Map, Value};

const WORDS: &[&str] = &[
    "*",
    "Allow",
    "Deny",
    "allow",
    "s3:GetObject",
    "s3:Get*",
    "s3:*",
    "s3:PutObject",
    "GetObject",
    "arn:aws:s3:::b",
    "arn:aws:s3:::b/*",
    "arn:aws:s3:::*",
    "arn:aws:s3:::b/${aws:username}/*",
    "bucket/*",
    "AKID",
    "arn:aws:iam::1:root",
    "arn:aws:iam::1:user/AKID",
    "2012-10-17",
    "2008-10-17",
    "aws:SourceIp",
    "10.0.0.0/8",
    "s3:prefix",
    "home/*",
    "true",
    "false",
    "",
];
const FIELDS: &[&str] = &[
    "Version",
    "Id",
    "Statement",
    "Sid",
    "Effect",
    "Principal",
    "NotPrincipal",
    "Action",
    "NotAction",
    "Resource",
    "NotResource",
    "Condition",
    "AWS",
    "CanonicalUser",
    "StringEquals",
    "StringLike",
    "IpAddress",
    "NotIpAddress",
    "Bool",
    "Null",
    "ForAnyValue:StringLike",
    "StringNotEqualsIfExists",
    "NumericLessThan",
    "aws:SourceIp",
    "s3:prefix",
    "aws:SecureTransport",
];

fn word() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(WORDS).prop_map(|w| json!(w)),
        any::<i32>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(|b| json!(b)),
        Just(Value::Null),
    ]
}

fn json_ish() -> impl Strategy<Value = Value> {
    word().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

const ACTIONS: &[&str] = &[
    "*",
    "s3:GetObject",
    "s3:Get*",
    "s3:*",
    "s3:PutObject",
    "s3:ListBucket",
    "GetObject",
];
const RESOURCES: &[&str] = &[
    "*",
    "arn:aws:s3:::b",
    "arn:aws:s3:::b/*",
    "arn:aws:s3:::*",
    "arn:aws:s3:::b/home/${aws:username}/*",
    "bucket/*",
];
const PRINCIPALS: &[&str] = &[
    "*",
    "AKID",
    "arn:aws:iam::1:root",
    "arn:aws:iam::1:user/OTHER",
    "arn:aws:s3:::b",
];

/// A plausible element value: a word of `pool`, a list of them, or anything.
fn element(pool: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let words = move || prop::sample::select(pool).prop_map(|w| json!(w));
    prop_oneof![
        5 => words(),
        2 => prop::collection::vec(words(), 1..3).prop_map(Value::Array),
        1 => json_ish(),
    ]
}

fn principal() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => Just(json!("*")),
        4 => element(PRINCIPALS).prop_map(|v| json!({"AWS": v})),
        1 => element(PRINCIPALS),
    ]
}

/// Mostly well-formed statements, with every field optional and some values wrong.
fn statement() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["Allow", "Deny", "Allow", "Deny", "allow"][..]),
        prop::option::weighted(
            0.9,
            prop::sample::select(&["Principal", "NotPrincipal"][..]),
        ),
        prop::sample::select(&["Action", "Action", "NotAction"][..]),
        prop::sample::select(&["Resource", "Resource", "NotResource"][..]),
        (principal(), element(ACTIONS), element(RESOURCES)),
        prop::option::weighted(0.3, json_ish()),
    )
        .prop_map(|(effect, p, a, r, (pv, av, rv), cv)| {
            let mut m = Map::new();
            m.insert("Effect".into(), json!(effect));
            if let Some(p) = p {
                m.insert(p.into(), pv);
            }
            m.insert(a.into(), av);
            m.insert(r.into(), rv);
            if let Some(cv) = cv {
                m.insert("Condition".into(), cv);
            }
            Value::Object(m)
        })
}

fn policy_doc() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["2012-10-17", "2008-10-17"][..]),
        prop::collection::vec(statement(), 1..4),
    )
        .prop_map(|(v, s)| json!({"Version": v, "Statement": s}))
}

fn requests() -> Vec<Request> {
    let mut out = Vec::new();
    for who in [
        Principal::Anonymous,
        Principal::key("AKID"),
        Principal::key("OTHER"),
    ] {
        for (action, res) in [
            ("s3:GetObject", Resource::object("b", "home/AKID/x")),
            ("s3:PutObject", Resource::object("b", "k")),
            ("s3:ListBucket", Resource::Bucket("b".into())),
            ("s3:ListAllMyBuckets", Resource::Service),
        ] {
            let r = Request::new(who.clone(), action, res)
                .with("s3:prefix", "home/x")
                .with_source_ip("10.1.2.3".parse().unwrap())
                .with_secure_transport(true);
            out.push(r);
        }
    }
    out
}

/// Every Allow is backed by an applicable Allow statement; a document without the word
/// `Allow` has no Allow statement and allows nothing.
fn check_sound(text: &str) {
    let reqs = requests();
    for parsed in [Policy::parse_bucket(text), Policy::parse_identity(text)] {
        let Ok(p) = parsed else { continue };
        assert_eq!(p.text(), text);
        let has_allow = p.statements().iter().any(|s| s.effect == Effect::Allow);
        if !text.contains("\"Allow\"") {
            assert!(!has_allow, "{text}");
        }
        for r in &reqs {
            let src = if p.kind() == saker_policy::PolicyKind::Bucket {
                Sources {
                    bucket_policy: Some(&p),
                    ..Default::default()
                }
            } else {
                Sources {
                    identity: Some(&p),
                    ..Default::default()
                }
            };
            if evaluate(r, &src) == Decision::Allow {
                let backed = p
                    .statements()
                    .iter()
                    .any(|s| s.effect == Effect::Allow && s.applies(r, p.variables_enabled()));
                assert!(backed, "{text} allowed {r:?}");
                assert!(has_allow);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        let b = Policy::parse_bucket(&text);
        let i = Policy::parse_identity(&text);
        prop_assert!(b.is_err() && i.is_err(), "{text:?} parsed");
    }

    #[test]
    fn json_ish_strings_never_panic(text in r#"[{}\[\]":,A-Za-z0-9*$ /\-]{0,200}"#) {
        check_sound(&text);
    }

    #[test]
    fn random_documents_are_sound(v in json_ish()) {
        check_sound(&v.to_string());
    }

    #[test]
    fn policy_shaped_documents_are_sound(v in policy_doc(), cut in 0usize..400) {
        let text = v.to_string();
        check_sound(&text);
        // A truncated document never parses.
        let cut = cut.min(text.len().saturating_sub(1));
        if text.is_char_boundary(cut) {
            prop_assert!(Policy::parse_bucket(&text[..cut]).is_err());
        }
    }
}

#[test]
fn generated_documents_often_parse_and_sometimes_allow() {
    // The soundness property is only worth something if generated documents parse and
    // allow requests: count them over a deterministic run.
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = policy_doc();
    let (mut parsed, mut allowing) = (0, 0);
    for _ in 0..512 {
        let text = strategy
            .new_tree(&mut runner)
            .unwrap()
            .current()
            .to_string();
        if let Ok(p) = Policy::parse_bucket(&text) {
            parsed += 1;
            let src = Sources {
                bucket_policy: Some(&p),
                ..Default::default()
            };
            if requests()
                .iter()
                .any(|r| evaluate(r, &src) == Decision::Allow)
            {
                allowing += 1;
            }
        }
    }
    assert!(
        parsed >= 20 && allowing >= 3,
        "parsed {parsed}, allowing {allowing}"
    );
}
