//! The listing engine against an S3 model.
//!
//! An in-process cluster (four MNode groups on a memory store) is driven with S3 puts and deletes;
//! a `BTreeMap` of the keys that exist is the model. Listings must match S3 semantics over the
//! model: keys in byte order, after the marker, under the prefix, rolled up at the delimiter, in
//! pages of `max_keys` items with `is_truncated` set iff more items follow. A marker that lies
//! inside a common prefix skips the whole prefix. Implicit directories are never listed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::sample::Index;
use saker_client::{ClientError, Cluster, ListItem, Lister};
use saker_rpc::{FileKind, Layout, MetaError, MetaRequest, MetaResponse, MetaService, NewObject};

const BUCKET: &str = "b";

/// MNode groups of the in-process cluster: entries of one directory spread over all of them.
const GROUPS: u32 = 4;

async fn new_cluster() -> Cluster {
    let store: Arc<dyn saker_mnode::MetaStore> = Arc::new(saker_mnode::MemStore::new());
    let local = saker_mnode::LocalGroups::start(store, GROUPS, saker_mnode::MnodeConfig::new(1))
        .await
        .expect("start mnodes");
    let groups: BTreeMap<u32, Arc<dyn MetaService>> = local.services();
    local.connect(Arc::new(saker_coordinator::NamespaceCoordinator::new(
        local.router.clone(),
        groups.clone(),
    )));
    let cluster = Cluster::new(
        local.router.clone(),
        groups,
        Arc::new(saker_chunkstore::MemChunkStore::new()),
        Default::default(),
    );
    cluster
        .call(
            &[BUCKET.into()],
            MetaRequest::CreateBucket {
                name: BUCKET.into(),
                uid: 0,
                gid: 0,
            },
        )
        .await
        .expect("create bucket");
    cluster
}

/// The path of `key` in the bucket and whether it is a directory marker (`d/`).
fn path_of(key: &str) -> (Vec<String>, bool) {
    let (body, dir_marker) = match key.strip_suffix('/') {
        Some(k) => (k, true),
        None => (key, false),
    };
    let mut path = vec![BUCKET.to_string()];
    path.extend(body.split('/').map(str::to_string));
    (path, dir_marker)
}

async fn put(cluster: &Cluster, key: &str, etag: &str) -> Result<(), ClientError> {
    let (path, dir_marker) = path_of(key);
    let body = Bytes::copy_from_slice(key.as_bytes());
    let obj = NewObject {
        size: body.len() as u64,
        etag: etag.to_string(),
        layout: Layout::Inline,
        inline: Some(body),
        ..Default::default()
    };
    cluster
        .put_object(&path, obj, dir_marker, None, Default::default())
        .await
        .map(|_| ())
}

async fn delete(cluster: &Cluster, key: &str) {
    let (path, dir_marker) = path_of(key);
    let resp = cluster
        .call(
            &path,
            MetaRequest::DeleteObject {
                path: path.clone(),
                dir_marker,
                cond: None,
                version_id: None,
                versioning: Default::default(),
                bypass_governance: false,
                lifecycle: false,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("delete {key:?}: {e}"));
    assert_eq!(resp, MetaResponse::Done, "delete {key:?}");
}

/// A listed item as the model sees it: objects carry their ETag.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Obj(String, String),
    Cp(String),
}

impl Item {
    fn key(&self) -> &str {
        match self {
            Item::Obj(k, _) | Item::Cp(k) => k,
        }
    }
}

fn item_of(li: &ListItem) -> Item {
    match li {
        ListItem::Object { key, attr } => {
            let want = if key.ends_with('/') {
                FileKind::Dir
            } else {
                FileKind::File
            };
            assert_eq!(attr.kind, want, "kind of listed object {key:?}");
            Item::Obj(key.clone(), attr.etag.clone())
        }
        ListItem::CommonPrefix(p) => Item::Cp(p.clone()),
    }
}

/// One page from the cluster, with a fresh lister (the marker is all the state there is).
async fn cluster_page(
    cluster: &Cluster,
    prefix: &str,
    delim: Option<&str>,
    after: &str,
    max: usize,
) -> (Vec<Item>, bool) {
    let mut lister = Lister::new(cluster, BUCKET).await.expect("open lister");
    lister_page(&mut lister, prefix, delim, after, max).await
}

async fn lister_page(
    lister: &mut Lister<'_>,
    prefix: &str,
    delim: Option<&str>,
    after: &str,
    max: usize,
) -> (Vec<Item>, bool) {
    let (items, truncated) = lister
        .page(prefix, delim, after, max)
        .await
        .unwrap_or_else(|e| {
            panic!("page(prefix={prefix:?}, delim={delim:?}, after={after:?}, max={max}): {e}")
        });
    (items.iter().map(item_of).collect(), truncated)
}

