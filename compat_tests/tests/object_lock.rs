//! Object Lock (WORM) end to end: buckets created with it keep versions for good; a version
//! under a retention or a legal hold cannot be deleted or have its retention weakened through
//! S3 (AccessDenied; governance bypassed only by keys allowed to) nor changed through the
//! mount (EPERM for unlink, rename, open for writing and truncate).

mod common;

use std::time::{Duration, SystemTime};

use aws_sdk_s3::primitives::DateTime;
use aws_sdk_s3::types::{
    BucketVersioningStatus, CompletedMultipartUpload, CompletedPart, ObjectLockLegalHold,
    ObjectLockLegalHoldStatus, ObjectLockMode, ObjectLockRetention, ObjectLockRetentionMode,
    VersioningConfiguration,
};
use aws_sdk_s3::Client;
use common::fuse::{cpath, errno, libc_errno, LibraryMount, Mounted};
use common::worm::a_day_of_governance;
use common::*;

async fn lock_bucket(c: &Client, tag: &str) -> String {
    let b = bucket_name(tag);
    c.create_bucket()
        .bucket(&b)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .expect("create bucket with object lock");
    b
}

fn in_secs(secs: u64) -> DateTime {
    let t = SystemTime::now() + Duration::from_secs(secs);
    DateTime::from_secs(t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64)
}

fn retention(mode: ObjectLockRetentionMode, until: DateTime) -> ObjectLockRetention {
    ObjectLockRetention::builder()
        .mode(mode)
        .retain_until_date(until)
        .build()
}

async fn put_locked(c: &Client, b: &str, k: &str, mode: ObjectLockMode, secs: u64) -> String {
    c.put_object()
        .bucket(b)
        .key(k)
        .body(body(k.as_bytes()))
        .object_lock_mode(mode)
        .object_lock_retain_until_date(in_secs(secs))
        .send()
        .await
        .expect("put with a retention")
        .version_id
        .expect("a lock bucket keeps versions")
}

async fn delete_version(
    c: &Client,
    b: &str,
    k: &str,
    v: &str,
    bypass: bool,
) -> Result<(), Failure> {
    let r = c
        .delete_object()
        .bucket(b)
        .key(k)
        .version_id(v)
        .bypass_governance_retention(bypass)
        .send()
        .await;
    match r {
        Ok(_) => Ok(()),
        Err(e) => Err(failure::<(), _>(Err(e))),
    }
}

fn denied(r: Result<(), Failure>, what: &str) {
    let f = r.expect_err(what);
    assert_eq!(
        (f.status, f.code.as_deref()),
        (403, Some("AccessDenied")),
        "{what}: {f:?}"
    );
}

