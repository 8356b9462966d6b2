//! Each FUSE operation against a real mount (`saker server --mount`): file data (random
//! offsets, sparse files, O_APPEND, truncate, fsync), attributes (chmod, chown, utimens),
//! rename (within and across directories, replacing, RENAME_NOREPLACE, RENAME_EXCHANGE),
//! symlinks, special files, readdir, statfs, extended attributes as S3 user
//! metadata, locks, long paths, and the errnos of bad calls.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fuse::*;
use common::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn file_data_reads_back_at_any_offset() {
    data_reads_back(false);
}

#[test]
fn file_data_reads_back_at_any_offset_in_a_bucket_that_keeps_versions() {
    data_reads_back(true);
}

fn data_reads_back(versioned: bool) {
    let m = Mounted::start(Opts::default());
    let b = m.bucket_keeping_versions("data", versioned);

    // Random-offset writes leave a sparse hole that reads as zeros.
    let p = b.join("sparse.bin");
    let f = File::create(&p).unwrap();
    f.write_all_at(b"tail", 1 << 20).unwrap();
    f.write_all_at(b"head", 0).unwrap();
    f.write_all_at(b"mid", 4096).unwrap();
    drop(f);
    let got = std::fs::read(&p).unwrap();
    assert_eq!(got.len(), (1 << 20) + 4);
    assert_eq!(&got[..4], b"head");
    assert_eq!(&got[4096..4099], b"mid");
    assert!(got[4..4096].iter().all(|&x| x == 0));
    assert!(got[4099..1 << 20].iter().all(|&x| x == 0));
    assert_eq!(&got[1 << 20..], b"tail");

    // Overwrite in place of a chunked file, through a read-write handle.
    let big = random_bytes(3 << 20);
    let p2 = b.join("big.bin");
    std::fs::write(&p2, &big).unwrap();
    let mut f = OpenOptions::new().read(true).write(true).open(&p2).unwrap();
    f.seek(SeekFrom::Start(2_000_000)).unwrap();
    f.write_all(b"PATCH").unwrap();
    let mut back = [0u8; 9];
    f.read_exact_at(&mut back, 1_999_998).unwrap();
    assert_eq!(&back[2..7], b"PATCH");
    drop(f);
    let mut want = big.clone();
    want[2_000_000..2_000_005].copy_from_slice(b"PATCH");
    assert_eq!(std::fs::read(&p2).unwrap(), want);

    // O_APPEND writes land at the end whatever the offset.
    let p3 = b.join("log.txt");
    std::fs::write(&p3, b"one\n").unwrap();
    let mut f = OpenOptions::new().append(true).open(&p3).unwrap();
    f.write_all(b"two\n").unwrap();
    f.write_all(b"three\n").unwrap();
    drop(f);
    assert_eq!(std::fs::read(&p3).unwrap(), b"one\ntwo\nthree\n");

    // truncate down and up (zeros), by path and by handle.
    let f = OpenOptions::new().write(true).open(&p3).unwrap();
    f.set_len(3).unwrap();
    drop(f);
    assert_eq!(std::fs::read(&p3).unwrap(), b"one");
    let f = OpenOptions::new().write(true).open(&p3).unwrap();
    f.set_len(6).unwrap();
    drop(f);
    assert_eq!(std::fs::read(&p3).unwrap(), b"one\0\0\0");
    let c = cpath(&p3);
    assert_eq!(
        libc_errno(unsafe { libc::truncate(c.as_ptr(), 0) } as i64),
        0
    );
    assert_eq!(std::fs::metadata(&p3).unwrap().len(), 0);

    // O_TRUNC on open empties the file.
    std::fs::write(&p2, b"short").unwrap();
    assert_eq!(std::fs::read(&p2).unwrap(), b"short");

    // fsync makes bytes visible to S3 before close; close-to-open for the rest.
    let rt = rt();
    let s3 = m.srv.client();
    let mut f = File::create(b.join("synced.txt")).unwrap();
    f.write_all(b"durable before close").unwrap();
    f.sync_all().unwrap();
    let seen = rt.block_on(get_bytes(&s3, "data", "synced.txt"));
    assert_eq!(seen, b"durable before close");
    drop(f);

    // Empty files, and a create that exists: O_EXCL says EEXIST.
    File::create(b.join("empty")).unwrap();
    assert_eq!(std::fs::metadata(b.join("empty")).unwrap().len(), 0);
    let again = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(b.join("empty"));
    assert_eq!(errno(again), libc::EEXIST);
}

