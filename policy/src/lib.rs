//! Sans-I/O S3 authorization, evaluated as AWS does within one account.
//!
//! - [`Policy`]: IAM policy documents, bucket ([`Policy::parse_bucket`]) or identity
//!   ([`Policy::parse_identity`]), with their `Condition`s ([`condition`]) and wildcard and
//!   policy-variable matching ([`pattern`]).
//! - [`Request`]: what the gateway knows of a request: [`Principal`], IAM action,
//!   [`Resource`] and condition keys.
//! - [`evaluate()`]: the [`Decision`] from the identity policy, bucket policy and ACL
//!   ([`Sources`]).
//! - [`s3_action`]: the IAM actions an S3 operation needs.
//! - [`Acl`], [`ObjectOwnership`], [`PublicAccessBlock`]: ACLs and the bucket settings
//!   that limit them.
//! - [`canned_identity`]: ready-made per-key policies.
//!
//! ```
//! use saker_policy::{evaluate, s3_action, Decision, Policy, Principal, Request, Resource, Sources};
//!
//! let policy = Policy::parse_bucket(r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
//!     "Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::site/*"}]}"#).unwrap();
//! let check = s3_action("HeadObject").unwrap()[0];
//! let req = Request::new(Principal::Anonymous, check.action, Resource::object("site", "index.html"));
//! let sources = Sources { bucket_policy: Some(&policy), ..Default::default() };
//! assert_eq!(evaluate(&req, &sources), Decision::Allow);
//! ```

pub mod acl;
pub mod action;
pub mod canned;
pub mod condition;
pub mod document;
pub mod error;
pub mod evaluate;
pub mod pattern;
pub mod public;
pub mod request;

pub use acl::{
    acl_allows, acl_permission, Acl, AclTarget, CannedAcl, Grant, Grantee, Group, ObjectOwnership,
    Permission,
};
pub use action::{s3_action, versioned_action, Check, Target};
pub use canned::{
    admin_identity_json, canned_identity, canned_identity_json, full_access, CANNED_IDENTITY_NAMES,
};
pub use condition::{Clause, Condition, Operator, SetQualifier};
pub use document::{
    resource_in_bucket, Effect, ParseOptions, Patterns, Policy, PolicyKind, PrincipalEntry,
    Principals, Statement, DEFAULT_MAX_SIZE, IAM_MAX_SIZE,
};
pub use error::Error;
pub use evaluate::{evaluate, Decision, Sources};
pub use pattern::{wildcard_match, wildcard_match_ignore_case};
pub use public::PublicAccessBlock;
pub use request::{Principal, Request, Resource};
