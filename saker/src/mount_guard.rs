//! The mount guard: a small process (`saker mount-guard`, hidden) that detaches a mount whose
//! serving process died, even by SIGKILL.
//!
//! fusermount3's auto_unmount is not enough on its own: it unmounts only when opening the
//! mount point fails with ENOTCONN, and when its socket closes before the last of the mount's
//! (cloned) /dev/fuse descriptors, its open lands in the live connection and fails with
//! ECONNABORTED instead, so the dead mount stays attached (seen once in CI). The guard waits for
//! its stdin, a pipe the serving process holds, to close; then, if the mount point still carries
//! the same file system (device number from the mount table, no call into the file system), it
//! detaches it lazily.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct GuardArgs {
    /// The mount point (canonical path).
    mountpoint: PathBuf,
    /// The mounted file system's device, `MAJOR:MINOR` as in /proc/self/mountinfo.
    device: String,
}

/// The serving side: the guard process and the pipe whose closing wakes it.
pub struct Guard {
    _stdin: ChildStdin,
    _child: Child,
}

/// Starts a guard for the FUSE mount at `mountpoint` (just mounted by this process).
pub fn start(mountpoint: &Path) -> anyhow::Result<Guard> {
    let path = mountpoint.canonicalize()?;
    let device = mounted_device(&path)
        .with_context(|| format!("{} is not in the mount table", path.display()))?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("mount-guard")
        .arg(&path)
        .arg(&device)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own process group: a terminal's Ctrl-C reaches the mount, not the guard.
        .process_group(0)
        .spawn()
        .context("cannot start the mount guard")?;
    let stdin = child.stdin.take().context("the mount guard's stdin")?;
    Ok(Guard {
        _stdin: stdin,
        _child: child,
    })
}

/// `saker mount-guard MOUNTPOINT DEVICE`: waits for stdin to close, then detaches the mount if
/// it is still the one it guards.
pub fn run(args: &GuardArgs) -> anyhow::Result<()> {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 64];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if mounted_device(&args.mountpoint).as_deref() == Some(args.device.as_str()) {
        crate::mount::unmount(&args.mountpoint);
    }
    Ok(())
}

/// The device (`MAJOR:MINOR`) of the topmost mount at `path`, from /proc/self/mountinfo.
fn mounted_device(path: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = escaped(path.to_str()?);
    table.lines().rev().find_map(|l| {
        let mut f = l.split(' ');
        let device = f.nth(2)?;
        let point = f.nth(1)?;
        (point == want).then(|| device.to_string())
    })
}

/// A path as the mount table spells it (space, tab, newline and backslash in octal).
fn escaped(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_escaped_as_the_mount_table_spells_them() {
        assert_eq!(escaped("/tmp/a b\\c"), "/tmp/a\\040b\\134c");
    }

    #[test]
    fn the_root_file_system_has_a_device() {
        let dev = mounted_device(Path::new("/")).expect("/ is mounted");
        let (major, minor) = dev.split_once(':').expect("MAJOR:MINOR");
        assert!(major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok());
    }
}