#[test]
fn attributes_change_with_chmod_chown_and_utimens() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("attrs");
    let p = b.join("f");
    std::fs::write(&p, b"x").unwrap();
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!(meta.uid(), 0);
    assert!(meta.is_file());
    assert_eq!(meta.nlink(), 1);

    std::fs::set_permissions(&p, PermissionsExt::from_mode(0o640)).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o640);
    std::os::unix::fs::chown(&p, Some(1234), Some(5678)).unwrap();
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1234, 5678));

    let when = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let f = File::options().write(true).open(&p).unwrap();
    f.set_times(
        std::fs::FileTimes::new()
            .set_modified(when)
            .set_accessed(when),
    )
    .unwrap();
    drop(f);
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!(meta.modified().unwrap(), when);
    assert_eq!(meta.accessed().unwrap(), when);
    // A write moves mtime forward again.
    std::fs::write(&p, b"y").unwrap();
    assert!(
        std::fs::metadata(&p).unwrap().modified().unwrap()
            > SystemTime::now() - Duration::from_secs(60)
    );

    // Directories: mode and nlink.
    std::fs::create_dir(b.join("d")).unwrap();
    std::fs::set_permissions(b.join("d"), PermissionsExt::from_mode(0o711)).unwrap();
    let dm = std::fs::metadata(b.join("d")).unwrap();
    assert!(dm.is_dir());
    assert_eq!(dm.mode() & 0o7777, 0o711);
    assert!(dm.nlink() >= 2);
}

fn renameat2(from: &Path, to: &Path, flags: u32) -> i32 {
    let (f, t) = (cpath(from), cpath(to));
    libc_errno(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            flags,
        )
    } as i64)
}

#[test]
fn rename_moves_and_replaces_files() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("ren");
    std::fs::create_dir_all(b.join("x/y")).unwrap();
    std::fs::create_dir(b.join("z")).unwrap();
    // Enough names that some pairs land in different MNode groups.
    for i in 0..20 {
        std::fs::write(b.join(format!("x/f{i}")), format!("file {i}")).unwrap();
    }
    for i in 0..20 {
        let to = if i % 2 == 0 {
            b.join(format!("x/g{i}"))
        } else {
            b.join(format!("z/h{i}"))
        };
        std::fs::rename(b.join(format!("x/f{i}")), &to).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), format!("file {i}"));
        assert_eq!(
            errno(std::fs::metadata(b.join(format!("x/f{i}")))),
            libc::ENOENT
        );
    }
    // Replacing a target.
    std::fs::write(b.join("x/y/old"), b"old").unwrap();
    std::fs::rename(b.join("x/g0"), b.join("x/y/old")).unwrap();
    assert_eq!(
        std::fs::read_to_string(b.join("x/y/old")).unwrap(),
        "file 0"
    );
    // RENAME_NOREPLACE honoured; RENAME_EXCHANGE unsupported.
    assert_eq!(
        renameat2(&b.join("x/g2"), &b.join("x/y/old"), libc::RENAME_NOREPLACE),
        libc::EEXIST
    );
    assert_eq!(
        renameat2(&b.join("x/g2"), &b.join("x/y/new"), libc::RENAME_NOREPLACE),
        0
    );
    assert_eq!(
        renameat2(&b.join("x/g4"), &b.join("x/y/new"), libc::RENAME_EXCHANGE),
        libc::EINVAL
    );
    // A file over a directory, a directory over a file, a missing source.
    assert_eq!(
        errno(std::fs::rename(b.join("x/g4"), b.join("z"))),
        libc::EISDIR
    );
    assert_eq!(
        errno(std::fs::rename(b.join("x/nope"), b.join("x/n2"))),
        libc::ENOENT
    );
    // A directory moves with what it holds.
    std::fs::rename(b.join("x/y"), b.join("z/y2")).unwrap();
    assert_eq!(
        std::fs::read_to_string(b.join("z/y2/old")).unwrap(),
        "file 0"
    );
    assert_eq!(errno(std::fs::metadata(b.join("x/y"))), libc::ENOENT);
    let mut names: Vec<String> = std::fs::read_dir(b.join("z"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('h'))
        .collect();
    names.sort();
    assert_eq!(names.len(), 10);
}

