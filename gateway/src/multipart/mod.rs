//! Multipart uploads. Parts are always chunked; Complete moves their chunk references into the
//! inode in one raft entry (no data is copied). An upload's record ([`upload`]) is made by
//! [`create`], takes parts ([`part`], uploaded or copied, stored the same way), and ends in
//! [`complete`] or an abort; [`list`] shows uploads and their parts.

pub(crate) mod complete;
pub(crate) mod create;
pub(crate) mod list;
pub(crate) mod part;
pub(crate) mod upload;