/// The S3 model: key -> ETag of the keys that exist.
#[derive(Clone, Debug, Default)]
struct Model {
    keys: BTreeMap<String, String>,
}

impl Model {
    /// Directory names implied by `key` (`a/b/c` -> `a`, `a/b`; `d/` -> `d`).
    fn dirs_of(key: &str) -> impl Iterator<Item = &str> {
        key.bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'/')
            .map(move |(i, _)| &key[..i])
    }

    fn is_file(&self, name: &str) -> bool {
        self.keys.contains_key(name)
    }

    fn is_dir(&self, name: &str) -> bool {
        let p = format!("{name}/");
        self.keys
            .range(p.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&p))
    }

    /// Whether a POSIX tree cannot hold `key` beside the existing keys.
    fn conflicts(&self, key: &str) -> bool {
        Self::dirs_of(key).any(|d| self.is_file(d)) || (!key.ends_with('/') && self.is_dir(key))
    }

    /// Every item of the listing, S3 semantics.
    fn expected(&self, prefix: &str, delim: Option<&str>, after: &str) -> Vec<Item> {
        let delim = delim.filter(|d| !d.is_empty());
        let skip: Option<String> = delim.and_then(|d| {
            let rest = after.strip_prefix(prefix)?;
            rest.find(d)
                .map(|i| after[..prefix.len() + i + d.len()].to_string())
        });
        let mut out: Vec<Item> = Vec::new();
        for (k, etag) in &self.keys {
            if k.as_str() <= after || !k.starts_with(prefix) {
                continue;
            }
            if skip.as_deref().is_some_and(|s| k.starts_with(s)) {
                continue;
            }
            let item = match delim.and_then(|d| k[prefix.len()..].find(d).map(|i| (i, d))) {
                Some((i, d)) => Item::Cp(k[..prefix.len() + i + d.len()].to_string()),
                None => Item::Obj(k.clone(), etag.clone()),
            };
            // Keys of one common prefix are contiguous.
            if out.last() != Some(&item) {
                out.push(item);
            }
        }
        out
    }

    fn expected_page(
        &self,
        prefix: &str,
        delim: Option<&str>,
        after: &str,
        max: usize,
    ) -> (Vec<Item>, bool) {
        let mut all = self.expected(prefix, delim, after);
        let truncated = all.len() > max;
        all.truncate(max);
        (all, truncated)
    }
}

/// Puts `key` on the cluster and, if the tree accepted it, into the model; the cluster must
/// reject exactly the keys the model says cannot be held.
async fn put_checked(
    cluster: &Cluster,
    model: &mut Model,
    key: &str,
    etag: &str,
) -> Result<(), TestCaseError> {
    let conflict = model.conflicts(key);
    match put(cluster, key, etag).await {
        Ok(()) => {
            prop_assert!(
                !conflict,
                "put {key:?} succeeded, model expected a conflict; keys {:?}",
                model.keys.keys()
            );
            model.keys.insert(key.to_string(), etag.to_string());
        }
        Err(ClientError::Meta(MetaError::Conflict { .. })) => {
            prop_assert!(
                conflict,
                "put {key:?} conflicted, model expected success; keys {:?}",
                model.keys.keys()
            );
        }
        Err(e) => prop_assert!(false, "put {key:?}: unexpected error {e}"),
    }
    Ok(())
}

async fn delete_checked(cluster: &Cluster, model: &mut Model, key: &str) {
    delete(cluster, key).await;
    model.keys.remove(key);
}

fn obj(k: &str) -> Item {
    Item::Obj(k.to_string(), format!("e-{k}"))
}

fn cp(k: &str) -> Item {
    Item::Cp(k.to_string())
}

async fn listing(cluster: &Cluster, prefix: &str, delim: Option<&str>, after: &str) -> Vec<Item> {
    let (items, truncated) = cluster_page(cluster, prefix, delim, after, 1000).await;
    assert!(!truncated);
    items
}