#[test]
fn symlinks_readdir_statfs_and_unsupported_calls() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("misc");
    std::fs::write(b.join("target.txt"), b"pointed at").unwrap();
    std::os::unix::fs::symlink("target.txt", b.join("link")).unwrap();
    assert_eq!(
        std::fs::read_link(b.join("link")).unwrap(),
        Path::new("target.txt")
    );
    assert!(std::fs::symlink_metadata(b.join("link"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(b.join("link")).unwrap(), b"pointed at");
    // A dangling link is a link to nothing.
    std::os::unix::fs::symlink("/no/such/place", b.join("dangling")).unwrap();
    assert_eq!(errno(std::fs::read(b.join("dangling"))), libc::ENOENT);

    // FIFOs and device nodes exist with their type, mode and device number, not in S3.
    let fifo = cpath(&b.join("fifo"));
    assert_eq!(
        libc_errno(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) } as i64),
        0
    );
    let meta = std::fs::symlink_metadata(b.join("fifo")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
    assert_eq!(meta.mode() & 0o777, 0o640);
    let dev = cpath(&b.join("dev"));
    let rdev = libc::makedev(1, 3);
    assert_eq!(
        libc_errno(unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o600, rdev) } as i64),
        0
    );
    let meta = std::fs::symlink_metadata(b.join("dev")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &meta.file_type()
    ));
    assert_eq!(meta.rdev(), rdev);
    assert_eq!(
        libc_errno(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) } as i64),
        libc::EEXIST
    );
    let rt = rt();
    let listed = rt.block_on(list_all(&m.srv.client(), "misc", None));
    assert!(
        !listed.iter().any(|k| k == "fifo" || k == "dev"),
        "{listed:?}"
    );
    std::fs::remove_file(b.join("fifo")).unwrap();

    // readdir lists everything, with types.
    std::fs::create_dir(b.join("sub")).unwrap();
    for i in 0..300 {
        File::create(b.join(format!("sub/{i:04}"))).unwrap();
    }
    let mut names: Vec<String> = std::fs::read_dir(b.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let want: Vec<String> = (0..300).map(|i| format!("{i:04}")).collect();
    assert_eq!(names, want);
    let kinds: Vec<(String, bool)> = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.file_type().unwrap().is_dir(),
            )
        })
        .filter(|(n, _)| n == "sub" || n == "target.txt")
        .collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.contains(&("sub".into(), true)));
    assert!(kinds.contains(&("target.txt".into(), false)));

    // statfs answers.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let c = cpath(&b);
    assert_eq!(
        libc_errno(unsafe { libc::statvfs(c.as_ptr(), &mut st) } as i64),
        0
    );
    assert_eq!(st.f_namemax, 255);
    assert!(st.f_bavail > 0);

    // access(2) for root.
    assert_eq!(
        libc_errno(
            unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK | libc::X_OK) } as i64
        ),
        0
    );
}

#[test]
fn bad_calls_get_the_right_errno() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("errs");
    std::fs::write(b.join("file"), b"x").unwrap();
    std::fs::create_dir(b.join("dir")).unwrap();
    std::fs::write(b.join("dir/inner"), b"x").unwrap();

    let long = "n".repeat(256);
    assert_eq!(errno(File::create(b.join(&long))), libc::ENAMETOOLONG);
    assert_eq!(
        errno(std::fs::create_dir(b.join(&long))),
        libc::ENAMETOOLONG
    );
    assert_eq!(errno(File::create(b.join("file/under"))), libc::ENOTDIR);
    assert_eq!(errno(std::fs::read_dir(b.join("file"))), libc::ENOTDIR);
    assert_eq!(
        errno(OpenOptions::new().write(true).open(b.join("dir"))),
        libc::EISDIR
    );
    assert_eq!(errno(std::fs::remove_file(b.join("dir"))), libc::EISDIR);
    assert_eq!(errno(std::fs::remove_dir(b.join("file"))), libc::ENOTDIR);
    assert_eq!(errno(std::fs::remove_dir(b.join("dir"))), libc::ENOTEMPTY);
    assert_eq!(errno(std::fs::create_dir(b.join("dir"))), libc::EEXIST);
    assert_eq!(errno(std::fs::metadata(b.join("missing"))), libc::ENOENT);
    assert_eq!(errno(std::fs::remove_file(b.join("missing"))), libc::ENOENT);
    // Files cannot live at the mount's root (it holds buckets), and bucket names follow S3.
    assert_eq!(errno(File::create(m.root.join("loose-file"))), libc::EPERM);
    assert_eq!(
        errno(std::fs::create_dir(m.root.join("Bad_Bucket"))),
        libc::EINVAL
    );

    // Paths up to PATH_MAX: a ~4,000-byte directory chain holds a file ...
    let comp = "d".repeat(199);
    let mut deep = b.clone();
    let mut len = deep.as_os_str().len();
    while len + 200 < 4060 {
        deep.push(&comp);
        len += 200;
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("leaf"), b"deep").unwrap();
    assert_eq!(std::fs::read(deep.join("leaf")).unwrap(), b"deep");
    // ... and, as on a local file system, a process goes deeper through relative paths (here
    // a directory fd): the full path may pass PATH_MAX, each call's argument may not.
    let dirfd = File::open(&deep).unwrap();
    let name = std::ffi::CString::new("x".repeat(250)).unwrap();
    let fd = unsafe {
        libc::openat(
            dirfd.as_raw_fd(),
            name.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY,
            0o644,
        )
    };
    assert!(fd >= 0, "create below PATH_MAX: errno {}", libc_errno(-1));
    unsafe { libc::close(fd) };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    assert_eq!(
        libc_errno(unsafe { libc::fstatat(dirfd.as_raw_fd(), name.as_ptr(), &mut st, 0) } as i64),
        0
    );
    let beyond = std::ffi::CString::new(format!("{}/{}", deep.display(), "x".repeat(250))).unwrap();
    assert_eq!(
        libc_errno(unsafe { libc::stat(beyond.as_ptr(), &mut st) } as i64),
        libc::ENAMETOOLONG,
        "the kernel refuses a path argument over PATH_MAX"
    );
}

fn setxattr(p: &Path, name: &str, value: &[u8], flags: i32) -> i32 {
    let (c, n) = (cpath(p), std::ffi::CString::new(name).unwrap());
    libc_errno(unsafe {
        libc::setxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    } as i64)
}

