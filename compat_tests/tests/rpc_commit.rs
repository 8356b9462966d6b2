//! What an MNode decides of a library client's requests (a mount with a client credential),
//! against a real `saker server`: a `CommitFile` is checked against the writer's identity,
//! refused a layout naming another file's chunks (or the chunks the commit replaces), and the
//! MNode itself decides whether the replaced bytes (or an unlinked file) stay as a noncurrent
//! version, taking from the client only a receipt an MNode signed. A client reads a chunk only with a grant an
//! MNode gave after a permission check.

mod common;

use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use common::*;
use saker_client::{ChunkWriter, Cluster};
use saker_rpc::auth::{install, Credential};
use saker_rpc::{
    access as mode, Attr, CommitReceipt, CommitSeal, Cred, FreshKey, Layout, MetaError,
    MetaRequest, MetaResponse, ObjectView, Sse, Want,
};

const BUCKET: &str = "commits";
const VERSIONED: &str = "commits-versioned";

/// A server, an S3 client of its root key, and a library client holding the server's client
/// credential (the process's, from now on).
async fn start() -> (Server, aws_sdk_s3::Client, Cluster) {
    start_with(Opts::default()).await
}

/// [`start`] with the server's options `opts`.
async fn start_with(opts: Opts) -> (Server, aws_sdk_s3::Client, Cluster) {
    let srv = Server::start(opts);
    let node = Credential::load(&srv.credential_path()).unwrap();
    install(node.client().unwrap());
    let lib = Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let s3 = srv.client();
    (srv, s3, lib)
}

fn path(p: &str) -> Vec<String> {
    p.split('/').map(str::to_string).collect()
}

fn user() -> Cred {
    Cred {
        uid: 1000,
        gid: 1000,
        groups: vec![],
    }
}

async fn access(lib: &Cluster, p: &str, mask: u32, cred: Cred) -> Result<ObjectView, MetaError> {
    let req = MetaRequest::Access {
        path: path(p),
        mask,
        cred,
        want: Want::ATTR,
    };
    match lib.call(&path(p), req).await? {
        MetaResponse::Object(view) => Ok(*view),
        other => panic!("{other:?}"),
    }
}

async fn attr_of(lib: &Cluster, p: &str) -> Attr {
    access(lib, p, 0, Cred::ROOT).await.unwrap().attr
}

/// Makes `p`, owned by root with mode 0644.
async fn create(lib: &Cluster, p: &str) -> Attr {
    let req = MetaRequest::Create {
        path: path(p),
        mode: 0o100644,
        uid: 0,
        gid: 0,
        exclusive: true,
        symlink: None,
        special: None,
        cred: Cred::ROOT,
        defer: false,
        versioning: Default::default(),
    };
    match lib.call(&path(p), req).await.unwrap() {
        MetaResponse::Attr(a) => a,
        other => panic!("{other:?}"),
    }
}

/// Chunks holding `data`, made for file `id` (as a mount makes them).
async fn chunks_for(lib: &Cluster, id: u64, data: &[u8]) -> Layout {
    let mut w = ChunkWriter::new(lib).for_file(id);
    w.write(data).await.unwrap();
    w.finish_chunked().await.unwrap().layout
}

/// Commits `layout` (`size` bytes) as the bytes of file `id` at `p`, as `cred`, with
/// `receipt`: the file as committed and the commit's receipt.
async fn commit(
    lib: &Cluster,
    p: &str,
    id: u64,
    size: usize,
    layout: Layout,
    cred: Cred,
    receipt: Option<CommitReceipt>,
) -> Result<(Attr, CommitReceipt), MetaError> {
    commit_sealed(lib, p, id, size, layout, cred, receipt, None).await
}

/// [`commit`] of bytes sealed as `sse` says.
#[allow(clippy::too_many_arguments)]
async fn commit_sealed(
    lib: &Cluster,
    p: &str,
    id: u64,
    size: usize,
    layout: Layout,
    cred: Cred,
    receipt: Option<CommitReceipt>,
    sse: Option<CommitSeal>,
) -> Result<(Attr, CommitReceipt), MetaError> {
    let req = MetaRequest::CommitFile {
        path: path(p),
        id,
        size: size as u64,
        etag: "\"0\"".into(),
        layout,
        inline: None,
        cred,
        receipt,
        versioning: Default::default(),
        replaces: None,
        default_lock: None,
        sse,
    };
    match lib.call(&path(p), req).await? {
        MetaResponse::Committed { attr, receipt } => Ok((attr, receipt)),
        other => panic!("CommitFile answered {other:?}"),
    }
}

