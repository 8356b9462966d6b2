//! The key layout of one MNode group inside the shared store.
//!
//! Every key starts with the group id (4 bytes, big-endian) and a one-byte table tag, so the
//! groups of one process share a store without overlapping and a group's state machine is one
//! set of prefixes. Integers are big-endian so byte order is numeric order.
//!
//! | tag | key after the tag                     | value                          |
//! |-----|----------------------------------------|--------------------------------|
//! | `l` | log index (8)                          | raft log entry                 |
//! | `v` |                                        | raft vote                      |
//! | `p` |                                        | last purged log id             |
//! | `m` |                                        | state-machine meta             |
//! | `i` | parent id (8) + sort name              | inode ([`saker_rpc::Attr`])    |
//! | `d` | inode id (8) + payload kind (1)        | payload                        |
//! | `u` | bucket + 0 + key + 0 + upload id       | multipart upload               |
//! | `q` | upload id + 0 + part number (4)        | uploaded part                  |
//! | `x` | client id (16) + seq (8)               | dedupe: the first result       |
//! | `g` | deadline ns (8) + chunk id (16)        | chunk to delete after grace    |
//! | `n` | directory id (8)                       | key of its inode record        |
//! | `h` | inode id (8)                           | shared inode of hard links ([`saker_rpc::Attr`]) |
//! | `k` | inode id (8) + link token (16)         | a link counted and not settled yet |
//! | `t` | link token (16)                        | a link that stored its new name here: the inode id |
//! | `c` | seq (8) + owner group (4)              | change-log: [`saker_rpc::DirChange`]s for the owner |
//! | `s` |                                        | last change-log seq handed out |
//! | `a` | source group (4)                       | last change-log seq applied from it |
//! | `e` |                                        | exception table installed here |
//! | `o` | record key (UTF-8)                     | coordinator record (group 1 only) |
//! | `w` | bucket + 0 + key + 0 + !inode id (8)   | a version of an object ([`crate::ops::versions`]) |
//! | `r` | chunk id (16)                          | a chunk a write left short of its replicas |
//! | `f` | kind (1) + what is held                | a coordinator's hold: its term (8); kind `F` is the fence |
//! | `b` | bucket name (UTF-8)                   | the bucket's write settings ([`saker_rpc::SealedWrites`]) |
//! | `j` | bucket + 0 + seq (8)                   | a change-feed record ([`saker_rpc::FeedEvent`]) |
//! | `y` | bucket name (UTF-8)                   | where the bucket's feed stands ([`crate::ops::feed`]) |
//!
//! The sort name of a directory is its name followed by `/`, of anything else the bare name, so a
//! scan of a parent's inodes comes out in S3 listing order (a directory `d` sorts as `d/`).

use saker_rpc::InodeId;

use crate::store::prefix_end;

pub const LOG: u8 = b'l';
pub const VOTE: u8 = b'v';
pub const PURGED: u8 = b'p';
pub const SM_META: u8 = b'm';
pub const INODE: u8 = b'i';
pub const PAYLOAD: u8 = b'd';
pub const UPLOAD: u8 = b'u';
pub const PART: u8 = b'q';
pub const DEDUPE: u8 = b'x';
pub const GC: u8 = b'g';
pub const DIR_INDEX: u8 = b'n';
pub const SHARED: u8 = b'h';
pub const LINK_TOKEN: u8 = b'k';
pub const LINK_STORED: u8 = b't';
pub const CHANGE: u8 = b'c';
pub const CHANGE_SEQ: u8 = b's';
pub const APPLIED: u8 = b'a';
/// The exception table the coordinator last installed at the group (raft state, so a new
/// leader routes by it too).
pub const EXCEPTIONS: u8 = b'e';
/// The coordinator's replicated records ([`crate::coord_records`]), in group 1.
pub const COORD: u8 = b'o';
/// Object versions of buckets that keep them, by bucket and key, newest first.
pub const VERSIONS: u8 = b'w';
/// Chunks a write left short of their replicas, by chunk id, until a repair pass fixed them.
pub const REPAIR: u8 = b'r';
/// The coordinator's holds at the group (frozen directories, blocked paths and names) and the
/// highest coordinator term seen ([`crate::node`]'s holds), so a new leader keeps them.
pub const HOLDS: u8 = b'f';

/// Each bucket's write settings as installed here, with their settings version
/// ([`crate::ops::settings`]).
pub const BUCKET_WRITES: u8 = b'b';

/// Buckets' change feeds: one record per object change, by bucket and seq
/// ([`crate::ops::feed`]).
pub const FEED: u8 = b'j';
/// Where each bucket's feed stands (next seq, oldest kept, drops).
pub const FEED_HEAD: u8 = b'y';

/// Tables that make up the state machine (everything but the raft log and vote).
pub const SM_TABLES: [u8; 22] = [
    SM_META,
    INODE,
    PAYLOAD,
    UPLOAD,
    PART,
    DEDUPE,
    GC,
    DIR_INDEX,
    SHARED,
    LINK_TOKEN,
    LINK_STORED,
    CHANGE,
    CHANGE_SEQ,
    APPLIED,
    EXCEPTIONS,
    COORD,
    VERSIONS,
    REPAIR,
    HOLDS,
    BUCKET_WRITES,
    FEED,
    FEED_HEAD,
];