fn getxattr(p: &Path, name: &str) -> Result<Vec<u8>, i32> {
    let (c, n) = (cpath(p), std::ffi::CString::new(name).unwrap());
    let mut buf = vec![0u8; 4096];
    let r = unsafe { libc::getxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return Err(libc_errno(-1));
    }
    buf.truncate(r as usize);
    Ok(buf)
}

fn listxattr(p: &Path) -> Vec<String> {
    let c = cpath(p);
    let mut buf = vec![0u8; 4096];
    let r = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    assert!(r >= 0, "listxattr: errno {}", libc_errno(-1));
    buf.truncate(r as usize);
    let mut names: Vec<String> = buf
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8(s.to_vec()).unwrap())
        .collect();
    names.sort();
    names
}

fn removexattr(p: &Path, name: &str) -> i32 {
    let (c, n) = (cpath(p), std::ffi::CString::new(name).unwrap());
    libc_errno(unsafe { libc::removexattr(c.as_ptr(), n.as_ptr()) } as i64)
}

#[test]
fn user_xattrs_are_s3_user_metadata() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("xattrs");
    let p = b.join("photo.jpg");
    std::fs::write(&p, b"jpeg bytes").unwrap();
    assert_eq!(setxattr(&p, "user.color", b"blue", 0), 0);
    assert_eq!(setxattr(&p, "user.Camera", b"X100 V", 0), 0);
    assert_eq!(getxattr(&p, "user.color").unwrap(), b"blue");
    // S3 keeps names lower-case; so does the mount.
    assert_eq!(getxattr(&p, "user.camera").unwrap(), b"X100 V");
    assert_eq!(listxattr(&p), ["user.camera", "user.color"]);

    // Through S3: the same pairs as x-amz-meta-*; an S3 PUT's metadata reads back as xattrs.
    let rt = rt();
    let s3 = m.srv.client();
    let head = rt
        .block_on(s3.head_object().bucket("xattrs").key("photo.jpg").send())
        .unwrap();
    let meta = head.metadata.unwrap();
    assert_eq!(meta.get("color").map(String::as_str), Some("blue"));
    assert_eq!(meta.get("camera").map(String::as_str), Some("X100 V"));
    rt.block_on(
        s3.put_object()
            .bucket("xattrs")
            .key("from-s3")
            .metadata("origin", "sdk")
            .body(body(b"s3 bytes"))
            .send(),
    )
    .unwrap();
    assert_eq!(getxattr(&b.join("from-s3"), "user.origin").unwrap(), b"sdk");

    // setxattr flags, removal, and the errnos.
    assert_eq!(
        setxattr(&p, "user.color", b"red", libc::XATTR_CREATE),
        libc::EEXIST
    );
    assert_eq!(
        setxattr(&p, "user.size", b"L", libc::XATTR_REPLACE),
        libc::ENODATA
    );
    assert_eq!(setxattr(&p, "user.color", b"red", libc::XATTR_REPLACE), 0);
    assert_eq!(getxattr(&p, "user.color").unwrap(), b"red");
    assert_eq!(removexattr(&p, "user.color"), 0);
    assert_eq!(removexattr(&p, "user.color"), libc::ENODATA);
    assert_eq!(getxattr(&p, "user.color"), Err(libc::ENODATA));
    assert_eq!(getxattr(&p, "security.selinux"), Err(libc::ENODATA));
    assert_eq!(setxattr(&p, "trusted.x", b"1", 0), libc::EOPNOTSUPP);
    assert_eq!(setxattr(&p, "user.bin", &[0xff, 0x00], 0), libc::EINVAL);
    assert_eq!(setxattr(&p, "user.big", &[b'a'; 2100], 0), libc::ENOSPC);
    assert_eq!(listxattr(&p), ["user.camera"]);
    // The bytes are untouched by metadata changes; directories take xattrs too.
    assert_eq!(std::fs::read(&p).unwrap(), b"jpeg bytes");
    std::fs::create_dir(b.join("d")).unwrap();
    assert_eq!(setxattr(&b.join("d"), "user.owner", b"team-a", 0), 0);
    assert_eq!(getxattr(&b.join("d"), "user.owner").unwrap(), b"team-a");
}