#[tokio::test]
async fn retention_and_legal_hold_guard_versions() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = lock_bucket(&c, "lock").await;

    // Object Lock turns versioning on for good.
    let v = c.get_bucket_versioning().bucket(&b).send().await.unwrap();
    assert_eq!(v.status(), Some(&BucketVersioningStatus::Enabled));
    let suspend = VersioningConfiguration::builder()
        .status(BucketVersioningStatus::Suspended)
        .build();
    assert_fails(
        c.put_bucket_versioning()
            .bucket(&b)
            .versioning_configuration(suspend)
            .send()
            .await,
        409,
        "InvalidBucketState",
    );

    // A default retention applies to every new version.
    let conf = a_day_of_governance();
    c.put_object_lock_configuration()
        .bucket(&b)
        .object_lock_configuration(conf.clone())
        .send()
        .await
        .unwrap();
    let got = c
        .get_object_lock_configuration()
        .bucket(&b)
        .send()
        .await
        .unwrap();
    assert_eq!(got.object_lock_configuration(), Some(&conf));
    let v1 = c
        .put_object()
        .bucket(&b)
        .key("doc")
        .body(body(b"first"))
        .send()
        .await
        .unwrap()
        .version_id
        .unwrap();
    let head = c.head_object().bucket(&b).key("doc").send().await.unwrap();
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
    let until = head.object_lock_retain_until_date().unwrap().secs();
    let day_from_now = in_secs(86_400).secs();
    assert!(
        (day_from_now - 120..=day_from_now).contains(&until),
        "retain until {until}, a day from now is {day_from_now}"
    );
    assert_eq!(
        head.object_lock_legal_hold_status(),
        Some(&ObjectLockLegalHoldStatus::Off)
    );

    // The version cannot go; a delete without a version id writes a marker and keeps it.
    denied(delete_version(&c, &b, "doc", &v1, false).await, "delete v1");
    c.delete_object()
        .bucket(&b)
        .key("doc")
        .send()
        .await
        .unwrap();
    let r = c
        .get_object()
        .bucket(&b)
        .key("doc")
        .version_id(&v1)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.body.collect().await.unwrap().into_bytes().as_ref(),
        b"first"
    );
    // Shortening a governance retention needs the bypass; the root key may bypass it.
    let sooner = retention(ObjectLockRetentionMode::Governance, in_secs(60));
    assert_fails(
        c.put_object_retention()
            .bucket(&b)
            .key("doc")
            .version_id(&v1)
            .retention(sooner.clone())
            .send()
            .await,
        403,
        "AccessDenied",
    );
    c.put_object_retention()
        .bucket(&b)
        .key("doc")
        .version_id(&v1)
        .retention(sooner.clone())
        .bypass_governance_retention(true)
        .send()
        .await
        .unwrap();
    let r = c
        .get_object_retention()
        .bucket(&b)
        .key("doc")
        .version_id(&v1)
        .send()
        .await
        .unwrap();
    assert_eq!(r.retention(), Some(&sooner));
    delete_version(&c, &b, "doc", &v1, true).await.unwrap();

    // Compliance: nobody deletes it or shortens it, the root key with a bypass included;
    // extending it is allowed.
    let v2 = put_locked(&c, &b, "ledger", ObjectLockMode::Compliance, 3600).await;
    denied(
        delete_version(&c, &b, "ledger", &v2, true).await,
        "delete compliance",
    );
    let shorter = retention(ObjectLockRetentionMode::Compliance, in_secs(600));
    assert_fails(
        c.put_object_retention()
            .bucket(&b)
            .key("ledger")
            .retention(shorter)
            .bypass_governance_retention(true)
            .send()
            .await,
        403,
        "AccessDenied",
    );
    let longer = retention(ObjectLockRetentionMode::Compliance, in_secs(7200));
    c.put_object_retention()
        .bucket(&b)
        .key("ledger")
        .retention(longer)
        .send()
        .await
        .unwrap();
    denied(
        delete_version(&c, &b, "ledger", &v2, true).await,
        "delete extended",
    );

    // A legal hold holds whatever the retention says, until it is lifted.
    let b2 = lock_bucket(&c, "hold").await;
    put(&c, &b2, "evidence", b"held").await;
    let v3 = c
        .head_object()
        .bucket(&b2)
        .key("evidence")
        .send()
        .await
        .unwrap()
        .version_id
        .unwrap();
    let hold = |on: bool| {
        let s = if on {
            ObjectLockLegalHoldStatus::On
        } else {
            ObjectLockLegalHoldStatus::Off
        };
        ObjectLockLegalHold::builder().status(s).build()
    };
    c.put_object_legal_hold()
        .bucket(&b2)
        .key("evidence")
        .legal_hold(hold(true))
        .send()
        .await
        .unwrap();
    denied(delete_version(&c, &b2, "evidence", &v3, true).await, "held");
    let got = c
        .get_object_legal_hold()
        .bucket(&b2)
        .key("evidence")
        .send()
        .await
        .unwrap();
    assert_eq!(got.legal_hold(), Some(&hold(true)));
    c.put_object_legal_hold()
        .bucket(&b2)
        .key("evidence")
        .legal_hold(hold(false))
        .send()
        .await
        .unwrap();
    delete_version(&c, &b2, "evidence", &v3, false)
        .await
        .unwrap();

    // A multipart upload's lock comes from its CreateMultipartUpload.
    let up = c
        .create_multipart_upload()
        .bucket(&b2)
        .key("parts")
        .object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On)
        .send()
        .await
        .unwrap();
    let uid = up.upload_id().unwrap();
    let part = c
        .upload_part()
        .bucket(&b2)
        .key("parts")
        .upload_id(uid)
        .part_number(1)
        .body(body(b"one part"))
        .send()
        .await
        .unwrap();
    let done = c
        .complete_multipart_upload()
        .bucket(&b2)
        .key("parts")
        .upload_id(uid)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(
                    CompletedPart::builder()
                        .part_number(1)
                        .e_tag(part.e_tag().unwrap())
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let vp = done.version_id().unwrap();
    denied(
        delete_version(&c, &b2, "parts", vp, true).await,
        "held upload",
    );

    // Buckets without Object Lock refuse lock headers and lock requests.
    let plain = new_bucket(&c, "plain").await;
    assert_fails(
        c.put_object()
            .bucket(&plain)
            .key("k")
            .body(body(b"x"))
            .object_lock_legal_hold_status(ObjectLockLegalHoldStatus::On)
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    put(&c, &plain, "k", b"x").await;
    assert_fails(
        c.get_object_retention()
            .bucket(&plain)
            .key("k")
            .send()
            .await,
        400,
        "InvalidRequest",
    );
    assert_fails(
        c.get_object_lock_configuration()
            .bucket(&plain)
            .send()
            .await,
        404,
        "ObjectLockConfigurationNotFoundError",
    );
}

#[tokio::test]
async fn bypass_needs_its_permission() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = lock_bucket(&c, "bypass").await;
    let v = put_locked(&c, &b, "k", ObjectLockMode::Governance, 3600).await;
    // A key allowed to delete versions but not to bypass governance.
    let doc = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow",
            "Action":["s3:DeleteObject","s3:DeleteObjectVersion","s3:GetObject"],
            "Resource":"arn:aws:s3:::{b}/*"}}]}}"#
    );
    let file = srv.data_dir().join("no-bypass.json");
    std::fs::write(&file, doc).unwrap();
    let args = [
        "key",
        "create",
        "--access-key",
        "AKNOBYPASS",
        "--secret-key",
        "no-bypass-secret-1",
        "--policy",
        file.to_str().unwrap(),
    ];
    ok_stdout(srv.admin_cmd(&args), "key create");
    let limited = srv.client_with("AKNOBYPASS", "no-bypass-secret-1");
    denied(
        delete_version(&limited, &b, "k", &v, true).await,
        "no bypass",
    );
    delete_version(&c, &b, "k", &v, true).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mount_cannot_change_locked_files() {
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let c = mounted.srv.client();
    let b = lock_bucket(&c, "wormfs").await;
    put_locked(&c, &b, "locked", ObjectLockMode::Compliance, 3600).await;
    put(&c, &b, "free", b"free").await;
    put(&c, &b, "other", b"other").await;
    let dir = mounted.root.join(&b);
    let errs = tokio::task::spawn_blocking(move || {
        let locked = dir.join("locked");
        let read = std::fs::read(&locked).unwrap();
        let write = std::fs::OpenOptions::new().write(true).open(&locked);
        let trunc = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&locked);
        let unlink = std::fs::remove_file(&locked);
        let rename_away = std::fs::rename(&locked, dir.join("moved"));
        let rename_over = std::fs::rename(dir.join("other"), &locked);
        // A file without a lock changes as usual.
        std::fs::write(dir.join("free"), b"rewritten").unwrap();
        std::fs::remove_file(dir.join("free")).unwrap();
        let after = std::fs::read(&locked).unwrap();
        (
            read,
            after,
            [
                errno(write),
                errno(trunc),
                errno(unlink),
                errno(rename_away),
                errno(rename_over),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(errs.0, b"locked");
    assert_eq!(errs.1, b"locked");
    assert_eq!(errs.2, [libc::EPERM; 5]);
    assert_eq!(get_bytes(&c, &b, "locked").await, b"locked");
    assert_eq!(get_bytes(&c, &b, "other").await, b"other");
}

/// A bucket's default retention locks what the mount writes, at close(2): the open's own
/// fsyncs still replace the version it made (one version, all its bytes), and afterwards the
/// file cannot be removed or rewritten through the mount (EPERM) nor its version deleted
/// through S3 (AccessDenied). An object written before the default was set stays free.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mount_s_writes_get_the_default_retention() {
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let c = mounted.srv.client();
    let b = lock_bucket(&c, "wormdefault").await;
    put(&c, &b, "before", b"free").await;
    let conf = a_day_of_governance();
    c.put_object_lock_configuration()
        .bucket(&b)
        .object_lock_configuration(conf)
        .send()
        .await
        .unwrap();
    // The mount reads the bucket's settings when its first write there needs them: now.
    let dir = mounted.root.join(&b);
    let out = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let log = dir.join("log");
        let mut f = std::fs::File::create(&log).unwrap();
        f.write_all(b"first half, ").unwrap();
        f.sync_all().unwrap();
        f.write_all(b"second half").unwrap();
        f.sync_all().unwrap();
        drop(f);
        let read = std::fs::read(&log).unwrap();
        let unlink = std::fs::remove_file(&log);
        let write = std::fs::OpenOptions::new().write(true).open(&log);
        let rename_away = std::fs::rename(&log, dir.join("moved"));
        let free = std::fs::remove_file(dir.join("before"));
        (
            read,
            [errno(unlink), errno(write), errno(rename_away)],
            free,
        )
    })
    .await
    .unwrap();
    assert_eq!(out.0, b"first half, second half");
    assert_eq!(out.1, [libc::EPERM; 3]);
    assert!(
        out.2.is_ok(),
        "an object from before the default: {:?}",
        out.2
    );

    // Two versions: the first fsync's commit was locked at once (in its own batch), so the
    // second could not replace it and made another; each locked with the default: a day,
    // governance.
    let versions = c
        .list_object_versions()
        .bucket(&b)
        .prefix("log")
        .send()
        .await
        .unwrap();
    let ids: Vec<&str> = versions
        .versions()
        .iter()
        .filter_map(|v| v.version_id())
        .collect();
    assert_eq!(ids.len(), 2, "{versions:?}");
    let day = in_secs(86_400).secs();
    for vid in &ids {
        let head = c
            .head_object()
            .bucket(&b)
            .key("log")
            .version_id(*vid)
            .send()
            .await
            .unwrap();
        assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
        let until = head.object_lock_retain_until_date().unwrap().secs();
        assert!((day - 120..=day).contains(&until), "{until} vs {day}");
        denied(
            delete_version(&c, &b, "log", vid, false).await,
            "deleting a locked version the mount made",
        );
    }
    assert_eq!(get_bytes(&c, &b, "log").await, b"first half, second half");
}

