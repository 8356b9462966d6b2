//! Durability under SIGKILL and chunk garbage collection.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use aws_sdk_s3::Client;
use common::*;
use rand::Rng;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
/// The server's defaults: objects up to this size are inline, larger ones are cut in chunks.
/// The server default (`--inline-threshold`).
const INLINE_THRESHOLD: usize = 16 * KIB;
const CHUNK_SIZE: usize = 8 * MIB;

/// What one PUT wrote.
#[derive(Clone, Debug, PartialEq)]
struct Version {
    md5: String,
    size: usize,
    meta: String,
}

#[derive(Default)]
struct Ledger {
    /// The last acknowledged version of each key.
    acked: HashMap<String, Version>,
    /// Versions sent but not acknowledged (yet, or ever: the server died).
    in_flight: HashMap<String, Vec<Version>>,
    /// Failures seen before the kill.
    errors: Vec<String>,
}

/// Chunk files a single-part object of `size` bytes occupies.
fn chunks_of(size: usize) -> usize {
    if size <= INLINE_THRESHOLD {
        0
    } else {
        size.div_ceil(CHUNK_SIZE)
    }
}

async fn writer(
    task: usize,
    c: Client,
    bucket: String,
    ledger: Arc<Mutex<Ledger>>,
    killed: Arc<AtomicBool>,
    big_budget: Arc<AtomicUsize>,
) {
    let mut mine: Vec<String> = Vec::new();
    let mut seq = 0usize;
    loop {
        seq += 1;
        let (key, size) = {
            let mut rng = rand::thread_rng();
            let key = if !mine.is_empty() && rng.gen_bool(0.2) {
                // Overwrite one of this task's acknowledged keys.
                mine[rng.gen_range(0..mine.len())].clone()
            } else {
                format!("t{task}/d{}/k{seq:05}", seq % 4)
            };
            let big = rng.gen_bool(0.05)
                && big_budget
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            let size = if big {
                9 * MIB
            } else {
                rng.gen_range(0..200 * KIB)
            };
            (key, size)
        };
        let data = random_bytes(size);
        let v = Version {
            md5: md5_hex(&data),
            size,
            meta: format!("task{task}-seq{seq}"),
        };
        ledger
            .lock()
            .unwrap()
            .in_flight
            .entry(key.clone())
            .or_default()
            .push(v.clone());
        let r = c
            .put_object()
            .bucket(&bucket)
            .key(&key)
            .body(body(&data))
            .metadata("writer", &v.meta)
            .send()
            .await;
        match r {
            Ok(out) => {
                let mut l = ledger.lock().unwrap();
                if out.e_tag() != Some(format!("\"{}\"", v.md5).as_str()) {
                    l.errors
                        .push(format!("{key}: ETag {:?} for md5 {}", out.e_tag(), v.md5));
                }
                if let Some(list) = l.in_flight.get_mut(&key) {
                    list.retain(|x| x != &v);
                    if list.is_empty() {
                        l.in_flight.remove(&key);
                    }
                }
                l.acked.insert(key.clone(), v);
                if !mine.contains(&key) {
                    mine.push(key);
                }
            }
            Err(e) => {
                // After the kill every request fails; before it, none may.
                if !killed.load(Ordering::SeqCst) {
                    ledger
                        .lock()
                        .unwrap()
                        .errors
                        .push(format!("{key}: PUT failed before the kill: {e:?}"));
                }
                return;
            }
        }
    }
}

/// Checks one listed key against the versions it may hold.
/// Returns the size of what the key holds.
async fn verify_key(
    c: &Client,
    b: &str,
    key: &str,
    candidates: &[Version],
) -> Result<usize, String> {
    let out = c
        .get_object()
        .bucket(b)
        .key(key)
        .send()
        .await
        .map_err(|e| format!("{key}: GET failed: {e:?}"))?;
    let etag = out.e_tag().map(str::to_string);
    let meta = out
        .metadata()
        .and_then(|m| m.get("writer"))
        .cloned()
        .unwrap_or_default();
    let data = out
        .body
        .collect()
        .await
        .map_err(|e| format!("{key}: body: {e:?}"))?
        .into_bytes();
    let got = Version {
        md5: md5_hex(&data),
        size: data.len(),
        meta,
    };
    if !candidates.contains(&got) {
        return Err(format!(
            "{key}: holds {got:?}, expected one of {candidates:?}"
        ));
    }
    if etag.as_deref() != Some(format!("\"{}\"", got.md5).as_str()) {
        return Err(format!("{key}: ETag {etag:?} but body md5 {}", got.md5));
    }
    Ok(got.size)
}