#[test]
fn locks_hold_between_processes_on_the_mount() {
    require_tool("flock");
    let m = Mounted::start(Opts::default());
    let b = m.bucket("locks");
    let p = b.join("lockfile");
    std::fs::write(&p, b"").unwrap();

    // flock(2): an exclusive lock on one open file description excludes another ...
    let a = File::open(&p).unwrap();
    let other = File::open(&p).unwrap();
    assert_eq!(
        libc_errno(unsafe { libc::flock(a.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } as i64),
        0
    );
    assert_eq!(
        libc_errno(unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } as i64),
        libc::EWOULDBLOCK
    );
    // ... and another process.
    let busy = std::process::Command::new("flock")
        .args(["-n", "-x"])
        .arg(&p)
        .arg("true")
        .status()
        .unwrap();
    assert_eq!(busy.code(), Some(1), "flock -n must find the lock held");
    assert_eq!(
        libc_errno(unsafe { libc::flock(a.as_raw_fd(), libc::LOCK_UN) } as i64),
        0
    );
    let free = std::process::Command::new("flock")
        .args(["-n", "-x"])
        .arg(&p)
        .arg("true")
        .status()
        .unwrap();
    assert!(free.success(), "the lock was released");

    // fcntl record locks (open-file-description locks, so one process shows the conflict).
    let lock = |f: &File, typ: i32, start: i64, len: i64| {
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = typ as i16;
        fl.l_whence = libc::SEEK_SET as i16;
        fl.l_start = start;
        fl.l_len = len;
        libc_errno(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &fl) } as i64)
    };
    let w1 = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let w2 = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    assert_eq!(lock(&w1, libc::F_WRLCK, 0, 100), 0);
    assert_eq!(lock(&w2, libc::F_WRLCK, 50, 10), libc::EAGAIN);
    assert_eq!(
        lock(&w2, libc::F_WRLCK, 100, 10),
        0,
        "a disjoint range is free"
    );
    assert_eq!(lock(&w1, libc::F_UNLCK, 0, 100), 0);
    assert_eq!(lock(&w2, libc::F_WRLCK, 50, 10), 0);
}

#[test]
fn permissions_are_checked_for_the_caller() {
    require_tool("setpriv");
    let m = Mounted::start(Opts::default());
    let b = m.bucket("perms");
    std::fs::set_permissions(&b, PermissionsExt::from_mode(0o755)).unwrap();
    let secret = b.join("secret");
    std::fs::write(&secret, b"root only").unwrap();
    std::fs::set_permissions(&secret, PermissionsExt::from_mode(0o600)).unwrap();
    let shared = b.join("shared");
    std::fs::write(&shared, b"group 4242 reads").unwrap();
    std::fs::set_permissions(&shared, PermissionsExt::from_mode(0o640)).unwrap();
    std::os::unix::fs::chown(&shared, Some(0), Some(4242)).unwrap();
    let home = b.join("home");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
    let tmp = b.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, PermissionsExt::from_mode(0o1777)).unwrap();
    std::fs::write(tmp.join("roots"), b"mine").unwrap();
    let locked = b.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(locked.join("inside"), b"x").unwrap();

    let nobody = |script: &str| as_user(65534, 65534, &[], script);
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let denied = "Permission denied";
    let not_permitted = "Operation not permitted";

    // Reading another user's private file: EACCES; with the right supplementary group: fine.
    let o = nobody(&format!("cat {}", secret.display()));
    assert!(
        !o.status.success() && err(&o).contains(denied),
        "{}",
        err(&o)
    );
    let o = nobody(&format!("cat {}", shared.display()));
    assert!(
        !o.status.success() && err(&o).contains(denied),
        "{}",
        err(&o)
    );
    let o = as_user(65534, 65534, &[4242], &format!("cat {}", shared.display()));
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(o.stdout, b"group 4242 reads");
    // Writing into a directory without write permission: EACCES.
    let o = nobody(&format!("echo x > {}/mine", b.display()));
    assert!(
        !o.status.success() && err(&o).contains(denied),
        "{}",
        err(&o)
    );
    // Search permission on every directory of the path.
    let o = nobody(&format!("cat {}/inside", locked.display()));
    assert!(
        !o.status.success() && err(&o).contains(denied),
        "{}",
        err(&o)
    );
    // Own directory: create, and the new file is owned by the caller.
    let o = nobody(&format!(
        "echo hi > {h}/mine && mkdir {h}/sub && chmod 600 {h}/mine",
        h = home.display()
    ));
    assert!(o.status.success(), "{}", err(&o));
    let meta = std::fs::metadata(home.join("mine")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (65534, 65534, 0o600)
    );
    assert_eq!(std::fs::metadata(home.join("sub")).unwrap().uid(), 65534);
    // chmod and chown of someone else's file: EPERM.
    let o = nobody(&format!("chmod 666 {}", secret.display()));
    assert!(
        !o.status.success() && err(&o).contains(not_permitted),
        "{}",
        err(&o)
    );
    let o = nobody(&format!("chown 0 {}", home.join("mine").display()));
    assert!(
        !o.status.success() && err(&o).contains(not_permitted),
        "{}",
        err(&o)
    );
    // Sticky directory: others' files cannot be removed; one's own can.
    let o = nobody(&format!("rm -f {}/roots", tmp.display()));
    assert!(
        !o.status.success() && err(&o).contains(not_permitted),
        "{}",
        err(&o)
    );
    let o = nobody(&format!(
        "echo n > {t}/nobodys && rm {t}/nobodys",
        t = tmp.display()
    ));
    assert!(o.status.success(), "{}", err(&o));
    assert!(tmp.join("roots").exists());
    // access(2) answers for the caller.
    let o = nobody(&format!("test -r {}", secret.display()));
    assert!(!o.status.success());
    let o = nobody(&format!("test -w {}/mine", home.display()));
    assert!(o.status.success());
    // The bytes of a file the caller may not read were not touched.
    assert_eq!(std::fs::read(&secret).unwrap(), b"root only");
}