// ---------------------------------------------------------------------------------------------
// 1. Fixed examples
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn fixed_examples() {
    let cluster = new_cluster().await;
    let keys = ["z", "a/c/x", "a.d", "d/e", "a/b", "f/", "a-c", "a/c/", "d/"];
    for k in keys {
        put(&cluster, k, &format!("e-{k}"))
            .await
            .unwrap_or_else(|e| panic!("put {k}: {e}"));
    }

    // Conflicts a POSIX tree cannot hold.
    for k in ["a/b/c", "a/b/", "a", "a/c", "z/y", "z/"] {
        match put(&cluster, k, "x").await {
            Err(ClientError::Meta(MetaError::Conflict { .. })) => {}
            other => panic!("put {k:?}: expected a conflict, got {other:?}"),
        }
    }

    // Full listing: a directory sorts as `d/`, so a-c < a.d < a/b; markers are keys.
    let all = ["a-c", "a.d", "a/b", "a/c/", "a/c/x", "d/", "d/e", "f/", "z"];
    assert_eq!(listing(&cluster, "", None, "").await, all.map(obj).to_vec());

    // Delimiter '/': directories roll up, explicit or not, empty or not.
    assert_eq!(
        listing(&cluster, "", Some("/"), "").await,
        vec![
            obj("a-c"),
            obj("a.d"),
            cp("a/"),
            cp("d/"),
            cp("f/"),
            obj("z")
        ]
    );
    // Prefix ending mid-name.
    assert_eq!(
        listing(&cluster, "a", Some("/"), "").await,
        vec![obj("a-c"), obj("a.d"), cp("a/")]
    );
    assert_eq!(
        listing(&cluster, "a", None, "").await,
        all[..5].iter().map(|k| obj(k)).collect::<Vec<_>>()
    );
    assert_eq!(
        listing(&cluster, "a/", Some("/"), "").await,
        vec![obj("a/b"), cp("a/c/")]
    );
    // A prefix equal to a marker lists the marker itself as an object.
    assert_eq!(
        listing(&cluster, "a/c/", Some("/"), "").await,
        vec![obj("a/c/"), obj("a/c/x")]
    );
    assert_eq!(
        listing(&cluster, "a/c", None, "").await,
        vec![obj("a/c/"), obj("a/c/x")]
    );
    assert_eq!(
        listing(&cluster, "d", None, "").await,
        vec![obj("d/"), obj("d/e")]
    );
    assert_eq!(
        listing(&cluster, "d/", Some("/"), "").await,
        vec![obj("d/"), obj("d/e")]
    );
    assert_eq!(
        listing(&cluster, "f/", Some("/"), "").await,
        vec![obj("f/")]
    );
    // Nothing matches.
    assert_eq!(listing(&cluster, "/", None, "").await, vec![]);
    assert_eq!(listing(&cluster, "zz", None, "").await, vec![]);
    assert_eq!(listing(&cluster, "a/b/", None, "").await, vec![]);
    assert_eq!(listing(&cluster, "0", Some("/"), "").await, vec![]);

    // Other delimiters roll up mid-name.
    assert_eq!(
        listing(&cluster, "", Some("-"), "").await,
        vec![
            cp("a-"),
            obj("a.d"),
            obj("a/b"),
            obj("a/c/"),
            obj("a/c/x"),
            obj("d/"),
            obj("d/e"),
            obj("f/"),
            obj("z")
        ]
    );
    assert_eq!(
        listing(&cluster, "a", Some("."), "").await,
        vec![obj("a-c"), cp("a."), obj("a/b"), obj("a/c/"), obj("a/c/x")]
    );
    assert_eq!(
        listing(&cluster, "a/", Some("c"), "").await,
        vec![obj("a/b"), cp("a/c")]
    );

    // Markers.
    assert_eq!(
        listing(&cluster, "", None, "a").await,
        all.map(obj).to_vec()
    );
    assert_eq!(
        listing(&cluster, "", None, "a/b").await,
        all[3..].iter().map(|k| obj(k)).collect::<Vec<_>>()
    );
    assert_eq!(
        listing(&cluster, "", None, "a/c/").await,
        all[4..].iter().map(|k| obj(k)).collect::<Vec<_>>()
    );
    assert_eq!(
        listing(&cluster, "", None, "a/c").await,
        all[3..].iter().map(|k| obj(k)).collect::<Vec<_>>()
    );
    assert_eq!(
        listing(&cluster, "", None, "a/bb").await,
        all[3..].iter().map(|k| obj(k)).collect::<Vec<_>>()
    );
    assert_eq!(
        listing(&cluster, "", None, "b").await,
        all[5..].iter().map(|k| obj(k)).collect::<Vec<_>>()
    );
    assert_eq!(listing(&cluster, "", None, "z").await, vec![]);
    // A marker inside a common prefix skips the whole prefix.
    assert_eq!(
        listing(&cluster, "", Some("/"), "a/b").await,
        vec![cp("d/"), cp("f/"), obj("z")]
    );
    assert_eq!(
        listing(&cluster, "", Some("/"), "a/").await,
        vec![cp("d/"), cp("f/"), obj("z")]
    );
    assert_eq!(
        listing(&cluster, "a", Some("/"), "a.d").await,
        vec![cp("a/")]
    );
    // A marker before the prefix does not matter; one after it ends the listing.
    assert_eq!(
        listing(&cluster, "d/", None, "a").await,
        vec![obj("d/"), obj("d/e")]
    );
    assert_eq!(listing(&cluster, "d/", None, "e").await, vec![]);

    // Pages of two, each resumed from the last key (or prefix) returned.
    let mut after = String::new();
    let mut pages = Vec::new();
    loop {
        let (items, truncated) = cluster_page(&cluster, "", Some("/"), &after, 2).await;
        after = items
            .last()
            .map(|i| i.key().to_string())
            .unwrap_or_default();
        pages.push(items);
        if !truncated {
            break;
        }
    }
    assert_eq!(
        pages,
        vec![
            vec![obj("a-c"), obj("a.d")],
            vec![cp("a/"), cp("d/")],
            vec![cp("f/"), obj("z")]
        ]
    );
    // Exactly max items left: not truncated.
    assert_eq!(
        cluster_page(&cluster, "", None, "d/e", 2).await,
        (vec![obj("f/"), obj("z")], false)
    );
    assert_eq!(
        cluster_page(&cluster, "", None, "d/", 2).await,
        (vec![obj("d/e"), obj("f/")], true)
    );

    // Deleting a marker with children demotes the directory: the children stay listed.
    delete(&cluster, "d/").await;
    assert_eq!(listing(&cluster, "d", None, "").await, vec![obj("d/e")]);
    assert_eq!(
        listing(&cluster, "", Some("/"), "c").await,
        vec![cp("d/"), cp("f/"), obj("z")]
    );
    // Deleting the last child reaps the implicit directory: nothing under `d`, and `d` can now
    // be a file.
    delete(&cluster, "d/e").await;
    assert_eq!(listing(&cluster, "d", None, "").await, vec![]);
    assert_eq!(
        listing(&cluster, "", Some("/"), "c").await,
        vec![cp("f/"), obj("z")]
    );
    put(&cluster, "d", "e-d")
        .await
        .expect("d is free after the reap");
    assert_eq!(listing(&cluster, "d", Some("/"), "").await, vec![obj("d")]);
    // An empty explicit directory goes away with its marker.
    delete(&cluster, "f/").await;
    assert_eq!(listing(&cluster, "f", None, "").await, vec![]);
    // Deleting a key that does not exist, or the wrong kind, changes nothing.
    delete(&cluster, "a/c").await;
    delete(&cluster, "a/b/").await;
    delete(&cluster, "q/r/s").await;
    assert_eq!(
        listing(&cluster, "", None, "").await,
        ["a-c", "a.d", "a/b", "a/c/", "a/c/x", "d", "z"]
            .map(obj)
            .to_vec()
    );
    // Overwrites keep one entry with the new ETag.
    put(&cluster, "a/b", "new").await.unwrap();
    put(&cluster, "a/c/", "new-marker").await.unwrap();
    assert_eq!(
        listing(&cluster, "a/", None, "").await,
        vec![
            Item::Obj("a/b".into(), "new".into()),
            Item::Obj("a/c/".into(), "new-marker".into()),
            obj("a/c/x")
        ]
    );

    // Deep implicit directories are walked but never listed themselves.
    put(&cluster, "m/n/o/p", "e-m/n/o/p").await.unwrap();
    assert_eq!(listing(&cluster, "m", None, "").await, vec![obj("m/n/o/p")]);
    assert_eq!(
        listing(&cluster, "m/", Some("/"), "").await,
        vec![cp("m/n/")]
    );
    assert_eq!(
        listing(&cluster, "m/n/o/", Some("/"), "").await,
        vec![obj("m/n/o/p")]
    );
    delete(&cluster, "m/n/o/p").await;
    assert_eq!(listing(&cluster, "m", None, "").await, vec![]);
    put(&cluster, "m", "e-m")
        .await
        .expect("the whole implicit chain was reaped");

    // No such bucket.
    match Lister::new(&cluster, "nope").await {
        Err(ClientError::Meta(MetaError::NoSuchBucket)) => {}
        Err(e) => panic!("expected NoSuchBucket, got {e}"),
        Ok(_) => panic!("expected NoSuchBucket, got a lister"),
    }
}

