//! Several MNode groups in one process: path resolution through other groups' directories,
//! parent-directory updates through the change-log, and the races of the rmdir protocol.

use std::sync::Arc;

use saker_coordinator::NamespaceCoordinator;
use saker_mnode::{LocalGroups, MemStore, MetaStore, Mnode, MnodeConfig, ParentUpdates};
use saker_namespace::Route;
use saker_rpc::{
    Attr, ClientTag, Layout, MetaError, MetaRequest, MetaResponse, MetaService, NewObject, Want,
};

fn p(s: &str) -> Vec<String> {
    s.split('/').map(str::to_string).collect()
}

struct Cluster {
    groups: LocalGroups,
    coordinator: Arc<NamespaceCoordinator>,
}

static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn tag() -> ClientTag {
    ClientTag {
        client: 77,
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    }
}

impl Cluster {
    async fn start(store: Arc<dyn MetaStore>) -> Self {
        Self::start_with(store, ParentUpdates::Async).await
    }

    async fn start_with(store: Arc<dyn MetaStore>, mode: ParentUpdates) -> Self {
        let cfg = MnodeConfig {
            parent_updates: mode,
            ..MnodeConfig::new(1)
        };
        let groups = LocalGroups::start(store, 4, cfg).await.unwrap();
        let coordinator = Arc::new(NamespaceCoordinator::new(
            groups.router.clone(),
            groups.services(),
        ));
        groups.connect(coordinator.clone());
        Self {
            groups,
            coordinator,
        }
    }

    /// The group owning `name`.
    fn owner(&self, name: &str) -> u32 {
        match self.groups.router.route_name(name) {
            Route::Group(g) => g,
            Route::PathWalk => unreachable!("no exceptions in these tests"),
        }
    }

    fn node(&self, g: u32) -> &Arc<Mnode> {
        &self.groups.mnodes[g as usize - 1]
    }

    /// A name owned by group `g` (and not by `not`), made from `stem`.
    fn name_on(&self, g: u32, stem: &str) -> String {
        (0..)
            .map(|i| format!("{stem}{i}"))
            .find(|n| self.owner(n) == g)
            .unwrap()
    }

    /// Sends `req` to the owner of `path`'s last component.
    async fn call(&self, path: &[String], req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let g = self.owner(path.last().unwrap());
        self.node(g).call(tag(), req).await
    }

    async fn bucket(&self, name: &str) {
        self.call(
            &p(name),
            MetaRequest::CreateBucket {
                name: name.into(),
                uid: 0,
                gid: 0,
            },
        )
        .await
        .unwrap();
    }

    async fn mkdir(&self, path: &str) -> Result<MetaResponse, MetaError> {
        self.call(
            &p(path),
            MetaRequest::Mkdir {
                path: p(path),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: saker_rpc::Cred::ROOT,
            },
        )
        .await
    }

    async fn put(&self, path: &str) -> Result<MetaResponse, MetaError> {
        let obj = NewObject {
            size: 1,
            etag: "e".into(),
            layout: Layout::Inline,
            inline: Some(bytes::Bytes::from_static(b"x")),
            ..Default::default()
        };
        self.call(
            &p(path),
            MetaRequest::PutObject {
                path: p(path),
                obj,
                cond: None,
                versioning: Default::default(),
            },
        )
        .await
    }