/// Set-id bits after writes and truncates (the mount asks the kernel to leave them to the file
/// system, `FUSE_HANDLE_KILLPRIV_V2`): a caller other than root drops set-user-id, and
/// set-group-id where the group may execute; root keeps both.
#[test]
fn writes_and_truncates_by_others_drop_set_id_bits() {
    require_tool("setpriv");
    let m = Mounted::start(Opts::default());
    let b = m.bucket("setid");
    let file = |name: &str, mode: u32| {
        let p = b.join(name);
        std::fs::write(&p, b"start").unwrap();
        std::fs::set_permissions(&p, PermissionsExt::from_mode(mode)).unwrap();
        p
    };
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    let nobody = |script: &str| {
        let o = as_user(65534, 65534, &[], script);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };

    let by_root = file("by-root", 0o6777);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&by_root)
        .unwrap()
        .write_all(b" more")
        .unwrap();
    assert_eq!(mode(&by_root), 0o6777, "root writes keep set-id bits");

    let written = file("written", 0o6777);
    nobody(&format!("echo more >> {}", written.display()));
    assert_eq!(mode(&written), 0o777);
    assert_eq!(std::fs::read(&written).unwrap(), b"startmore\n");

    // Set-group-id without group execute is kept for a member of the file's group, and
    // dropped for anyone else (as ext4 does).
    let member = file("group-member", 0o666);
    std::os::unix::fs::chown(&member, None, Some(65534)).unwrap();
    std::fs::set_permissions(&member, PermissionsExt::from_mode(0o6766)).unwrap();
    nobody(&format!("echo more >> {}", member.display()));
    assert_eq!(mode(&member), 0o2766);
    let outsider = file("outsider", 0o6766);
    nobody(&format!("echo more >> {}", outsider.display()));
    assert_eq!(mode(&outsider), 0o766);

    let truncated = file("truncated", 0o6777);
    nobody(&format!(": > {}", truncated.display()));
    assert_eq!(mode(&truncated), 0o777);
    assert_eq!(std::fs::metadata(&truncated).unwrap().len(), 0);

    let extended = file("extended", 0o6777);
    nobody(&format!("truncate -s 100 {}", extended.display()));
    assert_eq!(mode(&extended), 0o777);
    assert_eq!(std::fs::metadata(&extended).unwrap().len(), 100);
}

#[test]
fn changes_cross_between_s3_and_the_mount_within_the_ttl() {
    // Default-like TTLs: the kernel trusts names and attributes for 1 s.
    let m = Mounted::start_with_ttl(Opts::default(), "1s");
    let b = m.bucket("ttl");
    let rt = rt();
    let s3 = m.srv.client();
    std::fs::write(b.join("a"), b"version 1").unwrap();
    assert_eq!(std::fs::read(b.join("a")).unwrap(), b"version 1");

    // Overwritten and then deleted through S3: the mount shows each within the TTL.
    rt.block_on(put(&s3, "ttl", "a", b"version 2 from s3"));
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        if std::fs::read(b.join("a")).ok().as_deref() == Some(b"version 2 from s3") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the overwrite never showed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    rt.block_on(s3.delete_object().bucket("ttl").key("a").send())
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::fs::metadata(b.join("a")).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the delete never showed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Deleted through the mount: gone from S3 at once.
    std::fs::write(b.join("b"), b"bye").unwrap();
    std::fs::remove_file(b.join("b")).unwrap();
    assert_status(
        rt.block_on(s3.head_object().bucket("ttl").key("b").send()),
        404,
    );
}

