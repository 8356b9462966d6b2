//! The `build` phase: a deep-learning dataset written the way a preparation job writes it
//! (issue 34's "FUSE build phase"): `--build-files` files of `--build-size` bytes each into
//! `--build-dirs` leaf directories (made first, untimed), in a random order over the threads.

use super::*;

impl Bench<'_> {
    pub(super) fn build(
        &self,
        threads: usize,
        root: &Path,
        rng: &mut StdRng,
    ) -> anyhow::Result<Timed> {
        let a = self.args;
        let top = root.join("build");
        let (_, mut files) = make_tree(&top, a.build_dirs, a.build_files, ("c", "s"))?;
        files.shuffle(rng);
        let data = &self.data[..a.build_size as usize];
        let fsync = a.fsync;
        let t = par(threads, "build", &files, |p| {
            write_file(p, data, fsync)?;
            Ok(Done::one(data.len() as u64))
        });
        fs::remove_dir_all(&top).with_context(|| format!("rm -r {}", top.display()))?;
        Ok(t)
    }
}
