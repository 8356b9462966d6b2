//! Mount settings.

use std::path::PathBuf;
use std::time::Duration;

/// How a mount behaves; [`MountConfig::default`] documents the defaults.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// How long the kernel may trust a name -> inode answer without asking again
    /// (default 1 s, as libfuse). Other clients' creates and deletes show within this time.
    pub entry_ttl: Duration,
    /// How long the kernel may trust attributes (default 1 s). Files another client changed
    /// show their new size and times within this time; their bytes at the next open.
    pub attr_ttl: Duration,
    /// Threads serving kernel requests (default 32: in-flight requests are what the MNodes
    /// merge into shared transactions).
    pub threads: usize,
    /// Where open files being written keep their local buffer (default the system temp dir;
    /// the buffers are unlinked files, gone when the file is closed).
    pub buffer_dir: PathBuf,
    /// Ask `fusermount3` to unmount when this process ends, however it ends (default on).
    pub auto_unmount: bool,
    /// Answer the kernel's CREATE with ENOSYS so that open(O_CREAT) comes as MKNOD then OPEN,
    /// and sync between them (default on; takes effect when the mount runs as root, which may
    /// read the callers' `/proc/TID/syscall`). See [`crate::created`].
    pub split_create: bool,
}

impl Default for MountConfig {
    fn default() -> Self {
        Self {
            entry_ttl: Duration::from_secs(1),
            attr_ttl: Duration::from_secs(1),
            threads: 32,
            buffer_dir: std::env::temp_dir(),
            auto_unmount: true,
            split_create: true,
        }
    }
}
