//! Inode attributes and S3 object metadata as they travel between roles and live in records.

use serde::{Deserialize, Serialize};

use crate::InodeId;

/// What an inode is. FIFOs, sockets and device nodes exist for the FUSE front end only (no
/// data; S3 neither lists nor serves them); a device carries its device number (`rdev`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice(u32),
    BlockDevice(u32),
}

impl FileKind {
    /// A FIFO, socket or device node.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            FileKind::Fifo | FileKind::Socket | FileKind::CharDevice(_) | FileKind::BlockDevice(_)
        )
    }
}

/// One chunk of file data on the chunkstores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRef {
    /// Random 128-bit id chosen by the writer.
    pub id: u128,
    pub len: u64,
    pub crc32c: u32,
}

/// A new chunk id for the bytes of file `id`: random high 64 bits, the inode id low (the
/// mount's chunks; the S3 path's ids are random throughout). An MNode takes a commit's layout
/// only where every chunk is the file's own ([`chunk_of`]), so a client cannot point a file
/// at another file's chunks (whose collection would then delete data still in use).
pub fn chunk_for(id: InodeId) -> u128 {
    (u128::from(rand::random::<u64>()) << 64) | u128::from(id)
}

/// Whether chunk `chunk` was made for file `id` ([`chunk_for`]).
pub fn chunk_of(id: InodeId, chunk: u128) -> bool {
    chunk as u64 == id
}

/// Where a file's bytes are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Layout {
    /// The bytes live in the inode's payload record on the MNode.
    #[default]
    Inline,
    /// The bytes are the concatenation of these chunks.
    Chunks(Vec<ChunkRef>),
    /// A hard link's reference (SwitchFS §5.5): the file's attributes, payloads and bytes live
    /// in the shared table of group `home`, under the inode id. The other fields of a
    /// reference are a copy taken when the name was made, not kept up to date.
    Shared { home: u32 },
    /// The bytes live in a remote archive tier ([`TierRef`]), with a local copy while a
    /// restore lasts.
    Tiered(Box<TierRef>),
    /// The bytes are the concatenation of these chunks, each erasure-coded ([`Coded`]).
    /// (Appended last: records written before it decode as they were.)
    Coded(Box<Coded>),
}

/// Chunks stored erasure-coded: each as `data` + `parity` shards on distinct chunkstores,
/// found from the chunk's id (chunkstore's `ec` module); the refs are the chunks' as they were
/// written, `stored[i]` the bytes chunk i's shards encode (its data, and an encrypted chunk's
/// records after it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coded {
    pub data: u8,
    pub parity: u8,
    pub chunks: Vec<ChunkRef>,
    pub stored: Vec<u64>,
}

impl Coded {
    /// The chunks with the bytes each one's shards encode (`None` for a record whose lists
    /// disagree).
    pub fn stored_chunks(&self) -> Option<impl Iterator<Item = (&ChunkRef, u64)> + '_> {
        (self.stored.len() == self.chunks.len())
            .then(|| self.chunks.iter().zip(self.stored.iter().copied()))
    }

    /// The ids every shard of every chunk is stored under ([`shard_id`]).
    pub fn shard_ids(&self) -> impl Iterator<Item = u128> + '_ {
        let (k, m) = (self.data, self.parity);
        self.chunks
            .iter()
            .flat_map(move |c| (0..k + m).map(move |i| shard_id(c.id, k, m, i)))
    }

    /// The S3 storage class of a version coded so: `EC_<data>_<parity>`.
    pub fn class_name(&self) -> String {
        ec_class_name(self.data, self.parity)
    }

    /// Why this cannot be a coded layout, if it cannot: a layout of 2 to 16 data and 1 to 8
    /// parity shards, no more parity than data, and a stored length, at least its data, for
    /// each chunk.
    pub fn check(&self) -> Result<(), String> {
        let (k, m) = (self.data, self.parity);
        if !(2..=16).contains(&k) || !(1..=8).contains(&m) || m > k {
            return Err(format!("erasure-coding layout {k}+{m}"));
        }
        let fits = self
            .stored_chunks()
            .is_some_and(|mut chunks| chunks.all(|(c, stored)| stored >= c.len));
        match fits {
            true => Ok(()),
            false => Err("stored lengths that do not fit the chunks".into()),
        }
    }
}

