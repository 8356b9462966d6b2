//! What "public" means (GetBucketPolicyStatus, the Public Access Block) and the Public
//! Access Block setting with its checks.
//!
//! A policy is public when one of its `Allow` statements names `"*"` as principal (or uses
//! `NotPrincipal`) and has no condition pinning the request to fixed values of a key that
//! identifies a network or a principal: `aws:SourceIp` with `IpAddress` on networks of at
//! least /8 (IPv4) or /32 (IPv6), or an equality (`StringEquals`, `StringEqualsIgnoreCase`,
//! `ArnEquals`, or `StringLike`/`ArnLike` without wildcards) on `aws:SourceArn`,
//! `aws:SourceVpc`, `aws:SourceVpce`, `aws:SourceAccount`, `aws:SourceOwner`,
//! `aws:PrincipalAccount`, `aws:PrincipalArn`, `aws:PrincipalOrgID`, `aws:userid`,
//! `aws:username`, `s3:DataAccessPointArn` or `s3:DataAccessPointAccount`. Negated,
//! `…IfExists` and `ForAllValues:` conditions never pin (they hold when the key is missing).
//! This follows S3's documented rule, simplified.

use serde::{Deserialize, Serialize};

use crate::condition::{Cidr, Clause, Operator, SetQualifier};
use crate::document::{Effect, PrincipalEntry, Statement};
use crate::{Acl, CannedAcl, Error, Policy};

const FIXED_KEYS: [&str; 13] = [
    "aws:sourcearn",
    "aws:sourcevpc",
    "aws:sourcevpce",
    "aws:sourceaccount",
    "aws:sourceowner",
    "aws:principalaccount",
    "aws:principalarn",
    "aws:principalorgid",
    "aws:userid",
    "aws:username",
    "s3:dataaccesspointarn",
    "s3:dataaccesspointaccount",
    "aws:sourceip",
];

/// Whether a clause limits a statement to fixed values of an identifying key.
fn pins(c: &Clause) -> bool {
    if !FIXED_KEYS.contains(&c.key.as_str())
        || c.if_exists
        || c.qualifier == Some(SetQualifier::ForAllValues)
    {
        return false;
    }
    let fixed = || c.values.iter().all(|v| !v.contains(['*', '?']));
    match (c.key.as_str(), c.operator) {
        ("aws:sourceip", Operator::IpAddress) => c
            .values
            .iter()
            .all(|v| Cidr::parse(v).is_some_and(|n| n.prefix >= if n.is_ipv4() { 8 } else { 32 })),
        ("aws:sourceip", _) => false,
        (_, Operator::StringEquals | Operator::StringEqualsIgnoreCase | Operator::ArnEquals) => {
            fixed()
        }
        (_, Operator::StringLike | Operator::ArnLike) => fixed(),
        _ => false,
    }
}

fn statement_is_public(s: &Statement) -> bool {
    let to_anyone = match &s.principal {
        None => false,
        Some(p) => p.negated || p.entries.contains(&PrincipalEntry::Everyone),
    };
    s.effect == Effect::Allow && to_anyone && !s.condition.clauses().iter().any(pins)
}

impl Policy {
    /// Whether the policy grants public access (see the module documentation). Identity
    /// policies never do.
    pub fn is_public(&self) -> bool {
        self.statements().iter().any(statement_is_public)
    }
}

/// A bucket's Public Access Block configuration (all `false`: nothing blocked).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PublicAccessBlock {
    /// Refuse setting a public ACL (canned or granted).
    pub block_public_acls: bool,
    /// ACL grants to AllUsers and AuthenticatedUsers grant nothing.
    pub ignore_public_acls: bool,
    /// Refuse PutBucketPolicy of a public policy.
    pub block_public_policy: bool,
    /// A public bucket policy grants nothing to anonymous requests (only keys of the
    /// account, which every key is, keep what it grants them).
    pub restrict_public_buckets: bool,
}

impl PublicAccessBlock {
    /// Whether a request may set canned ACL `name` (an unknown name is
    /// [`Error::UnknownCannedAcl`]); a public one is [`Error::PublicAclBlocked`] under
    /// `block_public_acls`.
    pub fn check_canned_acl(&self, name: &str) -> Result<(), Error> {
        let canned: CannedAcl = name.parse()?;
        if self.block_public_acls && canned.is_public() {
            return Err(Error::PublicAclBlocked);
        }
        Ok(())
    }

    /// Whether a request may set `acl`: one granting AllUsers or AuthenticatedUsers is
    /// [`Error::PublicAclBlocked`] under `block_public_acls`.
    pub fn check_acl(&self, acl: &Acl) -> Result<(), Error> {
        if self.block_public_acls && acl.is_public() {
            return Err(Error::PublicAclBlocked);
        }
        Ok(())
    }

