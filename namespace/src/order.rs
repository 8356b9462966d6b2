//! S3 listing order for the entries of one directory.
//!
//! S3 lists keys in UTF-8 byte order of the full key. A directory `d` stands for every key under
//! `d/`, so among its siblings it sorts as the string `d/`: `a-c` < `a.d` < `a/b`. Sorting each
//! directory's entries by [`cmp_entries`] and walking the tree depth-first yields full-key order.
//!
//! Beware: a store ordered by raw name bytes is not in this order (`a` < `a-c`, but `a/` >
//! `a-c`): a scan must either index directories under their sort key or reorder.

use std::borrow::Cow;
use std::cmp::Ordering;

/// The string an entry sorts as among its siblings: the name, plus `/` for a directory.
pub fn sort_key(name: &str, is_dir: bool) -> Cow<'_, str> {
    if is_dir {
        Cow::Owned(format!("{name}/"))
    } else {
        Cow::Borrowed(name)
    }
}

/// Orders two `(name, is_dir)` entries of one directory by the UTF-8 bytes of their sort keys.
pub fn cmp_entries(a: (&str, bool), b: (&str, bool)) -> Ordering {
    // Same as comparing sort_key(a) with sort_key(b), without allocating.
    let slash: &[u8] = b"/";
    let ka =
        a.0.bytes()
            .chain(if a.1 { slash } else { &[] }.iter().copied());
    let kb =
        b.0.bytes()
            .chain(if b.1 { slash } else { &[] }.iter().copied());
    ka.cmp(kb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::key_to_path;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn sort_key_appends_slash_for_dirs() {
        assert_eq!(sort_key("d", true), "d/");
        assert_eq!(sort_key("d", false), "d");
        assert!(matches!(sort_key("d", false), Cow::Borrowed(_)));
    }

    #[test]
    fn directory_sorts_as_name_slash() {
        // The example from ARCHITECTURE.md: a-c < a.d < a/b.
        let mut v = vec![("a", true), ("a.d", false), ("a-c", false)];
        v.sort_by(|x, y| cmp_entries(*x, *y));
        assert_eq!(v, [("a-c", false), ("a.d", false), ("a", true)]);
        // A raw name order would put the directory first.
        assert!("a" < "a-c");
        assert_eq!(cmp_entries(("a", true), ("a-c", false)), Ordering::Greater);
        // '0' (0x30) sorts after '/' (0x2f).
        assert_eq!(cmp_entries(("a", true), ("a0", false)), Ordering::Less);
        assert_eq!(cmp_entries(("a", true), ("a", true)), Ordering::Equal);
        assert_eq!(cmp_entries(("a", false), ("a", true)), Ordering::Less);
        assert_eq!(cmp_entries(("é", false), ("z", true)), Ordering::Greater);
    }

    #[derive(Default)]
    struct Dir {
        marker: bool,
        children: BTreeMap<String, Node>,
    }

    enum Node {
        File,
        Dir(Dir),
    }

    /// Inserts a key into the tree; false if it conflicts with what is there (file vs dir).
    fn insert(root: &mut Dir, key: &str) -> bool {
        let Ok(p) = key_to_path("b", key) else {
            return false;
        };
        let mut dir = root;
        for c in p.parent_components() {
            let node = dir
                .children
                .entry(c.to_string())
                .or_insert_with(|| Node::Dir(Dir::default()));
            match node {
                Node::Dir(d) => dir = d,
                Node::File => return false,
            }
        }
        let last = p.last().to_string();
        match (dir.children.get_mut(&last), p.dir_marker) {
            (None, true) => {
                let d = Dir {
                    marker: true,
                    ..Dir::default()
                };
                dir.children.insert(last, Node::Dir(d));
            }
            (None, false) => {
                dir.children.insert(last, Node::File);
            }
            (Some(Node::Dir(d)), true) => d.marker = true,
            (Some(Node::File), false) => {}
            (Some(_), _) => return false,
        }
        true
    }

    /// Depth-first walk with each directory's entries sorted by `cmp_entries`.
    fn walk(dir: &Dir, prefix: &str, out: &mut Vec<String>) {
        let mut entries: Vec<(&str, &Node)> =
            dir.children.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let is_dir = |n: &Node| matches!(n, Node::Dir(_));
        entries.sort_by(|a, b| cmp_entries((a.0, is_dir(a.1)), (b.0, is_dir(b.1))));
        for (name, node) in entries {
            match node {
                Node::File => out.push(format!("{prefix}{name}")),
                Node::Dir(d) => {
                    let sub = format!("{prefix}{name}/");
                    if d.marker {
                        out.push(sub.clone());
                    }
                    walk(d, &sub, out);
                }
            }
        }
    }

    #[test]
    fn walk_of_the_example_tree() {
        let mut root = Dir::default();
        for k in ["a/b", "a.d", "a-c", "a/", "a0", "a/b-c", "a/b/"] {
            insert(&mut root, k);
        }
        let mut out = Vec::new();
        walk(&root, "", &mut out);
        assert_eq!(out, ["a-c", "a.d", "a/", "a/b", "a/b-c", "a0"]);
    }

    proptest! {
        #[test]
        fn tree_walk_is_full_key_byte_order(
            keys in prop::collection::vec("[ab.é0/-]{1,8}", 1..40),
        ) {
            let mut root = Dir::default();
            let mut accepted: Vec<String> =
                keys.into_iter().filter(|k| insert(&mut root, k)).collect();
            accepted.sort(); // String order is UTF-8 byte order.
            accepted.dedup();
            let mut out = Vec::new();
            walk(&root, "", &mut out);
            prop_assert_eq!(out, accepted);
        }

        #[test]
        fn cmp_entries_matches_sort_key(
            a in "[a./é-]{0,4}", ad in any::<bool>(),
            b in "[a./é-]{0,4}", bd in any::<bool>(),
        ) {
            prop_assert_eq!(
                cmp_entries((&a, ad), (&b, bd)),
                sort_key(&a, ad).as_bytes().cmp(sort_key(&b, bd).as_bytes())
            );
        }
    }
}
