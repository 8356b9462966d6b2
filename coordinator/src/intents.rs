//! What the coordinator's multi-step protocols log between their steps: a directory (or
//! cross-group file) rename's intent ([`RenameIntent`], see [`crate::rename`]) and a hard
//! link's ([`LinkIntent`], see [`crate::link`]), each in a [`Journal`] of its own.

use bytes::Bytes;
use saker_rpc::{Attr, Cred, InodeId, ObjectMeta, RenameVersioning};
use serde::{Deserialize, Serialize};

use crate::journal::Journal;

/// A directory rename between its two steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenameIntent {
    pub from: Vec<String>,
    pub to: Vec<String>,
    /// The directory with its exact attributes.
    pub attr: Attr,
    pub meta: ObjectMeta,
    pub data: Option<Bytes>,
    pub tags: Vec<(String, String)>,
    /// The empty directory the rename replaces.
    pub replace: Option<InodeId>,
    /// A file rename must not replace an existing target.
    pub noreplace: bool,
    pub cred: Cred,
    /// How the file's old and new buckets keep versions (none in intents logged before).
    #[serde(default)]
    pub versioning: RenameVersioning,
}

/// Logged renames (`renames/rename-<seq>`).
pub type RenameJournal = Journal<RenameIntent>;

/// Record key prefix of logged renames.
pub const RENAMES: &str = "renames/rename";

impl Journal<RenameIntent> {
    /// Whether an unresolved intent moves the inode at `from`.
    pub fn moving(&self, from: &[String]) -> bool {
        self.pending_values().iter().any(|i| i.from == from)
    }
}

/// A link between its steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkIntent {
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub cred: Cred,
    /// The file's inode: step 2 counts it and no other.
    pub id: InodeId,
    /// Counts the link once at the file's home, however often step 2 runs.
    pub token: u128,
    /// Step 2's answer, once logged: the reference the new name gets.
    pub reference: Option<Attr>,
}

/// Logged links (`links/link-<seq>`).
pub type LinkJournal = Journal<LinkIntent>;

/// Record key prefix of logged links.
pub const LINKS: &str = "links/link";