/// Implicit directories without descendant objects (left by a `mkdir_implicit` whose put never
/// came) are neither listed nor rolled up into a common prefix.
#[tokio::test]
async fn empty_implicit_directories_are_invisible() {
    let cluster = new_cluster().await;
    for dirs in [
        vec!["e"],
        vec!["e", "f"],
        vec!["g"],
        vec!["a"],
        vec!["a", "a"],
    ] {
        let mut path = vec![BUCKET.to_string()];
        path.extend(dirs.iter().map(|d| d.to_string()));
        cluster
            .call(
                &path,
                MetaRequest::MkdirImplicit {
                    path: path.clone(),
                    uid: 0,
                    gid: 0,
                },
            )
            .await
            .unwrap_or_else(|e| panic!("mkdir_implicit {path:?}: {e}"));
    }
    for k in ["a/b", "d", "f"] {
        put(&cluster, k, &format!("e-{k}")).await.unwrap();
    }
    let everything = vec![obj("a/b"), obj("d"), obj("f")];
    assert_eq!(listing(&cluster, "", None, "").await, everything);
    assert_eq!(
        listing(&cluster, "", Some("/"), "").await,
        vec![cp("a/"), obj("d"), obj("f")]
    );
    assert_eq!(
        listing(&cluster, "a/", Some("/"), "").await,
        vec![obj("a/b")]
    );
    assert_eq!(listing(&cluster, "e", Some("/"), "").await, vec![]);
    assert_eq!(listing(&cluster, "e/", None, "").await, vec![]);
    assert_eq!(listing(&cluster, "", Some("/"), "d").await, vec![obj("f")]);
    assert_eq!(
        listing(&cluster, "", Some("/"), "e/f/").await,
        vec![obj("f")]
    );
    assert_eq!(
        cluster_page(&cluster, "", Some("/"), "a/", 1).await,
        (vec![obj("d")], true)
    );
    assert_eq!(
        cluster_page(&cluster, "", Some("/"), "d", 1).await,
        (vec![obj("f")], false)
    );
    assert_eq!(
        cluster_page(&cluster, "", None, "d", 1).await,
        (vec![obj("f")], false)
    );
}

