//! What every crate that keeps files needs the same way: a directory synced after its entries
//! change, a file replaced atomically and durably, and the wall clock in ns since the epoch
//! (the clock deadlines and record times are kept in).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Makes the entries of `dir` (files made, renamed or removed in it) durable. An empty path
/// is the current directory.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::File::open(dir)?.sync_all()
}

/// Replaces the file at `path` with `bytes`, atomically and durably: written to `PATH.tmp`,
/// synced, renamed over `path`, and its directory synced. A crash leaves the old file or the
/// new one, never a mix (and at worst a `.tmp` beside it).
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(path, bytes, None)
}

/// [`replace_file`] for a secret: the file is made readable by its owner only (mode 600).
pub fn replace_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace(path, bytes, Some(0o600))
}

fn replace(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).write(true).truncate(true);
        #[cfg(unix)]
        if let Some(mode) = mode {
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
        }
        let mut f = options.open(&tmp)?;
        #[cfg(unix)]
        if let Some(mode) = mode {
            // An older file of that name keeps its mode through open: set it.
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    sync_dir(path.parent().unwrap_or(Path::new("")))
}

/// `PATH.tmp`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// The wall clock, ns since the Unix epoch (0 before it).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_has_the_new_bytes_and_no_tmp_beside_it() {
        let dir = std::env::temp_dir().join(format!("saker-durable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        replace_file(&path, b"one").unwrap();
        replace_private_file(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert!(!tmp_path(&path).exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Into a directory that is not there: an error, nothing left behind.
        assert!(replace_file(&dir.join("no/f"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_clock_is_past_2020() {
        assert!(now_ns() > 1_577_836_800_000_000_000);
    }
}
