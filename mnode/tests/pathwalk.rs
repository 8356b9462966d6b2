//! Path-walk redirection (FalconFS §4.2.1): a name in the exception table as `PathWalk` is
//! placed by hash(parent id, name), so one very common name spreads over every group. A client
//! sends such a request to any group, which resolves the parent and forwards it to the owner.

use std::collections::BTreeSet;
use std::sync::Arc;

use saker_coordinator::NamespaceCoordinator;
use saker_mnode::{LocalGroups, MemStore, MnodeConfig};
use saker_namespace::{Exception, ExceptionTable};
use saker_rpc::{
    Attr, ClientTag, Layout, MetaError, MetaRequest, MetaResponse, MetaService, NewObject, Want,
};

fn p(s: &str) -> Vec<String> {
    s.split('/').map(str::to_string).collect()
}

static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn tag() -> ClientTag {
    ClientTag {
        client: 33,
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    }
}

/// Group of an inode id (the high 16 bits).
fn group_of(id: u64) -> u32 {
    (id >> 48) as u32
}

async fn start() -> LocalGroups {
    let mut exceptions = ExceptionTable::new();
    exceptions.set("train", Exception::PathWalk);
    let groups = LocalGroups::start_placed(
        Arc::new(MemStore::new()),
        4,
        MnodeConfig::new(1),
        saker_mnode::RING_VNODES,
        exceptions,
    )
    .await
    .unwrap();
    let coordinator = NamespaceCoordinator::new(groups.router.clone(), groups.services());
    groups.connect(Arc::new(coordinator));
    groups
}

/// Sends to group `g` whatever the name (as a client does for path-walked names).
async fn via(groups: &LocalGroups, g: u32, req: MetaRequest) -> Result<MetaResponse, MetaError> {
    groups.mnodes[g as usize - 1].call(tag(), req).await
}

async fn stat(groups: &LocalGroups, g: u32, path: &str) -> Result<Attr, MetaError> {
    let req = MetaRequest::Lookup {
        path: p(path),
        want: Want::ATTR,
    };
    match via(groups, g, req).await? {
        MetaResponse::Object(v) => Ok(v.attr),
        other => panic!("{other:?}"),
    }
}

fn file() -> NewObject {
    NewObject {
        size: 1,
        etag: "e".into(),
        layout: Layout::Inline,
        inline: Some(bytes::Bytes::from_static(b"x")),
        ..Default::default()
    }
}

async fn mkdir(groups: &LocalGroups, path: &str) {
    let last = path.rsplit('/').next().unwrap();
    let g = match groups.router.route_name(last) {
        saker_namespace::Route::Group(g) => g,
        saker_namespace::Route::PathWalk => 1,
    };
    let req = MetaRequest::Mkdir {
        path: p(path),
        mode: 0o755,
        uid: 0,
        gid: 0,
        cred: saker_rpc::Cred::ROOT,
    };
    via(groups, g, req).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_path_walked_name_spreads_over_the_groups_and_is_found_from_any() {
    let groups = start().await;
    let create = MetaRequest::CreateBucket {
        name: "b".into(),
        uid: 0,
        gid: 0,
    };
    let g = match groups.router.route_name("b") {
        saker_namespace::Route::Group(g) => g,
        saker_namespace::Route::PathWalk => unreachable!(),
    };
    via(&groups, g, create).await.unwrap();
    let n = 40;
    for i in 0..n {
        mkdir(&groups, &format!("b/d{i}")).await;
    }
    let forwards_before: u64 = groups
        .mnodes
        .iter()
        .map(|m| m.counters().unwrap().forwards)
        .sum();
    // Every `train` goes to group 1 first, which forwards it where it belongs.
    for i in 0..n {
        let path = p(&format!("b/d{i}/train"));
        via(
            &groups,
            1,
            MetaRequest::PutObject {
                path,
                obj: file(),
                cond: None,
                versioning: Default::default(),
            },
        )
        .await
        .unwrap();
    }
    let mut owners = BTreeSet::new();
    for i in 0..n {
        let dir = stat(&groups, 2, &format!("b/d{i}")).await.unwrap();
        let expected = groups.router.route_pid_name(dir.id, "train");
        // Found from every group, and it lives where hash(pid, name) says.
        for from in 1..=4 {
            let a = stat(&groups, from, &format!("b/d{i}/train")).await.unwrap();
            assert_eq!(group_of(a.id), expected, "d{i}/train from group {from}");
        }
        owners.insert(expected);
        assert_eq!(dir.children, 1, "d{i} counts its train");
    }
    assert_eq!(
        owners.len(),
        4,
        "40 trains spread over all 4 groups: {owners:?}"
    );
    let forwards_after: u64 = groups
        .mnodes
        .iter()
        .map(|m| m.counters().unwrap().forwards)
        .sum();
    assert!(
        forwards_after - forwards_before >= n as u64 / 2,
        "requests sent to a non-owner were forwarded ({} forwards)",
        forwards_after - forwards_before
    );

    // A path-walked *directory*: resolved through, listed, then removed by the coordinator's
    // protocol (its freeze goes to the owner by forwarding).
    mkdir(&groups, "b/x").await;
    mkdir(&groups, "b/x/train").await;
    let inner = p("b/x/train/leaf");
    let owner = groups.router.route_name("leaf");
    let leaf_group = match owner {
        saker_namespace::Route::Group(g) => g,
        saker_namespace::Route::PathWalk => unreachable!(),
    };
    via(
        &groups,
        leaf_group,
        MetaRequest::PutObject {
            path: inner.clone(),
            obj: file(),
            cond: None,
            versioning: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(stat(&groups, 3, "b/x/train").await.unwrap().children, 1);
    assert_eq!(
        via(
            &groups,
            4,
            MetaRequest::Rmdir {
                path: p("b/x/train"),
                cred: saker_rpc::Cred::ROOT
            }
        )
        .await,
        Err(MetaError::NotEmpty)
    );
    via(
        &groups,
        leaf_group,
        MetaRequest::Unlink {
            path: inner,
            cred: saker_rpc::Cred::ROOT,
            versioning: saker_rpc::Versioning::Off,
        },
    )
    .await
    .unwrap();
    via(
        &groups,
        4,
        MetaRequest::Rmdir {
            path: p("b/x/train"),
            cred: saker_rpc::Cred::ROOT,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        stat(&groups, 1, "b/x/train").await,
        Err(MetaError::NotFound)
    );
    // Unlink of a path-walked file through a non-owner.
    via(
        &groups,
        3,
        MetaRequest::Unlink {
            path: p("b/d0/train"),
            cred: saker_rpc::Cred::ROOT,
            versioning: saker_rpc::Versioning::Off,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        stat(&groups, 2, "b/d0/train").await,
        Err(MetaError::NotFound)
    );
    groups.shutdown().await;
}
