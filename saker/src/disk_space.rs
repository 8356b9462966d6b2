//! Free and total space of the file systems holding this process's data directories, read at
//! every scrape of `/metrics` (`saker_disk_free_bytes{dir}`, `saker_disk_total_bytes{dir}`),
//! and the metadata store's reserve ([`keep_reserve`]).

use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts};

struct DiskSpace {
    dirs: Mutex<Vec<PathBuf>>,
    free: IntGaugeVec,
    total: IntGaugeVec,
}

static DISK_SPACE: LazyLock<&'static DiskSpace> = LazyLock::new(|| {
    let gauge = |name: &str, help: &str| {
        IntGaugeVec::new(Opts::new(name, help), &["dir"]).expect("valid metric definition")
    };
    let space: &'static DiskSpace = Box::leak(Box::new(DiskSpace {
        dirs: Mutex::new(Vec::new()),
        free: gauge(
            "saker_disk_free_bytes",
            "Bytes available to saker on the file system of a data directory",
        ),
        total: gauge(
            "saker_disk_total_bytes",
            "Size of the file system of a data directory",
        ),
    }));
    prometheus::register(Box::new(Shared(space))).expect("metric registers once");
    space
});

/// The registry owns a box; the collector itself lives for the process.
struct Shared(&'static DiskSpace);

impl Collector for Shared {
    fn desc(&self) -> Vec<&Desc> {
        let mut d = self.0.free.desc();
        d.extend(self.0.total.desc());
        d
    }

    fn collect(&self) -> Vec<MetricFamily> {
        for dir in self.0.dirs.lock().expect("disk space lock").iter() {
            let label = dir.display().to_string();
            match space(dir) {
                Ok((free, total)) => {
                    self.0.free.with_label_values(&[&label]).set(free as i64);
                    self.0.total.with_label_values(&[&label]).set(total as i64);
                }
                Err(e) => tracing::debug!(dir = %label, error = %e, "statvfs failed"),
            }
        }
        let mut out = self.0.free.collect();
        out.extend(self.0.total.collect());
        out
    }
}

/// Reports the space of `dir`'s file system from now on.
pub fn watch(dir: &Path) {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut dirs = DISK_SPACE.dirs.lock().expect("disk space lock");
    if !dirs.contains(&dir) {
        dirs.push(dir);
    }
}

/// How often the metadata store's reserve is checked.
const RESERVE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Keeps `reserve` bytes free on the file system of the metadata store in `dir`: while less
/// is free, the MNodes of this process refuse writes that add data, and below half of it
/// their replicas take no raft entries ([`saker_mnode::space`]), checked every half second
/// (0: never). Must run inside the tokio runtime.
pub fn keep_reserve(dir: &Path, reserve: u64) {
    if reserve == 0 {
        return;
    }
    let dir = dir.to_path_buf();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RESERVE_EVERY);
        loop {
            tick.tick().await;
            match space(&dir) {
                Ok((free, _)) => {
                    saker_mnode::space::set_critical(free < reserve / 2);
                    saker_mnode::space::set_low((free < reserve).then(|| {
                        format!(
                            "metadata store {}: disk full ({free} bytes free, below the \
                             {reserve}-byte reserve, --meta-reserve)",
                            dir.display()
                        )
                    }))
                }
                Err(e) => tracing::debug!(dir = %dir.display(), error = %e, "statvfs failed"),
            }
        }
    });
}

/// Bytes available to this process and the size of the file system holding `path`.
fn space(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: statvfs is plain old data; all zeroes is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok((st.f_bavail as u64 * frsize, st.f_blocks as u64 * frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_dir_is_reported_at_each_scrape() {
        let dir = tempfile::tempdir().unwrap();
        watch(dir.path());
        watch(dir.path());
        let label = dir.path().canonicalize().unwrap().display().to_string();
        let text = saker_gateway::metrics::render();
        for name in ["saker_disk_free_bytes", "saker_disk_total_bytes"] {
            let series: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("{name}{{dir=\"{label}\"}}")))
                .collect();
            assert_eq!(series.len(), 1, "{name}: {text}");
            let value: f64 = series[0].rsplit(' ').next().unwrap().parse().unwrap();
            assert!(value > 0.0, "{}", series[0]);
        }
    }
}
