//! IAM policy documents (bucket policies and per-key identity policies): parsing and
//! validation of the JSON, and matching one statement against a request.
//!
//! Principals name access keys: `"*"` (everyone, anonymous included), `{"AWS": "*"}` (the
//! same), `{"AWS": "AKEXAMPLE"}` (a bare access key id),
//! `{"AWS": "arn:aws:iam::<any>:user/<path/>AKEXAMPLE"}` (the same key: the last path
//! segment), `{"AWS": "arn:aws:iam::<any>:root"}` (any signed request) and
//! `{"CanonicalUser": "AKEXAMPLE"}`. A key id also matches the request's canonical user id
//! ([`Request::with_canonical_user`]: the account's, for a key that is an account), so
//! `{"CanonicalUser": "<64 hex>"}` names an account as on AWS. `Service` and `Federated`
//! principals are accepted but never match.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::condition::Condition;
use crate::pattern::{match_with_vars, wildcard_match, wildcard_match_ignore_case};
use crate::{Error, Principal, Request};

/// The default size cap of a policy document (S3's for bucket policies).
pub const DEFAULT_MAX_SIZE: usize = 20 * 1024;
/// AWS's cap for IAM user policies, should a caller want it.
pub const IAM_MAX_SIZE: usize = 6 * 1024;

/// Where a policy is attached, which decides whether statements name principals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// Attached to a bucket: every statement has `Principal` or `NotPrincipal`.
    Bucket,
    /// Attached to an access key: no statement has a principal (it is the key).
    Identity,
}

/// How documents are parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// Largest document accepted, in bytes.
    pub max_size: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_size: DEFAULT_MAX_SIZE,
        }
    }
}

/// `Allow` or `Deny`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Allow,
    Deny,
}

/// One principal a statement names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrincipalEntry {
    /// `"*"`: every request, anonymous ones included.
    Everyone,
    /// `arn:aws:iam::<account>:root`: every signed request.
    AnyKey,
    /// One access key.
    Key(String),
    /// A service or federated principal: accepted, never matches.
    Other(String),
}

impl PrincipalEntry {
    /// Whether the entry names `p`, whose canonical user id is `canonical`.
    fn matches(&self, p: &Principal, canonical: Option<&str>) -> bool {
        match (self, p) {
            (PrincipalEntry::Everyone, _) => true,
            (PrincipalEntry::AnyKey, Principal::Key { .. }) => true,
            (PrincipalEntry::Key(k), Principal::Key { access_key, .. }) => {
                k == access_key || canonical == Some(k.as_str())
            }
            _ => false,
        }
    }
}

/// `Principal` (or, `negated`, `NotPrincipal`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principals {
    pub negated: bool,
    pub entries: Vec<PrincipalEntry>,
}

/// `Action`/`Resource` (or, `negated`, `NotAction`/`NotResource`): wildcard patterns.
/// Actions are stored lowercased (matched case-insensitively), resources as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patterns {
    pub negated: bool,
    pub patterns: Vec<String>,
}

/// One statement of a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub sid: Option<String>,
    pub effect: Effect,
    /// `None` in identity policies.
    pub principal: Option<Principals>,
    pub action: Patterns,
    pub resource: Patterns,
    pub condition: Condition,
}

impl Statement {
    /// Whether the statement's principal covers `p`. `NotPrincipal` never covers an
    /// anonymous request in an `Allow` statement: only `"*"` grants to anonymous users.
    pub fn principal_matches(&self, p: &Principal) -> bool {
        self.principal_covers(p, None)
    }

    /// [`Statement::principal_matches`] for a principal whose canonical user id is
    /// `canonical`.
    fn principal_covers(&self, p: &Principal, canonical: Option<&str>) -> bool {
        match &self.principal {
            None => true,
            Some(ps) if ps.negated => {
                let allow_anonymous = self.effect == Effect::Allow && p.is_anonymous();
                !allow_anonymous && !ps.entries.iter().any(|e| e.matches(p, canonical))
            }
            Some(ps) => ps.entries.iter().any(|e| e.matches(p, canonical)),
        }
    }

    /// Whether the statement's action covers `action` (any case).
    pub fn action_matches(&self, action: &str) -> bool {
        let hit = self
            .action
            .patterns
            .iter()
            .any(|p| wildcard_match_ignore_case(p, action));
        hit != self.action.negated
    }

