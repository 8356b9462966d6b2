//! MNode integration tests: store conformance, namespace rules through the executor, and
//! durability across a restart of the raft group.

use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use saker_coordinator::NamespaceCoordinator;
use saker_mnode::store::{conformance, LogJournal};
use saker_mnode::{FjallStore, LocalGroups, MemStore, MetaStore, Mnode, MnodeConfig, RedbStore};
use saker_rpc::{
    ClientTag, Layout, MetaError, MetaRequest, MetaResponse, MetaService, NewObject, Want,
};

#[test]
fn mem_store_conforms() {
    conformance::run_all(&MemStore::new());
}

#[test]
fn fjall_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(&FjallStore::open(&dir.path().join("meta.fjall")).unwrap());
}

#[test]
fn fjall_keeps_earlier_non_durable_writes_with_a_durable_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.fjall");
    {
        let s = FjallStore::open(&path).unwrap();
        let mut b = saker_mnode::store::WriteBatch::default();
        b.put(b"k1".to_vec(), &b"v1"[..]);
        s.write(&b, false).unwrap();
        let mut b = saker_mnode::store::WriteBatch::default();
        b.put(b"k2".to_vec(), &b"v2"[..]);
        s.write(&b, true).unwrap();
    }
    let s = FjallStore::open(&path).unwrap();
    assert_eq!(s.get(b"k1").unwrap().as_deref(), Some(&b"v1"[..]));
    assert_eq!(s.get(b"k2").unwrap().as_deref(), Some(&b"v2"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_journal_answers_every_concurrent_append_and_reopens_at_once() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = Arc::new(LogJournal::open(dir.path()).unwrap());
        let writers: Vec<_> = (1..=16u32)
            .map(|group| {
                let j = j.clone();
                tokio::spawn(async move {
                    j.append(group, vec![(1, Bytes::from(vec![group as u8]))])
                        .await
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap().unwrap();
        }
    }
    // Dropping the journal stopped and joined its sync thread.
    let j = LogJournal::open(dir.path()).unwrap();
    for group in 1..=16u32 {
        assert_eq!(
            j.entries(group, 1, None),
            vec![Bytes::from(vec![group as u8])]
        );
    }
}

#[test]
fn the_log_journal_syncs_a_lone_append_on_the_callers_thread() {
    let dir = tempfile::tempdir().unwrap();
    {
        let j = LogJournal::open(dir.path()).unwrap();
        for i in 1..=3u64 {
            // No sync was running or queued: the append's own ran before its first poll
            // returned, so the future is ready at once.
            j.append(1, vec![(i, Bytes::from(vec![i as u8]))])
                .now_or_never()
                .expect("a lone append is durable at its first poll")
                .unwrap();
        }
    }
    let j = LogJournal::open(dir.path()).unwrap();
    assert_eq!(j.entries(1, 0, None).len(), 3);
}

#[test]
fn redb_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(&RedbStore::open(&dir.path().join("meta.redb")).unwrap());
}

fn p(s: &str) -> Vec<String> {
    s.split('/').map(str::to_string).collect()
}

/// An object stored inline at its MNode.
fn inline_object(body: &[u8]) -> NewObject {
    NewObject {
        size: body.len() as u64,
        etag: format!("etag-{}", body.len()),
        layout: Layout::Inline,
        inline: Some(bytes::Bytes::copy_from_slice(body)),
        ..Default::default()
    }
}

/// Talks to one group of an in-process cluster, which forwards what it does not own.
struct Client {
    groups: LocalGroups,
    node: Arc<Mnode>,
    seq: u64,
}

impl Client {
    async fn call(&mut self, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        self.seq += 1;
        self.node
            .call(
                ClientTag {
                    client: 42,
                    seq: self.seq,
                },
                req,
            )
            .await
    }

    async fn put(&mut self, path: &str, body: &[u8]) -> Result<MetaResponse, MetaError> {
        let obj = inline_object(body);
        self.call(MetaRequest::PutObject {
            path: p(path),
            obj,
            cond: None,
            versioning: Default::default(),
        })
        .await
    }

    async fn create_bucket(&mut self, name: &str) {
        self.call(MetaRequest::CreateBucket {
            name: name.into(),
            uid: 0,
            gid: 0,
        })
        .await
        .unwrap();
    }

    async fn mkdir_implicit(&mut self, path: &str) -> Result<MetaResponse, MetaError> {
        self.call(MetaRequest::MkdirImplicit {
            path: p(path),
            uid: 0,
            gid: 0,
        })
        .await
    }

    async fn lookup(&mut self, path: &str) -> Result<saker_rpc::ObjectView, MetaError> {
        match self
            .call(MetaRequest::Lookup {
                path: p(path),
                want: Want::OBJECT,
            })
            .await?
        {
            MetaResponse::Object(v) => Ok(*v),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The entries of `dir` on every group, in sort order (directories as `name/`).
    async fn names(&mut self, dir: &str) -> Vec<String> {
        let id = self.lookup(dir).await.unwrap().attr.id;
        let mut names = Vec::new();
        for g in &self.groups.mnodes {
            let req = MetaRequest::Scan {
                dir: id,
                start_after: vec![],
                limit: 1000,
                reader: None,
            };
            match g.call(ClientTag { client: 0, seq: 0 }, req).await.unwrap() {
                MetaResponse::Entries(e) => names.extend(e.into_iter().map(|e| {
                    if e.attr.is_dir() {
                        e.name + "/"
                    } else {
                        e.name
                    }
                })),
                other => panic!("unexpected {other:?}"),
            }
        }
        names.sort();
        names
    }
}

/// Four groups on `store` with a coordinator; the client enters at group 1.
async fn start(store: Arc<dyn MetaStore>) -> Client {
    start_with(store, 4, MnodeConfig::new(1)).await
}

async fn start_with(store: Arc<dyn MetaStore>, n: u32, cfg: MnodeConfig) -> Client {
    let groups = LocalGroups::start(store, n, cfg).await.unwrap();
    let coordinator = NamespaceCoordinator::new(groups.router.clone(), groups.services());
    groups.connect(Arc::new(coordinator));
    Client {
        node: groups.mnodes[0].clone(),
        groups,
        seq: 0,
    }
}

#[tokio::test]
async fn implicit_parents_conflicts_and_reaping() {
    let mut c = start(Arc::new(MemStore::new())).await;
    assert_eq!(c.put("b/a/x", b"1").await, Err(MetaError::NoSuchBucket));
    c.create_bucket("b").await;
    assert_eq!(
        c.put("b/a/c/x", b"1").await,
        Err(MetaError::MissingParent { depth: 1 })
    );
    c.mkdir_implicit("b/a").await.unwrap();
    c.mkdir_implicit("b/a")
        .await
        .expect("mkdir_implicit is idempotent");
    c.mkdir_implicit("b/a/c").await.unwrap();
    c.put("b/a/c/x", b"hello").await.unwrap();
    assert_eq!(
        c.lookup("b/a/c/x").await.unwrap().data.as_deref(),
        Some(&b"hello"[..])
    );
    // A file where a directory must be, and the reverse.
    assert!(
        matches!(c.put("b/a/c/x/y", b"1").await, Err(MetaError::Conflict { path }) if path == "b/a/c/x")
    );
    assert!(matches!(
        c.put("b/a/c", b"1").await,
        Err(MetaError::Conflict { .. })
    ));
    // Listing order: a directory sorts as name + '/'.
    c.put("b/a-c", b"1").await.unwrap();
    c.put("b/a.d", b"1").await.unwrap();
    assert_eq!(c.names("b").await, vec!["a-c", "a.d", "a/"]);
    // Deleting the only object reaps the empty implicit parents, not the bucket.
    c.call(MetaRequest::DeleteObject {
        path: p("b/a/c/x"),
        dir_marker: false,
        cond: None,
        version_id: None,
        versioning: Default::default(),
        bypass_governance: false,
        lifecycle: false,
    })
    .await
    .unwrap();
    assert_eq!(c.names("b").await, vec!["a-c", "a.d"]);
    assert_eq!(
        c.call(MetaRequest::DeleteBucket { name: "b".into() }).await,
        Err(MetaError::NotEmpty)
    );
    // An empty implicit directory (left by an interrupted put) does not block a file's name.
    c.mkdir_implicit("b/z").await.unwrap();
    c.put("b/z", b"file")
        .await
        .expect("the object replaces the empty implicit directory");
    assert!(!c.lookup("b/z").await.unwrap().attr.is_dir());
}

#[tokio::test]
async fn dir_marker_demotes_when_not_empty() {
    let mut c = start(Arc::new(MemStore::new())).await;
    c.create_bucket("b").await;
    let marker = NewObject {
        etag: "m".into(),
        inline: Some(bytes::Bytes::from_static(b"mk")),
        ..Default::default()
    };
    c.call(MetaRequest::PutDirMarker {
        path: p("b/d"),
        obj: marker,
    })
    .await
    .unwrap();
    c.put("b/d/f", b"1").await.unwrap();
    let d = c.lookup("b/d").await.unwrap();
    assert!(!d.attr.implicit);
    assert_eq!(d.data.as_deref(), Some(&b"mk"[..]));
    c.call(MetaRequest::DeleteObject {
        path: p("b/d"),
        dir_marker: true,
        cond: None,
        version_id: None,
        versioning: Default::default(),
        bypass_governance: false,
        lifecycle: false,
    })
    .await
    .unwrap();
    let d = c.lookup("b/d").await.unwrap();
    assert!(
        d.attr.implicit,
        "marker delete on a non-empty dir demotes it"
    );
    assert_eq!(d.data, None);
    c.call(MetaRequest::DeleteObject {
        path: p("b/d/f"),
        dir_marker: false,
        cond: None,
        version_id: None,
        versioning: Default::default(),
        bypass_governance: false,
        lifecycle: false,
    })
    .await
    .unwrap();
    assert_eq!(
        c.lookup("b/d").await.unwrap_err(),
        MetaError::NotFound,
        "demoted dir reaped when emptied"
    );
    c.call(MetaRequest::DeleteBucket { name: "b".into() })
        .await
        .unwrap();
    assert_eq!(c.lookup("b").await.unwrap_err(), MetaError::NoSuchBucket);
}

#[tokio::test]
async fn retried_write_returns_first_result() {
    let c = start(Arc::new(MemStore::new())).await;
    let tag = ClientTag { client: 7, seq: 1 };
    let req = MetaRequest::CreateBucket {
        name: "b".into(),
        uid: 0,
        gid: 0,
    };
    let first = c.node.call(tag, req.clone()).await;
    assert!(first.is_ok());
    assert_eq!(
        c.node.call(tag, req.clone()).await,
        first,
        "same tag: same answer, not Exists"
    );
    let again = c.node.call(ClientTag { client: 7, seq: 2 }, req).await;
    assert_eq!(again, Err(MetaError::Exists));
}

#[tokio::test]
async fn concurrent_writes_batch_and_survive_restart() {
    // The same store under a new raft instance: the log is replayed and ids continue.
    // (Durability of the redb file across a real kill -9 is the end-to-end crash test's job.)
    let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
    {
        let mut c = start(store.clone()).await;
        c.call(MetaRequest::CreateBucket {
            name: "b".into(),
            uid: 0,
            gid: 0,
        })
        .await
        .unwrap();
        let mut tasks = Vec::new();
        for i in 0..200u64 {
            let node = c.node.clone();
            tasks.push(tokio::spawn(async move {
                let obj = NewObject {
                    size: 1,
                    etag: format!("{i}"),
                    inline: Some(bytes::Bytes::from(vec![i as u8])),
                    ..Default::default()
                };
                node.call(
                    ClientTag {
                        client: 9,
                        seq: i + 1,
                    },
                    MetaRequest::PutObject {
                        path: p(&format!("b/f{i:03}")),
                        obj,
                        cond: None,
                        versioning: Default::default(),
                    },
                )
                .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        c.groups.shutdown().await;
    }
    let mut c = start(store).await;
    let names = c.names("b").await;
    assert_eq!(names.len(), 200);
    let v = c.lookup("b/f123").await.unwrap();
    assert_eq!(
        (v.attr.etag.as_str(), v.data.as_deref()),
        ("123", Some(&[123u8][..]))
    );
    // Ids keep increasing after the restart, in every group (the group is in the high bits).
    let mut highest = std::collections::BTreeMap::new();
    for i in 0..200 {
        let id = c.lookup(&format!("b/f{i:03}")).await.unwrap().attr.id;
        let top = highest.entry(id >> 48).or_insert(0);
        *top = id.max(*top);
    }
    for i in 0..40 {
        let MetaResponse::Attr(a) = c.put(&format!("b/new{i}"), b"x").await.unwrap() else {
            panic!()
        };
        assert!(a.id > highest.get(&(a.id >> 48)).copied().unwrap_or(0));
    }
}

#[tokio::test]
async fn later_batches_see_unapplied_writes_of_earlier_ones() {
    // Tiny batches, so the 201 requests span many batches with several in flight. One group:
    // parents on other groups are only seen once applied, which is another test's business.
    let cfg = MnodeConfig {
        max_batch: 3,
        pipeline_depth: 4,
        ..MnodeConfig::new(1)
    };
    let mut c = start_with(Arc::new(MemStore::new()), 1, cfg).await;
    // Dependent requests issued back to back without waiting: join_all polls the calls in
    // order, so they are queued in order, and with the pipeline the parent directory of a put
    // may still be in flight when the put is evaluated.
    let mut reqs = vec![MetaRequest::CreateBucket {
        name: "b".into(),
        uid: 0,
        gid: 0,
    }];
    for i in 0..100 {
        reqs.push(MetaRequest::MkdirImplicit {
            path: p(&format!("b/d{i}")),
            uid: 0,
            gid: 0,
        });
        let obj = NewObject {
            size: 1,
            etag: "e".into(),
            inline: Some(bytes::Bytes::from_static(b"x")),
            ..Default::default()
        };
        reqs.push(MetaRequest::PutObject {
            path: p(&format!("b/d{i}/f")),
            obj,
            cond: None,
            versioning: Default::default(),
        });
    }
    let node = c.node.clone();
    let calls = reqs.into_iter().enumerate().map(|(i, req)| {
        let node = node.clone();
        async move {
            node.call(
                ClientTag {
                    client: 11,
                    seq: i as u64 + 1,
                },
                req,
            )
            .await
        }
    });
    for r in futures::future::join_all(calls).await {
        r.expect("every request, queued in order, succeeds");
    }
    assert_eq!(c.names("b").await.len(), 100);
}

#[tokio::test]
async fn the_dedupe_table_keeps_one_window_of_a_clients_sparse_seqs() {
    // A client numbers all its requests with one counter, so one group sees every third seq
    // (say): the entries a window behind go all the same.
    let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
    let c = start_with(store.clone(), 1, MnodeConfig::new(1)).await;
    let tag = |seq| ClientTag { client: 9, seq };
    let bucket = MetaRequest::CreateBucket {
        name: "b".into(),
        uid: 0,
        gid: 0,
    };
    c.node.call(tag(1), bucket.clone()).await.unwrap();
    const STRIDE: u64 = 3;
    let writes = 2 * saker_mnode::DEDUPE_WINDOW / STRIDE + 200;
    for i in 1..=writes {
        let req = MetaRequest::PutObject {
            path: p(&format!("b/k{i}")),
            obj: inline_object(b"x"),
            cond: None,
            versioning: Default::default(),
        };
        c.node.call(tag(1 + i * STRIDE), req).await.unwrap();
    }
    let keys = saker_mnode::keys::Keys::new(1);
    let table = keys.table(saker_mnode::keys::DEDUPE);
    let end = keys.table_end(saker_mnode::keys::DEDUPE);
    let kept = store.scan(&table, Some(&end), usize::MAX).unwrap().len() as u64;
    // One window, and the up to 64 seqs a trim waits for before it scans.
    let window = (saker_mnode::DEDUPE_WINDOW + 64) / STRIDE + 1;
    assert!(
        kept <= window,
        "{kept} dedupe entries kept for {writes} writes; one window is {window}"
    );
    // The newest ones are still answered from the table (a new CreateBucket of "b" would be
    // refused).
    assert!(c.node.call(tag(1 + writes * STRIDE), bucket).await.is_ok());
}

/// `ChunkRefs` answers in pages by chunk id: pages of 3 come in order, cover every referenced
/// chunk once, and a chunk whose object was renamed between two pages (its record moved) is
/// still in its page.
#[tokio::test]
async fn chunk_refs_come_in_pages_by_id() {
    let mut c = start_with(Arc::new(MemStore::new()), 1, MnodeConfig::new(1)).await;
    c.create_bucket("b").await;
    let mut all = std::collections::BTreeSet::new();
    for i in 0..4u128 {
        let chunks: Vec<saker_rpc::ChunkRef> = (0..2u128)
            .map(|j| saker_rpc::ChunkRef {
                id: (i * 7919 + j * 104_729) << 64 | (i * 2 + j),
                len: 10,
                crc32c: 0,
            })
            .collect();
        all.extend(chunks.iter().map(|r| r.id));
        let obj = NewObject {
            size: 20,
            etag: format!("e{i}"),
            layout: Layout::Chunks(chunks),
            ..Default::default()
        };
        c.call(MetaRequest::PutObject {
            path: p(&format!("b/k{i}")),
            obj,
            cond: None,
            versioning: Default::default(),
        })
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let req = MetaRequest::ChunkRefs {
            after,
            limit: 3,
            leaks: true,
        };
        let MetaResponse::ChunkIds(ids) = c.call(req).await.unwrap() else {
            panic!("not ids")
        };
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
        pages += 1;
        if pages == 1 {
            // The first page's objects move to names that sort first and last.
            c.call(MetaRequest::Rename {
                from: p("b/k0"),
                to: p("b/a0"),
                noreplace: false,
                cred: saker_rpc::Cred::ROOT,
                versioning: Default::default(),
            })
            .await
            .unwrap();
        }
        seen.extend(ids.iter().copied());
        match ids.last() {
            Some(&l) if ids.len() == 3 => after = Some(l),
            _ => break,
        }
    }
    assert_eq!(pages, 3, "8 ids in pages of 3");
    assert_eq!(seen, all.into_iter().collect::<Vec<_>>());
    let too_big = MetaRequest::ChunkRefs {
        after: None,
        limit: saker_rpc::MAX_LIST_PAGE + 1,
        leaks: true,
    };
    assert!(matches!(c.call(too_big).await, Err(MetaError::Invalid(_))));
}

fn tag(seq: u64) -> ClientTag {
    ClientTag { client: 44, seq }
}

/// Whether `call` is still waiting after a while (it is held), else its answer.
async fn held<T>(call: &mut (impl std::future::Future<Output = T> + Unpin)) -> Option<T> {
    tokio::time::timeout(std::time::Duration::from_millis(300), call)
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_holds_survive_a_new_leader_and_fence_an_older_coordinator() {
    let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
    let (parent, dir) = {
        let mut c = start(store.clone()).await;
        c.create_bucket("b").await;
        c.mkdir_implicit("b/d").await.unwrap();
        c.put("b/f", b"old").await.unwrap();
        let frozen = c
            .call(MetaRequest::Freeze {
                path: p("b/d"),
                coord: 5,
            })
            .await
            .unwrap();
        let MetaResponse::Frozen { parent, attr } = frozen else {
            panic!("freeze answered {frozen:?}")
        };
        // A retried freeze is the same hold, so one release ends it.
        c.call(MetaRequest::Freeze {
            path: p("b/d"),
            coord: 5,
        })
        .await
        .unwrap();
        c.call(MetaRequest::BlockPath {
            path: p("b/f"),
            coord: 5,
        })
        .await
        .unwrap();
        c.groups.shutdown().await;
        (parent, attr.id)
    };
    // Every group elects a leader again on the same state: the holds are kept.
    let mut c = start(store).await;
    let g = c.groups.router.owner(parent, "d");
    let owner = c.groups.mnodes[g as usize - 1].clone();
    let fenced = owner
        .call(tag(0), MetaRequest::Unfreeze { dir, coord: 4 })
        .await
        .unwrap_err();
    assert_eq!(
        fenced,
        MetaError::Fenced { term: 4 },
        "the fence is kept too"
    );
    let node = c.node.clone();
    let write_below = |path: &'static str, seq: u64| {
        let node = node.clone();
        Box::pin(async move {
            let req = MetaRequest::PutObject {
                path: p(path),
                obj: inline_object(b"new"),
                cond: None,
                versioning: Default::default(),
            };
            node.call(ClientTag { client: 43, seq }, req).await
        })
    };
    let mut below = write_below("b/d/x", 1);
    assert!(
        held(&mut below).await.is_none(),
        "a write below a frozen dir waits"
    );
    let mut over = write_below("b/f", 2);
    assert!(
        held(&mut over).await.is_none(),
        "a write to a blocked path waits"
    );
    owner
        .call(tag(0), MetaRequest::Unfreeze { dir, coord: 5 })
        .await
        .unwrap();
    below.await.unwrap();
    assert_eq!(
        c.lookup("b/d/x").await.unwrap().data.as_deref(),
        Some(&b"new"[..])
    );
    assert!(held(&mut over).await.is_none(), "the path is still blocked");
    // A new coordinator releases every hold and fences the old one out.
    for m in &c.groups.mnodes {
        m.call(tag(0), MetaRequest::ThawAll { coord: 6 })
            .await
            .unwrap();
    }
    over.await.unwrap();
    assert_eq!(
        c.lookup("b/f").await.unwrap().data.as_deref(),
        Some(&b"new"[..])
    );
    let late = c
        .call(MetaRequest::Freeze {
            path: p("b/d"),
            coord: 5,
        })
        .await;
    assert_eq!(late.unwrap_err(), MetaError::Fenced { term: 5 });
    let late = owner.call(tag(0), MetaRequest::ThawAll { coord: 5 }).await;
    assert_eq!(late.unwrap_err(), MetaError::Fenced { term: 5 });
}

/// An in-memory store that records the keys each write deletes.
#[derive(Default)]
struct DeleteLog {
    inner: MemStore,
    deleted: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl MetaStore for DeleteLog {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, saker_mnode::store::StoreError> {
        self.inner.get(key)
    }

    fn write(
        &self,
        batch: &saker_mnode::store::WriteBatch,
        durable: bool,
    ) -> Result<(), saker_mnode::store::StoreError> {
        let gone = batch.ops.iter().filter(|(_, v)| v.is_none());
        self.deleted
            .lock()
            .unwrap()
            .extend(gone.map(|(k, _)| k.clone()));
        self.inner.write(batch, durable)
    }

    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<saker_mnode::store::KvPairs, saker_mnode::store::StoreError> {
        self.inner.scan(start, end, limit)
    }

    fn last_in(
        &self,
        start: &[u8],
        end: &[u8],
    ) -> Result<Option<saker_mnode::store::Kv>, saker_mnode::store::StoreError> {
        self.inner.last_in(start, end)
    }
}

impl DeleteLog {
    /// The payload records deleted since the last call.
    fn payloads_deleted(&self) -> usize {
        let prefixes: Vec<Vec<u8>> = (0..8)
            .map(|g| saker_mnode::keys::Keys::new(g).table(saker_mnode::keys::PAYLOAD))
            .collect();
        let mut deleted = self.deleted.lock().unwrap();
        let n = deleted
            .iter()
            .filter(|k| prefixes.iter().any(|p| k.starts_with(p)))
            .count();
        deleted.clear();
        n
    }
}

/// A new object's inode id was never used: its put deletes no payload records (tags, lock,
/// ACL it does not have). An overwrite keeps its id and still deletes the ones it drops.
#[tokio::test]
async fn a_new_object_deletes_no_payloads_and_an_overwrite_still_does() {
    let store = Arc::new(DeleteLog::default());
    let mut c = start(store.clone()).await;
    c.create_bucket("b").await;
    store.payloads_deleted();
    c.put("b/new", b"first").await.unwrap();
    assert_eq!(store.payloads_deleted(), 0);
    let mut tagged = inline_object(b"second");
    tagged.tags = vec![("k".into(), "v".into())];
    c.call(MetaRequest::PutObject {
        path: p("b/new"),
        obj: tagged,
        cond: None,
        versioning: Default::default(),
    })
    .await
    .unwrap();
    // Its lock and ACL.
    assert_eq!(store.payloads_deleted(), 2);
    c.put("b/new", b"third").await.unwrap();
    // Its tags too.
    assert_eq!(store.payloads_deleted(), 3);
    assert_eq!(
        c.lookup("b/new").await.unwrap().data.as_deref(),
        Some(&b"third"[..])
    );
}
