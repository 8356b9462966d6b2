//! The authorization decision for one request, as AWS makes it within one account.
//!
//! 1. The root key is always allowed: it is not subject to policies or ACLs.
//! 2. An applicable `Deny` statement in the identity policy or the bucket policy is an
//!    explicit deny, whatever else allows.
//! 3. Otherwise an applicable `Allow` statement in either policy, or an ACL grant, allows.
//! 4. Otherwise the request is implicitly denied.
//!
//! A request of another account than the bucket owner's ([`Sources::cross_account`]) needs
//! both: its identity policy must allow it, and so must the bucket policy or an ACL grant, as
//! AWS evaluates cross-account access.
//!
//! An anonymous request has no identity policy (one passed is ignored); only bucket policy
//! statements naming `"*"` and ACL grants to AllUsers can allow it (an `Allow` with
//! `NotPrincipal` does not: a deliberate, safer departure from AWS). The Public Access Block
//! applies: `ignore_public_acls` drops group grants, `restrict_public_buckets` keeps a public
//! bucket policy from allowing anonymous requests. ACLs grant nothing under Object
//! Ownership `BucketOwnerEnforced`.

use crate::acl::acl_permission;
use crate::document::Effect;
use crate::{Acl, ObjectOwnership, Policy, PublicAccessBlock, Request};

/// The outcome of [`evaluate()`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// A `Deny` statement applies.
    ExplicitDeny,
    /// Nothing allows the request.
    ImplicitDeny,
}

impl Decision {
    pub fn is_allowed(self) -> bool {
        self == Decision::Allow
    }
}

/// Everything that can allow or deny a request, besides the request itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sources<'a> {
    /// The requesting key's identity policy. `None` means the key has no permissions of its
    /// own (only the bucket policy and ACLs can allow it); a caller that gives keys without
    /// a policy full access passes [`crate::full_access`] instead.
    pub identity: Option<&'a Policy>,
    /// The policy of the bucket the checked resource is in, if it has one (for a copy's
    /// [`crate::Target::CopySource`] check, the source bucket's).
    pub bucket_policy: Option<&'a Policy>,
    /// The ACL that [`crate::acl_permission`] names for the action (the bucket's for bucket
    /// actions and for PutObject/DeleteObject, the object's for GetObject and object ACL
    /// actions). `None`: no ACL grant applies.
    pub acl: Option<&'a Acl>,
    /// The bucket's Object Ownership (the default, `BucketOwnerEnforced`, disables ACLs).
    pub ownership: ObjectOwnership,
    /// The bucket's Public Access Block (the default blocks nothing).
    pub public_access_block: PublicAccessBlock,
    /// The requester belongs to another account than the bucket's owner: the identity policy
    /// alone does not allow (see the module documentation).
    pub cross_account: bool,
}

/// Decides `req` (see the module documentation).
pub fn evaluate(req: &Request, sources: &Sources<'_>) -> Decision {
    if req.principal.is_root() {
        return Decision::Allow;
    }
    let anonymous = req.principal.is_anonymous();
    let identity = sources.identity.filter(|_| !anonymous);
    let restricted = anonymous
        && sources.public_access_block.restrict_public_buckets
        && sources.bucket_policy.is_some_and(Policy::is_public);
    // Allowed by the identity policy, and by the bucket policy.
    let mut allowed = [false, false];
    let arn = req.resource.arn();
    let policies = [(identity, true), (sources.bucket_policy, !restricted)];
    for (i, (policy, may_allow)) in policies.into_iter().enumerate() {
        let Some(policy) = policy else { continue };
        let vars = policy.variables_enabled();
        for s in policy.statements() {
            if !s.applies_to(req, &arn, vars) {
                continue;
            }
            match s.effect {
                Effect::Deny => return Decision::ExplicitDeny,
                Effect::Allow => allowed[i] |= may_allow,
            }
        }
    }
    let [by_identity, by_bucket] = allowed;
    let by_resource = || by_bucket || acl_allows_request(req, sources);
    let allow = if sources.cross_account && !anonymous {
        by_identity && by_resource()
    } else {
        by_identity || by_resource()
    };
    if allow {
        Decision::Allow
    } else {
        Decision::ImplicitDeny
    }
}