async fn versions(srv: &Server, key: &str) -> usize {
    let out = srv
        .client()
        .list_object_versions()
        .bucket(VERSIONED)
        .prefix(key)
        .send()
        .await
        .unwrap();
    out.versions()
        .iter()
        .filter(|v| v.key() == Some(key))
        .count()
}

#[tokio::test]
async fn the_mnode_decides_what_a_client_s_commit_does() {
    let (srv, s3, lib) = start().await;
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();

    // Another file's bytes, written through S3.
    let theirs = random_bytes(300 * 1024);
    put(&s3, BUCKET, "theirs", &theirs).await;
    let their_layout = attr_of(&lib, &format!("{BUCKET}/theirs")).await.layout;
    assert!(!their_layout.chunks().is_empty());

    let f = format!("{BUCKET}/mine");
    let id = create(&lib, &f).await.id;
    let first = random_bytes(200 * 1024);
    let layout = chunks_for(&lib, id, &first).await;

    // A writer who neither owns the file nor may write it.
    let r = commit(&lib, &f, id, first.len(), layout.clone(), user(), None).await;
    assert!(matches!(r, Err(MetaError::AccessDenied)), "{r:?}");
    // Another file's chunks, and chunks made for another file.
    let r = commit(
        &lib,
        &f,
        id,
        theirs.len(),
        their_layout.clone(),
        Cred::ROOT,
        None,
    )
    .await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    let elsewhere = chunks_for(&lib, id + 1, &first).await;
    let r = commit(&lib, &f, id, first.len(), elsewhere, Cred::ROOT, None).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    // Nothing of the other file was touched.
    assert_eq!(get_bytes(&s3, BUCKET, "theirs").await, theirs);

    // The owner commits.
    let (attr, _) = commit(&lib, &f, id, first.len(), layout.clone(), Cred::ROOT, None)
        .await
        .unwrap();
    assert_eq!(attr.size, first.len() as u64);
    assert_eq!(get_bytes(&s3, BUCKET, "mine").await, first);
    // The chunks the file holds now cannot be committed again (their release would be the
    // new bytes' loss).
    let r = commit(&lib, &f, id, first.len(), layout, Cred::ROOT, None).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    assert_eq!(get_bytes(&s3, BUCKET, "mine").await, first);

    // In a bucket that keeps versions the client has no say in it (the request carries no
    // setting).
    s3.create_bucket().bucket(VERSIONED).send().await.unwrap();
    s3.put_bucket_versioning()
        .bucket(VERSIONED)
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let f = format!("{VERSIONED}/mine");
    let id = create(&lib, &f).await.id;
    // The first bytes replace none.
    let layout = chunks_for(&lib, id, &first).await;
    commit(&lib, &f, id, first.len(), layout, Cred::ROOT, None)
        .await
        .unwrap();
    let before = versions(&srv, "mine").await;
    let write = |kib: usize, receipt: Option<CommitReceipt>| {
        let data = random_bytes(kib * 1024);
        let lib = &lib;
        let f = f.clone();
        async move {
            let layout = chunks_for(lib, id, &data).await;
            let (_, r) = commit(lib, &f, id, data.len(), layout, Cred::ROOT, receipt)
                .await
                .unwrap();
            (data, r)
        }
    };
    // Without a receipt, the bytes replaced stay as a noncurrent version.
    let (data, r1) = write(101, None).await;
    assert_eq!(versions(&srv, "mine").await, before + 1);
    assert_eq!(get_bytes(&s3, VERSIONED, "mine").await, data);
    // With the receipt of the commit that made them, they are replaced in place.
    let (last, r2) = write(102, Some(r1)).await;
    assert_eq!(versions(&srv, "mine").await, before + 1);
    assert_eq!(get_bytes(&s3, VERSIONED, "mine").await, last);
    // A receipt changed by the client, or one for older bytes, keeps them.
    let mut forged = r2;
    forged.mtime_ns += 1;
    write(103, Some(forged)).await;
    assert_eq!(versions(&srv, "mine").await, before + 2);
    let (data, _) = write(104, Some(r2)).await;
    assert_eq!(versions(&srv, "mine").await, before + 3);
    assert_eq!(get_bytes(&s3, VERSIONED, "mine").await, data);
    // The version the forged receipt would have dropped is still there, whole.
    let listed = s3
        .list_object_versions()
        .bucket(VERSIONED)
        .prefix("mine")
        .send()
        .await
        .unwrap();
    let sizes: Vec<i64> = listed.versions().iter().filter_map(|v| v.size()).collect();
    assert!(sizes.contains(&(last.len() as i64)), "{sizes:?}");

    // A truncation that would keep no version is refused; an unlink that says the bucket
    // keeps none still leaves every version behind a delete marker.
    let truncate = MetaRequest::truncate(path(&f), Cred::ROOT);
    let r = lib.call(&path(&f), truncate).await;
    assert!(matches!(r, Err(MetaError::Invalid(_))), "{r:?}");
    let kept = versions(&srv, "mine").await;
    let unlink = MetaRequest::Unlink {
        path: path(&f),
        cred: Cred::ROOT,
        versioning: saker_rpc::Versioning::Off,
    };
    lib.call(&path(&f), unlink).await.unwrap();
    assert_eq!(versions(&srv, "mine").await, kept);
    let listed = s3
        .list_object_versions()
        .bucket(VERSIONED)
        .prefix("mine")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.delete_markers().len(), 1, "{listed:?}");
}

