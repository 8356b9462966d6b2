//! The FUSE front end: a `fuser` mount over the same namespace the S3 gateway serves.
//!
//! A file written through the mount is an object in S3 and the reverse (ARCHITECTURE.md "The
//! namespace", "Front ends"). The client is stateless apart from the kernel's needs:
//!
//! - it keeps only ino -> (parent ino, name) for inodes the kernel holds ([`inodes`]), dropped
//!   on `forget`, and sends full paths, one MNode request per kernel operation where possible
//!   (lookup, getattr, open, create, mkdir, unlink, rmdir, setattr, access: one `Access` or
//!   write request each; readdir: one scan per group at opendir);
//! - permissions are checked by the MNode with the caller's uid, gid and supplementary groups
//!   (no `default_permissions`);
//! - writes go to a local buffer file and become visible (to S3 and other mounts) at
//!   close/fsync (close-to-open), with the ETag rule of ARCHITECTURE.md ([`file`]);
//! - entry and attribute TTLs are configurable ([`MountConfig`], 1 s by default);
//! - the caller's supplementary groups are read from /proc once a second per process.
//!
//! - extended attributes `user.NAME` are the S3 user metadata `x-amz-meta-NAME` (names
//!   lower-cased, as S3 keeps them; values printable ASCII; 2 KiB in all, else ENOSPC); other
//!   namespaces hold nothing (ENODATA on get, EOPNOTSUPP on set);
//! - flock(2) and fcntl(2) locks (POSIX and OFD) are kept by the kernel for this mount (the
//!   file system does not take them over), so they hold between processes on this host.
//!
//! - a rename within one MNode group is one atomic request there; anything else (a directory,
//!   a file moving between groups) is the coordinator's logged move, which keeps the inode and
//!   its chunks (a directory's entries stay where they are) and finishes after a crash.
//!
//! - FIFOs, sockets and device nodes (mknod) are inodes without data, invisible to S3.
//!
//! - kernel round trips the file system does not need are switched off: a read-only handle's
//!   close sends no FLUSH (`FOPEN_NOFLUSH`), and writes do not ask for `security.capability`
//!   first (`FUSE_HANDLE_KILLPRIV_V2`: the file system drops set-id bits on writes and
//!   truncates by callers other than root, as Linux does).
//!
//! - open(O_CREAT) on a mount run as root comes as MKNOD, answered before the create's sync,
//!   then OPEN, which waits for it ([`created`]): open(2) returns once the file is durable,
//!   and creates in one directory share syncs instead of queueing behind the directory lock.
//!
//! - link(2) makes one more name of a file (SwitchFS §5.5): its attributes, payloads and
//!   chunks live once, in a shared record at the group of the name it had first, and every
//!   name is a reference there; the MNode holding a name forwards ops on the file to that
//!   group. Removals of names reach it as change-log records, like parent-directory updates.
//!   A link is the coordinator's logged intent (count, store, settle), finished after a
//!   crash.
//!
//! Not supported, with the errno callers get: RENAME_EXCHANGE (EINVAL).

mod config;
pub mod created;
mod dir;
mod error;
pub mod file;
mod fs;
pub mod inodes;
mod io;
mod kernel;
mod metrics;
mod open;
mod sealing;
mod versioning;

use std::path::Path;
use std::sync::Arc;

pub use config::MountConfig;
pub use error::FuseError;
pub use fs::SakerFs;
use saker_client::Cluster;

/// Mounts `cluster` at `mountpoint`, served by background threads until the returned session
/// is dropped (or unmounted from outside). File-system calls block on `rt`, so they must not
/// come from a thread of `rt`.
pub fn spawn_mount(
    cluster: Arc<Cluster>,
    rt: tokio::runtime::Handle,
    mountpoint: &Path,
    cfg: MountConfig,
) -> std::io::Result<fuser::BackgroundSession> {
    let mut options = vec![
        fuser::MountOption::FSName("saker".into()),
        fuser::MountOption::Subtype("saker".into()),
        fuser::MountOption::RW,
        fuser::MountOption::NoAtime,
    ];
    if cfg.auto_unmount {
        options.push(fuser::MountOption::AutoUnmount);
    }
    let mut config = fuser::Config::default();
    config.mount_options = options;
    // Other users reach the mount (permissions are the MNode's); auto_unmount needs it too.
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(cfg.threads.max(1));
    config.clone_fd = true;
    let fs = SakerFs::new(cluster, rt, cfg);
    fuser::spawn_mount(fs, mountpoint, &config)
}
