//! Scratch space for the targets that read files: a directory per process and target (in
//! `/dev/shm` where there is one, so fsyncs cost nothing), and a runtime for the chunk store's
//! async calls.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Prefix of every scratch directory's name: `saker-fuzz-<pid>-<target>`.
const PREFIX: &str = "saker-fuzz-";

/// The scratch directory of `target` in this process, emptied. Directories that processes no
/// longer running left behind are removed the first time.
pub(crate) fn dir(target: &str) -> PathBuf {
    static CLEANED: OnceLock<()> = OnceLock::new();
    let base = base();
    CLEANED.get_or_init(|| remove_stale(&base));
    let dir = base.join(format!("{PREFIX}{}-{target}", std::process::id()));
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("scratch {dir:?}: {e}"),
        _ => {}
    }
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The current-thread runtime the chunk store's calls run on.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

fn base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && tempfile_ok(shm) {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Whether this process may write in `dir`.
fn tempfile_ok(dir: &Path) -> bool {
    let probe = dir.join(format!("{PREFIX}{}-probe", std::process::id()));
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