/// Payload kinds stored under [`PAYLOAD`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PayloadKind {
    /// Inline file bytes, or a directory marker's body.
    Data = 0,
    /// S3 headers and user metadata ([`saker_rpc::ObjectMeta`]).
    Meta = 1,
    /// Object tags.
    Tags = 2,
    /// The version's Object Lock ([`saker_rpc::ObjectLock`]).
    Lock = 3,
    /// The object's ACL (the gateway's encoding, opaque here).
    Acl = 4,
}

pub const PAYLOAD_KINDS: [PayloadKind; 5] = [
    PayloadKind::Data,
    PayloadKind::Meta,
    PayloadKind::Tags,
    PayloadKind::Lock,
    PayloadKind::Acl,
];

/// Key builder bound to one group.
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    pub group: u32,
}

impl Keys {
    pub fn new(group: u32) -> Self {
        Self { group }
    }

    pub fn table(&self, tag: u8) -> Vec<u8> {
        let mut k = Vec::with_capacity(64);
        k.extend_from_slice(&self.group.to_be_bytes());
        k.push(tag);
        k
    }

    pub fn table_end(&self, tag: u8) -> Vec<u8> {
        prefix_end(&self.table(tag)).expect("a table prefix always has an end")
    }

    pub fn log(&self, index: u64) -> Vec<u8> {
        let mut k = self.table(LOG);
        k.extend_from_slice(&index.to_be_bytes());
        k
    }

    pub fn log_index(key: &[u8]) -> Option<u64> {
        key.get(5..13)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }

    pub fn single(&self, tag: u8) -> Vec<u8> {
        self.table(tag)
    }

    /// Prefix of all inodes whose parent is `pid`.
    pub fn children(&self, pid: InodeId) -> Vec<u8> {
        let mut k = self.table(INODE);
        k.extend_from_slice(&pid.to_be_bytes());
        k
    }

    pub fn inode(&self, pid: InodeId, name: &str, is_dir: bool) -> Vec<u8> {
        let mut k = self.children(pid);
        k.extend_from_slice(name.as_bytes());
        if is_dir {
            k.push(b'/');
        }
        k
    }

    pub fn payload(&self, id: InodeId, kind: PayloadKind) -> Vec<u8> {
        let mut k = self.table(PAYLOAD);
        k.extend_from_slice(&id.to_be_bytes());
        k.push(kind as u8);
        k
    }

    /// The group's copy of `bucket`'s write settings.
    pub fn bucket_writes(&self, bucket: &str) -> Vec<u8> {
        let mut k = self.table(BUCKET_WRITES);
        k.extend_from_slice(bucket.as_bytes());
        k
    }

    /// Where `bucket`'s feed stands in this group.
    pub fn feed_head(&self, bucket: &str) -> Vec<u8> {
        let mut k = self.table(FEED_HEAD);
        k.extend_from_slice(bucket.as_bytes());
        k
    }

    /// Prefix of `bucket`'s feed records.
    pub fn feed_of(&self, bucket: &str) -> Vec<u8> {
        let mut k = self.table(FEED);
        k.extend_from_slice(bucket.as_bytes());
        k.push(0);
        k
    }

    /// Record `seq` of `bucket`'s feed.
    pub fn feed(&self, bucket: &str, seq: u64) -> Vec<u8> {
        let mut k = self.feed_of(bucket);
        k.extend_from_slice(&seq.to_be_bytes());
        k
    }

    pub fn uploads_of(&self, bucket: &str) -> Vec<u8> {
        let mut k = self.table(UPLOAD);
        k.extend_from_slice(bucket.as_bytes());
        k.push(0);
        k
    }

    pub fn upload(&self, bucket: &str, key: &str, upload_id: &str) -> Vec<u8> {
        let mut k = self.uploads_of(bucket);
        k.extend_from_slice(key.as_bytes());
        k.push(0);
        k.extend_from_slice(upload_id.as_bytes());
        k
    }

    pub fn parts_of(&self, upload_id: &str) -> Vec<u8> {
        let mut k = self.table(PART);
        k.extend_from_slice(upload_id.as_bytes());
        k.push(0);
        k
    }

    pub fn part(&self, upload_id: &str, part_number: u32) -> Vec<u8> {
        let mut k = self.parts_of(upload_id);
        k.extend_from_slice(&part_number.to_be_bytes());
        k
    }

    /// Prefix of the versions of `bucket`'s keys (add the key prefix for a range).
    pub fn versions_of(&self, bucket: &str) -> Vec<u8> {
        let mut k = self.table(VERSIONS);
        k.extend_from_slice(bucket.as_bytes());
        k.push(0);
        k
    }

