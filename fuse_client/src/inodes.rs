//! The only namespace state the client keeps: for each inode the kernel holds, its parent and
//! name (to rebuild the full path a request carries) and the kernel's lookup count. Entries
//! go when the kernel forgets them; nothing else about the tree is cached here.

use std::collections::HashMap;

/// The root directory's inode (the MNode's root id is the FUSE root id).
pub const ROOT: u64 = 1;

/// The longest full path (from the mount's root) this mount sends to the MNodes. The kernel
/// limits each call's path argument to PATH_MAX (4,096 bytes), but a process reaches deeper
/// through relative paths, as on a local file system. (S3 addresses only keys up to 1,024
/// bytes: deeper files are listed but cannot be fetched by key.)
pub const MAX_PATH: usize = 64 * 1024;

struct Node {
    parent: u64,
    name: String,
    lookups: u64,
}

/// ino -> (parent ino, name, lookup count).
#[derive(Default)]
pub struct Inodes {
    nodes: HashMap<u64, Node>,
}

impl Inodes {
    /// Records one kernel lookup of `ino` as `name` in `parent` (a rename elsewhere moves it).
    pub fn remember(&mut self, ino: u64, parent: u64, name: &str) {
        if ino == ROOT {
            return;
        }
        let node = self.nodes.entry(ino).or_insert_with(|| Node {
            parent,
            name: String::new(),
            lookups: 0,
        });
        node.parent = parent;
        if node.name != name {
            node.name = name.to_string();
        }
        node.lookups += 1;
    }

    /// The kernel dropped `n` lookups of `ino`.
    /// Whether the kernel let go of `ino` (its lookups reached 0).
    pub fn forget(&mut self, ino: u64, n: u64) -> bool {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
            if node.lookups == 0 {
                self.nodes.remove(&ino);
                return true;
            }
        }
        false
    }

    /// Moves `ino` to `name` in `parent` (after a rename through this mount).
    pub fn moved(&mut self, ino: u64, parent: u64, name: &str) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.parent = parent;
            node.name = name.to_string();
        }
    }

    /// The parent of `ino`, if the kernel holds it.
    pub fn parent(&self, ino: u64) -> Option<u64> {
        self.nodes.get(&ino).map(|n| n.parent)
    }

    /// The full path of `ino`, root first; `None` if some inode on the way is unknown.
    pub fn path(&self, ino: u64) -> Option<Vec<String>> {
        let mut rev = Vec::new();
        let mut cur = ino;
        while cur != ROOT {
            let node = self.nodes.get(&cur)?;
            rev.push(node.name.clone());
            cur = node.parent;
            // A cycle cannot come from the kernel; stop rather than loop.
            if rev.len() > MAX_PATH / 2 {
                return None;
            }
        }
        rev.reverse();
        Some(rev)
    }

    /// Inodes the kernel holds (for tests and metrics).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_rebuilt_from_parents_and_forgotten_at_zero() {
        let mut t = Inodes::default();
        t.remember(10, ROOT, "b");
        t.remember(11, 10, "dir");
        t.remember(12, 11, "f");
        assert_eq!(t.path(12).unwrap(), vec!["b", "dir", "f"]);
        assert_eq!(t.path(ROOT).unwrap(), Vec::<String>::new());
        t.remember(12, 11, "f");
        t.forget(12, 1);
        assert!(t.path(12).is_some());
        t.forget(12, 1);
        assert!(t.path(12).is_none());
        assert_eq!(t.len(), 2);
        t.moved(11, 10, "other");
        assert_eq!(t.path(11).unwrap(), vec!["b", "other"]);
        assert!(t.path(99).is_none());
    }
}
