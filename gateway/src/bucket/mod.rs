//! Buckets: creating, listing and deleting them ([`buckets`]), and their settings
//! ([`settings`]) on the S3 API: policy and access ([`access`]), ACLs, CORS, default
//! encryption, tags, Object Lock, versioning, lifecycle and notifications; storage classes by
//! prefix ([`storage_class`], an admin setting). Owners of buckets and objects are
//! told by [`owner`]. Every handler finds a bucket and its settings through [`lookup`]; the
//! settings keep the parsed rule types ([`cors_rules`], [`lifecycle::rules`]) below them.

pub(crate) mod access;
pub(crate) mod acl;
pub(crate) mod bucket_acl;
pub(crate) mod buckets;
pub(crate) mod class_rules;
pub mod cors;
pub mod cors_rules;
pub(crate) mod encryption;
pub mod lifecycle;
pub(crate) mod lock;
pub(crate) mod lookup;
pub(crate) mod notification;
pub(crate) mod owner;
pub mod settings;
pub mod storage_class;
pub(crate) mod tagging;
pub(crate) mod versions;