/// One lister serves many pages and many listings: `page` re-positions every time.
#[tokio::test]
async fn one_lister_many_listings() {
    let cluster = new_cluster().await;
    for k in ["a/b", "a-", "a0", "b/c/d", "b/"] {
        put(&cluster, k, &format!("e-{k}")).await.unwrap();
    }
    let mut lister = Lister::new(&cluster, BUCKET).await.unwrap();
    assert_eq!(
        lister_page(&mut lister, "", None, "", 2).await,
        (vec![obj("a-"), obj("a/b")], true)
    );
    assert_eq!(
        lister_page(&mut lister, "b", None, "", 10).await,
        (vec![obj("b/"), obj("b/c/d")], false)
    );
    assert_eq!(
        lister_page(&mut lister, "", None, "a/b", 2).await,
        (vec![obj("a0"), obj("b/")], true)
    );
    assert_eq!(
        lister_page(&mut lister, "", Some("/"), "", 10).await,
        (vec![obj("a-"), cp("a/"), obj("a0"), cp("b/")], false)
    );
    assert_eq!(
        lister_page(&mut lister, "", None, "b/", 1).await,
        (vec![obj("b/c/d")], false)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Random puts and deletes against the model
// ---------------------------------------------------------------------------------------------

/// Components chosen so that ordering edge cases hit: '-' (0x2d) and '.' (0x2e) sort before
/// '/' (0x2f), '0' (0x30) after it.
const COMPS: &[&str] = &["a", "b", "a-", "a.", "a0", "z"];
const DELIMS: &[Option<&str>] = &[None, Some("/"), Some("-")];
const SLASH_OR_NONE: &[Option<&str>] = &[None, Some("/")];

fn key_strategy() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(COMPS), 1..=3),
        any::<bool>(),
    )
        .prop_map(|(comps, slash)| {
            let mut k = comps.join("/");
            if slash {
                k.push('/');
            }
            k
        })
}

#[derive(Clone, Debug)]
enum Op {
    Put(String),
    /// Delete some key (often one that does not exist, or of the other kind).
    Delete(String),
    /// Delete one of the keys that exist.
    DeleteExisting(Index),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => key_strategy().prop_map(Op::Put),
        1 => key_strategy().prop_map(Op::Delete),
        2 => any::<Index>().prop_map(Op::DeleteExisting),
    ]
}

/// A string position: a byte prefix of an existing key, or a short random string.
#[derive(Clone, Debug)]
enum Pos {
    Empty,
    OfKey(Index, Index),
    Random(String),
}

