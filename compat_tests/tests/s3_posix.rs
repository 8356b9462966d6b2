//! POSIX modes for keys with a uid: files and directories made and chmod-ed through the mount
//! are read, written, deleted and listed through S3 by keys made with `--uid`/`--gid` as
//! those users would through the mount; the root key is not checked. Needs /dev/fuse and root.

mod common;

use std::os::unix::fs::{chown, PermissionsExt};

use common::fuse::Mounted;
use common::*;

fn create_key(srv: &Server, ak: &str, uid: u32) {
    let (uid, sk) = (uid.to_string(), format!("{ak}-secret"));
    let args = [
        "key",
        "create",
        "--access-key",
        ak,
        "--secret-key",
        &sk,
        "--uid",
        &uid,
        "--gid",
        &uid,
        "--policy",
        "admin",
    ];
    ok_stdout(srv.admin_cmd(&args), "key create");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_with_a_uid_are_held_to_the_file_modes() {
    let mounted = tokio::task::spawn_blocking(|| Mounted::start(Opts::default()))
        .await
        .unwrap();
    let srv = &mounted.srv;
    create_key(srv, "AKALICE", 1000);
    create_key(srv, "AKBOB", 2000);
    let alice = srv.client_with("AKALICE", "AKALICE-secret");
    let bob = srv.client_with("AKBOB", "AKBOB-secret");
    let root = srv.client();

    // Through the mount (as root): alice's home, a private and a shared file in it.
    let bucket = mounted.bucket("posixb");
    let home = bucket.join("home");
    std::fs::create_dir(&home).unwrap();
    chown(&home, Some(1000), Some(1000)).unwrap();
    for (name, mode) in [("secret", 0o600), ("shared", 0o644)] {
        let f = home.join(name);
        std::fs::write(&f, name).unwrap();
        chown(&f, Some(1000), Some(1000)).unwrap();
        std::fs::set_permissions(&f, PermissionsExt::from_mode(mode)).unwrap();
    }

    // Reads: a 0600 file is alice's alone (and the root key's); a 0644 one anyone's.
    assert_eq!(get_bytes(&alice, "posixb", "home/secret").await, b"secret");
    assert_eq!(get_bytes(&root, "posixb", "home/secret").await, b"secret");
    let denied = failure(
        bob.get_object()
            .bucket("posixb")
            .key("home/secret")
            .send()
            .await,
    );
    assert_eq!(
        (denied.status, denied.code.as_deref()),
        (403, Some("AccessDenied"))
    );
    assert_status(
        bob.head_object()
            .bucket("posixb")
            .key("home/secret")
            .send()
            .await,
        403,
    );
    assert_eq!(get_bytes(&bob, "posixb", "home/shared").await, b"shared");

    // Writes and deletes need write permission on the directory (0755, alice's).
    let r = bob
        .put_object()
        .bucket("posixb")
        .key("home/bobs")
        .body(body(b"x"))
        .send()
        .await;
    assert_status(r, 403);
    assert!(!home.join("bobs").exists(), "a refused PUT stored nothing");
    let r = bob
        .delete_object()
        .bucket("posixb")
        .key("home/shared")
        .send()
        .await;
    assert_status(r, 403);
    assert!(
        home.join("shared").exists(),
        "a refused DELETE removed nothing"
    );
    // ... of the nearest directory that exists, for keys whose directories a PUT makes: the
    // bucket is root's, 0755.
    let r = bob
        .put_object()
        .bucket("posixb")
        .key("new/deep/x")
        .body(body(b"x"))
        .send()
        .await;
    assert_status(r, 403);
    put(&alice, "posixb", "home/made/by/alice", b"mine").await;
    let made = std::fs::metadata(home.join("made/by/alice")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((made.uid(), made.gid()), (1000, 1000));
    // Changing a file in place (its tags) needs write permission on it.
    let tags = aws_sdk_s3::types::Tagging::builder()
        .tag_set(
            aws_sdk_s3::types::Tag::builder()
                .key("k")
                .value("v")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let r = bob
        .put_object_tagging()
        .bucket("posixb")
        .key("home/shared")
        .tagging(tags.clone())
        .send()
        .await;
    assert_status(r, 403);
    alice
        .put_object_tagging()
        .bucket("posixb")
        .key("home/shared")
        .tagging(tags)
        .send()
        .await
        .unwrap();
    // The keys of a multi-object delete, one by one; a copy's source is read.
    let delete = aws_sdk_s3::types::Delete::builder()
        .objects(
            aws_sdk_s3::types::ObjectIdentifier::builder()
                .key("home/shared")
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let out = bob
        .delete_objects()
        .bucket("posixb")
        .delete(delete)
        .send()
        .await
        .unwrap();
    let refused: Vec<_> = out.errors().iter().filter_map(|e| e.code()).collect();
    assert_eq!(refused, ["AccessDenied"]);
    assert!(home.join("shared").exists(), "a refused key stays");
    bob.create_bucket().bucket("bobs").send().await.unwrap();
    let copy = |src: &str| {
        bob.copy_object()
            .bucket("bobs")
            .key("copied")
            .copy_source(format!("posixb/{src}"))
            .send()
    };
    assert_status(copy("home/secret").await, 403);
    copy("home/shared").await.unwrap();
    alice
        .delete_object()
        .bucket("posixb")
        .key("home/shared")
        .send()
        .await
        .unwrap();
    assert!(!home.join("shared").exists());

    // Listing needs read and search permission on the prefix's directory.
    std::fs::set_permissions(&home, PermissionsExt::from_mode(0o700)).unwrap();
    let r = bob
        .list_objects_v2()
        .bucket("posixb")
        .prefix("home/")
        .send()
        .await;
    assert_status(r, 403);
    let listed = list_all(&alice, "posixb", Some("home/")).await;
    assert!(listed.contains(&"home/secret".to_string()), "{listed:?}");
    // Search permission on the directories above, for reads too.
    let r = bob
        .get_object()
        .bucket("posixb")
        .key("home/made/by/alice")
        .send()
        .await;
    assert_status(r, 403);
    assert_eq!(
        get_bytes(&root, "posixb", "home/made/by/alice").await,
        b"mine"
    );
}
