//! Directory attributes under both switches of issue 5 — request merging on or off, parent
//! updates sync or async — checked against a sequential model of randomized concurrent
//! workloads; the dirty set's message economy; and exact attributes after an owner restart
//! that left its dirty set behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use saker_coordinator::NamespaceCoordinator;
use saker_mnode::{LocalGroups, MemStore, MetaStore, MnodeConfig, ParentUpdates};
use saker_namespace::Route;
use saker_rpc::{
    Attr, ClientTag, GroupCounters, Layout, MetaError, MetaRequest, MetaResponse, MetaService,
    NewObject, Want,
};

fn p(s: &str) -> Vec<String> {
    s.split('/').map(str::to_string).collect()
}

static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn tag() -> ClientTag {
    ClientTag {
        client: 91,
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    }
}

struct Groups(LocalGroups);

impl Groups {
    async fn start(store: Arc<dyn MetaStore>, merge: bool, mode: ParentUpdates) -> Self {
        let cfg = MnodeConfig {
            parent_updates: mode,
            max_batch: if merge { 512 } else { 1 },
            ..MnodeConfig::new(1)
        };
        let groups = LocalGroups::start(store, 4, cfg).await.unwrap();
        let coordinator = NamespaceCoordinator::new(groups.router.clone(), groups.services());
        groups.connect(Arc::new(coordinator));
        Self(groups)
    }

    fn owner(&self, name: &str) -> u32 {
        match self.0.router.route_name(name) {
            Route::Group(g) => g,
            Route::PathWalk => unreachable!("no exceptions here"),
        }
    }

    async fn call(&self, path: &[String], req: MetaRequest) -> Result<MetaResponse, MetaError> {
        let g = self.owner(path.last().unwrap());
        self.0.mnodes[g as usize - 1].call(tag(), req).await
    }

    async fn bucket(&self, name: &str) {
        let req = MetaRequest::CreateBucket {
            name: name.into(),
            uid: 0,
            gid: 0,
        };
        self.call(&p(name), req).await.unwrap();
    }

    async fn mkdir(&self, path: &str) -> Result<MetaResponse, MetaError> {
        let req = MetaRequest::Mkdir {
            path: p(path),
            mode: 0o755,
            uid: 0,
            gid: 0,
            cred: saker_rpc::Cred::ROOT,
        };
        self.call(&p(path), req).await
    }