    /// Whether the statement's resource covers the ARN `arn`; `vars`: substitute policy
    /// variables from `req`.
    pub fn resource_matches(&self, arn: &str, req: &Request, vars: bool) -> bool {
        let var = req.vars(vars);
        let hit = self
            .resource
            .patterns
            .iter()
            .any(|p| match_with_vars(p, arn, false, var));
        hit != self.resource.negated
    }

    /// Whether the statement applies to `req` (principal, action, resource and condition).
    pub fn applies(&self, req: &Request, vars: bool) -> bool {
        self.applies_to(req, &req.resource.arn(), vars)
    }

    /// [`Statement::applies`] with the request's resource ARN made once by the caller.
    pub fn applies_to(&self, req: &Request, arn: &str, vars: bool) -> bool {
        self.principal_covers(&req.principal, req.canonical_user())
            && self.action_matches(&req.action)
            && self.resource_matches(arn, req, vars)
            && self.condition.matches(req, vars)
    }
}

/// A parsed, validated policy document, with the text it was parsed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    text: String,
    kind: PolicyKind,
    version: Option<String>,
    id: Option<String>,
    statements: Vec<Statement>,
}

impl Policy {
    /// Parses a bucket policy (every statement names a principal), at most
    /// [`DEFAULT_MAX_SIZE`] bytes.
    pub fn parse_bucket(json: &str) -> Result<Policy, Error> {
        Policy::parse(json, PolicyKind::Bucket, ParseOptions::default())
    }

    /// Parses an identity (per-key) policy (no statement names a principal), at most
    /// [`DEFAULT_MAX_SIZE`] bytes.
    pub fn parse_identity(json: &str) -> Result<Policy, Error> {
        Policy::parse(json, PolicyKind::Identity, ParseOptions::default())
    }

    /// Parses and validates a policy of `kind`.
    pub fn parse(json: &str, kind: PolicyKind, options: ParseOptions) -> Result<Policy, Error> {
        if json.len() > options.max_size {
            return Err(Error::TooLarge {
                size: json.len(),
                max: options.max_size,
            });
        }
        let doc: Value = serde_json::from_str(json).map_err(|e| Error::Json(e.to_string()))?;
        let doc = object(&doc, "policy")?;
        check_fields(doc, "policy", &["Version", "Id", "Statement"])?;
        let version = opt_string(doc, "Version")?;
        if let Some(v) = &version {
            if v != "2012-10-17" && v != "2008-10-17" {
                return Err(Error::UnsupportedVersion(v.clone()));
            }
        }
        let id = opt_string(doc, "Id")?;
        let list: Vec<&Value> = match doc.get("Statement") {
            None => return Err(Error::EmptyStatement),
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v) => vec![v],
        };
        if list.is_empty() {
            return Err(Error::EmptyStatement);
        }
        let mut sids = BTreeSet::new();
        let mut statements = Vec::with_capacity(list.len());
        for v in list {
            let s = parse_statement(v, kind)?;
            if let Some(sid) = s.sid.as_ref().filter(|s| !s.is_empty()) {
                if !sids.insert(sid.clone()) {
                    return Err(Error::DuplicateSid(sid.clone()));
                }
            }
            statements.push(s);
        }
        Ok(Policy {
            text: json.to_string(),
            kind,
            version,
            id,
            statements,
        })
    }

    /// The document exactly as it was parsed (what GetBucketPolicy returns).
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn kind(&self) -> PolicyKind {
        self.kind
    }

    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    pub fn statements(&self) -> &[Statement] {
        &self.statements
    }

    /// Whether policy variables (`${aws:username}`) are substituted: only in Version
    /// 2012-10-17 documents, as in AWS; elsewhere `${…}` is literal text.
    pub fn variables_enabled(&self) -> bool {
        self.version.as_deref() == Some("2012-10-17")
    }

    /// The condition keys the policy's conditions name (lowercased), so a caller can fill
    /// only those into a [`Request`]. A policy that substitutes variables
    /// ([`Policy::uses_variables`]) may read any key besides.
    pub fn condition_keys(&self) -> impl Iterator<Item = &str> {
        self.statements
            .iter()
            .flat_map(|s| s.condition.clauses().iter().map(|c| c.key.as_str()))
    }

    /// Whether a `${…}` variable is substituted somewhere in the policy.
    pub fn uses_variables(&self) -> bool {
        self.variables_enabled() && self.text.contains("${")
    }

    /// Every `Resource` and `NotResource` pattern of every statement.
    pub fn resources(&self) -> impl Iterator<Item = &str> {
        self.statements
            .iter()
            .flat_map(|s| s.resource.patterns.iter().map(String::as_str))
    }
}

