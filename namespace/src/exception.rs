//! `ExceptionTable`: the versioned per-name exceptions to filename-hash placement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ring::GroupId;

/// How a name escapes plain filename hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Exception {
    /// Place by `hash(pid, name)`: a name too common to sit on one group (e.g. `train`).
    PathWalk,
    /// Pin every inode with this name to the group.
    Override(GroupId),
}

/// Name -> exception, owned by the coordinator. Every change bumps `version`, which every
/// response carries so that holders of an older table refresh it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionTable {
    version: u64,
    entries: BTreeMap<String, Exception>,
}

impl ExceptionTable {
    /// An empty table at version 0.
    pub fn new() -> ExceptionTable {
        ExceptionTable::default()
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn get(&self, name: &str) -> Option<&Exception> {
        self.entries.get(name)
    }

    /// Adds or replaces the exception for `name`; bumps the version. Returns the previous one.
    pub fn set(&mut self, name: impl Into<String>, exception: Exception) -> Option<Exception> {
        self.version += 1;
        self.entries.insert(name.into(), exception)
    }

    /// Removes the exception for `name`, bumping the version if there was one.
    pub fn remove(&mut self, name: &str) -> Option<Exception> {
        let old = self.entries.remove(name);
        if old.is_some() {
            self.version += 1;
        }
        old
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All entries, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Exception)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_remove_bump_version() {
        let mut t = ExceptionTable::new();
        assert_eq!((t.version(), t.len(), t.is_empty()), (0, 0, true));
        assert_eq!(t.set("train", Exception::PathWalk), None);
        assert_eq!(t.set("hot", Exception::Override(3)), None);
        assert_eq!(t.version(), 2);
        assert_eq!(t.get("train"), Some(&Exception::PathWalk));
        assert_eq!(t.get("hot"), Some(&Exception::Override(3)));
        assert_eq!(t.get("cold"), None);
        assert_eq!(
            t.set("hot".to_string(), Exception::Override(4)),
            Some(Exception::Override(3))
        );
        assert_eq!((t.version(), t.len()), (3, 2));
        assert_eq!(t.remove("train"), Some(Exception::PathWalk));
        assert_eq!((t.version(), t.len()), (4, 1));
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [("hot", &Exception::Override(4))]
        );
    }

    #[test]
    fn removing_a_missing_name_keeps_the_version() {
        let mut t = ExceptionTable::new();
        t.set("a", Exception::PathWalk);
        assert_eq!(t.remove("b"), None);
        assert_eq!(t.version(), 1);
    }

    #[test]
    fn serde_round_trip() {
        let mut t = ExceptionTable::new();
        t.set("a", Exception::PathWalk);
        t.set("b", Exception::Override(9));
        let json = serde_json::to_string(&t).unwrap();
        let back: ExceptionTable = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert_eq!(back.version(), 2);
    }
}