    /// Prefix of the versions of one key.
    pub fn versions_of_key(&self, bucket: &str, key: &str) -> Vec<u8> {
        let mut k = self.versions_of(bucket);
        k.extend_from_slice(key.as_bytes());
        k.push(0);
        k
    }

    /// The version of `key` written as inode `id` (newer ids sort first).
    pub fn version(&self, bucket: &str, key: &str, id: InodeId) -> Vec<u8> {
        let mut k = self.versions_of_key(bucket, key);
        k.extend_from_slice(&(!id).to_be_bytes());
        k
    }

    /// `(key, inode id)` of a version record's key, given its bucket's prefix length.
    pub fn version_parts(key: &[u8], bucket_prefix: usize) -> Option<(String, InodeId)> {
        let rest = key.get(bucket_prefix..)?;
        let (name, id) = rest.split_at(rest.len().checked_sub(9)?);
        if id[0] != 0 {
            return None;
        }
        let id = u64::from_be_bytes(id[1..].try_into().ok()?);
        Some((String::from_utf8(name.to_vec()).ok()?, !id))
    }

    pub fn dedupe(&self, client: u128, seq: u64) -> Vec<u8> {
        let mut k = self.table(DEDUPE);
        k.extend_from_slice(&client.to_be_bytes());
        k.extend_from_slice(&seq.to_be_bytes());
        k
    }

    pub fn gc(&self, deadline_ns: i64, chunk: u128) -> Vec<u8> {
        let mut k = self.table(GC);
        k.extend_from_slice(&(deadline_ns.max(0) as u64).to_be_bytes());
        k.extend_from_slice(&chunk.to_be_bytes());
        k
    }

    /// The repair record of chunk `chunk`.
    pub fn repair(&self, chunk: u128) -> Vec<u8> {
        let mut k = self.table(REPAIR);
        k.extend_from_slice(&chunk.to_be_bytes());
        k
    }

    /// The shared inode `id` of hard links whose home is this group.
    pub fn shared(&self, id: InodeId) -> Vec<u8> {
        let mut k = self.table(SHARED);
        k.extend_from_slice(&id.to_be_bytes());
        k
    }

    /// The mark of a link of shared inode `id` counted with `token` and not settled yet.
    pub fn link_token(&self, id: InodeId, token: u128) -> Vec<u8> {
        let mut k = self.table(LINK_TOKEN);
        k.extend_from_slice(&id.to_be_bytes());
        k.extend_from_slice(&token.to_be_bytes());
        k
    }

    /// The record that the link of `token` stored its new name in this group.
    pub fn link_stored(&self, token: u128) -> Vec<u8> {
        let mut k = self.table(LINK_STORED);
        k.extend_from_slice(&token.to_be_bytes());
        k
    }

    pub fn dir_index(&self, id: InodeId) -> Vec<u8> {
        let mut k = self.table(DIR_INDEX);
        k.extend_from_slice(&id.to_be_bytes());
        k
    }

    pub fn change(&self, seq: u64, owner: u32) -> Vec<u8> {
        let mut k = self.table(CHANGE);
        k.extend_from_slice(&seq.to_be_bytes());
        k.extend_from_slice(&owner.to_be_bytes());
        k
    }

    /// `(seq, owner)` of a change-log key.
    pub fn change_parts(key: &[u8]) -> Option<(u64, u32)> {
        let seq = key.get(5..13)?.try_into().ok().map(u64::from_be_bytes)?;
        let owner = key.get(13..17)?.try_into().ok().map(u32::from_be_bytes)?;
        Some((seq, owner))
    }

    pub fn applied(&self, source: u32) -> Vec<u8> {
        let mut k = self.table(APPLIED);
        k.extend_from_slice(&source.to_be_bytes());
        k
    }

    pub fn repair_chunk(key: &[u8]) -> Option<u128> {
        key.get(5..21)
            .and_then(|b| b.try_into().ok())
            .map(u128::from_be_bytes)
    }

    pub fn gc_chunk(key: &[u8]) -> Option<u128> {
        key.get(13..29)
            .and_then(|b| b.try_into().ok())
            .map(u128::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_sorts_as_name_slash() {
        let k = Keys::new(7);
        let dir_a = k.inode(5, "a", true);
        let file_ac = k.inode(5, "a-c", false);
        let file_ad = k.inode(5, "a.d", false);
        let file_a0 = k.inode(5, "a0", false);
        assert!(file_ac < file_ad && file_ad < dir_a && dir_a < file_a0);
        assert!(dir_a.ends_with(b"a/"));
    }

    #[test]
    fn groups_do_not_overlap() {
        let a = Keys::new(1);
        let b = Keys::new(2);
        assert!(a.table_end(GC) <= b.table(LOG));
        assert_eq!(Keys::log_index(&a.log(42)), Some(42));
        assert_eq!(Keys::gc_chunk(&a.gc(10, 99)), Some(99));
        assert_eq!(Keys::change_parts(&a.change(7, 3)), Some((7, 3)));
        assert!(
            a.change(1, 9) < a.change(2, 1),
            "the change-log is in seq order"
        );
    }
}
