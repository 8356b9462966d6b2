//! Real tools on a real mount: `tar x` of a 10,000-file tree, `cp -r`, `rsync -a` (twice: the
//! second finds nothing to do, so sizes, modes and mtimes survived), `git init/add/commit`,
//! `find | wc -l` and `du`. Each result is checked against the source tree.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::fuse::*;
use common::*;

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;

/// Writes the source tree: DIRS directories of FILES_PER_DIR small files with distinct bytes
/// and a few modes; returns the number of files.
fn make_tree(root: &Path) -> usize {
    for d in 0..DIRS {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let p = dir.join(format!("file{f:03}.txt"));
            std::fs::write(&p, format!("dir {d} file {f}\n").repeat(1 + f % 7)).unwrap();
            if f % 10 == 0 {
                std::fs::set_permissions(&p, PermissionsExt::from_mode(0o600)).unwrap();
            }
        }
    }
    DIRS * FILES_PER_DIR
}

/// Every file under `a` has the same bytes and mode under `b`, and `b` has no other files.
fn same_tree(a: &Path, b: &Path) {
    let list = |root: &Path| {
        let out = run_ok(
            Command::new("find")
                .arg(".")
                .arg("-type")
                .arg("f")
                .current_dir(root),
        );
        let mut v: Vec<String> = out.lines().map(str::to_string).collect();
        v.sort();
        v
    };
    let (la, lb) = (list(a), list(b));
    assert_eq!(la.len(), lb.len(), "file counts differ");
    assert_eq!(la, lb);
    for (i, rel) in la.iter().enumerate() {
        // Bytes of every 7th file, modes of all.
        let (pa, pb) = (a.join(rel), b.join(rel));
        let (ma, mb) = (pa.metadata().unwrap(), pb.metadata().unwrap());
        assert_eq!(ma.len(), mb.len(), "{rel}");
        assert_eq!(ma.mode() & 0o777, mb.mode() & 0o777, "{rel}");
        if i % 7 == 0 {
            assert_eq!(
                std::fs::read(&pa).unwrap(),
                std::fs::read(&pb).unwrap(),
                "{rel}"
            );
        }
    }
}

#[test]
fn tar_cp_rsync_find_du_and_git_work_on_the_mount() {
    for tool in ["tar", "cp", "rsync", "git", "find", "du"] {
        require_tool(tool);
    }
    let m = Mounted::start_with_ttl(Opts::default(), "1s");
    let b = m.bucket("tools");
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src");
    let n = make_tree(&src);
    let tarball = local.path().join("tree.tar");
    run_ok(
        Command::new("tar")
            .arg("cf")
            .arg(&tarball)
            .arg("-C")
            .arg(&src)
            .arg("."),
    );

    // tar x of the whole tree.
    let untarred = b.join("untarred");
    std::fs::create_dir(&untarred).unwrap();
    run_ok(
        Command::new("tar")
            .arg("xf")
            .arg(&tarball)
            .arg("-C")
            .arg(&untarred),
    );
    let count = run_ok(
        Command::new("sh")
            .arg("-c")
            .arg(format!("find {} -type f | wc -l", untarred.display())),
    );
    assert_eq!(count.trim(), n.to_string());
    same_tree(&src, &untarred);

    // du sees the bytes (at least the apparent size of the source).
    let du = |p: &Path| -> u64 {
        let out = run_ok(
            Command::new("du")
                .arg("-s")
                .arg("--apparent-size")
                .arg("-B1")
                .arg(p),
        );
        out.split_whitespace().next().unwrap().parse().unwrap()
    };
    let files_bytes: u64 = run_ok(Command::new("sh").arg("-c").arg(format!(
        "find {} -type f -printf '%s\\n' | awk '{{s+=$1}} END {{print s}}'",
        src.display()
    )))
    .trim()
    .parse()
    .unwrap();
    assert!(du(&untarred) >= files_bytes, "du under the file bytes");

    // cp -r within the mount (one tenth of the tree) and from local disk.
    run_ok(
        Command::new("cp")
            .arg("-r")
            .arg(untarred.join("dir007"))
            .arg(b.join("copied")),
    );
    same_tree(&src.join("dir007"), &b.join("copied"));

    // rsync -a keeps modes and mtimes: a second run has nothing to transfer.
    let dest = b.join("rsynced");
    run_ok(
        Command::new("rsync")
            .arg("-a")
            .arg(format!("{}/", src.join("dir042").display()))
            .arg(&dest),
    );
    same_tree(&src.join("dir042"), &dest);
    let again = run_ok(
        Command::new("rsync")
            .arg("-a")
            .arg("--itemize-changes")
            .arg(format!("{}/", src.join("dir042").display()))
            .arg(&dest),
    );
    assert_eq!(again.trim(), "", "rsync found differences: {again}");
    let (a, b2) = (
        src.join("dir042/file005.txt").metadata().unwrap(),
        dest.join("file005.txt").metadata().unwrap(),
    );
    assert_eq!(a.mtime(), b2.mtime());

    // git: init, add, commit, and a clean status afterwards.
    let repo = b.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        run_ok(
            Command::new("git")
                .args(["-c", "user.name=saker", "-c", "user.email=t@saker.invalid"])
                .args(["-c", "init.defaultBranch=main", "-c", "safe.directory=*"])
                .args(args)
                .current_dir(&repo),
        )
    };
    git(&["init", "-q"]);
    run_ok(
        Command::new("cp")
            .arg("-r")
            .arg(src.join("dir001"))
            .arg(repo.join("data")),
    );
    std::fs::write(repo.join("README"), b"a repository on saker\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("README"), b"changed\n").unwrap();
    git(&["commit", "-q", "-a", "-m", "second"]);
    assert_eq!(git(&["rev-list", "--count", "HEAD"]).trim(), "2");
    assert_eq!(git(&["status", "--porcelain"]).trim(), "");
    assert_eq!(git(&["show", "HEAD~1:README"]), "a repository on saker\n");
    git(&["fsck", "--strict"]);
    let tracked = git(&["ls-files"]);
    assert_eq!(tracked.lines().count(), FILES_PER_DIR + 1);
}