/// The processes whose parent is `parent` and whose command name is `name`.
fn children_named(parent: u32, name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue; // gone meanwhile
        };
        // pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let ppid = stat[close + 1..].split_whitespace().nth(1);
        if &stat[open + 1..close] == name && ppid == Some(&parent.to_string()) {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_killed_mount_process_leaves_no_hung_mount_point() {
    require_fuse();
    require_tool("fusermount3");
    let srv = Server::default_start();
    let dir = tempfile::Builder::new()
        .prefix("saker-fuse-kill-")
        .tempdir()
        .unwrap();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // A client host's credential: the mount sends only what it allows.
    let client = dir.path().join("client.json");
    export_client_credential(&srv, &client);
    let mut child = spawn_library_mount(&mnt, &srv.rpc_addr, &client, &[]);
    std::fs::create_dir(mnt.join("killbkt")).unwrap();
    std::fs::write(mnt.join("killbkt/f"), b"before the kill").unwrap();
    // fusermount3's auto_unmount helper misses a race (its socket may close before the last
    // /dev/fuse descriptor): without it, the mount's own guard process must detach the mount.
    let helpers = children_named(child.id(), "fusermount3");
    assert_eq!(helpers.len(), 1, "the auto_unmount helper runs");
    for pid in helpers {
        // SAFETY: a plain kill(2) of a process this test's child started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The guard detaches the mount point: no ENOTCONN left behind.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while is_mounted(&mnt) {
        assert!(
            std::time::Instant::now() < deadline,
            "the mount point is still attached after the mount process died"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0);
    // What was written before the kill is in the namespace.
    let rt = rt();
    let s3 = srv.client();
    assert_eq!(
        rt.block_on(get_bytes(&s3, "killbkt", "f")),
        b"before the kill"
    );
}

#[test]
fn directories_rename_with_their_contents_and_s3_sees_the_new_keys() {
    let m = Mounted::start(Opts::default());
    let b = m.bucket("dirs");
    // Several names, so the moves cross MNode groups.
    for d in 0..6 {
        let dir = b.join(format!("d{d}"));
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        for f in 0..5 {
            std::fs::write(dir.join(format!("f{f}")), format!("{d}/{f}")).unwrap();
        }
        std::fs::write(dir.join("inner/deep"), format!("deep {d}")).unwrap();
    }
    std::fs::create_dir(b.join("into")).unwrap();
    for d in 0..6 {
        let to = if d % 2 == 0 {
            b.join(format!("renamed{d}"))
        } else {
            b.join(format!("into/moved{d}"))
        };
        std::fs::rename(b.join(format!("d{d}")), &to).unwrap();
        assert_eq!(
            errno(std::fs::metadata(b.join(format!("d{d}")))),
            libc::ENOENT
        );
        for f in 0..5 {
            assert_eq!(
                std::fs::read_to_string(to.join(format!("f{f}"))).unwrap(),
                format!("{d}/{f}")
            );
        }
        assert_eq!(
            std::fs::read_to_string(to.join("inner/deep")).unwrap(),
            format!("deep {d}")
        );
    }
    // nlink of the directory that gained three subdirectories.
    assert_eq!(std::fs::metadata(b.join("into")).unwrap().nlink(), 2 + 3);
    // S3 lists the objects under their new keys at once.
    let rt = rt();
    let s3 = m.srv.client();
    let keys = rt.block_on(list_all(&s3, "dirs", Some("into/moved1/")));
    assert_eq!(
        keys,
        // Directories made by mkdir are explicit: S3 shows their markers.
        [
            "into/moved1/",
            "into/moved1/f0",
            "into/moved1/f1",
            "into/moved1/f2",
            "into/moved1/f3",
            "into/moved1/f4",
            "into/moved1/inner/",
            "into/moved1/inner/deep"
        ]
    );
    assert!(rt.block_on(list_all(&s3, "dirs", Some("d1/"))).is_empty());

    // Over an empty directory: replaced. Over a full one: ENOTEMPTY. Below itself: EINVAL.
    std::fs::create_dir(b.join("empty")).unwrap();
    std::fs::rename(b.join("renamed0"), b.join("empty")).unwrap();
    assert_eq!(std::fs::read_to_string(b.join("empty/f0")).unwrap(), "0/0");
    assert_eq!(
        errno(std::fs::rename(b.join("renamed2"), b.join("empty"))),
        libc::ENOTEMPTY
    );
    assert_eq!(
        errno(std::fs::rename(
            b.join("renamed2"),
            b.join("renamed2/inner/x")
        )),
        libc::EINVAL
    );
    // A directory over a file: ENOTDIR; RENAME_NOREPLACE over a directory: EEXIST.
    std::fs::write(b.join("plain"), b"p").unwrap();
    assert_eq!(
        errno(std::fs::rename(b.join("renamed2"), b.join("plain"))),
        libc::ENOTDIR
    );
    std::fs::create_dir(b.join("other")).unwrap();
    assert_eq!(
        renameat2(
            &b.join("renamed2"),
            &b.join("other"),
            libc::RENAME_NOREPLACE
        ),
        libc::EEXIST
    );
    // mv(1) of a tree.
    run_ok(
        std::process::Command::new("mv")
            .arg(b.join("renamed4"))
            .arg(b.join("other/by-mv")),
    );
    assert_eq!(
        std::fs::read_to_string(b.join("other/by-mv/inner/deep")).unwrap(),
        "deep 4"
    );
}

#[test]
fn posix_corner_cases_of_open_files() {
    corner_cases(false);
}

#[test]
fn posix_corner_cases_of_open_files_in_a_bucket_that_keeps_versions() {
    corner_cases(true);
}

fn corner_cases(versioned: bool) {
    require_tool("perl");
    let m = Mounted::start(Opts::default());
    let b = m.bucket_keeping_versions("corners", versioned);
    std::fs::set_permissions(&b, PermissionsExt::from_mode(0o777)).unwrap();

    // fstat of an open file after its name is gone: nlink 0, the file's own attributes.
    let p = b.join("doomed");
    std::fs::write(&p, b"still here").unwrap();
    let f = File::open(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    let meta = f.metadata().unwrap();
    assert_eq!((meta.nlink(), meta.len()), (0, 10));

    // A file created with mode 0 can be truncated through the handle that created it.
    let zero = b.join("mode0");
    let script = format!(
        "perl -MFcntl -e 'sysopen(my $f, $ARGV[0], O_CREAT|O_RDWR, 0) or die \"open: $!\"; \
         truncate($f, 0) or die \"ftruncate: $!\"' {}",
        zero.display()
    );
    let o = as_user(65534, 65534, &[], &script);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&zero).unwrap().mode() & 0o7777, 0);

    // A write by someone other than the owner drops set-user-id.
    let setuid = b.join("setuid");
    std::fs::write(&setuid, b"").unwrap();
    std::fs::set_permissions(&setuid, PermissionsExt::from_mode(0o4777)).unwrap();
    let o = as_user(
        65534,
        65534,
        &[],
        &format!("echo x >> {}", setuid.display()),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&setuid).unwrap().mode() & 0o7777, 0o777);
    assert_eq!(std::fs::read(&setuid).unwrap(), b"x\n");
}

