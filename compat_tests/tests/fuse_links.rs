//! Hard links through a real mount (SwitchFS §5.5): one file under several names, in several
//! directories and so on several MNode groups; one inode number, one link count, one content
//! and one set of attributes whichever name is used, from the mount and from S3; the file goes
//! with its last name, and links survive a SIGKILL of the server.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::fuse::*;
use common::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// (inode, link count, size) of `p`.
fn ids(p: &Path) -> (u64, u64, u64) {
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.ino(), m.nlink(), m.len())
}

/// Every name must show the same inode, `nlink` links and `content`.
fn assert_one_file(names: &[PathBuf], nlink: u64, content: &[u8]) {
    let ino = ids(&names[0]).0;
    for n in names {
        assert_eq!(
            ids(n),
            (ino, nlink, content.len() as u64),
            "{}",
            n.display()
        );
        assert_eq!(std::fs::read(n).unwrap(), content, "{}", n.display());
    }
}

#[test]
fn hard_links_share_one_file_across_directories_groups_and_s3() {
    let mut m = Mounted::start(Opts::fast_gc());
    let b = m.bucket("links");
    let rt = rt();
    let s3 = m.srv.client();
    std::fs::create_dir(b.join("sub")).unwrap();
    // Chunked content (above the inline threshold), so the chunks' single owner is tested.
    let mut content = random_bytes(200_000);
    std::fs::write(b.join("orig"), &content).unwrap();
    let ctime = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.ctime(), m.ctime_nsec())
    };
    let ctime_before = ctime(&b.join("orig"));

    // Eight names over two directories: with four groups, most live on a group other than
    // the one holding the file's attributes.
    let mut names = vec![b.join("orig")];
    for i in 0..7 {
        let dir = if i % 2 == 0 { b.clone() } else { b.join("sub") };
        let name = dir.join(format!("name-{i}"));
        std::fs::hard_link(&names[i % names.len()], &name).unwrap();
        names.push(name);
    }
    assert_one_file(&names, 8, &content);
    assert!(
        ctime(&b.join("orig")) > ctime_before,
        "link(2) changes the file's ctime"
    );

    // A taken name, a directory and a missing source: EEXIST, EPERM, ENOENT; the count stays.
    assert_eq!(
        errno(std::fs::hard_link(&names[1], &names[2])),
        libc::EEXIST
    );
    assert_eq!(
        errno(std::fs::hard_link(b.join("sub"), b.join("dirlink"))),
        libc::EPERM
    );
    assert_eq!(
        errno(std::fs::hard_link(b.join("nothing"), b.join("x"))),
        libc::ENOENT
    );
    assert_one_file(&names, 8, &content);

    // Writes, truncates, chmod and xattrs through one name show through all the others.
    let mut f = OpenOptions::new().append(true).open(&names[3]).unwrap();
    f.write_all(b"appended through name-2").unwrap();
    drop(f);
    content.extend_from_slice(b"appended through name-2");
    assert_one_file(&names, 8, &content);
    std::fs::set_permissions(&names[5], std::fs::Permissions::from_mode(0o640)).unwrap();
    for n in &names {
        assert_eq!(std::fs::metadata(n).unwrap().mode() & 0o777, 0o640);
    }
    let attr = cpath(&names[6]);
    let set = unsafe {
        libc::setxattr(
            attr.as_ptr(),
            c"user.color".as_ptr(),
            b"blue".as_ptr().cast(),
            4,
            0,
        )
    };
    assert_eq!(set, 0, "setxattr through a link");

    // S3 sees every name as an object with the file's bytes, ETag and user metadata; a
    // listing shows the file's size under each key.
    let etag = quoted_md5(&content);
    for key in ["orig", "name-0", "sub/name-1", "sub/name-5"] {
        let got = rt
            .block_on(s3.get_object().bucket("links").key(key).send())
            .unwrap();
        assert_eq!(got.e_tag(), Some(etag.as_str()), "{key}");
        assert_eq!(
            got.metadata()
                .and_then(|m| m.get("color"))
                .map(String::as_str),
            Some("blue"),
            "{key}"
        );
        let body = rt.block_on(got.body.collect()).unwrap().into_bytes();
        assert_eq!(&body[..], &content[..], "{key}");
    }
    let listed = rt
        .block_on(s3.list_objects_v2().bucket("links").send())
        .unwrap();
    // (`sub/` is the directory mkdir(2) made.)
    let objects: Vec<_> = listed
        .contents()
        .iter()
        .filter(|o| o.key() != Some("sub/"))
        .collect();
    assert_eq!(objects.len(), 8, "{objects:?}");
    for o in objects {
        assert_eq!(o.size(), Some(content.len() as i64), "{:?}", o.key());
        assert_eq!(o.e_tag(), Some(etag.as_str()), "{:?}", o.key());
    }

    // A rename of one name, across directories, moves only that name.
    let moved = b.join("sub").join("moved");
    std::fs::rename(&names[2], &moved).unwrap();
    names[2] = moved;
    assert_one_file(&names, 8, &content);
    // Renaming a name onto another name of the same file does nothing.
    std::fs::rename(&names[3], &names[4]).unwrap();
    assert_one_file(&names, 8, &content);

    // An S3 PUT to one key gives that key an object of its own; the others keep the file.
    rt.block_on(put(&s3, "links", "name-0", b"its own object"));
    assert_eq!(std::fs::read(&names[1]).unwrap(), b"its own object");
    assert_eq!(ids(&names[1]).1, 1);
    assert_ne!(ids(&names[1]).0, ids(&names[0]).0);
    names.remove(1);
    assert_one_file(&names, 7, &content);
    // S3 DELETE of one key removes that name only.
    rt.block_on(s3.delete_object().bucket("links").key("sub/name-5").send())
        .unwrap();
    names.retain(|n| !n.ends_with("sub/name-5"));
    assert_one_file(&names, 6, &content);

    // The kill: links, counts and content are durable once the calls returned.
    m.srv.kill();
    m.remount_after_kill();
    assert_one_file(&names, 6, &content);

    // Unlinks: each name goes alone, the file with the last one (and its chunks after the
    // grace period, while the other object's chunk stays).
    while let Some(last) = names.pop() {
        std::fs::remove_file(&last).unwrap();
        assert!(std::fs::metadata(&last).is_err());
        if !names.is_empty() {
            assert_one_file(&names, names.len() as u64, &content);
        }
    }
    let s3 = m.srv.client();
    assert_status(
        rt.block_on(s3.head_object().bucket("links").key("orig").send()),
        404,
    );
    let collected = rt.block_on(poll_until(Duration::from_secs(30), || async {
        m.srv.stored_chunks() == 0
    }));
    assert!(
        collected,
        "{} chunks left after the last name went",
        m.srv.stored_chunks()
    );
}

