//! Listings of a bucket: ListObjects V1 and V2 ([`objects`]) and ListObjectVersions
//! ([`versions`]), over one page reader and the encodings they share ([`page`]).

pub(crate) mod objects;
pub(crate) mod page;
pub(crate) mod versions;
