//! The only namespace state the client keeps: for each inode the kernel holds, its parent and
//! name (to rebuild the full path a request carries) and the kernel's lookup count. Entries
//! go when the kernel forgets them; nothing else about the tree is cached here. A file with
//! hard links made or seen through this mount also keeps its other names, so that when the
//! name in use goes (unlink, rename) another one carries its requests.

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
    /// Other names of a file with hard links (empty for anything else).
    others: Vec<(u64, String)>,
}

/// The most other names kept for one file.
const MAX_OTHERS: usize = 8;

/// ino -> (parent ino, name, lookup count).
#[derive(Default)]
pub struct Inodes {
    nodes: HashMap<u64, Node>,
}

impl Inodes {
    /// Records one kernel lookup of `ino` as `name` in `parent`: a rename elsewhere moves it;
    /// a file with `links` (more than one name) keeps the name it had as another one.
    pub fn remember(&mut self, ino: u64, parent: u64, name: &str, links: bool) {
        if ino == ROOT {
            return;
        }
        let node = self.nodes.entry(ino).or_insert_with(|| Node {
            parent,
            name: String::new(),
            lookups: 0,
            others: Vec::new(),
        });
        if node.parent != parent || node.name != name {
            let known = node
                .others
                .iter()
                .position(|(p, n)| *p == parent && n == name);
            if let Some(at) = known {
                node.others.remove(at);
            }
            if links || known.is_some() || !node.others.is_empty() {
                // A file with hard links: the name in use so far is one of its names too.
                let old = (node.parent, std::mem::take(&mut node.name));
                node.others.push(old);
                if node.others.len() > MAX_OTHERS {
                    node.others.remove(0);
                }
            }
            node.parent = parent;
            node.name = name.to_string();
        }
        node.lookups += 1;
    }

    /// Records one more name of `ino` made by link(2) through this mount (the kernel counts
    /// it as a lookup). The name in use stays.
    pub fn linked(&mut self, ino: u64, parent: u64, name: &str) {
        match self.nodes.get_mut(&ino) {
            Some(node) => {
                node.lookups += 1;
                node.others.push((parent, name.to_string()));
                if node.others.len() > MAX_OTHERS {
                    node.others.remove(0);
                }
            }
            None => self.remember(ino, parent, name, true),
        }
    }

    /// `name` in `parent` no longer names `ino` (unlinked or renamed away through this
    /// mount): another known name of it takes over.
    pub fn unlinked(&mut self, ino: u64, parent: u64, name: &str) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        if node.parent == parent && node.name == name {
            if let Some((p, n)) = node.others.pop() {
                node.parent = p;
                node.name = n;
            }
        } else {
            node.others.retain(|(p, n)| !(*p == parent && n == name));
        }
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

    /// Moves `ino` from `from` (parent, name) to `name` in `parent` (after a rename through
    /// this mount).
    pub fn moved(&mut self, ino: u64, from: (u64, &str), parent: u64, name: &str) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            match node
                .others
                .iter_mut()
                .find(|(p, n)| (*p, n.as_str()) == from)
            {
                Some(other) if (node.parent, node.name.as_str()) != from => {
                    *other = (parent, name.to_string());
                }
                _ => {
                    node.parent = parent;
                    node.name = name.to_string();
                }
            }
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
        t.remember(10, ROOT, "b", false);
        t.remember(11, 10, "dir", false);
        t.remember(12, 11, "f", false);
        assert_eq!(t.path(12).unwrap(), vec!["b", "dir", "f"]);
        assert_eq!(t.path(ROOT).unwrap(), Vec::<String>::new());
        t.remember(12, 11, "f", false);
        t.forget(12, 1);
        assert!(t.path(12).is_some());
        t.forget(12, 1);
        assert!(t.path(12).is_none());
        assert_eq!(t.len(), 2);
        t.moved(11, (10, "dir"), 10, "other");
        assert_eq!(t.path(11).unwrap(), vec!["b", "other"]);
        assert!(t.path(99).is_none());
    }

    #[test]
    fn a_file_with_links_goes_on_under_another_name() {
        let mut t = Inodes::default();
        t.remember(10, ROOT, "b", false);
        t.remember(12, 10, "f", false);
        t.linked(12, 10, "g");
        t.linked(12, 10, "h");
        assert_eq!(t.path(12).unwrap(), vec!["b", "f"]);
        t.unlinked(12, 10, "f");
        assert_eq!(t.path(12).unwrap(), vec!["b", "h"]);
        t.moved(12, (10, "g"), 10, "g2");
        t.unlinked(12, 10, "h");
        assert_eq!(t.path(12).unwrap(), vec!["b", "g2"]);
        // A lookup through a known name makes it the one in use and keeps the other.
        t.linked(12, 10, "k");
        t.remember(12, 10, "k", false);
        assert_eq!(t.path(12).unwrap(), vec!["b", "k"]);
        t.unlinked(12, 10, "k");
        assert_eq!(t.path(12).unwrap(), vec!["b", "g2"]);
        // Two lookups and three links: five forgets let it go.
        assert!(!t.forget(12, 4));
        assert!(t.forget(12, 1));
        // A plain file renamed elsewhere is simply found under its new name.
        t.remember(13, 10, "x", false);
        t.remember(13, 10, "y", false);
        t.unlinked(13, 10, "y");
        assert_eq!(t.path(13).unwrap(), vec!["b", "y"]);
        // Links made elsewhere: a lookup of a second name of a file with two keeps the first.
        t.remember(14, 10, "p", true);
        t.remember(14, 10, "q", true);
        t.unlinked(14, 10, "q");
        assert_eq!(t.path(14).unwrap(), vec!["b", "p"]);
    }
}