/// Whether a bucket policy's resource pattern can only name `bucket` or its objects (for
/// PutBucketPolicy, which refuses policies about other buckets): `*`, or an
/// `arn:aws:s3:::` ARN whose bucket part (up to the first `/`) matches `bucket`
/// (`arn:aws:s3:::b`, `arn:aws:s3:::b/*`, `arn:aws:s3:::b*/x` all do for `b`).
pub fn resource_in_bucket(resource: &str, bucket: &str) -> bool {
    if resource == "*" {
        return true;
    }
    let Some(rest) = resource.strip_prefix("arn:aws:s3:::") else {
        return false;
    };
    let name = rest.split('/').next().unwrap_or("");
    wildcard_match(name, bucket)
}

fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Error> {
    v.as_object()
        .ok_or_else(|| Error::Malformed(format!("{what} must be a JSON object")))
}

fn check_fields(m: &Map<String, Value>, what: &str, known: &[&str]) -> Result<(), Error> {
    match m.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Error::Malformed(format!("unknown field {k:?} in {what}"))),
        None => Ok(()),
    }
}

fn opt_string(m: &Map<String, Value>, field: &str) -> Result<Option<String>, Error> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::Malformed(format!("{field} must be a string"))),
    }
}

/// A string or a non-empty array of strings.
fn strings(v: &Value, field: &str) -> Result<Vec<String>, Error> {
    let bad = || {
        Error::Malformed(format!(
            "{field} must be a string or a non-empty array of strings"
        ))
    };
    match v {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        _ => Err(bad()),
    }
}

/// The one of `name`/`Not<name>` a statement has.
fn either<'a>(
    m: &'a Map<String, Value>,
    name: &'static str,
) -> Result<Option<(bool, &'a Value)>, Error> {
    match (m.get(name), m.get(&format!("Not{name}"))) {
        (Some(_), Some(_)) => Err(Error::Conflicting(name)),
        (Some(v), None) => Ok(Some((false, v))),
        (None, Some(v)) => Ok(Some((true, v))),
        (None, None) => Ok(None),
    }
}