#[test]
fn removal_in_a_sticky_directory_checks_the_files_owner_now() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("sticky");
    std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let file = b.join("f");
    std::fs::write(&file, b"owned by 1000, then by 2000").unwrap();
    std::os::unix::fs::chown(&file, Some(1000), Some(1000)).unwrap();
    // Names made while 1000 owned the file (several, so that some are held by groups other
    // than the file's home).
    let names: Vec<PathBuf> = (0..6).map(|i| b.join(format!("g{i}"))).collect();
    for n in &names {
        std::fs::hard_link(&file, n).unwrap();
    }
    std::os::unix::fs::chown(&file, Some(2000), Some(2000)).unwrap();
    for (i, n) in names.iter().enumerate() {
        let shown = std::fs::metadata(n).unwrap();
        assert_eq!(
            (shown.uid(), shown.nlink()),
            (2000, 7 - i as u64),
            "{}",
            n.display()
        );
        // The old owner may no longer remove the name; the new one may.
        let o = as_user(1000, 1000, &[], &format!("rm -f {}", n.display()));
        assert!(!o.status.success(), "uid 1000 removed {}", n.display());
        assert!(n.exists());
        let o = as_user(2000, 2000, &[], &format!("rm -f {}", n.display()));
        assert!(
            o.status.success(),
            "uid 2000 could not remove {}: {}",
            n.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!n.exists());
    }
    assert_eq!(ids(&file).1, 1);
}