#[tokio::test]
async fn a_client_reads_chunks_only_with_a_grant_from_the_mnode() {
    let (_srv, s3, lib) = start().await;
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    let secret = random_bytes(300 * 1024);
    put(&s3, BUCKET, "secret", &secret).await;
    let f = format!("{BUCKET}/secret");
    let chmod = MetaRequest::chmod(path(&f), 0o100600, Cred::ROOT);
    lib.call(&path(&f), chmod).await.unwrap();
    let whole = saker_client::ReadRange {
        start: 0,
        end: secret.len() as u64,
    };

    // Attributes alone (no permission checked) come without grants: the chunk ids they name
    // do not open the chunks.
    let view = access(&lib, &f, 0, user()).await.unwrap();
    assert!(!view.attr.layout.chunks().is_empty());
    assert!(view.grants.is_empty(), "{:?}", view.grants);
    match lib.read_bytes(&view.attr.layout, None, whole).await {
        Err(e) => assert!(e.to_string().contains("grant"), "{e}"),
        Ok(b) => panic!("read {} bytes without a grant", b.len()),
    }
    // A caller without read permission gets nothing.
    let r = access(&lib, &f, mode::READ, user()).await;
    assert!(matches!(r, Err(MetaError::AccessDenied)), "{r:?}");
    // One with it gets a grant for each chunk, and reads.
    let view = access(&lib, &f, mode::READ, Cred::ROOT).await.unwrap();
    assert_eq!(view.grants.len(), view.attr.layout.chunks().len());
    saker_rpc::capability::hold(&view.grants);
    let got = lib
        .read_bytes(&view.attr.layout, None, whole)
        .await
        .unwrap();
    assert_eq!(got, secret);
}