fn parse_statement(v: &Value, kind: PolicyKind) -> Result<Statement, Error> {
    let m = object(v, "statement")?;
    check_fields(
        m,
        "statement",
        &[
            "Sid",
            "Effect",
            "Principal",
            "NotPrincipal",
            "Action",
            "NotAction",
            "Resource",
            "NotResource",
            "Condition",
        ],
    )?;
    let sid = opt_string(m, "Sid")?;
    let effect = match m.get("Effect") {
        None => return Err(Error::MissingEffect),
        Some(Value::String(s)) if s == "Allow" => Effect::Allow,
        Some(Value::String(s)) if s == "Deny" => Effect::Deny,
        Some(other) => {
            let s = other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_string);
            return Err(Error::UnknownEffect(s));
        }
    };
    let principal = match (either(m, "Principal")?, kind) {
        (None, PolicyKind::Bucket) => return Err(Error::MissingPrincipal),
        (Some(_), PolicyKind::Identity) => return Err(Error::UnexpectedPrincipal),
        (None, PolicyKind::Identity) => None,
        // S3 takes NotPrincipal only with Deny: an Allow to everyone but someone would grant
        // anonymous access by omission.
        (Some((true, _)), PolicyKind::Bucket) if effect == Effect::Allow => {
            return Err(Error::Malformed(
                "NotPrincipal may be used only with \"Effect\": \"Deny\"".into(),
            ))
        }
        (Some((negated, v)), PolicyKind::Bucket) => Some(Principals {
            negated,
            entries: parse_principal(v)?,
        }),
    };
    let (negated, v) = either(m, "Action")?.ok_or(Error::MissingAction)?;
    let mut actions = strings(v, "Action")?;
    for a in &mut actions {
        let valid = a == "*"
            || a.split_once(':').is_some_and(|(svc, name)| {
                !svc.is_empty()
                    && !name.is_empty()
                    && svc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !valid {
            return Err(Error::InvalidAction(a.clone()));
        }
        *a = a.to_lowercase();
    }
    let action = Patterns {
        negated,
        patterns: actions,
    };
    let (negated, v) = either(m, "Resource")?.ok_or(Error::MissingResource)?;
    let resources = strings(v, "Resource")?;
    if let Some(bad) = resources
        .iter()
        .find(|r| *r != "*" && !r.starts_with("arn:"))
    {
        return Err(Error::InvalidResource(bad.clone()));
    }
    let resource = Patterns {
        negated,
        patterns: resources,
    };
    let condition = match m.get("Condition") {
        None => Condition::default(),
        Some(c) => Condition::parse(c)?,
    };
    Ok(Statement {
        sid,
        effect,
        principal,
        action,
        resource,
        condition,
    })
}

fn parse_principal(v: &Value) -> Result<Vec<PrincipalEntry>, Error> {
    let invalid = |s: &str| Error::InvalidPrincipal(s.to_string());
    match v {
        Value::String(s) if s == "*" => Ok(vec![PrincipalEntry::Everyone]),
        Value::Object(m) if !m.is_empty() => {
            let mut out = Vec::new();
            for (kind, ids) in m {
                for id in strings(ids, "Principal")? {
                    out.push(match kind.as_str() {
                        "AWS" => aws_principal(&id).ok_or_else(|| invalid(&id))?,
                        "CanonicalUser" if !id.is_empty() => PrincipalEntry::Key(id),
                        "Service" | "Federated" => PrincipalEntry::Other(id),
                        _ => return Err(invalid(&format!("{kind}: {id}"))),
                    });
                }
            }
            Ok(out)
        }
        other => Err(invalid(&other.to_string())),
    }
}

/// Maps an `AWS` principal string to the keys it names.
fn aws_principal(s: &str) -> Option<PrincipalEntry> {
    let valid_key = |k: &str| !k.is_empty() && !k.contains(|c: char| c.is_whitespace() || c == '*');
    if s == "*" {
        return Some(PrincipalEntry::Everyone);
    }
    let Some(rest) = s.strip_prefix("arn:") else {
        return valid_key(s).then(|| PrincipalEntry::Key(s.to_string()));
    };
    // partition:iam::account:resource
    let mut parts = rest.splitn(5, ':');
    let (_partition, service, _region, _account, resource) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if service != "iam" {
        return None;
    }
    if resource == "root" {
        return Some(PrincipalEntry::AnyKey);
    }
    let user = resource.strip_prefix("user/")?.rsplit('/').next()?;
    valid_key(user).then(|| PrincipalEntry::Key(user.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resource;

    fn bucket(s: &str) -> Result<Policy, Error> {
        Policy::parse_bucket(s)
    }

    #[test]
    fn parses_aws_example_and_keeps_text() {
        let text = r#"{
          "Version": "2012-10-17",
          "Id": "example",
          "Statement": {
            "Sid": "PublicRead", "Effect": "Allow", "Principal": "*",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": "arn:aws:s3:::DOC-EXAMPLE-BUCKET/*"
          }
        }"#;
        let p = bucket(text).unwrap();
        assert_eq!(p.text(), text);
        assert_eq!(p.id(), Some("example"));
        assert!(p.variables_enabled());
        assert_eq!(p.kind(), PolicyKind::Bucket);
        let s = &p.statements()[0];
        assert_eq!(s.sid.as_deref(), Some("PublicRead"));
        assert_eq!(s.action.patterns, ["s3:getobject", "s3:getobjectversion"]);
        assert_eq!(
            s.principal.as_ref().unwrap().entries,
            [PrincipalEntry::Everyone]
        );
        assert_eq!(
            p.resources().collect::<Vec<_>>(),
            ["arn:aws:s3:::DOC-EXAMPLE-BUCKET/*"]
        );
    }

    #[test]
    fn principal_strings() {
        #[rustfmt::skip]
        let cases = [
            (r#""*""#, Some(vec![PrincipalEntry::Everyone])),
            (r#"{"AWS":"*"}"#, Some(vec![PrincipalEntry::Everyone])),
            (r#"{"AWS":"AKID1"}"#, Some(vec![PrincipalEntry::Key("AKID1".into())])),
            (r#"{"AWS":["arn:aws:iam::123456789012:user/AKID1","arn:aws:iam::x:user/div/AKID2"]}"#,
                Some(vec![PrincipalEntry::Key("AKID1".into()), PrincipalEntry::Key("AKID2".into())])),
            (r#"{"AWS":"arn:aws:iam::123456789012:root"}"#, Some(vec![PrincipalEntry::AnyKey])),
            (r#"{"CanonicalUser":"AKID3"}"#, Some(vec![PrincipalEntry::Key("AKID3".into())])),
            (r#"{"Service":"logging.s3.amazonaws.com"}"#,
                Some(vec![PrincipalEntry::Other("logging.s3.amazonaws.com".into())])),
            (r#""AKID1""#, None),
            (r#"{"AWS":"arn:aws:iam::1:role/r"}"#, None),
            (r#"{"AWS":"arn:aws:s3:::b"}"#, None),
            (r#"{"AWS":"AK*"}"#, None),
            (r#"{"AWS":[]}"#, None),
            (r#"{}"#, None),
            (r#"{"Nobody":"x"}"#, None),
        ];
        for (principal, want) in cases {
            let doc = format!(
                r#"{{"Statement":{{"Effect":"Allow","Principal":{principal},"Action":"s3:*","Resource":"*"}}}}"#
            );
            let got = bucket(&doc).map(|p| p.statements()[0].principal.clone().unwrap().entries);
            assert_eq!(got.ok(), want, "{principal}");
        }
    }

    /// A principal naming a canonical user id matches the key of that account, however the
    /// key is called; one naming the key id still matches the key.
    #[test]
    fn a_canonical_user_principal_names_the_account() {
        let id = "5f".repeat(32);
        let doc = |who: &str| {
            format!(
                r#"{{"Statement":{{"Effect":"Allow","Principal":{who},"Action":"s3:*","Resource":"*"}}}}"#
            )
        };
        let canonical = bucket(&doc(&format!(r#"{{"CanonicalUser":"{id}"}}"#))).unwrap();
        let by_key = bucket(&doc(r#"{"CanonicalUser":"AKTEAM"}"#)).unwrap();
        let req = |canonical: Option<&str>| {
            Request::new(
                Principal::key("AKTEAM"),
                "s3:GetObject",
                crate::Resource::Service,
            )
            .with_canonical_user(canonical.map(str::to_string))
        };
        let applies = |p: &Policy, r: &Request| p.statements()[0].applies(r, false);
        assert!(applies(&canonical, &req(Some(&id))));
        assert!(!applies(&canonical, &req(None)));
        assert!(!applies(&canonical, &req(Some(&"00".repeat(32)))));
        assert!(applies(&by_key, &req(Some(&id))));
        assert!(applies(&by_key, &req(None)));
        let not = bucket(&format!(
            r#"{{"Statement":{{"Effect":"Deny","NotPrincipal":{{"CanonicalUser":"{id}"}},"Action":"s3:*","Resource":"*"}}}}"#
        ))
        .unwrap();
        assert!(!applies(&not, &req(Some(&id))), "NotPrincipal spares it");
        assert!(applies(&not, &req(None)));
    }

    #[test]
    fn validation_errors() {
        let stmt = |s: &str| format!(r#"{{"Version":"2012-10-17","Statement":[{s}]}}"#);
        let ok = r#""Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"*""#;
        #[rustfmt::skip]
        let cases: Vec<(String, Error)> = vec![
            ("{not json".into(), Error::Json(String::new())),
            ("[]".into(), Error::Malformed(String::new())),
            (r#"{"Version":"2012-10-17"}"#.into(), Error::EmptyStatement),
            (r#"{"Statement":[]}"#.into(), Error::EmptyStatement),
            (r#"{"Version":"2020-01-01","Statement":[]}"#.into(), Error::UnsupportedVersion(String::new())),
            (r#"{"Statement":[],"Extra":1}"#.into(), Error::Malformed(String::new())),
            (stmt(r#"{"Principal":"*","Action":"s3:*","Resource":"*"}"#), Error::MissingEffect),
            (stmt(r#"{"Effect":"allow","Principal":"*","Action":"s3:*","Resource":"*"}"#), Error::UnknownEffect(String::new())),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Resource":"*"}"#), Error::MissingAction),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*"}"#), Error::MissingResource),
            (stmt(r#"{"Effect":"Allow","Action":"s3:*","Resource":"*"}"#), Error::MissingPrincipal),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","NotAction":"s3:x","Resource":"*"}"#), Error::Conflicting("Action")),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":"GetObject","Resource":"*"}"#), Error::InvalidAction(String::new())),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":[],"Resource":"*"}"#), Error::Malformed(String::new())),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"bucket/*"}"#), Error::InvalidResource(String::new())),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"StringEquality":{"a":"b"}}}"#), Error::UnknownConditionOperator(String::new())),
            (stmt(r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Colour":"red"}"#), Error::Malformed(String::new())),
            (stmt(&format!(r#"{{"Sid":"a",{ok}}},{{"Sid":"a",{ok}}}"#)), Error::DuplicateSid(String::new())),
        ];
        for (doc, want) in cases {
            let got = bucket(&doc).expect_err(&doc);
            assert_eq!(
                std::mem::discriminant(&got),
                std::mem::discriminant(&want),
                "{doc}: {got}"
            );
        }
        // Identity policies must not name principals.
        let with_principal = stmt(&format!("{{{ok}}}"));
        assert_eq!(
            Policy::parse_identity(&with_principal),
            Err(Error::UnexpectedPrincipal)
        );
        let small = ParseOptions { max_size: 10 };
        assert!(matches!(
            Policy::parse(&with_principal, PolicyKind::Bucket, small),
            Err(Error::TooLarge { max: 10, .. })
        ));
        let big = stmt(&format!(
            r#"{{"Sid":"{}",{ok}}}"#,
            "x".repeat(DEFAULT_MAX_SIZE)
        ));
        assert!(matches!(bucket(&big), Err(Error::TooLarge { .. })));
        assert!(bucket(&with_principal).is_ok());
    }

    #[test]
    fn statement_matching() {
        let p = Policy::parse_identity(
            r#"{"Version":"2012-10-17","Statement":[
              {"Effect":"Allow","NotAction":"s3:Delete*","NotResource":"arn:aws:s3:::secret/*"},
              {"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::home-${aws:username}"}]}"#,
        )
        .unwrap();
        let [not, vars] = p.statements() else {
            panic!()
        };
        let req = |a: &str, r: Resource| Request::new(Principal::key("ann"), a, r);
        let cases = [
            (not, req("s3:GetObject", Resource::object("pub", "k")), true),
            (not, req("S3:GETOBJECT", Resource::object("pub", "k")), true),
            (
                not,
                req("s3:DeleteObject", Resource::object("pub", "k")),
                false,
            ),
            (
                not,
                req("s3:GetObject", Resource::object("secret", "k")),
                false,
            ),
            (
                vars,
                req("s3:ListBucket", Resource::Bucket("home-ann".into())),
                true,
            ),
            (
                vars,
                req("s3:ListBucket", Resource::Bucket("home-bob".into())),
                false,
            ),
        ];
        for (i, (s, r, want)) in cases.into_iter().enumerate() {
            assert_eq!(s.applies(&r, p.variables_enabled()), want, "case {i}");
        }
        // Version 2008-10-17: variables are literal.
        let old = Policy::parse_identity(
            r#"{"Version":"2008-10-17","Statement":{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::${aws:username}"}}"#,
        )
        .unwrap();
        assert!(!old.variables_enabled());
        let r = req("s3:ListBucket", Resource::Bucket("ann".into()));
        assert!(!old.statements()[0].applies(&r, false));
    }

    #[test]
    fn resources_in_bucket() {
        let cases = [
            ("arn:aws:s3:::b", true),
            ("arn:aws:s3:::b/*", true),
            ("arn:aws:s3:::b/archive/*", true),
            ("arn:aws:s3:::b*/x", true),
            ("*", true),
            ("arn:aws:s3:::bb/*", false),
            ("arn:aws:s3:::some-other-bucket/*", false),
            ("arn:aws:iam::1:user/b", false),
        ];
        for (r, want) in cases {
            assert_eq!(resource_in_bucket(r, "b"), want, "{r}");
        }
    }
}