fn pos_strategy() -> impl Strategy<Value = Pos> {
    prop_oneof![
        2 => Just(Pos::Empty),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(k, n)| Pos::OfKey(k, n)),
        1 => "[-./0abz]{1,4}".prop_map(Pos::Random),
    ]
}

impl Pos {
    fn resolve(&self, model: &Model) -> String {
        match self {
            Pos::Empty => String::new(),
            Pos::Random(s) => s.clone(),
            Pos::OfKey(k, n) => {
                if model.keys.is_empty() {
                    return String::new();
                }
                let key = model
                    .keys
                    .keys()
                    .nth(k.index(model.keys.len()))
                    .expect("in range");
                // Keys are ASCII: every byte length is a char boundary. Cuts include the
                // whole key.
                key[..n.index(key.len() + 1)].to_string()
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Query {
    prefix: Pos,
    start: Pos,
    delim: Option<&'static str>,
    max: usize,
}

fn query_strategy() -> impl Strategy<Value = Query> {
    (
        pos_strategy(),
        prop_oneof![2 => Just(Pos::Empty), 1 => pos_strategy()],
        prop::sample::select(DELIMS),
        1usize..=5,
    )
        .prop_map(|(prefix, start, delim, max)| Query {
            prefix,
            start,
            delim,
            max,
        })
}

fn key_of_index(model: &Model, i: &Index) -> Option<String> {
    if model.keys.is_empty() {
        None
    } else {
        model.keys.keys().nth(i.index(model.keys.len())).cloned()
    }
}

/// Paginates `prefix`/`delim` from `start` in pages of `max`, checking each page against the
/// model, and returns the concatenation.
async fn paginate(
    cluster: &Cluster,
    model: &Model,
    prefix: &str,
    delim: Option<&str>,
    start: &str,
    max: usize,
) -> Result<Vec<Item>, TestCaseError> {
    let mut lister = Lister::new(cluster, BUCKET).await.expect("open lister");
    let mut after = start.to_string();
    let mut all = Vec::new();
    for _ in 0..1000 {
        let got = lister_page(&mut lister, prefix, delim, &after, max).await;
        let want = model.expected_page(prefix, delim, &after, max);
        prop_assert_eq!(
            &got,
            &want,
            "page(prefix={:?}, delim={:?}, after={:?}, max={}) over keys {:?}",
            prefix,
            delim,
            after,
            max,
            model.keys.keys().collect::<Vec<_>>()
        );
        let (items, truncated) = got;
        if !truncated {
            all.extend(items);
            return Ok(all);
        }
        prop_assert!(!items.is_empty(), "a truncated page must hold an item");
        after = items.last().expect("non-empty").key().to_string();
        all.extend(items);
    }
    Err(TestCaseError::fail(
        "pagination did not end after 1000 pages",
    ))
}

async fn run_random(ops: Vec<Op>, queries: Vec<Query>) -> Result<(), TestCaseError> {
    let cluster = new_cluster().await;
    let mut model = Model::default();
    for (n, op) in ops.iter().enumerate() {
        match op {
            Op::Put(k) => put_checked(&cluster, &mut model, k, &format!("e{n}")).await?,
            Op::Delete(k) => delete_checked(&cluster, &mut model, k).await,
            Op::DeleteExisting(i) => {
                if let Some(k) = key_of_index(&model, i) {
                    delete_checked(&cluster, &mut model, &k).await;
                }
            }
        }
        // The full listing after every step.
        let (got, truncated) = cluster_page(&cluster, "", None, "", 1000).await;
        prop_assert!(!truncated);
        prop_assert_eq!(
            got,
            model.expected("", None, ""),
            "full listing after {:?}",
            op
        );
    }

    for q in &queries {
        let prefix = q.prefix.resolve(&model);
        let start = q.start.resolve(&model);
        let all = paginate(&cluster, &model, &prefix, q.delim, &start, q.max).await?;
        let want = model.expected(&prefix, q.delim, &start);
        prop_assert_eq!(
            &all,
            &want,
            "pages of {} (prefix={:?}, delim={:?}, start={:?}) over keys {:?}",
            q.max,
            prefix,
            q.delim,
            start,
            model.keys.keys().collect::<Vec<_>>()
        );
        // Strictly increasing, each common prefix once.
        for w in all.windows(2) {
            prop_assert!(w[0].key() < w[1].key(), "out of order: {:?}", w);
        }
    }
    // The whole bucket in pages, with every delimiter.
    for delim in DELIMS {
        let all = paginate(&cluster, &model, "", *delim, "", 3).await?;
        prop_assert_eq!(all, model.expected("", *delim, ""));
    }
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Only this file is ours: keep failures in the output, not in a regressions file.
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn random_puts_and_deletes_list_like_s3(
        ops in prop::collection::vec(op_strategy(), 1..40),
        queries in prop::collection::vec(query_strategy(), 1..8),
    ) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(run_random(ops, queries))?;
    }
}

/// Every combination of prefix, delimiter and page size, paginated and compared with the model.
async fn check_combinations(
    cluster: &Cluster,
    model: &Model,
    prefixes: &[&str],
    delims: &[Option<&str>],
    maxes: &[usize],
) {
    for prefix in prefixes {
        for delim in delims {
            for &max in maxes {
                let all = paginate(cluster, model, prefix, *delim, "", max)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    all,
                    model.expected(prefix, *delim, ""),
                    "prefix={prefix:?} delim={delim:?} max={max}"
                );
            }
        }
    }
}

/// Directories larger than the lister's first scan pages (16, then 128 entries).
#[tokio::test]
async fn large_directories() {
    let cluster = new_cluster().await;
    let mut model = Model::default();
    for i in 0..150 {
        let keys = match i % 4 {
            0 => vec![format!("k{i:03}/x"), format!("big/k{i:03}/y/")],
            1 => vec![format!("k{i:03}"), format!("big/k{i:03}-")],
            2 => vec![
                format!("k{i:03}-"),
                format!("k{i:03}/"),
                format!("big/k{i:03}."),
            ],
            _ => vec![
                format!("k{i:03}."),
                format!("big/k{i:03}"),
                format!("big/k{i:03}/z"),
            ],
        };
        for k in keys {
            put_checked(&cluster, &mut model, &k, &format!("e-{k}"))
                .await
                .unwrap();
        }
    }
    // `big/k003` (a file) blocked `big/k003/z`.
    assert!(!model.keys.contains_key("big/k003/z"));
    assert!(model.keys.len() > 300);
    check_combinations(
        &cluster,
        &model,
        &["", "k", "k1", "big/", "big/k0", "big/k1"],
        &[None, Some("/"), Some("-")],
        &[1, 15, 16, 17, 128, 129, 1000],
    )
    .await;
    // Delete every other key and list again.
    let keys: Vec<String> = model.keys.keys().cloned().collect();
    for k in keys.iter().step_by(2) {
        delete_checked(&cluster, &mut model, k).await;
    }
    check_combinations(
        &cluster,
        &model,
        &["", "big/"],
        &[None, Some("/")],
        &[1, 16, 1000],
    )
    .await;
}

/// Non-ASCII keys sort by UTF-8 bytes; multi-character delimiters roll up like S3's.
#[tokio::test]
async fn unicode_keys_and_long_delimiters() {
    let cluster = new_cluster().await;
    let mut model = Model::default();
    let keys = [
        "é",
        "e/x",
        "ü/x",
        "ü/ÿ/",
        "z",
        "日本/語",
        "日本/語/",
        "日本語",
        "ab\u{7f}",
        "Z",
        "a b",
        "a+b",
        "a%2F",
        "x/x/x",
        "x/xy/x",
        "x/x-",
        "x/x",
        "€/",
        "€/€",
    ];
    for k in keys {
        put_checked(&cluster, &mut model, k, &format!("e-{k}"))
            .await
            .unwrap();
    }
    // `日本/語` is a file, so `日本/語/` could not be a directory; `x/x` is a directory.
    assert!(!model.keys.contains_key("日本/語/"));
    assert!(!model.keys.contains_key("x/x"));
    check_combinations(
        &cluster,
        &model,
        &[
            "", "日", "日本", "日本/", "ü", "ü/", "x/", "x/x", "e", "€", "ab",
            // Directories no key can be under: nothing listed, no error.
            "./", "./x", "../x/", "x/../", "//x",
        ],
        &[
            None,
            Some("/"),
            Some("x/"),
            Some("本/"),
            Some("€"),
            Some("/x"),
        ],
        &[1, 2, 1000],
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// 3. Pages resumed while keys come and go
// ---------------------------------------------------------------------------------------------

async fn run_churn(
    initial: Vec<String>,
    churn: Vec<Vec<Op>>,
    prefix: String,
    delim: Option<&'static str>,
) -> Result<(), TestCaseError> {
    let cluster = new_cluster().await;
    let mut model = Model::default();
    let mut n = 0usize;
    for k in &initial {
        n += 1;
        put_checked(&cluster, &mut model, k, &format!("e{n}")).await?;
    }

    // Keys present through the whole listing, and keys present at any point of it.
    let mut always: BTreeSet<String> = model.keys.keys().cloned().collect();
    let mut ever: BTreeSet<String> = always.clone();
    let mut listed: Vec<Item> = Vec::new();
    let mut after = String::new();
    let mut churn = churn.into_iter();
    let mut finished = false;
    for _ in 0..1000 {
        // Each page sees the state of its moment: it must match the model's page exactly.
        let got = cluster_page(&cluster, &prefix, delim, &after, 2).await;
        let want = model.expected_page(&prefix, delim, &after, 2);
        prop_assert_eq!(
            &got,
            &want,
            "page(prefix={:?}, delim={:?}, after={:?}, max=2) over keys {:?}",
            &prefix,
            delim,
            &after,
            model.keys.keys().collect::<Vec<_>>()
        );
        let (items, truncated) = got;
        if let Some(last) = items.last() {
            after = last.key().to_string();
        }
        listed.extend(items);
        if !truncated {
            finished = true;
            break;
        }
        // Keys come and go between pages.
        for op in churn.next().unwrap_or_default() {
            match op {
                Op::Put(k) => {
                    n += 1;
                    put_checked(&cluster, &mut model, &k, &format!("e{n}")).await?;
                }
                Op::Delete(k) => delete_checked(&cluster, &mut model, &k).await,
                Op::DeleteExisting(i) => {
                    if let Some(k) = key_of_index(&model, &i) {
                        delete_checked(&cluster, &mut model, &k).await;
                    }
                }
            }
            always.retain(|k| model.keys.contains_key(k));
            ever.extend(model.keys.keys().cloned());
        }
    }
    prop_assert!(finished, "listing did not end");

    // No item twice, none out of order.
    for w in listed.windows(2) {
        prop_assert!(
            w[0].key() < w[1].key(),
            "out of order or repeated: {:?} in {:?}",
            w,
            listed
        );
    }
    // Nothing that never existed during the listing.
    for item in &listed {
        match item {
            Item::Obj(k, _) => {
                prop_assert!(ever.contains(k), "listed {:?}, which never existed", k)
            }
            Item::Cp(p) => prop_assert!(
                ever.iter().any(|k| k.starts_with(p.as_str())),
                "listed prefix {:?}, under which no key ever existed",
                p
            ),
        }
    }
    // Every key present throughout appears exactly once (as itself or rolled up).
    let delim = delim.filter(|d| !d.is_empty());
    for k in always.iter().filter(|k| k.starts_with(prefix.as_str())) {
        let want = match delim.and_then(|d| k[prefix.len()..].find(d).map(|i| (i, d))) {
            Some((i, d)) => k[..prefix.len() + i + d.len()].to_string(),
            None => k.clone(),
        };
        let hits = listed.iter().filter(|item| item.key() == want).count();
        prop_assert_eq!(
            hits,
            1,
            "key {:?} (as {:?}) present throughout, listed {} times in {:?}",
            k,
            want,
            hits,
            listed
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn pages_resume_while_keys_come_and_go(
        initial in prop::collection::vec(key_strategy(), 0..30),
        churn in prop::collection::vec(prop::collection::vec(op_strategy(), 0..4), 0..20),
        prefix in prop_oneof![3 => Just(String::new()), 1 => "[-./0abz]{1,3}"],
        delim in prop::sample::select(SLASH_OR_NONE),
    ) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(run_churn(initial, churn, prefix, delim))?;
    }
}

/// Many writers at once creating deep keys whose implicit parents overlap and live on different
/// groups: every PUT succeeds (parents created by one writer may still be in flight when
/// another resolves through them), and the listing shows exactly the keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deep_puts_with_shared_implicit_parents() {
    let cluster = Arc::new(new_cluster().await);
    let keys: Vec<String> = (0..300)
        .map(|i| format!("x{}/y{}/z{}/f{i}", i % 3, i % 5, i % 7))
        .collect();
    let mut tasks = Vec::new();
    for chunk in keys.chunks(10) {
        let (cluster, chunk) = (cluster.clone(), chunk.to_vec());
        tasks.push(tokio::spawn(async move {
            let puts = chunk.iter().map(|k| put(&cluster, k, "e"));
            for (k, r) in chunk.iter().zip(futures::future::join_all(puts).await) {
                r.unwrap_or_else(|e| panic!("put {k}: {e}"));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut want = keys.clone();
    want.sort();
    let got: Vec<String> = listing(&cluster, "", None, "")
        .await
        .iter()
        .map(|i| i.key().to_string())
        .collect();
    assert_eq!(got, want);
}
