//! The mapping of an S3 object key in a bucket to a path in the tree, and back.
//!
//! Key `k` in bucket `b` is the path `/b/k`, split on `/`. A key ending in `/` is a directory
//! marker. Keys that cannot be mapped are rejected with a reason; they are never rewritten.

use crate::name::{Name, NameError, MAX_NAME_LEN};

/// Longest allowed object key, in bytes (an S3 limit).
pub const MAX_KEY_LEN: usize = 1024;

/// Why an object key (or its bucket) cannot be mapped to a path. Component numbers start at 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("bucket name is not a valid path component: {0}")]
    Bucket(#[source] NameError),
    #[error("object key is empty")]
    Empty,
    #[error("object key is longer than 1024 bytes")]
    TooLong,
    #[error("object key component {0} is empty")]
    EmptyComponent(usize),
    #[error("object key component '{0}' is not allowed")]
    DotComponent(&'static str),
    #[error("object key component {0} is longer than 255 bytes")]
    ComponentTooLong(usize),
    #[error("object key component {0} contains a NUL byte")]
    Nul(usize),
}

/// An object key resolved to a path: `/bucket/components[0]/.../components[n-1]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectPath {
    pub bucket: Name,
    /// The key split on `/`; never empty. For a directory marker the trailing empty component
    /// is dropped.
    pub components: Vec<Name>,
    /// The key ends with `/`: it names the directory itself (its marker payload).
    pub dir_marker: bool,
}