/// In a bucket with a default retention the MNode locks the version a library client's
/// commit makes, in the commit's own batch; the next commit of the same open cannot replace
/// it in place (its receipt notwithstanding) and makes another locked version; the locked
/// versions cannot be deleted without the governance bypass.
#[tokio::test]
async fn a_client_s_commit_is_locked_by_the_mnode() {
    use common::worm::{a_day_of_governance, locked_bucket};
    let (_srv, s3, lib) = start().await;
    locked_bucket(&s3, VERSIONED, a_day_of_governance()).await;
    let f = format!("{VERSIONED}/worm");
    let id = create(&lib, &f).await.id;
    let mut receipt = None;
    for kib in [64, 65] {
        let data = random_bytes(kib * 1024);
        let layout = chunks_for(&lib, id, &data).await;
        let (_, r) = commit(&lib, &f, id, data.len(), layout, Cred::ROOT, receipt)
            .await
            .unwrap();
        receipt = Some(r);
        assert_eq!(get_bytes(&s3, VERSIONED, "worm").await, data);
    }
    let listed = s3
        .list_object_versions()
        .bucket(VERSIONED)
        .prefix("worm")
        .send()
        .await
        .unwrap();
    let ids: Vec<String> = listed
        .versions()
        .iter()
        .filter(|v| v.size() != Some(0))
        .filter_map(|v| v.version_id().map(str::to_string))
        .collect();
    assert_eq!(ids.len(), 2, "each commit made a version: {listed:?}");
    for vid in &ids {
        let r = s3
            .get_object_retention()
            .bucket(VERSIONED)
            .key("worm")
            .version_id(vid)
            .send()
            .await
            .unwrap();
        let mode = r.retention().and_then(|r| r.mode()).cloned();
        assert_eq!(
            mode,
            Some(aws_sdk_s3::types::ObjectLockRetentionMode::Governance)
        );
        let e = s3
            .delete_object()
            .bucket(VERSIONED)
            .key("worm")
            .version_id(vid)
            .send()
            .await
            .expect_err("a locked version is deleted");
        assert_eq!(e.raw_response().map(|r| r.status().as_u16()), Some(403));
    }
}

/// What a node gives a library client for a file: a data key, its record, and for a fresh
/// key the proof its commit brings.
type GivenKey = (saker_rpc::PlainKey, Sse, Option<FreshKey>);

