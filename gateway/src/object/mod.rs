//! Objects: PutObject and CopyObject over one shared write sequence ([`write`]), GetObject
//! and HeadObject over one read ([`get`]), deletes, GetObjectAttributes, tagging and object
//! ACLs, server-side encryption and remote tiers. Every one starts from [`lookup`] (a key's
//! object or version) and [`conditions`] (preconditions); none imports a handler of another.

pub(crate) mod acl;
pub(crate) mod attributes;
pub(crate) mod conditions;
pub(crate) mod copy;
pub(crate) mod delete;
pub(crate) mod get;
pub(crate) mod lookup;
pub(crate) mod put;
pub(crate) mod sse;
pub(crate) mod tagging;
pub(crate) mod tiering;
pub(crate) mod write;