    async fn create(&self, path: &str) -> Result<MetaResponse, MetaError> {
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

    async fn unlink(&self, path: &str) -> Result<MetaResponse, MetaError> {
        self.call(
            &p(path),
            MetaRequest::Unlink {
                path: p(path),
                cred: saker_rpc::Cred::ROOT,
                versioning: saker_rpc::Versioning::Off,
            },
        )
        .await
    }

    async fn rmdir(&self, path: &str) -> Result<MetaResponse, MetaError> {
        self.call(
            &p(path),
            MetaRequest::Rmdir {
                path: p(path),
                cred: saker_rpc::Cred::ROOT,
            },
        )
        .await
    }

    async fn stat(&self, path: &str) -> Attr {
        let req = MetaRequest::Lookup {
            path: p(path),
            want: Want::ATTR,
        };
        match self.call(&p(path), req).await.unwrap() {
            MetaResponse::Object(v) => v.attr,
            other => panic!("stat {path}: {other:?}"),
        }
    }

    async fn readdir(&self, path: &str) -> Vec<String> {
        let dir = self.stat(path).await.id;
        let mut names = Vec::new();
        for m in &self.0.mnodes {
            let req = MetaRequest::Scan {
                dir,
                start_after: Vec::new(),
                limit: saker_rpc::MAX_PAGE,
                reader: None,
            };
            match m.call(tag(), req).await.unwrap() {
                MetaResponse::Entries(es) => names.extend(es.into_iter().map(|e| e.name)),
                other => panic!("scan: {other:?}"),
            }
        }
        names.sort();
        names
    }

    async fn counters(&self) -> Vec<GroupCounters> {
        let mut out = Vec::new();
        for m in &self.0.mnodes {
            out.push(m.counters().unwrap());
        }
        out
    }
}

/// The model: per directory, its files and subdirectories.
#[derive(Default, Clone)]
struct Dir {
    files: std::collections::BTreeSet<String>,
    subdirs: std::collections::BTreeSet<String>,
}

async fn check_against_model(g: &Groups, model: &BTreeMap<String, Dir>, when: &str) {
    for (path, d) in model {
        let a = g.stat(path).await;
        let entries = (d.files.len() + d.subdirs.len()) as u64;
        assert_eq!(a.children, entries, "{when}: entry count of {path}");
        assert_eq!(
            a.nlink,
            2 + d.subdirs.len() as u32,
            "{when}: nlink of {path}"
        );
        let mut names: Vec<String> = d.files.iter().chain(&d.subdirs).cloned().collect();
        names.sort();
        assert_eq!(g.readdir(path).await, names, "{when}: readdir of {path}");
    }
}

/// Rounds of concurrent creates, unlinks, mkdirs and rmdirs over a few directories; after each
/// round (every op of it answered) every directory's stat and readdir match the model.
async fn randomized_against_the_model(merge: bool, mode: ParentUpdates) {
    let g = Groups::start(Arc::new(MemStore::new()), merge, mode).await;
    g.bucket("bkt").await;
    let mut model: BTreeMap<String, Dir> = BTreeMap::new();
    for d in ["d0", "d1", "d2"] {
        g.mkdir(&format!("bkt/{d}")).await.unwrap();
        model.insert(format!("bkt/{d}"), Dir::default());
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(
        5 + merge as u64 * 2 + (mode == ParentUpdates::Sync) as u64,
    );
    let mut next = 0u32;
    for round in 0..6 {
        // Plan a round of ops on distinct names, run them all at once.
        let mut ops: Vec<(char, String)> = Vec::new();
        let dirs: Vec<String> = model.keys().cloned().collect();
        let mut fresh = std::collections::BTreeSet::new();
        for _ in 0..48 {
            let dir = &dirs[rng.gen_range(0..dirs.len())];
            // Removed earlier in this round.
            let Some(d) = model.get_mut(dir) else {
                continue;
            };
            let old_file = d.files.iter().find(|f| !fresh.contains(*f)).cloned();
            let roll = rng.gen_range(0..10);
            if let (true, Some(name)) = ((5..8).contains(&roll), old_file.clone()) {
                d.files.remove(&name);
                ops.push(('u', format!("{dir}/{name}")));
            } else if roll < 8 || old_file.is_none() {
                next += 1;
                let name = format!("f{next}");
                d.files.insert(name.clone());
                fresh.insert(name.clone());
                ops.push(('c', format!("{dir}/{name}")));
            } else if roll < 9 && dir.matches('/').count() < 2 {
                next += 1;
                let name = format!("s{next}");
                d.subdirs.insert(name.clone());
                ops.push(('m', format!("{dir}/{name}")));
            } else if let Some(name) = d.subdirs.iter().next().cloned() {
                // rmdir only of an empty subdirectory that no op of this round touches.
                let sub = format!("{dir}/{name}");
                if model
                    .get(&sub)
                    .is_some_and(|s| s.files.is_empty() && s.subdirs.is_empty())
                    && !ops.iter().any(|(_, o)| o.starts_with(&format!("{sub}/")))
                {
                    model.get_mut(dir).unwrap().subdirs.remove(&name);
                    model.remove(&sub);
                    ops.push(('r', sub));
                }
            }
        }
        let results = futures::future::join_all(ops.iter().map(|(op, path)| async {
            match op {
                'c' => g.create(path).await,
                'u' => g.unlink(path).await,
                'm' => g.mkdir(path).await,
                'r' => g.rmdir(path).await,
                _ => unreachable!(),
            }
        }))
        .await;
        for ((op, path), r) in ops.iter().zip(results) {
            r.unwrap_or_else(|e| panic!("round {round}: {op} {path}: {e:?}"));
            if *op == 'm' {
                model.insert(path.clone(), Dir::default());
            }
        }
        check_against_model(&g, &model, &format!("round {round}")).await;
    }
    // rmdir of a directory whose only child was just created on another group fails.
    let dir = "bkt/d0/lonely";
    g.mkdir(dir).await.unwrap();
    let child = (0..)
        .map(|i| format!("c{i}"))
        .find(|n| g.owner(n) != g.owner("lonely"))
        .unwrap();
    g.create(&format!("{dir}/{child}")).await.unwrap();
    assert_eq!(g.rmdir(dir).await, Err(MetaError::NotEmpty));
    g.0.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_merge_async() {
    randomized_against_the_model(true, ParentUpdates::Async).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_merge_sync() {
    randomized_against_the_model(true, ParentUpdates::Sync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_no_merge_async() {
    randomized_against_the_model(false, ParentUpdates::Async).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn model_no_merge_sync() {
    randomized_against_the_model(false, ParentUpdates::Sync).await;
}

/// Async mode: a stat of a directory other groups changed pulls from those groups only, and a
/// stat of a clean directory sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clean_directory_costs_no_messages_and_a_dirty_one_only_its_contributors() {
    let g = Groups::start(Arc::new(MemStore::new()), true, ParentUpdates::Async).await;
    g.bucket("bkt").await;
    g.mkdir("bkt/d").await.unwrap();
    let owner = g.owner("d");
    // Two files, both on one group other than the directory's owner.
    let contributor = (1..=4).find(|x| *x != owner).unwrap();
    let names: Vec<String> = (0..)
        .map(|i| format!("f{i}"))
        .filter(|n| g.owner(n) == contributor)
        .take(2)
        .collect();
    // Whatever the start-up left (the rebuild of the dirty sets) settles with one stat.
    g.stat("bkt/d").await;
    for n in &names {
        g.create(&format!("bkt/d/{n}")).await.unwrap();
    }
    let before = g.counters().await;
    assert_eq!(g.stat("bkt/d").await.children, 2);
    let after = g.counters().await;
    let o = owner as usize - 1;
    assert!(
        after[o].pulls - before[o].pulls <= 1,
        "one pull, from the contributor only: {} pulls",
        after[o].pulls - before[o].pulls
    );
    // Now clean: another stat sends no message at all.
    let before = g.counters().await;
    assert_eq!(g.stat("bkt/d").await.children, 2);
    let after = g.counters().await;
    let msgs = |c: &[GroupCounters]| c.iter().map(|c| c.server_msgs()).sum::<u64>();
    assert_eq!(msgs(&after), msgs(&before), "a clean stat is local");
    assert_eq!(after[o].dirty_dirs, 0);
    g.0.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_directory_nobody_reads_leaves_the_dirty_set_once_its_changes_are_pushed() {
    let g = Groups::start(Arc::new(MemStore::new()), true, ParentUpdates::Async).await;
    g.bucket("bkt").await;
    g.mkdir("bkt/d").await.unwrap();
    let owner = g.owner("d");
    let o = owner as usize - 1;
    g.stat("bkt/d").await;
    let name = (0..)
        .map(|i| format!("f{i}"))
        .find(|n| g.owner(n) != owner)
        .unwrap();
    g.create(&format!("bkt/d/{name}")).await.unwrap();
    assert!(
        g.counters().await[o].dirty_dirs >= 1,
        "the create marked the directory dirty"
    );
    // The contributor's proactive push applies the change at the owner: the mark goes with
    // it, though nobody read the directory.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while g.counters().await[o].dirty_dirs > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the directory stayed dirty after its changes were pushed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(g.stat("bkt/d").await.children, 1);
    g.0.shutdown().await;
}

/// The directory's owner as the other groups see it while their pushes fail: marks get
/// through, change-log records do not (the owner crashes before any push).
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

/// Async mode: the owner held the only record that its directory is dirty (in memory) and the
/// other groups had pushed nothing when everything stopped; after the restart the owner
/// rebuilds its dirty set from the other groups and the attributes are exact, with no manual
/// push.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attributes_are_exact_after_a_restart_that_lost_the_dirty_set() {
    let store: Arc<dyn MetaStore> = Arc::new(MemStore::new());
    let cfg = MnodeConfig {
        parent_updates: ParentUpdates::Async,
        ..MnodeConfig::new(1)
    };
    let groups = LocalGroups::start(store.clone(), 4, cfg).await.unwrap();
    let g = Groups(groups);
    let dir_owner = g.owner("d");
    let coordinator = Arc::new(NamespaceCoordinator::new(
        g.0.router.clone(),
        g.0.services(),
    ));
    for m in &g.0.mnodes {
        let mut peers = g.0.services();
        if m.group() != dir_owner {
            let owner = peers[&dir_owner].clone();
            peers.insert(dir_owner, Arc::new(PushesFail(owner)));
        }
        m.connect(peers, coordinator.clone());
    }
    g.bucket("b").await;
    g.mkdir("b/d").await.unwrap();
    let files: Vec<String> = (0..200)
        .map(|i| format!("f{i}"))
        .filter(|n| g.owner(n) != dir_owner)
        .take(12)
        .collect();
    for f in &files {
        g.create(&format!("b/d/{f}")).await.unwrap();
    }
    let counters = g.counters().await;
    assert!(
        counters[dir_owner as usize - 1].dirty_dirs >= 1,
        "the owner holds the directory as dirty"
    );
    g.0.shutdown().await;

    let g = Groups::start(store, true, ParentUpdates::Async).await;
    let d = g.stat("b/d").await;
    assert_eq!(d.children, files.len() as u64, "every change, exactly once");
    assert_eq!(d.nlink, 2);
    g.0.shutdown().await;
}
