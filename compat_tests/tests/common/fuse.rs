//! FUSE test harness: a real `saker server --mount` (or a separate `saker mount`), waited on
//! until the kernel shows the mount, detached when the test ends; helpers to run commands as
//! another user and to read errnos.
//! Needs /dev/fuse and root (as CI has); fails loudly without.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use super::{Opts, Server};

/// How long a mount may take to appear or disappear.
const MOUNT_DEADLINE: Duration = Duration::from_secs(20);

/// Whether `dir` is a mount point in the kernel's table (also when its file system is dead
/// and every call on it fails with ENOTCONN).
pub fn is_mounted(dir: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo");
    let want = dir.to_str().expect("a UTF-8 path");
    // Field 5 is the mount point (spaces escaped as \040; test paths have none).
    table.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

/// Waits until `dir` is a mount point.
pub fn wait_mounted(dir: &Path) {
    let deadline = Instant::now() + MOUNT_DEADLINE;
    while !is_mounted(dir) {
        assert!(
            Instant::now() < deadline,
            "{} was never mounted",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fails the test loudly when the machine cannot mount FUSE file systems.
pub fn require_fuse() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "this test needs /dev/fuse (a FUSE-capable kernel)"
    );
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test mounts FUSE file systems and switches users: run it as root (as CI does)"
    );
}

/// Fails the test loudly when a tool it runs is missing.
pub fn require_tool(name: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "this test needs `{name}` on PATH (.ci/run installs it with apt)"
    );
}

/// An all-in-one server with the namespace mounted at `root`.
pub struct Mounted {
    pub srv: Server,
    pub root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mounted {
    /// Mounts with zero entry and attribute TTLs (every kernel call reaches the MNodes), plus
    /// `extra` server options.
    pub fn start(extra: Opts) -> Mounted {
        Self::start_with_ttl(extra, "0s")
    }

    pub fn start_with_ttl(extra: Opts, ttl: &str) -> Mounted {
        require_fuse();
        let dir = tempfile::Builder::new()
            .prefix("saker-fuse-")
            .tempdir()
            .unwrap();
        // Other users reach the mount point (permission tests switch uid).
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let root = dir.path().join("mnt");
        std::fs::create_dir(&root).unwrap();
        let opts = extra
            .arg("--mount", root.to_str().unwrap())
            .arg("--attr-ttl", ttl)
            .arg("--entry-ttl", ttl);
        let srv = Server::start(opts);
        wait_mounted(&root);
        Mounted {
            srv,
            root,
            _dir: dir,
        }
    }

    /// After the server was killed: the dead mount goes, and the server restarted on the same
    /// data directory mounts the same place again.
    pub fn remount_after_kill(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.root).status();
        let deadline = Instant::now() + MOUNT_DEADLINE;
        while is_mounted(&self.root) {
            assert!(
                Instant::now() < deadline,
                "the dead mount is still attached"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.srv.restart();
        wait_mounted(&self.root);
    }

    /// Makes a bucket (a directory at the mount's root) and returns its path.
    pub fn bucket(&self, name: &str) -> PathBuf {
        let p = self.root.join(name);
        std::fs::create_dir(&p).unwrap();
        p
    }

    /// A new bucket, made through the mount; with `versioned`, keeping versions (set through
    /// S3 before the mount writes to it).
    pub fn bucket_keeping_versions(&self, name: &str, versioned: bool) -> PathBuf {
        let p = self.bucket(name);
        if versioned {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let status = aws_sdk_s3::types::BucketVersioningStatus::Enabled;
            rt.block_on(super::set_versioning(&self.srv.client(), name, status));
        }
        p
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.srv.kill();
        // A killed server's mount point is detached lazily.
        let _ = Command::new("umount").arg("-l").arg(&self.root).status();
    }
}

/// A separate `saker mount --cluster` process of `srv`'s namespace, holding only the client
/// credential (as a client host does); killed and detached when dropped.
#[allow(dead_code)]
pub struct LibraryMount {
    pub root: PathBuf,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

#[allow(dead_code)]
impl LibraryMount {
    pub fn start(srv: &Server) -> LibraryMount {
        require_fuse();
        let dir = tempfile::Builder::new()
            .prefix("saker-libmount-")
            .tempdir()
            .unwrap();
        let root = dir.path().join("mnt");
        std::fs::create_dir(&root).unwrap();
        let credential = dir.path().join("client.json");
        export_client_credential(srv, &credential);
        let ttl = ["--attr-ttl", "0s", "--entry-ttl", "0s"];
        let child = spawn_library_mount(&root, &srv.rpc_addr, &credential, &ttl);
        LibraryMount {
            root,
            child,
            _dir: dir,
        }
    }
}

/// Writes `srv`'s client credential (what a client host is given) to `file`.
#[allow(dead_code)]
pub fn export_client_credential(srv: &Server, file: &Path) {
    let export = [
        "cluster-credential",
        "export",
        file.to_str().unwrap(),
        "--client",
    ];
    super::ok_stdout(srv.admin_cmd(&export), "cluster-credential export");
}

/// Starts `saker mount root --cluster rpc` (plus `extra`) with `credential`, and waits until
/// it is mounted.
#[allow(dead_code)]
pub fn spawn_library_mount(
    root: &Path,
    rpc: &str,
    credential: &Path,
    extra: &[&str],
) -> std::process::Child {
    let mut child = Command::new(super::saker_bin())
        .args(["mount", root.to_str().unwrap(), "--cluster", rpc])
        .args(extra)
        .env("SAKER_CLUSTER_CREDENTIAL", credential)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start saker mount");
    if let Err(e) = std::panic::catch_unwind(|| wait_mounted(root)) {
        let _ = child.kill();
        std::panic::resume_unwind(e);
    }
    child
}

impl Drop for LibraryMount {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount").arg("-l").arg(&self.root).status();
    }
}

/// The errno of a failed std::io call.
pub fn errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("the call should fail")
        .raw_os_error()
        .expect("an OS error")
}

/// The errno of a libc call that returned -1, or 0 when it succeeded.
pub fn libc_errno(ret: i64) -> i32 {
    if ret == -1 {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    } else {
        0
    }
}

pub fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// `sh -c script` as `uid`/`gid` with supplementary `groups`, in the C locale (so messages
/// such as "Permission denied" can be matched).
pub fn as_user(uid: u32, gid: u32, groups: &[u32], script: &str) -> Output {
    require_tool("setpriv");
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"));
    if groups.is_empty() {
        cmd.arg("--clear-groups");
    } else {
        let g: Vec<String> = groups.iter().map(u32::to_string).collect();
        cmd.arg(format!("--groups={}", g.join(",")));
    }
    cmd.args(["sh", "-c", script])
        .env("LC_ALL", "C")
        .current_dir("/")
        .output()
        .expect("run setpriv")
}

/// Runs a command (in the C locale) and panics with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.env("LC_ALL", "C").output().expect("spawn the command");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