/// Maps `key` in `bucket` to a path. `bucket` must be a valid [`Name`]; the key must be at most
/// 1024 bytes and every component non-empty (except the one trailing `/` of a directory marker),
/// not `.` or `..`, at most 255 bytes and free of NUL.
pub fn key_to_path(bucket: &str, key: &str) -> Result<ObjectPath, KeyError> {
    let bucket = Name::new(bucket).map_err(KeyError::Bucket)?;
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > MAX_KEY_LEN {
        return Err(KeyError::TooLong);
    }
    let (body, dir_marker) = match key.strip_suffix('/') {
        Some(body) => (body, true),
        None => (key, false),
    };
    let components = body
        .split('/')
        .enumerate()
        .map(|(i, c)| component(i + 1, c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ObjectPath {
        bucket,
        components,
        dir_marker,
    })
}

fn component(index: usize, c: &str) -> Result<Name, KeyError> {
    Name::new(c).map_err(|e| match e {
        NameError::Empty => KeyError::EmptyComponent(index),
        NameError::Dot if c == "." => KeyError::DotComponent("."),
        NameError::Dot => KeyError::DotComponent(".."),
        NameError::TooLong => KeyError::ComponentTooLong(index),
        NameError::Nul => KeyError::Nul(index),
        NameError::Slash => unreachable!("component {index} was split on '/'"),
    })
}

impl ObjectPath {
    /// The S3 key this path stands for (with a trailing `/` for a directory marker).
    pub fn key(&self) -> String {
        let len = self.components.iter().map(|c| c.len() + 1).sum::<usize>();
        let mut key = String::with_capacity(len);
        for (i, c) in self.components.iter().enumerate() {
            if i > 0 {
                key.push('/');
            }
            key.push_str(c);
        }
        if self.dir_marker {
            key.push('/');
        }
        key
    }

    /// The directories between the bucket and the last component.
    pub fn parent_components(&self) -> &[Name] {
        &self.components[..self.components.len() - 1]
    }

    /// The last component: the name that decides the owner of this path.
    pub fn last(&self) -> &Name {
        self.components
            .last()
            .expect("key_to_path never yields an empty component list")
    }
}

// `MAX_NAME_LEN` is what `Name::new` enforces; keep the message above in sync with it.
const _: () = assert!(MAX_NAME_LEN == 255);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(p: &ObjectPath) -> Vec<&str> {
        p.components.iter().map(|c| c.as_str()).collect()
    }

    #[test]
    fn plain_key() {
        let p = key_to_path("b", "a/b/c.txt").unwrap();
        assert_eq!(p.bucket.as_str(), "b");
        assert_eq!(names(&p), ["a", "b", "c.txt"]);
        assert!(!p.dir_marker);
        assert_eq!(p.last().as_str(), "c.txt");
        assert_eq!(p.parent_components().len(), 2);
        assert_eq!(p.key(), "a/b/c.txt");
    }

    #[test]
    fn single_component() {
        let p = key_to_path("b", "x").unwrap();
        assert_eq!(names(&p), ["x"]);
        assert!(p.parent_components().is_empty());
    }

    #[test]
    fn dir_marker() {
        let p = key_to_path("b", "a/d/").unwrap();
        assert!(p.dir_marker);
        assert_eq!(names(&p), ["a", "d"]);
        assert_eq!(p.last().as_str(), "d");
        assert_eq!(p.key(), "a/d/");
    }

    #[test]
    fn empty_components() {
        assert_eq!(key_to_path("b", ""), Err(KeyError::Empty));
        assert_eq!(key_to_path("b", "/"), Err(KeyError::EmptyComponent(1)));
        assert_eq!(key_to_path("b", "/a"), Err(KeyError::EmptyComponent(1)));
        assert_eq!(key_to_path("b", "a//b"), Err(KeyError::EmptyComponent(2)));
        assert_eq!(key_to_path("b", "a//"), Err(KeyError::EmptyComponent(2)));
    }

    #[test]
    fn dot_components() {
        assert_eq!(key_to_path("b", "."), Err(KeyError::DotComponent(".")));
        assert_eq!(
            key_to_path("b", "a/../c"),
            Err(KeyError::DotComponent(".."))
        );
        assert_eq!(key_to_path("b", "a/./"), Err(KeyError::DotComponent(".")));
        assert!(key_to_path("b", "a/.../c").is_ok());
    }

    #[test]
    fn lengths() {
        let ok = format!("{}/{}", "a".repeat(255), "b".repeat(255));
        assert!(key_to_path("b", &ok).is_ok());
        let long = format!("x/{}", "a".repeat(256));
        assert_eq!(key_to_path("b", &long), Err(KeyError::ComponentTooLong(2)));
        let key = vec!["a".repeat(200); 5].join("/"); // 1004 bytes
        assert!(key_to_path("b", &key).is_ok());
        let key = vec!["a".repeat(205); 5].join("/"); // 1029 bytes
        assert_eq!(key_to_path("b", &key), Err(KeyError::TooLong));
        assert_eq!(
            key_to_path("b", &"a/".repeat(512))
                .unwrap()
                .components
                .len(),
            512
        );
        assert_eq!(key_to_path("b", &"a/".repeat(513)), Err(KeyError::TooLong));
    }

    #[test]
    fn nul_and_bucket() {
        assert_eq!(key_to_path("b", "a/b\0"), Err(KeyError::Nul(2)));
        assert_eq!(
            key_to_path("", "a"),
            Err(KeyError::Bucket(NameError::Empty))
        );
        assert_eq!(
            key_to_path("..", "a"),
            Err(KeyError::Bucket(NameError::Dot))
        );
        assert_eq!(
            key_to_path("x/y", "a"),
            Err(KeyError::Bucket(NameError::Slash))
        );
    }

    #[test]
    fn messages_say_why() {
        let msg = |k: &str| key_to_path("b", k).unwrap_err().to_string();
        assert_eq!(msg("a//b"), "object key component 2 is empty");
        assert_eq!(
            msg(&"a".repeat(1025)),
            "object key is longer than 1024 bytes"
        );
        assert_eq!(msg("a/.."), "object key component '..' is not allowed");
        assert_eq!(
            msg(&"a".repeat(256)),
            "object key component 1 is longer than 255 bytes"
        );
        assert_eq!(msg("a\0"), "object key component 1 contains a NUL byte");
        assert_eq!(
            key_to_path("", "a").unwrap_err().to_string(),
            "bucket name is not a valid path component: name is empty"
        );
    }

    fn component_strategy() -> impl Strategy<Value = String> {
        "[a-z0-9.é_ -]{1,12}".prop_filter("dot names", |s| s != "." && s != "..")
    }

    proptest! {
        /// Any key at all, from arbitrary bytes: no panic, and an accepted one maps to valid
        /// names that give the key back.
        #[test]
        fn arbitrary_keys_map_to_valid_names_or_are_refused(
            raw in prop::collection::vec(any::<u8>(), 0..600),
            slashes in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut bytes = raw;
            for at in slashes {
                if !bytes.is_empty() {
                    let i = at.index(bytes.len());
                    bytes[i] = b'/';
                }
            }
            let key = String::from_utf8_lossy(&bytes).into_owned();
            if let Ok(p) = key_to_path("bucket", &key) {
                prop_assert_eq!(p.key(), key.clone());
                for c in &p.components {
                    prop_assert!(Name::check(c.as_str()).is_ok(), "{:?} from {:?}", c, key);
                }
            }
        }

        #[test]
        fn round_trip(
            comps in prop::collection::vec(component_strategy(), 1..8),
            marker in any::<bool>(),
        ) {
            let mut key = comps.join("/");
            if marker {
                key.push('/');
            }
            let p = key_to_path("bucket", &key).unwrap();
            prop_assert_eq!(p.key(), key);
            prop_assert_eq!(p.dir_marker, marker);
            prop_assert_eq!(names(&p), comps.iter().map(String::as_str).collect::<Vec<_>>());
        }

        #[test]
        fn bad_component_is_rejected(
            comps in prop::collection::vec(component_strategy(), 1..6),
            at in any::<prop::sample::Index>(),
            bad in prop::sample::select(vec!["", ".", ".."]),
            marker in any::<bool>(),
        ) {
            let mut comps = comps;
            let i = at.index(comps.len() + 1);
            let at_end = i == comps.len();
            comps.insert(i, bad.to_string());
            let mut key = comps.join("/");
            // A single trailing empty component without another '/' is a valid dir marker.
            if marker || (bad.is_empty() && at_end) {
                key.push('/');
            }
            let err = key_to_path("bucket", &key).unwrap_err();
            let want = match bad {
                "" => KeyError::EmptyComponent(i + 1),
                "." => KeyError::DotComponent("."),
                _ => KeyError::DotComponent(".."),
            };
            prop_assert_eq!(err, want);
        }

        #[test]
        fn accepted_keys_round_trip(key in "[a/.]{0,12}") {
            // Any key that maps at all maps back to itself.
            if let Ok(p) = key_to_path("bucket", &key) {
                prop_assert_eq!(p.key(), key);
            }
        }
    }
}