/// A data key request by a library client: the key, or the refusal.
async fn sse_key(
    lib: &Cluster,
    p: &str,
    id: u64,
    cred: Cred,
    fresh: bool,
) -> Result<GivenKey, MetaError> {
    let req = MetaRequest::SseKey {
        path: path(p),
        id,
        cred,
        fresh,
    };
    match lib.call(&path(p), req).await? {
        MetaResponse::SseKey { key, sse, fresh } => Ok((key, sse, fresh)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_client_gets_data_keys_only_after_a_read_s_or_a_commit_s_check() {
    let (_keys, master) = common::sse::master_key();
    let (srv, s3, lib) = start_with(common::sse::with_key(&master)).await;
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    let aes = aws_sdk_s3::types::ServerSideEncryptionByDefault::builder()
        .sse_algorithm(aws_sdk_s3::types::ServerSideEncryption::Aes256)
        .build()
        .unwrap();
    common::sse::set_default_encryption(&s3, BUCKET, aes).await;
    let p = "commits/sealed";
    let id = create(&lib, p).await.id;
    // A fresh key for new bytes: the commit's check (owner, or write permission).
    let denied = sse_key(&lib, p, id, user(), true).await;
    assert_eq!(denied.unwrap_err(), MetaError::AccessDenied);
    let (key, sse, fresh) = sse_key(&lib, p, id, Cred::ROOT, true).await.unwrap();
    assert!(saker_rpc::is_sse_s3(&sse));
    let fresh = fresh.expect("a fresh key comes with its proof");
    assert_eq!(
        sse_key(&lib, p, id + 1, Cred::ROOT, true)
            .await
            .unwrap_err(),
        MetaError::NotFound,
        "a key for another file than the path names"
    );
    // The bucket encrypts by default: a commit in the clear is refused, and so is one sealed
    // under a key of the client's own making, or under a key given for another file.
    let data = b"sealed by a library client with a key from the node".to_vec();
    let clear = chunks_for(&lib, id, &data).await;
    let refused = commit(&lib, p, id, data.len(), clear, Cred::ROOT, None).await;
    assert_eq!(refused.unwrap_err(), MetaError::AccessDenied);
    let own = saker_client::sealed::WrappingKey::new(&[9; 32])
        .new_data_key(None, None)
        .1;
    let other = "commits/other";
    let other_id = create(&lib, other).await.id;
    let wrong = [
        (p, id, own.clone(), FreshKey::sign(id, &own)),
        (p, id, own, fresh),
        (other, other_id, sse.clone(), fresh),
    ];
    for (at, file, sse, fresh) in wrong {
        let layout = chunks_for(&lib, file, &data).await;
        let seal = Some(CommitSeal { sse, fresh });
        let r = commit_sealed(&lib, at, file, data.len(), layout, Cred::ROOT, None, seal).await;
        assert!(matches!(r, Err(MetaError::Invalid(_))), "{at}: {r:?}");
    }
    // Sealed under the node's key, the bytes read back through S3 as sent.
    let dk = saker_client::sealed::DataKey::from_plain(&key);
    let mut w = ChunkWriter::new(&lib)
        .for_file(id)
        .sealed(Some(dk.sealing(&sse, 0)));
    w.write(&data).await.unwrap();
    let layout = w.finish_chunked().await.unwrap().layout;
    let seal = Some(CommitSeal { sse, fresh });
    let sealed = commit_sealed(&lib, p, id, data.len(), layout, Cred::ROOT, None, seal);
    assert!(sealed.await.unwrap().0.sealed);
    let got = s3
        .get_object()
        .bucket(BUCKET)
        .key("sealed")
        .send()
        .await
        .unwrap();
    assert_eq!(
        got.server_side_encryption(),
        Some(&aws_sdk_s3::types::ServerSideEncryption::Aes256)
    );
    assert_eq!(
        got.body.collect().await.unwrap().into_bytes().to_vec(),
        data
    );
    // The stored version's key: to whoever may read the file, and no one else.
    let (opened, _, proof) = sse_key(&lib, p, id, user(), false).await.unwrap();
    assert_eq!(proof, None, "the stored version's key is for reading only");
    assert!(opened == key, "the key of the stored version");
    let chmod = MetaRequest::chmod(path(p), 0o100600, Cred::ROOT);
    lib.call(&path(p), chmod).await.unwrap();
    let denied = sse_key(&lib, p, id, user(), false).await;
    assert_eq!(denied.unwrap_err(), MetaError::AccessDenied);
    assert!(sse_key(&lib, p, id, Cred::ROOT, false).await.is_ok());
    // Counted.
    let metrics = metrics_text(&srv.admin).await;
    for (kind, outcome) in [("fresh", "denied"), ("fresh", "given"), ("open", "denied")] {
        let line = format!("saker_mnode_sse_keys_total{{kind=\"{kind}\",outcome=\"{outcome}\"}}");
        assert!(metrics.contains(&line), "{line} missing from\n{metrics}");
    }
}

/// A change of a bucket's default retention reaches every group before it is answered, and
/// each commit is decided in its own batch from its group's copy: a commit sent after the
/// change was answered is locked as the change says, and one that overlapped the change as
/// either side, never as a copy a few seconds old says. (Commits of fresh files, spread over
/// the server's groups, run while the default is switched on and off.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retention_change_holds_for_every_commit_answered_after_it() {
    use aws_sdk_s3::types::ObjectLockMode;
    use common::race::Writers;
    use common::worm::{a_day_of_governance, locked_bucket, no_default, put_lock_config};
    use std::sync::Arc;

    const BUCKET: &str = "commits-retention-race";
    const CHANGES: usize = 8;
    const AFTER_EACH: usize = 6;
    let (_srv, s3, lib) = start().await;
    locked_bucket(&s3, BUCKET, no_default()).await;
    let lib = Arc::new(lib);
    let mut writers = Writers::default();
    for w in 0..3 {
        let lib = lib.clone();
        writers.spawn(move |n| {
            let lib = lib.clone();
            async move {
                let key = format!("w{w}-{n}");
                let f = format!("{BUCKET}/{key}");
                let data = random_bytes(1024);
                let id = create(&lib, &f).await.id;
                let layout = chunks_for(&lib, id, &data).await;
                commit(&lib, &f, id, data.len(), layout, Cred::ROOT, None)
                    .await
                    .unwrap();
                key
            }
        });
    }
    let switch = |on: bool| {
        let conf = if on {
            a_day_of_governance()
        } else {
            no_default()
        };
        put_lock_config(&s3, BUCKET, conf)
    };
    let settings = (0..CHANGES).map(|i| i % 2 == 0);
    let (changes, commits) = writers.race(false, settings, AFTER_EACH, switch).await;

    let settled = changes.settled(&commits);
    assert!(settled.len() >= CHANGES * AFTER_EACH, "{settled:?}");
    for (key, on) in settled {
        let head = s3
            .head_object()
            .bucket(BUCKET)
            .key(key)
            .send()
            .await
            .unwrap();
        let locked = head.object_lock_mode() == Some(&ObjectLockMode::Governance);
        assert_eq!(locked, on, "{key}: committed while the default was {on}");
    }
}