/// The id shard `index` of erasure-coded chunk `chunk` in a layout of `data` + `parity` shards
/// is stored under: a hash of them all, as unlikely to meet another chunk's id as two random
/// ids are, and different for another layout of the same chunk.
pub fn shard_id(chunk: u128, data: u8, parity: u8, index: u8) -> u128 {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"saker ec shard\0");
    h.update(chunk.to_le_bytes());
    h.update([data, parity, index]);
    let digest = h.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    u128::from_le_bytes(id)
}

/// Where a transitioned version's bytes are: object `key` of tier `tier` (a name of the
/// cluster's tier definitions), `size` bytes whose CRC32C is `crc32c`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierRef {
    pub tier: String,
    pub key: String,
    pub size: u64,
    pub crc32c: u32,
    /// A local copy brought back by RestoreObject, kept until `until_ns`.
    pub restored: Option<Restored>,
}

impl TierRef {
    /// Whether its restored copy, if it has one, lapsed by `now_ns`.
    pub fn restore_lapsed(&self, now_ns: i64) -> bool {
        self.restored.as_ref().is_some_and(|r| r.until_ns <= now_ns)
    }
}

/// The S3 storage class of chunks erasure-coded in `data` + `parity` shards: `EC_<k>_<m>`.
pub fn ec_class_name(data: u8, parity: u8) -> String {
    format!("EC_{data}_{parity}")
}

/// The erasure-coding layout (data, parity) a storage class names: `EC_<k>_<m>` (whether or not
/// k + m is a layout saker takes), or `STANDARD_IA`, which is `EC_4_2`. `None`: not such a
/// class (STANDARD, or a tier's name).
pub fn ec_class(name: &str) -> Option<(u8, u8)> {
    if name == "STANDARD_IA" {
        return Some((4, 2));
    }
    let (k, m) = name.strip_prefix("EC_")?.split_once('_')?;
    let number = |s: &str| {
        (!s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u8>().ok())
            .flatten()
    };
    Some((number(k)?, number(m)?))
}

/// Checks a tier's name: `[A-Z0-9_-]{1,64}`, as it is also the StorageClass S3 shows, and
/// not `STANDARD` nor an erasure-coding class ([`ec_class`]).
pub fn check_tier_name(name: &str) -> Result<(), String> {
    if ec_class(name).is_some() {
        return Err(format!(
            "{name} is an erasure-coding storage class (EC_<data>_<parity>, STANDARD_IA), not a \
             tier's name"
        ));
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && name != "STANDARD";
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tier name {name:?}: 1-64 of A-Z, 0-9, _ and -, and not STANDARD"
        ))
    }
}

/// A restored copy of a tiered version: its chunks and when the copy lapses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    pub chunks: Vec<ChunkRef>,
    pub until_ns: i64,
}

impl Layout {
    /// The chunks this record owns (none for a hard link's reference; a tiered version's
    /// restored copy; a coded file's chunks, whose bytes are in their shards).
    pub fn chunks(&self) -> &[ChunkRef] {
        match self {
            Layout::Inline | Layout::Shared { .. } => &[],
            Layout::Chunks(c) => c,
            Layout::Tiered(t) => t.restored.as_ref().map_or(&[], |r| &r.chunks),
            Layout::Coded(c) => &c.chunks,
        }
    }

    /// The erasure coding, when the chunks are coded.
    pub fn coded(&self) -> Option<&Coded> {
        match self {
            Layout::Coded(c) => Some(c),
            _ => None,
        }
    }

    /// The remote copy, when the bytes live in a tier.
    pub fn tiered(&self) -> Option<&TierRef> {
        match self {
            Layout::Tiered(t) => Some(t),
            _ => None,
        }
    }