    async fn attr(&self, path: &str) -> Result<Attr, MetaError> {
        let req = MetaRequest::Lookup {
            path: p(path),
            want: Want::ATTR,
        };
        match self.call(&p(path), req).await? {
            MetaResponse::Object(v) => Ok(v.attr),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parent_attributes_follow_creates_and_deletes_sync() {
    parent_attributes_follow_creates_and_deletes(ParentUpdates::Sync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parent_attributes_follow_creates_and_deletes_async() {
    parent_attributes_follow_creates_and_deletes(ParentUpdates::Async).await;
}

/// After a create or unlink on any group returns, a stat of the parent shows it.
async fn parent_attributes_follow_creates_and_deletes(mode: ParentUpdates) {
    let c = Cluster::start_with(Arc::new(MemStore::new()), mode).await;
    c.bucket("b").await;
    let dir_owner = c.owner("d");
    c.mkdir("b/d").await.unwrap();
    let before = c.attr("b/d").await.unwrap();
    // Files on every group, concurrently.
    let names: Vec<String> = (0..64).map(|i| format!("f{i}")).collect();
    assert!(
        names.iter().any(|n| c.owner(n) != dir_owner),
        "some files live away from their directory"
    );
    let paths: Vec<String> = names.iter().map(|n| format!("b/d/{n}")).collect();
    for r in futures::future::join_all(paths.iter().map(|path| c.put(path))).await {
        r.unwrap();
    }
    // Sync mode: every create's change is at the owner before the create returns.
    let after = c.attr("b/d").await.unwrap();
    assert_eq!(after.children, 64);
    assert!(after.mtime_ns >= before.mtime_ns);
    c.mkdir("b/d/sub").await.unwrap();
    let with_sub = c.attr("b/d").await.unwrap();
    assert_eq!((with_sub.children, with_sub.nlink), (65, 3));
    for (i, n) in names[..10].iter().enumerate() {
        let path = p(&format!("b/d/{n}"));
        c.call(
            &path,
            MetaRequest::Unlink {
                path: path.clone(),
                cred: saker_rpc::Cred::ROOT,
                versioning: saker_rpc::Versioning::Off,
            },
        )
        .await
        .unwrap();
        assert_eq!(c.attr("b/d").await.unwrap().children, 64 - i as u64);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rmdir_races_create_below_on_another_group() {
    let c = Arc::new(Cluster::start(Arc::new(MemStore::new())).await);
    c.bucket("b").await;
    let dir = c.name_on(1, "d");
    let file = c.name_on(2, "f");
    for round in 0..40 {
        let dpath = format!("b/{dir}");
        let fpath = format!("b/{dir}/{file}");
        c.mkdir(&dpath).await.unwrap();
        let dir_id = c.attr(&dpath).await.unwrap().id;
        let rmdir = {
            let c = c.clone();
            let dpath = dpath.clone();
            tokio::spawn(async move {
                let path = p(&dpath);
                c.call(
                    &path,
                    MetaRequest::Rmdir {
                        path: path.clone(),
                        cred: saker_rpc::Cred::ROOT,
                    },
                )
                .await
            })
        };
        let put = {
            let c = c.clone();
            let fpath = fpath.clone();
            tokio::spawn(async move { c.put(&fpath).await })
        };
        let (rmdir, put) = (rmdir.await.unwrap(), put.await.unwrap());
        match (&rmdir, &put) {
            (Ok(_), Ok(_)) => {
                let f = c.attr(&fpath).await;
                let d = c.attr(&dpath).await;
                let mut usage = Vec::new();
                for g in &c.groups.mnodes {
                    usage.push(
                        g.call(tag(), MetaRequest::DirUsage { dirs: vec![dir_id] })
                            .await,
                    );
                }
                panic!(
                    "round {round}: rmdir and a create below both succeeded: file {f:?}, \
                     directory {d:?}, usage per group {usage:?}"
                )
            }
            (Err(MetaError::NotEmpty), Ok(_)) => {
                // The file exists and is reachable; clean up for the next round.
                c.attr(&fpath).await.expect("created file is reachable");
                let path = p(&fpath);
                c.call(
                    &path,
                    MetaRequest::Unlink {
                        path: path.clone(),
                        cred: saker_rpc::Cred::ROOT,
                        versioning: saker_rpc::Versioning::Off,
                    },
                )
                .await
                .unwrap();
                let path = p(&dpath);
                c.call(
                    &path,
                    MetaRequest::Rmdir {
                        path: path.clone(),
                        cred: saker_rpc::Cred::ROOT,
                    },
                )
                .await
                .unwrap();
            }
            (Ok(_), Err(MetaError::MissingParent { depth: 1 })) => {
                assert_eq!(c.attr(&dpath).await.unwrap_err(), MetaError::NotFound);
                // No entry was left behind under the removed directory on any group.
                for g in &c.groups.mnodes {
                    let usage = g.call(tag(), MetaRequest::DirUsage { dirs: vec![dir_id] });
                    assert_eq!(
                        usage.await.unwrap(),
                        MetaResponse::Usage(Default::default())
                    );
                }
            }
            other => panic!("round {round}: unexpected outcome {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_mkdir_of_one_name_succeeds_once() {
    let c = Arc::new(Cluster::start(Arc::new(MemStore::new())).await);
    c.bucket("b").await;
    let calls = (0..4u32).map(|g| {
        let c = c.clone();
        async move {
            // Sent to every group: the non-owners forward.
            let req = MetaRequest::Mkdir {
                path: p("b/same"),
                mode: 0o755,
                uid: 0,
                gid: 0,
                cred: saker_rpc::Cred::ROOT,
            };
            c.node(g + 1).call(tag(), req).await
        }
    });
    let results = futures::future::join_all(calls).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let exists = results
        .iter()
        .filter(|r| **r == Err(MetaError::Exists))
        .count();
    assert_eq!((ok, exists), (1, 3), "{results:?}");
    assert_eq!(c.attr("b").await.unwrap().children, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_bucket_sweeps_implicit_dirs_on_every_group() {
    let c = Cluster::start(Arc::new(MemStore::new())).await;
    c.bucket("b").await;
    // Implicit directories at several depths, spread over groups, one object deep down.
    for d in ["b/x", "b/x/y", "b/x/y/z", "b/w", "b/w/v"] {
        c.call(
            &p(d),
            MetaRequest::MkdirImplicit {
                path: p(d),
                uid: 0,
                gid: 0,
            },
        )
        .await
        .unwrap();
    }
    c.put("b/x/y/z/obj").await.unwrap();
    let bucket = p("b");
    let del = || c.call(&bucket, MetaRequest::DeleteBucket { name: "b".into() });
    assert_eq!(del().await, Err(MetaError::NotEmpty));
    let path = p("b/x/y/z/obj");
    c.call(
        &path,
        MetaRequest::DeleteObject {
            path: path.clone(),
            dir_marker: false,
            cond: None,
            version_id: None,
            versioning: Default::default(),
            bypass_governance: false,
            lifecycle: false,
        },
    )
    .await
    .unwrap();
    // The delete reaped z, y and x (cascading through the coordinator); w/v stays.
    assert_eq!(c.attr("b/x").await.unwrap_err(), MetaError::NotFound);
    let (w, v) = (c.attr("b/w").await.unwrap(), c.attr("b/w/v").await.unwrap());
    assert!(w.implicit && v.implicit);
    del().await.unwrap();
    assert_eq!(c.attr("b").await.unwrap_err(), MetaError::NoSuchBucket);
    // Nothing of the bucket's subtree is left on any group.
    for id in [w.id, v.id] {
        for g in &c.groups.mnodes {
            let usage = g.call(tag(), MetaRequest::DirUsage { dirs: vec![id] });
            assert_eq!(
                usage.await.unwrap(),
                MetaResponse::Usage(Default::default())
            );
        }
    }
    // The name is free again.
    c.bucket("b").await;
}

/// The directory's owner as the other groups see it while their pushes fail: everything but
/// `ApplyChanges` gets through (a crash between a create's commit and its change push).
struct PushesFail(Arc<dyn MetaService>);

#[async_trait::async_trait]
impl MetaService for PushesFail {
    async fn call(&self, tag: ClientTag, req: MetaRequest) -> Result<MetaResponse, MetaError> {
        match req {
            MetaRequest::ApplyChanges { .. } => Err(MetaError::Unavailable("down".into())),
            req => self.0.call(tag, req).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn change_log_is_pushed_after_a_restart_and_applied_once() {
    let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
    let groups = LocalGroups::start(store.clone(), 4, MnodeConfig::new(1))
        .await
        .unwrap();
    let coordinator = Arc::new(NamespaceCoordinator::new(
        groups.router.clone(),
        groups.services(),
    ));
    let c = Cluster {
        groups,
        coordinator: coordinator.clone(),
    };
    let dir_owner = c.owner("d");
    for m in &c.groups.mnodes {
        let mut peers = c.groups.services();
        if m.group() != dir_owner {
            let owner = peers[&dir_owner].clone();
            peers.insert(dir_owner, Arc::new(PushesFail(owner)));
        }
        m.connect(peers, coordinator.clone());
    }
    c.bucket("b").await;
    c.mkdir("b/d").await.unwrap();
    let files: Vec<String> = (0..200)
        .map(|i| format!("f{i}"))
        .filter(|n| c.owner(n) != dir_owner)
        .take(20)
        .collect();
    for f in &files {
        c.put(&format!("b/d/{f}"))
            .await
            .expect("a create commits even when its parent's owner is unreachable");
    }
    assert_eq!(
        c.attr("b/d").await.unwrap().children,
        0,
        "nothing pushed yet"
    );
    c.groups.shutdown().await;

    for restart in 0..2 {
        let c = Cluster::start(store.clone()).await;
        for m in &c.groups.mnodes {
            m.push_changes().await.unwrap();
        }
        let d = c.attr("b/d").await.unwrap();
        assert_eq!(
            d.children, 20,
            "restart {restart}: every change applied exactly once"
        );
        for f in &files {
            c.attr(&format!("b/d/{f}")).await.unwrap();
        }
        c.groups.shutdown().await;
    }
}

impl Cluster {
    async fn rename(&self, from: &str, to: &str, noreplace: bool) -> Result<Attr, MetaError> {
        let req = MetaRequest::CoordinatedRename {
            from: p(from),
            to: p(to),
            noreplace,
            cred: saker_rpc::Cred::ROOT,
            versioning: Default::default(),
        };
        // Any group hands it to the coordinator.
        match self.node(1).call(tag(), req).await? {
            MetaResponse::Attr(a) => Ok(a),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn directory_rename_moves_only_the_directory_record() {
    let c = Cluster::start(Arc::new(MemStore::new())).await;
    c.bucket("b").await;
    let src = c.name_on(1, "src");
    let dst = c.name_on(3, "dst");
    c.mkdir("b/x").await.unwrap();
    c.mkdir(&format!("b/{src}")).await.unwrap();
    c.mkdir(&format!("b/{src}/sub")).await.unwrap();
    let files: Vec<String> = (0..32).map(|i| format!("f{i}")).collect();
    for f in &files {
        c.put(&format!("b/{src}/{f}")).await.unwrap();
    }
    c.put(&format!("b/{src}/sub/deep")).await.unwrap();
    let before = c.attr(&format!("b/{src}")).await.unwrap();
    let (b0, x0) = (c.attr("b").await.unwrap(), c.attr("b/x").await.unwrap());

    let moved = c
        .rename(&format!("b/{src}"), &format!("b/x/{dst}"), false)
        .await
        .unwrap();
    assert_eq!(moved.id, before.id, "the directory keeps its inode");
    assert_eq!((moved.children, moved.nlink), (33, 3));
    assert_eq!(
        c.attr(&format!("b/{src}")).await.unwrap_err(),
        MetaError::NotFound
    );
    for f in &files {
        assert_eq!(
            c.attr(&format!("b/{src}/{f}")).await.unwrap_err(),
            MetaError::NotFound
        );
        c.attr(&format!("b/x/{dst}/{f}")).await.unwrap();
    }
    c.attr(&format!("b/x/{dst}/sub/deep")).await.unwrap();
    // The parents' entry counts and link counts moved with it.
    let (b1, x1) = (c.attr("b").await.unwrap(), c.attr("b/x").await.unwrap());
    assert_eq!((b1.children, b1.nlink), (b0.children - 1, b0.nlink - 1));
    assert_eq!((x1.children, x1.nlink), (x0.children + 1, x0.nlink + 1));
    // New entries land under the new name.
    c.put(&format!("b/x/{dst}/later")).await.unwrap();
    assert_eq!(c.attr(&format!("b/x/{dst}")).await.unwrap().children, 34);

    // Targets: an empty directory is replaced; a full one, a file, noreplace and a move
    // below itself are refused.
    c.mkdir("b/empty").await.unwrap();
    c.mkdir("b/full").await.unwrap();
    c.put("b/full/f").await.unwrap();
    c.put("b/file").await.unwrap();
    let path = format!("b/x/{dst}");
    assert_eq!(
        c.rename(&path, "b/full", false).await.unwrap_err(),
        MetaError::NotEmpty
    );
    assert_eq!(
        c.rename(&path, "b/file", false).await.unwrap_err(),
        MetaError::NotDir
    );
    assert_eq!(
        c.rename(&path, "b/empty", true).await.unwrap_err(),
        MetaError::Exists
    );
    assert!(matches!(
        c.rename(&path, &format!("{path}/sub/inner"), false)
            .await
            .unwrap_err(),
        MetaError::Invalid(_)
    ));
    let replaced = c.attr("b/empty").await.unwrap().id;
    let moved = c.rename(&path, "b/empty", false).await.unwrap();
    assert_eq!(moved.id, before.id);
    assert_ne!(c.attr("b/empty").await.unwrap().id, replaced);
    c.attr("b/empty/sub/deep").await.unwrap();
    // The file in the refused target is still there.
    c.attr("b/full/f").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn directory_rename_races_lookups_and_creates_inside_it() {
    let c = Arc::new(Cluster::start(Arc::new(MemStore::new())).await);
    c.bucket("b").await;
    let mut name = "d0".to_string();
    for round in 1..=12 {
        let from = format!("b/{name}");
        if round == 1 {
            c.mkdir(&from).await.unwrap();
            c.put(&format!("{from}/seed")).await.unwrap();
        }
        let next = format!("d{round}");
        let to = format!("b/{next}");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Readers and writers inside the directory while it is renamed.
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (c, from, stop) = (c.clone(), from.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut created = Vec::new();
                    let mut i = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        match c.attr(&format!("{from}/seed")).await {
                            Ok(_) | Err(MetaError::NotFound) => {}
                            Err(e) => panic!("lookup inside a renamed directory: {e:?}"),
                        }
                        let f = format!("w{w}-{round}-{i}");
                        match c.put(&format!("{from}/{f}")).await {
                            Ok(_) => created.push(f),
                            Err(MetaError::MissingParent { .. } | MetaError::NotFound) => {}
                            Err(e) => panic!("create inside a renamed directory: {e:?}"),
                        }
                        i += 1;
                        tokio::task::yield_now().await;
                    }
                    created
                })
            })
            .collect();
        tokio::task::yield_now().await;
        c.rename(&from, &to, false).await.unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut created = Vec::new();
        for w in workers {
            created.extend(w.await.unwrap());
        }
        // Every create that succeeded is under the new name; nothing is under the old one.
        for f in &created {
            c.attr(&format!("{to}/{f}")).await.unwrap();
        }
        c.attr(&format!("{to}/seed")).await.unwrap();
        assert_eq!(c.attr(&from).await.unwrap_err(), MetaError::NotFound);
        name = next;
    }
}

impl Cluster {
    async fn data(&self, path: &str) -> Result<Vec<u8>, MetaError> {
        let want = Want::DATA;
        let req = MetaRequest::Lookup {
            path: p(path),
            want,
        };
        match self.call(&p(path), req).await? {
            MetaResponse::Object(v) => Ok(v.data.unwrap_or_default().to_vec()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_moves_between_groups_keeping_its_inode_while_writers_wait() {
    let c = Arc::new(Cluster::start(Arc::new(MemStore::new())).await);
    c.bucket("b").await;
    c.mkdir("b/x").await.unwrap();
    c.mkdir("b/y").await.unwrap();
    let from = format!("b/x/{}", c.name_on(1, "f"));
    let to = format!("b/y/{}", c.name_on(3, "g"));
    c.put(&from).await.unwrap();
    let id = c.attr(&from).await.unwrap().id;
    let (x0, y0) = (c.attr("b/x").await.unwrap(), c.attr("b/y").await.unwrap());
    let moved = c.rename(&from, &to, false).await.unwrap();
    assert_eq!(moved.id, id, "the inode keeps its id");
    assert_eq!(c.data(&to).await.unwrap(), b"x");
    assert_eq!(c.attr(&from).await.unwrap_err(), MetaError::NotFound);
    assert_eq!(c.attr("b/x").await.unwrap().children, x0.children - 1);
    assert_eq!(c.attr("b/y").await.unwrap().children, y0.children + 1);
    // Within one group through the coordinator: one step, payloads kept.
    let same = format!("b/y/{}", c.name_on(3, "h"));
    assert_eq!(c.rename(&to, &same, false).await.unwrap().id, id);
    assert_eq!(c.data(&same).await.unwrap(), b"x");
    assert_eq!(c.attr(&to).await.unwrap_err(), MetaError::NotFound);
    // noreplace over an existing file, and a file over a directory.
    c.put(&to).await.unwrap();
    assert_eq!(
        c.rename(&same, &to, true).await.unwrap_err(),
        MetaError::Exists
    );
    assert_eq!(
        c.rename(&same, "b/x", false).await.unwrap_err(),
        MetaError::IsDir
    );

    // Writers of the source path while it moves wait for the move, then succeed.
    for round in 0..10 {
        let src = format!("b/x/{}", c.name_on(2, &format!("w{round}-")));
        let dst = format!("b/y/{}", c.name_on(4, &format!("v{round}-")));
        c.put(&src).await.unwrap();
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let (c, src) = (c.clone(), src.clone());
                tokio::spawn(async move {
                    for _ in 0..5 {
                        c.put(&src).await.unwrap();
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        c.rename(&src, &dst, false).await.unwrap();
        for w in writers {
            w.await.unwrap();
        }
        assert_eq!(c.data(&dst).await.unwrap(), b"x");
    }
}

impl Cluster {
    /// The groups whose own records hold an entry `name` under directory `dir`.
    async fn holders(&self, dir: u64, name: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for (i, node) in self.groups.mnodes.iter().enumerate() {
            let req = MetaRequest::Scan {
                dir,
                start_after: Vec::new(),
                limit: 10_000,
                reader: None,
            };
            match node.call(tag(), req).await.unwrap() {
                MetaResponse::Entries(e) if e.iter().any(|e| e.name == name) => {
                    out.push(i as u32 + 1)
                }
                _ => {}
            }
        }
        out
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redirected_name_moves_its_inodes_and_requests_follow() {
    use saker_namespace::Exception;
    let c = Arc::new(Cluster::start(Arc::new(MemStore::new())).await);
    c.bucket("b").await;
    let ring_owner = c.owner("Makefile");
    let target = (1..=4).find(|g| *g != ring_owner).unwrap();
    let mut dirs = Vec::new();
    for k in 0..8 {
        c.mkdir(&format!("b/d{k}")).await.unwrap();
        c.put(&format!("b/d{k}/Makefile")).await.unwrap();
        c.put(&format!("b/d{k}/main.c")).await.unwrap();
        dirs.push(c.attr(&format!("b/d{k}")).await.unwrap());
    }
    let ids: Vec<u64> = futures::future::join_all((0..8).map(|k| {
        let c = c.clone();
        async move { c.attr(&format!("b/d{k}/Makefile")).await.unwrap().id }
    }))
    .await;
    // Writers of the name keep going while it moves: they wait for the move, then succeed.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let c = c.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    c.put(&format!("b/d{}/Makefile", (w + i) % 8))
                        .await
                        .unwrap();
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    let table = c
        .coordinator
        .set_exception("Makefile", Some(Exception::Override(target)))
        .await
        .unwrap();
    for w in writers {
        w.await.unwrap();
    }
    assert_eq!(table.get("Makefile"), Some(&Exception::Override(target)));
    for (k, dir) in dirs.iter().enumerate() {
        // Exactly one record, at the new owner; the parent's counts did not move.
        assert_eq!(c.holders(dir.id, "Makefile").await, vec![target], "d{k}");
        let now = c.attr(&format!("b/d{k}")).await.unwrap();
        assert_eq!(now.children, dir.children, "d{k}");
        // Found from every group (the old owner forwards).
        for g in 1..=4u32 {
            let req = MetaRequest::Lookup {
                path: p(&format!("b/d{k}/Makefile")),
                want: Want::ATTR,
            };
            assert!(
                c.node(g).call(tag(), req).await.is_ok(),
                "d{k} via group {g}"
            );
        }
        // Other names stay where the ring puts them.
        assert_eq!(
            c.holders(dir.id, "main.c").await,
            vec![c.owner("main.c")],
            "d{k}"
        );
    }
    // Files not rewritten by the writers kept their inode.
    let after = c.attr("b/d0/Makefile").await.unwrap().id;
    assert!(ids.contains(&after) || after > *ids.iter().max().unwrap());
    // New files of the name go to the new owner.
    c.mkdir("b/new").await.unwrap();
    c.put("b/new/Makefile").await.unwrap();
    let new_dir = c.attr("b/new").await.unwrap().id;
    assert_eq!(c.holders(new_dir, "Makefile").await, vec![target]);
    // Back to the ring: everything moves back.
    c.coordinator.set_exception("Makefile", None).await.unwrap();
    for dir in &dirs {
        assert_eq!(c.holders(dir.id, "Makefile").await, vec![ring_owner]);
    }
    assert_eq!(c.holders(new_dir, "Makefile").await, vec![ring_owner]);
    // A name some directory has is refused.
    c.mkdir("b/d0/Kconfig").await.unwrap();
    assert!(matches!(
        c.coordinator
            .set_exception("Kconfig", Some(Exception::Override(target)))
            .await,
        Err(MetaError::Invalid(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_balancing_round_brings_every_group_under_the_bound() {
    let c = Arc::new(Cluster::start(Arc::new(MemStore::new())).await);
    c.bucket("b").await;
    // A source-tree-like namespace: 300 directories, each with a Makefile (one name, so one
    // group holds all 300) and two unique files.
    let paths: Vec<String> = (0..300)
        .flat_map(|d| {
            [
                format!("b/d{d}/Makefile"),
                format!("b/d{d}/main{d}.c"),
                format!("b/d{d}/util{d}.c"),
            ]
        })
        .collect();
    for d in 0..300 {
        c.mkdir(&format!("b/d{d}")).await.unwrap();
    }
    for chunk in paths.chunks(64) {
        for r in futures::future::join_all(chunk.iter().map(|p| c.put(p))).await {
            r.unwrap();
        }
    }
    let report = c.coordinator.balance_once(0.05, 8, 0).await.unwrap();
    assert!(
        report.max_share_before > report.bound,
        "the test namespace starts unbalanced: {report:?}"
    );
    assert!(
        report.max_share_after <= report.bound,
        "a round brings the groups under the bound: {report:?}"
    );
    assert!(
        !report.added.is_empty() && report.added.len() <= 8,
        "{report:?}"
    );
    // Every file is still found, from any group.
    for (i, path) in paths.iter().enumerate() {
        let g = (i % 4) as u32 + 1;
        let req = MetaRequest::Lookup {
            path: p(path),
            want: Want::ATTR,
        };
        assert!(c.node(g).call(tag(), req).await.is_ok(), "{path}");
    }
    // A second round has nothing to add.
    let again = c.coordinator.balance_once(0.05, 8, 0).await.unwrap();
    assert!(again.added.is_empty(), "{again:?}");
}

/// mkdir of `path` by uid 1000 (not the owner of anything here), sent to group `g`.
async fn mkdir_as_user(c: &Cluster, g: u32, path: &str) -> Result<MetaResponse, MetaError> {
    let req = MetaRequest::Mkdir {
        path: p(path),
        mode: 0o755,
        uid: 1000,
        gid: 1000,
        cred: saker_rpc::Cred {
            uid: 1000,
            gid: 1000,
            groups: vec![],
        },
    };
    c.node(g).call(tag(), req).await
}

fn chmod(path: &str, mode: u32, cred: saker_rpc::Cred) -> MetaRequest {
    MetaRequest::chmod(p(path), mode, cred)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_directory_chmod_reaches_every_replica_before_it_returns() {
    let c = Cluster::start(Arc::new(MemStore::new())).await;
    c.bucket("b").await;
    let d = c.name_on(1, "d");
    let dir = format!("b/{d}");
    c.mkdir(&dir).await.unwrap();
    c.call(&p(&dir), chmod(&dir, 0o777, saker_rpc::Cred::ROOT))
        .await
        .unwrap();
    // Every other group resolves through the directory and caches it, mode 0777.
    for g in 2..=4 {
        let name = c.name_on(g, "sub");
        mkdir_as_user(&c, g, &format!("{dir}/{name}"))
            .await
            .unwrap();
    }
    let before: Vec<u64> = (1..=4)
        .map(|g| c.node(g).counters().unwrap().invalidations)
        .collect();

    // Writers on every other group keep trying while the owner closes the directory.
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let c = Arc::new(c);
    let writers: Vec<_> = (2..=4u32)
        .map(|g| {
            let (c, closed, dir) = (c.clone(), closed.clone(), dir.clone());
            tokio::spawn(async move {
                let mut late = 0;
                for i in 0.. {
                    let done = closed.load(std::sync::atomic::Ordering::SeqCst);
                    let name = c.name_on(g, &format!("w{i}-"));
                    match mkdir_as_user(&c, g, &format!("{dir}/{name}")).await {
                        Ok(_) => assert!(!done, "group {g} created under {dir} after chmod 0755"),
                        Err(MetaError::AccessDenied) => late += 1,
                        Err(e) => panic!("group {g}: {e}"),
                    }
                    if done && late >= 3 {
                        break;
                    }
                }
            })
        })
        .collect();
    tokio::task::yield_now().await;
    let a = c
        .call(&p(&dir), chmod(&dir, 0o755, saker_rpc::Cred::ROOT))
        .await
        .unwrap();
    closed.store(true, std::sync::atomic::Ordering::SeqCst);
    match a {
        MetaResponse::Attr(a) => assert_eq!(a.mode & 0o7777, 0o755),
        other => panic!("unexpected {other:?}"),
    }
    for w in writers {
        w.await.unwrap();
    }
    for g in 1..=4 {
        let now = c.node(g).counters().unwrap().invalidations;
        assert!(
            now > before[g as usize - 1],
            "group {g} was not invalidated"
        );
    }

    // A caller who does not own the directory may not change it: refused before any
    // invalidation, and nothing stays frozen.
    let invalidations = || -> u64 {
        (1..=4)
            .map(|g| c.node(g).counters().unwrap().invalidations)
            .sum()
    };
    let quiet = invalidations();
    let user = saker_rpc::Cred {
        uid: 1000,
        gid: 1000,
        groups: vec![],
    };
    assert_eq!(
        c.call(&p(&dir), chmod(&dir, 0o777, user))
            .await
            .unwrap_err(),
        MetaError::NotPermitted
    );
    assert_eq!(c.attr(&dir).await.unwrap().mode & 0o7777, 0o755);
    c.put(&format!("{dir}/after")).await.unwrap();
    // Files, and a directory's times, are changed in place, without the coordinator.
    c.call(
        &p(&format!("{dir}/after")),
        chmod(&format!("{dir}/after"), 0o600, saker_rpc::Cred::ROOT),
    )
    .await
    .unwrap();
    assert_eq!(
        c.attr(&format!("{dir}/after")).await.unwrap().mode & 0o7777,
        0o600
    );
    let touch = MetaRequest::SetAttr {
        path: p(&dir),
        mode: None,
        uid: None,
        gid: None,
        size: None,
        atime: Some(saker_rpc::SetTime::At(7)),
        mtime: Some(saker_rpc::SetTime::At(9)),
        cred: saker_rpc::Cred::ROOT,
        through_handle: false,
    };
    c.call(&p(&dir), touch).await.unwrap();
    assert_eq!(c.attr(&dir).await.unwrap().atime_ns, 7);
    assert_eq!(invalidations(), quiet, "no invalidation but the chmod's");
}