/// Through a library mount (a `saker mount --cluster` process holding only a client
/// credential) in a bucket with a governance default: the file is locked at its first commit
/// (its fsync, seen while the file is still open); afterwards unlink, rename and truncate are
/// EPERM, and an S3 delete of its version is AccessDenied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_library_mount_s_file_is_locked_at_its_first_commit() {
    let srv = Server::default_start();
    let c = srv.client();
    let b = lock_bucket(&c, "wormlib").await;
    c.put_object_lock_configuration()
        .bucket(&b)
        .object_lock_configuration(a_day_of_governance())
        .send()
        .await
        .unwrap();
    let mount = tokio::task::block_in_place(|| LibraryMount::start(&srv));
    let dir = mount.root.join(&b);
    let open = tokio::task::block_in_place(|| {
        use std::io::Write;
        let mut f = std::fs::File::create(dir.join("log")).unwrap();
        f.write_all(b"committed once").unwrap();
        f.sync_all().unwrap();
        f
    });
    let head = c.head_object().bucket(&b).key("log").send().await.unwrap();
    assert_eq!(head.object_lock_mode(), Some(&ObjectLockMode::Governance));
    let vid = head.version_id().expect("a version id").to_string();
    let errs = tokio::task::block_in_place(|| {
        drop(open);
        let log = dir.join("log");
        [
            errno(std::fs::remove_file(&log)),
            errno(std::fs::rename(&log, dir.join("moved"))),
            errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&log),
            ),
            // SAFETY: a valid C path.
            libc_errno(unsafe { libc::truncate(cpath(&log).as_ptr(), 0) } as i64),
        ]
    });
    assert_eq!(errs, [libc::EPERM; 4]);
    denied(
        delete_version(&c, &b, "log", &vid, false).await,
        "deleting the version a library mount made",
    );
    assert_eq!(get_bytes(&c, &b, "log").await, b"committed once");
}
