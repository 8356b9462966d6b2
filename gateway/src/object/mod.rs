//! Objects: PutObject and CopyObject (one shared write sequence), GetObject and HeadObject,
//! deletes, GetObjectAttributes, tagging, server-side encryption and remote tiers.

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