    /// Whether PutBucketPolicy may set `policy`: a public one is
    /// [`Error::PublicPolicyBlocked`] under `block_public_policy`.
    pub fn check_policy(&self, policy: &Policy) -> Result<(), Error> {
        if self.block_public_policy && policy.is_public() {
            return Err(Error::PublicPolicyBlocked);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(principal: &str, condition: &str) -> bool {
        let doc = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{principal},
              "Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"{condition}}}]}}"#
        );
        Policy::parse_bucket(&doc).unwrap().is_public()
    }

    #[test]
    fn public_policies() {
        let c = |s: &str| format!(r#","Condition":{s}"#);
        let cases = [
            (r#""*""#, String::new(), true),
            (r#"{"AWS":"*"}"#, String::new(), true),
            (r#"{"AWS":"AKID"}"#, String::new(), false),
            (r#"{"AWS":"arn:aws:iam::1:root"}"#, String::new(), false),
            (
                r#""*""#,
                c(r#"{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"}}"#),
                false,
            ),
            (
                r#""*""#,
                c(r#"{"IpAddress":{"aws:SourceIp":["192.0.2.0/24","2001:db8::/32"]}}"#),
                false,
            ),
            (
                r#""*""#,
                c(r#"{"IpAddress":{"aws:SourceIp":"0.0.0.0/1"}}"#),
                true,
            ),
            (
                r#""*""#,
                c(r#"{"NotIpAddress":{"aws:SourceIp":"192.0.2.0/24"}}"#),
                true,
            ),
            (
                r#""*""#,
                c(r#"{"IpAddressIfExists":{"aws:SourceIp":"192.0.2.0/24"}}"#),
                true,
            ),
            (
                r#""*""#,
                c(r#"{"StringEquals":{"aws:SourceVpc":"vpc-1"}}"#),
                false,
            ),
            (
                r#""*""#,
                c(r#"{"StringLike":{"aws:SourceVpc":"vpc-*"}}"#),
                true,
            ),
            (
                r#""*""#,
                c(r#"{"StringEquals":{"aws:PrincipalAccount":"123456789012"}}"#),
                false,
            ),
            (
                r#""*""#,
                c(r#"{"ForAllValues:StringEquals":{"aws:SourceVpc":"vpc-1"}}"#),
                true,
            ),
            (
                r#""*""#,
                c(r#"{"Bool":{"aws:SecureTransport":"true"}}"#),
                true,
            ),
            (r#""*""#, c(r#"{"StringEquals":{"s3:prefix":"x"}}"#), true),
        ];
        for (principal, cond, want) in cases {
            assert_eq!(public(principal, &cond), want, "{principal} {cond}");
        }
        let deny =
            r#"{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*"}}"#;
        assert!(!Policy::parse_bucket(deny).unwrap().is_public());
        // Allow with NotPrincipal would be public; S3 refuses it outright.
        let not = r#"{"Statement":{"Effect":"Allow","NotPrincipal":{"AWS":"K"},"Action":"s3:*","Resource":"*"}}"#;
        assert!(matches!(
            Policy::parse_bucket(not),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn block_checks() {
        let off = PublicAccessBlock::default();
        let on = PublicAccessBlock {
            block_public_acls: true,
            block_public_policy: true,
            ..off
        };
        assert_eq!(off.check_canned_acl("public-read"), Ok(()));
        assert_eq!(
            on.check_canned_acl("public-read"),
            Err(Error::PublicAclBlocked)
        );
        assert_eq!(
            on.check_canned_acl("authenticated-read"),
            Err(Error::PublicAclBlocked)
        );
        assert_eq!(on.check_canned_acl("private"), Ok(()));
        assert!(matches!(
            on.check_canned_acl("x"),
            Err(Error::UnknownCannedAcl(_))
        ));
        let acl = Acl::canned("public-read-write", "o", "o").unwrap();
        assert_eq!(on.check_acl(&acl), Err(Error::PublicAclBlocked));
        assert_eq!(on.check_acl(&Acl::private("o")), Ok(()));
        let p = Policy::parse_bucket(
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#,
        )
        .unwrap();
        assert_eq!(on.check_policy(&p), Err(Error::PublicPolicyBlocked));
        assert_eq!(off.check_policy(&p), Ok(()));
        // Stored as JSON; missing fields default to false.
        let pab: PublicAccessBlock = serde_json::from_str(r#"{"block_public_acls":true}"#).unwrap();
        assert_eq!(
            pab,
            PublicAccessBlock {
                block_public_acls: true,
                ..off
            }
        );
    }
}
