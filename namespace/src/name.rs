//! `Name`: one validated path component (a file, directory or bucket name as stored in the tree).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Longest allowed component, in bytes (POSIX NAME_MAX).
pub const MAX_NAME_LEN: usize = 255;

/// Why a string is not a valid path component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name is empty")]
    Empty,
    #[error("name must not be '.' or '..'")]
    Dot,
    #[error("name is longer than 255 bytes")]
    TooLong,
    #[error("name contains a NUL byte")]
    Nul,
    #[error("name contains '/'")]
    Slash,
}

/// A validated path component: non-empty, not `.` or `..`, at most 255 bytes, no NUL, no `/`.
///
/// Serialized as a plain string; deserializing validates it again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl Name {
    /// Validates `s` and copies it into a `Name`.
    pub fn new(s: &str) -> Result<Name, NameError> {
        validate(s)?;
        Ok(Name(s.to_owned()))
    }

    /// Checks `s` without copying it.
    pub fn check(s: &str) -> Result<(), NameError> {
        validate(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

fn validate(s: &str) -> Result<(), NameError> {
    if s.is_empty() {
        return Err(NameError::Empty);
    }
    if s == "." || s == ".." {
        return Err(NameError::Dot);
    }
    if s.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    if s.contains('\0') {
        return Err(NameError::Nul);
    }
    if s.contains('/') {
        return Err(NameError::Slash);
    }
    Ok(())
}

impl TryFrom<String> for Name {
    type Error = NameError;

    fn try_from(s: String) -> Result<Name, NameError> {
        validate(&s)?;
        Ok(Name(s))
    }
}

impl TryFrom<&str> for Name {
    type Error = NameError;

    fn try_from(s: &str) -> Result<Name, NameError> {
        Name::new(s)
    }
}

impl FromStr for Name {
    type Err = NameError;

    fn from_str(s: &str) -> Result<Name, NameError> {
        Name::new(s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.0
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for s in ["a", "...", ".a", "a.", "é", "with space", "x-y_z.txt"] {
            assert_eq!(Name::new(s).unwrap().as_str(), s);
        }
        assert!(Name::new(&"a".repeat(255)).is_ok());
    }

    #[test]
    fn rejects_each_rule() {
        assert_eq!(Name::new(""), Err(NameError::Empty));
        assert_eq!(Name::new("."), Err(NameError::Dot));
        assert_eq!(Name::new(".."), Err(NameError::Dot));
        assert_eq!(Name::new(&"a".repeat(256)), Err(NameError::TooLong));
        // 128 two-byte chars = 256 bytes: the limit is in bytes, not chars.
        assert_eq!(Name::new(&"é".repeat(128)), Err(NameError::TooLong));
        assert_eq!(Name::new("a\0b"), Err(NameError::Nul));
        assert_eq!(Name::new("a/b"), Err(NameError::Slash));
        assert_eq!(Name::new("/"), Err(NameError::Slash));
    }

    #[test]
    fn messages_are_readable() {
        assert_eq!(
            NameError::TooLong.to_string(),
            "name is longer than 255 bytes"
        );
        assert_eq!(NameError::Dot.to_string(), "name must not be '.' or '..'");
    }

    #[test]
    fn deref_display_and_order() {
        let a = Name::new("abc").unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(format!("{a}"), "abc");
        assert!(Name::new("a-c").unwrap() < Name::new("a.d").unwrap());
        let set: std::collections::BTreeSet<Name> = [a.clone()].into();
        assert!(set.contains("abc"));
    }

    #[test]
    fn serde_is_a_plain_string_and_validates() {
        let n = Name::new("x.y").unwrap();
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(json, "\"x.y\"");
        assert_eq!(serde_json::from_str::<Name>(&json).unwrap(), n);
        assert!(serde_json::from_str::<Name>("\"..\"").is_err());
        assert!(serde_json::from_str::<Name>("\"a/b\"").is_err());
    }
}