/// open(O_CREAT) on a mount run as root comes as MKNOD then OPEN, the create's sync between
/// them (`saker_fuse::created`); with `--split-create false` as one CREATE. Either way: the
/// creator opens what it made whatever its mode, a file is in S3 once its open(2) returned,
/// parallel O_EXCL creates of one name in one directory succeed exactly once, and mknod(2)
/// makes a plain file.
#[test]
fn creates_open_what_they_made_and_are_in_s3_once_open_returns() {
    let rt = rt();
    for split in ["true", "false"] {
        let m = Mounted::start(Opts::default().arg("--split-create", split));
        let b = m.bucket("made");
        std::os::unix::fs::chown(&b, Some(65534), Some(65534)).unwrap();

        // A read-only mode does not stop its creator's own open for writing; a later open
        // for writing is refused.
        let ro = b.join("ro");
        let out = as_user(
            65534,
            65534,
            &[],
            &format!(
                "python3 -c 'import os; fd = os.open(\"{p}\", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o444); os.write(fd, b\"mine\"); os.close(fd)' && echo more >> {p}",
                p = ro.display()
            ),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "split {split}: the append was let in"
        );
        assert!(
            stderr.contains("Permission denied") && !stderr.contains("Traceback"),
            "split {split}: the create failed or the append failed otherwise: {stderr}"
        );
        assert_eq!(std::fs::read(&ro).unwrap(), b"mine", "split {split}");
        let md = std::fs::metadata(&ro).unwrap();
        assert_eq!(
            (md.mode() & 0o7777, md.uid()),
            (0o444, 65534),
            "split {split}"
        );

        // Eight threads race to create the same names in one directory.
        let s3 = m.srv.client();
        let names: Vec<String> = (0..64).map(|i| format!("race/n{i:03}")).collect();
        std::fs::create_dir(b.join("race")).unwrap();
        let wins = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for name in &names {
                        match OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(b.join(name))
                        {
                            Ok(f) => {
                                wins.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                // In S3 as soon as open(2) returned, before any close.
                                let head = rt
                                    .block_on(s3.head_object().bucket("made").key(name).send())
                                    .unwrap_or_else(|e| {
                                        panic!("split {split}: {name} not in S3: {e:?}")
                                    });
                                assert_eq!(head.content_length(), Some(0));
                                drop(f);
                            }
                            Err(e) => assert_eq!(
                                e.kind(),
                                std::io::ErrorKind::AlreadyExists,
                                "split {split}: {name}"
                            ),
                        }
                    }
                });
            }
        });
        assert_eq!(
            wins.load(std::sync::atomic::Ordering::SeqCst),
            names.len(),
            "split {split}: each name created exactly once"
        );
        assert_eq!(
            std::fs::read_dir(b.join("race")).unwrap().count(),
            names.len()
        );

        // mknod(2) of a regular file: an empty file, which its owner then writes.
        let mknod = |path: &std::path::Path, mode: libc::mode_t| {
            let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            assert_eq!(
                unsafe { libc::mknod(c.as_ptr(), libc::S_IFREG | mode, 0) },
                0,
                "split {split}: {}",
                std::io::Error::last_os_error()
            );
            c
        };
        let plain = b.join("plain");
        mknod(&plain, 0o640);
        let md = std::fs::metadata(&plain).unwrap();
        assert!(md.is_file() && md.len() == 0, "split {split}: {md:?}");
        assert_eq!(md.mode() & 0o7777, 0o640);
        std::fs::write(&plain, b"after mknod").unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"after mknod");
        // O_CREAT without O_EXCL on an existing file opens (and here truncates) it.
        std::fs::write(&plain, b"again").unwrap();
        assert_eq!(std::fs::read(&plain).unwrap(), b"again");

        // mknod(2) then truncate(2) at once, by the same thread: the open(2) after them reads
        // what the truncate made, not the empty file the mknod answered.
        let sized = b.join("sized");
        let c = mknod(&sized, 0o644);
        assert_eq!(unsafe { libc::truncate(c.as_ptr(), 5000) }, 0);
        assert_eq!(
            std::fs::read(&sized).unwrap(),
            vec![0u8; 5000],
            "split {split}"
        );
    }
}