    /// The home group of a hard link's shared inode, when this is a reference to one.
    pub fn shared_home(&self) -> Option<u32> {
        match self {
            Layout::Shared { home } => Some(*home),
            _ => None,
        }
    }
}

/// S3 checksums of an object (base64 as S3 sends them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Checksums {
    pub crc32: Option<String>,
    pub crc32c: Option<String>,
    pub crc64nvme: Option<String>,
    pub sha1: Option<String>,
    pub sha256: Option<String>,
}

impl Checksums {
    pub fn is_empty(&self) -> bool {
        self.crc32.is_none()
            && self.crc32c.is_none()
            && self.crc64nvme.is_none()
            && self.sha1.is_none()
            && self.sha256.is_none()
    }
}

/// One part of a completed multipart object (for `partNumber` reads and the `-N` ETag).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    pub size: u64,
    pub etag: String,
    pub checksums: Checksums,
}

/// S3 headers and user metadata of an object (kept in a payload record apart from the inode).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ObjectMeta {
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    pub content_disposition: Option<String>,
    pub content_language: Option<String>,
    pub cache_control: Option<String>,
    pub expires: Option<String>,
    pub website_redirect: Option<String>,
    /// `x-amz-meta-*` pairs, names lower-case without the prefix, sorted.
    pub user: Vec<(String, String)>,
    pub checksums: Checksums,
    /// Full-object checksum type for multipart objects ("COMPOSITE" or "FULL_OBJECT").
    pub checksum_type: Option<String>,
    /// How the bytes are encrypted, when they are (SSE-S3 or SSE-C).
    pub sse: Option<Sse>,
}

/// A version's server-side encryption: its data key, wrapped (AES-256-GCM) under the master
/// key (SSE-S3) or the client's key (SSE-C), and where its keystream starts
/// (`saker_client::sealed`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sse {
    /// SSE-C: the base64 MD5 of the client's key (what S3 echoes back).
    pub customer_key_md5: Option<String>,
    /// SSE-KMS: the id of the keyring's key the data key is wrapped under. Neither this nor
    /// `customer_key_md5`: SSE-S3, under the master key.
    pub kms_key_id: Option<String>,
    /// GCM nonce, encrypted data key and tag.
    pub wrapped: Vec<u8>,
    /// The version's keystream nonce.
    pub nonce: [u8; 8],
    /// A multipart object's part numbers, in order (each part was encrypted as a stream of
    /// its own); empty for an object written at once.
    pub parts: Vec<u32>,
}

/// Attributes of an inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub id: InodeId,
    pub kind: FileKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    /// S3 ETag without quotes (files; the marker's for explicit directories).
    pub etag: String,
    /// Directory created only as the parent of an object (never listed without descendants).
    pub implicit: bool,
    /// Number of entries (directories only).
    pub children: u64,
    pub layout: Layout,
    /// Parts of a multipart object, empty otherwise.
    pub parts: Vec<PartInfo>,
    /// Marker LastModified for explicit directories, object mtime otherwise (ns).
    pub s3_mtime_ns: i64,
    /// The bytes are encrypted (the object's metadata has the key: [`ObjectMeta::sse`]).
    pub sealed: bool,
}

impl Attr {
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }
}

/// A directory entry as returned by scans: the child's name and attributes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    pub attr: Attr,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erasure_coding_classes_are_named_and_are_no_tier_names() {
        assert_eq!(ec_class("EC_4_2"), Some((4, 2)));
        assert_eq!(ec_class("EC_8_3"), Some((8, 3)));
        assert_eq!(ec_class("STANDARD_IA"), Some((4, 2)));
        assert_eq!(ec_class_name(6, 3), "EC_6_3");
        for other in [
            "STANDARD",
            "COLD",
            "EC_4",
            "EC__2",
            "EC_4_2_1",
            "EC_x_2",
            "EC_4000_2",
        ] {
            assert_eq!(ec_class(other), None, "{other}");
        }
        assert!(check_tier_name("COLD").is_ok());
        assert!(check_tier_name("EC_4_2").is_err());
        assert!(check_tier_name("STANDARD_IA").is_err());
    }
}