fn acl_allows_request(req: &Request, sources: &Sources<'_>) -> bool {
    let (Some(acl), Some((_, permission))) = (sources.acl, acl_permission(&req.action)) else {
        return false;
    };
    sources.ownership.acls_enabled()
        && acl.allows(
            &req.principal,
            permission,
            sources.public_access_block.ignore_public_acls,
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{canned_identity, full_access, Principal, Resource};
    use Decision::*;

    fn bucket(json: &str) -> Policy {
        Policy::parse_bucket(json).unwrap()
    }

    fn get(p: Principal, key: &str) -> Request {
        Request::new(p, "s3:GetObject", Resource::object("B", key))
    }

    /// AWS example: "Granting read-only permission to anonymous users".
    const PUBLIC_READ: &str = r#"{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead",
        "Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:GetObjectVersion"],
        "Resource":["arn:aws:s3:::B/*"]}]}"#;

    #[test]
    fn anonymous_read_only_example() {
        let p = bucket(PUBLIC_READ);
        let src = Sources {
            bucket_policy: Some(&p),
            ..Default::default()
        };
        let cases = [
            (get(Principal::Anonymous, "k"), Allow),
            (get(Principal::key("K"), "k"), Allow),
            (
                Request::new(
                    Principal::Anonymous,
                    "s3:PutObject",
                    Resource::object("B", "k"),
                ),
                ImplicitDeny,
            ),
            (
                Request::new(
                    Principal::Anonymous,
                    "s3:ListBucket",
                    Resource::Bucket("B".into()),
                ),
                ImplicitDeny,
            ),
            (
                Request::new(
                    Principal::Anonymous,
                    "s3:GetObject",
                    Resource::object("C", "k"),
                ),
                ImplicitDeny,
            ),
        ];
        for (i, (r, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(&r, &src), want, "case {i}");
        }
        // Restricted: the public policy no longer serves anonymous requests, keys keep it.
        let pab = PublicAccessBlock {
            restrict_public_buckets: true,
            ..Default::default()
        };
        let src = Sources {
            public_access_block: pab,
            ..src
        };
        assert_eq!(
            evaluate(&get(Principal::Anonymous, "k"), &src),
            ImplicitDeny
        );
        assert_eq!(evaluate(&get(Principal::key("K"), "k"), &src), Allow);
    }

    #[test]
    fn source_ip_and_secure_transport_examples() {
        // AWS examples: allow only from a network, and deny requests not over HTTPS.
        let p = bucket(
            r#"{"Version":"2012-10-17","Statement":[
              {"Sid":"IPAllow","Effect":"Allow","Principal":"*","Action":"s3:*",
               "Resource":["arn:aws:s3:::B","arn:aws:s3:::B/*"],
               "Condition":{"IpAddress":{"aws:SourceIp":"192.0.2.0/24"},
                            "NotIpAddress":{"aws:SourceIp":"192.0.2.188/32"}}},
              {"Sid":"HttpsOnly","Effect":"Deny","Principal":"*","Action":"s3:*",
               "Resource":["arn:aws:s3:::B","arn:aws:s3:::B/*"],
               "Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}"#,
        );
        let src = Sources {
            bucket_policy: Some(&p),
            ..Default::default()
        };
        let at = |ip: &str, https: bool| {
            get(Principal::Anonymous, "k")
                .with_source_ip(ip.parse().unwrap())
                .with_secure_transport(https)
        };
        let cases = [
            (at("192.0.2.7", true), Allow),
            (at("192.0.2.188", true), ImplicitDeny),
            (at("198.51.100.1", true), ImplicitDeny),
            (at("192.0.2.7", false), ExplicitDeny),
            (get(Principal::Anonymous, "k"), ImplicitDeny),
        ];
        for (i, (r, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(&r, &src), want, "case {i}");
        }
    }

    #[test]
    fn home_directory_example_with_variables() {
        // AWS example: a user lists and uses only home/<username>/.
        let id = Policy::parse_identity(
            r#"{"Version":"2012-10-17","Statement":[
              {"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::B",
               "Condition":{"StringLike":{"s3:prefix":["home/${aws:username}/*","home/${aws:username}"]}}},
              {"Effect":"Allow","Action":["s3:GetObject","s3:PutObject"],
               "Resource":"arn:aws:s3:::B/home/${aws:username}/*"}]}"#,
        )
        .unwrap();
        let src = Sources {
            identity: Some(&id),
            ..Default::default()
        };
        let list = |who: &str, prefix: Option<&str>| {
            let r = Request::new(
                Principal::key(who),
                "s3:ListBucket",
                Resource::Bucket("B".into()),
            );
            match prefix {
                Some(p) => r.with("s3:prefix", p),
                None => r,
            }
        };
        let cases = [
            (list("alice", Some("home/alice/")), Allow),
            (list("alice", Some("home/alice")), Allow),
            (list("alice", Some("home/bob/")), ImplicitDeny),
            (list("alice", None), ImplicitDeny),
            (get(Principal::key("alice"), "home/alice/f"), Allow),
            (get(Principal::key("alice"), "home/bob/f"), ImplicitDeny),
            (get(Principal::Anonymous, "home/alice/f"), ImplicitDeny),
        ];
        for (i, (r, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(&r, &src), want, "case {i}");
        }
    }

    #[test]
    fn explicit_deny_wins_everywhere_but_root() {
        let full = full_access();
        let p = bucket(
            r#"{"Version":"2012-10-17","Statement":[
              {"Effect":"Deny","Principal":{"AWS":["AKWORKER"]},"Action":"s3:DeleteObject","Resource":"arn:aws:s3:::B/*"},
              {"Effect":"Deny","NotPrincipal":{"AWS":"arn:aws:iam::1:user/ADMIN"},"NotAction":"s3:Get*",
               "Resource":"arn:aws:s3:::B/locked/*"},
              {"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:root"},"Action":"s3:PutObject","NotResource":"arn:aws:s3:::B/ro/*"}]}"#,
        );
        let both = Sources {
            identity: Some(&full),
            bucket_policy: Some(&p),
            ..Default::default()
        };
        let only_bucket = Sources {
            bucket_policy: Some(&p),
            ..Default::default()
        };
        let req =
            |who: Principal, a: &str, key: &str| Request::new(who, a, Resource::object("B", key));
        let w = || Principal::key("AKWORKER");
        let cases = [
            (req(w(), "s3:DeleteObject", "x"), &both, ExplicitDeny),
            (req(w(), "s3:GetObject", "x"), &both, Allow),
            (req(w(), "s3:PutObject", "locked/a"), &both, ExplicitDeny),
            (req(w(), "s3:GetObject", "locked/a"), &both, Allow),
            (
                req(Principal::key("ADMIN"), "s3:PutObject", "locked/a"),
                &both,
                Allow,
            ),
            (
                req(Principal::Anonymous, "s3:PutObject", "locked/a"),
                &both,
                ExplicitDeny,
            ),
            (
                req(Principal::root("ROOT"), "s3:DeleteObject", "x"),
                &both,
                Allow,
            ),
            (
                req(Principal::root("ROOT"), "s3:PutObject", "locked/a"),
                &only_bucket,
                Allow,
            ),
            // No identity policy: only the bucket policy allows (any key, not anonymous).
            (req(w(), "s3:PutObject", "x"), &only_bucket, Allow),
            (req(w(), "s3:PutObject", "ro/x"), &only_bucket, ImplicitDeny),
            (req(w(), "s3:GetObject", "x"), &only_bucket, ImplicitDeny),
            (
                req(Principal::Anonymous, "s3:PutObject", "x"),
                &only_bucket,
                ImplicitDeny,
            ),
        ];
        for (i, (r, src, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(&r, src), want, "case {i}");
        }
    }

    #[test]
    fn identity_policies_and_anonymous() {
        let ro = canned_identity("readonly", Some("B")).unwrap();
        let src = Sources {
            identity: Some(&ro),
            ..Default::default()
        };
        assert_eq!(evaluate(&get(Principal::key("K"), "x"), &src), Allow);
        assert_eq!(
            evaluate(&get(Principal::Anonymous, "x"), &src),
            ImplicitDeny
        );
        let none = Sources::default();
        assert_eq!(
            evaluate(&get(Principal::key("K"), "x"), &none),
            ImplicitDeny
        );
    }

    #[test]
    fn acls_ownership_and_public_access_block() {
        let public = Acl::canned("public-read", "OWNER", "OWNER").unwrap();
        let acl_src = |ownership, ignore| Sources {
            acl: Some(&public),
            ownership,
            public_access_block: PublicAccessBlock {
                ignore_public_acls: ignore,
                ..Default::default()
            },
            ..Default::default()
        };
        let anon = get(Principal::Anonymous, "x");
        let put = Request::new(
            Principal::Anonymous,
            "s3:PutObject",
            Resource::object("B", "x"),
        );
        let owner_acl = Request::new(
            Principal::key("OWNER"),
            "s3:PutObjectAcl",
            Resource::object("B", "x"),
        );
        let cases = [
            (&anon, acl_src(ObjectOwnership::ObjectWriter, false), Allow),
            (
                &anon,
                acl_src(ObjectOwnership::BucketOwnerPreferred, false),
                Allow,
            ),
            (
                &anon,
                acl_src(ObjectOwnership::BucketOwnerEnforced, false),
                ImplicitDeny,
            ),
            (
                &anon,
                acl_src(ObjectOwnership::ObjectWriter, true),
                ImplicitDeny,
            ),
            (
                &put,
                acl_src(ObjectOwnership::ObjectWriter, false),
                ImplicitDeny,
            ),
            (
                &owner_acl,
                acl_src(ObjectOwnership::ObjectWriter, true),
                Allow,
            ),
        ];
        for (i, (r, src, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(r, &src), want, "case {i}");
        }
        // A bucket policy Deny beats an ACL grant.
        let deny = bucket(
            r#"{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::B/*"}}"#,
        );
        let src = Sources {
            bucket_policy: Some(&deny),
            ..acl_src(ObjectOwnership::ObjectWriter, false)
        };
        assert_eq!(evaluate(&anon, &src), ExplicitDeny);
    }

    #[test]
    fn set_qualifiers_and_if_exists_in_policies() {
        // Uploads may carry only the listed tags, and a canned ACL, if any, must be private.
        let p = bucket(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:PutObject",
              "Resource":"arn:aws:s3:::B/*","Condition":{
                "ForAllValues:StringEquals":{"s3:RequestObjectTagKeys":["team","env"]},
                "StringEqualsIfExists":{"s3:x-amz-acl":"private"}}},
              {"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::B/*",
               "Condition":{"ForAnyValue:StringLike":{"s3:RequestObjectTagKeys":"secret*"}}}]}"#,
        );
        let src = Sources {
            bucket_policy: Some(&p),
            ..Default::default()
        };
        let put = |tags: &[&str], acl: Option<&str>| {
            let mut r = Request::new(
                Principal::key("K"),
                "s3:PutObject",
                Resource::object("B", "o"),
            );
            r.set("s3:RequestObjectTagKeys", tags.iter().copied());
            if let Some(a) = acl {
                r.set("s3:x-amz-acl", [a]);
            }
            r
        };
        let cases = [
            (put(&[], None), Allow),
            (put(&["team"], None), Allow),
            (put(&["team", "env"], Some("private")), Allow),
            (put(&["team", "cost"], None), ImplicitDeny),
            (put(&["team"], Some("public-read")), ImplicitDeny),
            (put(&["secret-x"], None), ExplicitDeny),
        ];
        for (i, (r, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(&r, &src), want, "case {i}");
        }
    }

    #[test]
    fn cross_account_needs_both_the_identity_and_the_resource() {
        // A key of another account, with full access of its own, in a bucket that grants
        // public read by ACL and nothing by policy.
        let acl = Acl::from_canned(crate::CannedAcl::PublicRead, "owner", "owner");
        let full = full_access();
        let readonly = canned_identity("readonly", None).unwrap();
        let src = |identity, cross| Sources {
            identity: Some(identity),
            acl: Some(&acl),
            ownership: ObjectOwnership::ObjectWriter,
            cross_account: cross,
            ..Default::default()
        };
        let list = |p| Request::new(p, "s3:ListBucket", Resource::Bucket("B".into()));
        let put = |p| Request::new(p, "s3:PutObject", Resource::object("B", "k"));
        let alt = || Principal::key("alt");
        let cases = [
            // Same account: the identity policy suffices.
            (put(alt()), src(&full, false), Allow),
            // Another account: the ACL grants READ, not WRITE.
            (list(alt()), src(&full, true), Allow),
            (put(alt()), src(&full, true), ImplicitDeny),
            // The ACL grants, the key's own policy does not: still refused.
            (list(alt()), src(&readonly, true), Allow),
            (put(alt()), src(&readonly, true), ImplicitDeny),
            // An anonymous request has no identity to ask.
            (list(Principal::Anonymous), src(&full, true), Allow),
        ];
        for (i, (r, s, want)) in cases.into_iter().enumerate() {
            assert_eq!(evaluate(&r, &s), want, "case {i}");
        }
        let writeonly = canned_identity("writeonly", None).unwrap();
        assert_eq!(
            evaluate(&list(alt()), &src(&writeonly, true)),
            ImplicitDeny,
            "the ACL allows, the identity policy does not"
        );
    }
}