async fn delete_all(c: &Client, b: &str) {
    loop {
        let keys = list_all(c, b, None).await;
        if keys.is_empty() {
            return;
        }
        for batch in keys.chunks(1000) {
            let ids = batch
                .iter()
                .map(|k| ObjectIdentifier::builder().key(k).build().expect("key"))
                .collect();
            let out = c
                .delete_objects()
                .bucket(b)
                .delete(
                    Delete::builder()
                        .set_objects(Some(ids))
                        .quiet(true)
                        .build()
                        .expect("delete"),
                )
                .send()
                .await
                .expect("delete objects");
            assert!(out.errors().is_empty(), "{:?}", out.errors());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill_and_gc_cleans_up() {
    // Released chunks get a 1 s grace from the start (the due time is fixed when a chunk is
    // dropped); the scrub, which must outlive the longest upload, only after the restart.
    let load_opts = Opts::default()
        .arg("--gc-grace", "1s")
        .arg("--gc-interval", "200ms");
    let mut srv = Server::start(load_opts);
    let b = new_bucket(&srv.client(), "crash").await;

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let killed = Arc::new(AtomicBool::new(false));
    let big_budget = Arc::new(AtomicUsize::new(12));
    let mut tasks = Vec::new();
    for t in 0..8 {
        tasks.push(tokio::spawn(writer(
            t,
            srv.client_no_retry(),
            b.clone(),
            ledger.clone(),
            killed.clone(),
            big_budget.clone(),
        )));
    }

    // About 2 s of load with enough acknowledged writes, then kill with PUTs in flight.
    let start = Instant::now();
    let deadline = start + Duration::from_secs(30);
    loop {
        {
            let l = ledger.lock().unwrap();
            assert!(l.errors.is_empty(), "errors under load: {:?}", l.errors);
            if start.elapsed() >= Duration::from_secs(2)
                && l.acked.len() >= 50
                && l.in_flight.len() >= 4
            {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the load did not get going");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    killed.store(true, Ordering::SeqCst);
    srv.kill();
    for t in tasks {
        t.await.expect("writer task");
    }
    let ledger = Arc::try_unwrap(ledger)
        .ok()
        .expect("tasks are done")
        .into_inner()
        .unwrap();
    assert!(ledger.errors.is_empty(), "{:?}", ledger.errors);
    assert!(
        !ledger.in_flight.is_empty(),
        "the kill hit writes in flight"
    );
    eprintln!(
        "crash: {} acknowledged keys, {} keys in flight at the kill",
        ledger.acked.len(),
        ledger.in_flight.len()
    );

    srv.restart_with(Opts::fast_gc());
    let c = srv.client();
    let listed = list_all(&c, &b, None).await;
    let listed_set: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    assert_eq!(listed.len(), listed_set.len(), "a key is listed twice");

    let mut problems = Vec::new();
    for key in ledger.acked.keys() {
        if !listed_set.contains(key.as_str()) {
            problems.push(format!("{key}: acknowledged but not listed"));
        }
    }
    let mut expected_chunks = 0;
    for key in &listed {
        let mut candidates: Vec<Version> = ledger.in_flight.get(key).cloned().unwrap_or_default();
        candidates.extend(ledger.acked.get(key).cloned());
        if candidates.is_empty() {
            problems.push(format!("{key}: listed but never written"));
            continue;
        }
        match verify_key(&c, &b, key, &candidates).await {
            Ok(size) => expected_chunks += chunks_of(size),
            Err(p) => problems.push(p),
        }
    }
    assert!(
        problems.is_empty(),
        "after the crash:\n{}",
        problems.join("\n")
    );

    // GC: chunks of overwritten objects (released) and of writes the kill interrupted (leaked,
    // found by the scrub) disappear; exactly the live objects' chunks remain.
    let ok = poll_until(Duration::from_secs(30), || async {
        srv.stored_chunks() == expected_chunks
    })
    .await;
    assert!(
        ok,
        "chunks: {} stored, {expected_chunks} referenced by live objects",
        srv.stored_chunks()
    );

    delete_all(&c, &b).await;
    let ok = poll_until(Duration::from_secs(30), || async {
        srv.stored_chunks() == 0
    })
    .await;
    assert!(
        ok,
        "{} chunks left after deleting everything",
        srv.stored_chunks()
    );
    c.delete_bucket()
        .bucket(&b)
        .send()
        .await
        .expect("the bucket is empty");
}

#[tokio::test]
async fn gc_collects_chunks_of_overwritten_deleted_and_aborted_objects() {
    let srv = Server::start(Opts::fast_gc());
    let c = srv.client();
    let b = new_bucket(&c, "gc").await;
    assert_eq!(srv.stored_chunks(), 0);
    put(&c, &b, "inline", &random_bytes(1000)).await;
    for i in 0..3 {
        put(&c, &b, &format!("small/{i}"), &random_bytes(100 * KIB)).await;
    }
    let big = random_bytes(9 * MIB);
    put(&c, &b, "big", &big).await;
    // Chunks are durable before the PUT is acknowledged.
    assert_eq!(srv.stored_chunks(), 3 + 2);

    // Overwrite the 9 MiB object with a one-chunk one: its two chunks go after the grace.
    let replacement = random_bytes(100 * KIB);
    put(&c, &b, "big", &replacement).await;
    let ok = poll_until(Duration::from_secs(15), || async {
        srv.stored_chunks() == 4
    })
    .await;
    assert!(
        ok,
        "{} chunks stored after an overwrite, want 4",
        srv.stored_chunks()
    );
    assert!(get_bytes(&c, &b, "big").await == replacement);

    // A multipart upload's parts are released when it is aborted.
    let id = c
        .create_multipart_upload()
        .bucket(&b)
        .key("mpu")
        .send()
        .await
        .expect("create")
        .upload_id
        .expect("id");
    c.upload_part()
        .bucket(&b)
        .key("mpu")
        .upload_id(&id)
        .part_number(1)
        .body(body(&random_bytes(100 * KIB)))
        .send()
        .await
        .expect("upload part");
    assert_eq!(srv.stored_chunks(), 5);
    c.abort_multipart_upload()
        .bucket(&b)
        .key("mpu")
        .upload_id(&id)
        .send()
        .await
        .expect("abort");
    let ok = poll_until(Duration::from_secs(15), || async {
        srv.stored_chunks() == 4
    })
    .await;
    assert!(
        ok,
        "{} chunks stored after an abort, want 4",
        srv.stored_chunks()
    );

    delete_all(&c, &b).await;
    let ok = poll_until(Duration::from_secs(15), || async {
        srv.stored_chunks() == 0
    })
    .await;
    assert!(
        ok,
        "{} chunks stored after deleting everything",
        srv.stored_chunks()
    );
    // Live data was never collected early.
    assert!(list_all(&c, &b, None).await.is_empty());
}

#[tokio::test]
async fn restart_keeps_everything() {
    let mut srv = Server::default_start();
    let c = srv.client();
    let b = new_bucket(&c, "restart").await;
    let small = random_bytes(10);
    let big = random_bytes(9 * MIB);
    put(&c, &b, "a/small", &small).await;
    put(&c, &b, "big", &big).await;
    put(&c, &b, "d/", b"marker").await;
    c.put_object_tagging()
        .bucket(&b)
        .key("a/small")
        .tagging(
            aws_sdk_s3::types::Tagging::builder()
                .tag_set(
                    aws_sdk_s3::types::Tag::builder()
                        .key("k")
                        .value("v")
                        .build()
                        .expect("tag"),
                )
                .build()
                .expect("tagging"),
        )
        .send()
        .await
        .expect("tag");
    let upload = c
        .create_multipart_upload()
        .bucket(&b)
        .key("pending")
        .send()
        .await
        .expect("create upload")
        .upload_id
        .expect("id");

    srv.kill();
    srv.restart();
    let c = srv.client();
    assert_eq!(get_bytes(&c, &b, "a/small").await, small);
    assert!(get_bytes(&c, &b, "big").await == big);
    assert_eq!(get_bytes(&c, &b, "d/").await, b"marker");
    assert_eq!(list_all(&c, &b, None).await, vec!["a/small", "big", "d/"]);
    let tags = c
        .get_object_tagging()
        .bucket(&b)
        .key("a/small")
        .send()
        .await
        .expect("tags");
    assert_eq!(tags.tag_set().len(), 1);
    let lu = c
        .list_multipart_uploads()
        .bucket(&b)
        .send()
        .await
        .expect("uploads");
    assert_eq!(
        lu.uploads()
            .iter()
            .filter_map(|u| u.upload_id().map(str::to_string))
            .collect::<Vec<_>>(),
        vec![upload]
    );
}

/// Async parent updates: after a SIGKILL that may leave change-log records unpushed and loses
/// the owners' dirty sets, a directory's entry count equals the objects it holds, and every
/// acknowledged create is there. Writers run while the server is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn directory_attributes_are_exact_after_a_kill() {
    let mut srv = Server::default_start();
    let c = srv.client_no_retry();
    let bucket = new_bucket(&c, "dirattr").await;
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (c, bucket, acked) = (c.clone(), bucket.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let key = format!("dir/f{t}-{i}");
                let r = c
                    .put_object()
                    .bucket(&bucket)
                    .key(&key)
                    .body(body(b"x"))
                    .send()
                    .await;
                match r {
                    Ok(_) => {
                        acked.lock().unwrap().insert(key);
                    }
                    Err(_) => return,
                }
            }
        }));
    }
    // Kill once a few hundred creates were acknowledged.
    let enough = poll_until(Duration::from_secs(30), || {
        let acked = acked.clone();
        async move { acked.lock().unwrap().len() >= 300 }
    })
    .await;
    assert!(enough, "creates were acknowledged");
    srv.kill();
    for t in tasks {
        t.await.unwrap();
    }
    srv.restart();
    let listed: BTreeSet<String> = list_all(&srv.client(), &bucket, Some("dir/"))
        .await
        .into_iter()
        .collect();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.is_subset(&listed),
        "{} acknowledged creates missing",
        acked.difference(&listed).count()
    );
    srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let dir = lib
        .lookup(&[bucket.clone(), "dir".to_string()], saker_rpc::Want::ATTR)
        .await
        .unwrap()
        .attr;
    assert_eq!(
        dir.children,
        listed.len() as u64,
        "the directory counts exactly the objects it holds"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rename_cut_by_a_crash_finishes_on_restart() {
    // The process aborts right after the move's intent is logged, and right after its first
    // step (the new name) is applied: either way the restart rolls it forward. For a
    // directory (its entries stay put) and for a chunked file moving between MNode groups.
    for dir in [true, false] {
        for failpoint in ["rename_logged", "rename_in_done"] {
            rename_cut_by_a_crash(dir, failpoint).await;
        }
    }
}

async fn rename_cut_by_a_crash(dir: bool, failpoint: &str) {
    let mut srv = Server::start(Opts::fast_gc().env("SAKER_FAILPOINT", failpoint));
    let c = srv.client();
    let bucket = new_bucket(&c, "renamecut").await;
    srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let at = |name: &str| vec![bucket.clone(), name.to_string()];
    // Source and target names: for a file, owned by different groups.
    let (from, to) = if dir {
        ("src".to_string(), "dst".to_string())
    } else {
        let to = name_owned_elsewhere(&lib, &bucket, "big.bin", "moved", ".bin");
        ("big.bin".to_string(), to)
    };
    let big = random_bytes(600 * 1024);
    let keys: Vec<String> = if dir {
        (0..24)
            .map(|i| format!("src/{}f{i}", if i % 3 == 0 { "sub/" } else { "" }))
            .collect()
    } else {
        vec!["big.bin".to_string()]
    };
    for k in &keys {
        let data = if dir {
            k.as_bytes().to_vec()
        } else {
            big.clone()
        };
        put(&c, &bucket, k, &data).await;
    }
    let req = saker_rpc::MetaRequest::CoordinatedRename {
        from: at(&from),
        to: at(&to),
        noreplace: false,
        cred: saker_rpc::Cred::ROOT,
        versioning: Default::default(),
    };
    let cut = lib.call(&at(&to), req).await;
    assert!(
        cut.is_err(),
        "{failpoint}: the server was to abort, got {cut:?}"
    );
    srv.restart_with(Opts::fast_gc());
    let c = srv.client();
    let all = list_all(&c, &bucket, None).await;
    assert!(
        !all.iter().any(|k| k.starts_with(&from)),
        "{failpoint}: the old name is gone: {all:?}"
    );
    let mut want: Vec<String> = keys.iter().map(|k| k.replacen(&from, &to, 1)).collect();
    want.sort();
    assert_eq!(all, want, "{failpoint}");
    for k in &keys {
        let moved = k.replacen(&from, &to, 1);
        let data = if dir {
            k.as_bytes().to_vec()
        } else {
            big.clone()
        };
        assert_eq!(get_bytes(&c, &bucket, &moved).await, data);
    }
    if !dir {
        // The chunks moved with the inode: collecting the old name's garbage (and the leak
        // scrub) leaves them alone. Deleting another object shows a collection has run.
        put(&c, &bucket, "victim", &random_bytes(300 * 1024)).await;
        let with_victim = srv.stored_chunks();
        c.delete_object()
            .bucket(&bucket)
            .key("victim")
            .send()
            .await
            .unwrap();
        let collected = poll_until(Duration::from_secs(20), || {
            let n = srv.stored_chunks();
            async move { n < with_victim }
        })
        .await;
        assert!(collected, "the deleted object's chunks were collected");
        assert_eq!(get_bytes(&c, &bucket, &to).await, big);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_cut_by_a_crash_finishes_on_restart_with_the_right_count() {
    // The process aborts after the link's intent is logged, after the file's count is taken
    // (before and after that is logged), after the new name is stored and after the count is
    // settled: each time the
    // restart finishes the link, counting the new name exactly once (the file outlives its
    // first name and goes with its last).
    for failpoint in [
        "link_logged",
        "link_counted_unlogged",
        "link_counted",
        "link_stored",
        "link_settled",
    ] {
        link_cut_by_a_crash(failpoint).await;
    }
}

async fn link_cut_by_a_crash(failpoint: &str) {
    let mut srv = Server::start(Opts::fast_gc().env("SAKER_FAILPOINT", failpoint));
    let c = srv.client();
    let bucket = new_bucket(&c, "linkcut").await;
    srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let at = |name: &str| vec![bucket.clone(), name.to_string()];
    let to = name_owned_elsewhere(&lib, &bucket, "file.bin", "link", ".bin");
    let data = random_bytes(300 * 1024);
    put(&c, &bucket, "file.bin", &data).await;
    let req = saker_rpc::MetaRequest::CoordinatedLink {
        from: at("file.bin"),
        to: at(&to),
        expect: None,
        cred: saker_rpc::Cred::ROOT,
    };
    let cut = lib.call(&at(&to), req).await;
    assert!(
        cut.is_err(),
        "{failpoint}: the server was to abort, got {cut:?}"
    );
    srv.restart_with(Opts::fast_gc());
    srv.use_credential();
    let lib = saker_client::Cluster::connect_all(&srv.rpc_addr, Default::default())
        .await
        .unwrap();
    let linked = poll_until(Duration::from_secs(20), || {
        let lib = &lib;
        let path = at(&to);
        async move { lib.lookup(&path, saker_rpc::Want::ATTR).await.is_ok() }
    })
    .await;
    assert!(linked, "{failpoint}: the link was finished");
    for name in ["file.bin", to.as_str()] {
        let view = lib.lookup(&at(name), saker_rpc::Want::ATTR).await.unwrap();
        assert_eq!(view.attr.nlink, 2, "{failpoint}: {name}");
    }
    let c = srv.client();
    assert_eq!(get_bytes(&c, &bucket, &to).await, data, "{failpoint}");
    // The first name goes: the file stays, under the other one.
    c.delete_object()
        .bucket(&bucket)
        .key("file.bin")
        .send()
        .await
        .unwrap();
    let view = lib.lookup(&at(&to), saker_rpc::Want::ATTR).await.unwrap();
    assert_eq!(view.attr.nlink, 1, "{failpoint}");
    assert_eq!(get_bytes(&c, &bucket, &to).await, data, "{failpoint}");
    // The last name goes: so does the file, and its chunks are collected.
    c.delete_object()
        .bucket(&bucket)
        .key(&to)
        .send()
        .await
        .unwrap();
    let collected = poll_until(Duration::from_secs(30), || {
        let n = srv.stored_chunks();
        async move { n == 0 }
    })
    .await;
    assert!(
        collected,
        "{failpoint}: {} chunks left after the last name went",
        srv.stored_chunks()
    );
}
