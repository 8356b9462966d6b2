//! A seeded, stable mutation driver: what CI runs in place of cargo-fuzz (which needs
//! nightly). It mutates inputs of the corpus (flips, byte and integer edits, inserts,
//! deletes, copies and splices, as libFuzzer's mutators do) for a fixed number of runs or a
//! time limit, whichever comes first. It is not coverage-guided, so it finds shallow panics
//! only; any seed replays the same runs.

use std::time::{Duration, Instant};

use crate::Target;

/// A panic found by [`run`]: the input and where it was saved.
#[derive(Debug)]
pub struct Finding {
    pub input: Vec<u8>,
    pub saved: Option<std::path::PathBuf>,
}

/// How many runs [`run`] did.
#[derive(Debug)]
pub struct Report {
    pub runs: u64,
}

/// Runs `target` on mutations of `corpus` (with `seed`) up to `max_runs` times or for
/// `limit`. A panicking input is saved as `crash-<hash>` in `save_dir` (when given) and
/// returned.
pub fn run(
    target: Target,
    corpus: &[Vec<u8>],
    seed: u64,
    max_runs: u64,
    limit: Duration,
    save_dir: Option<&std::path::Path>,
) -> Result<Report, Finding> {
    let start = Instant::now();
    let mut rng = Rng(seed | 1);
    let empty = [Vec::new()];
    let corpus = if corpus.is_empty() {
        &empty[..]
    } else {
        corpus
    };
    let mut runs = 0;
    while runs < max_runs && start.elapsed() < limit {
        let mut input = corpus[rng.below(corpus.len())].clone();
        for _ in 0..=rng.below(4) {
            mutate(&mut input, &corpus[rng.below(corpus.len())], &mut rng);
        }
        runs += 1;
        if std::panic::catch_unwind(|| target(&input)).is_err() {
            let saved = save_dir.map(|dir| {
                let path = dir.join(format!("crash-{}", crate::seeds::file_name(&input)));
                std::fs::create_dir_all(dir).expect("crash directory");
                std::fs::write(&path, &input).expect("crash file");
                path
            });
            return Err(Finding { input, saved });
        }
    }
    Ok(Report { runs })
}

/// xorshift64*: small, seeded, the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 if `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Values that tend to sit at edges: lengths, counts and varints.
const INTERESTING: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
    u64::MAX,
    1 << 30,
];

fn mutate(input: &mut Vec<u8>, other: &[u8], rng: &mut Rng) {
    let len = input.len();
    match rng.below(9) {
        0 if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let at = rng.below(len);
            input[at] = rng.next() as u8;
        }
        2 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            input.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            input.drain(at..at + n);
        }
        4 => {
            // An interesting value, little-endian, or as a varint (postcard's lengths).
            let v = INTERESTING[rng.below(INTERESTING.len())];
            let bytes = if rng.below(2) == 0 {
                v.to_le_bytes()[..1 << rng.below(4)].to_vec()
            } else {
                varint(v)
            };
            let at = rng.below(len + 1);
            let end = (at + bytes.len()).min(len);
            input.splice(at..end, bytes);
        }
        5 if len > 1 => {
            // Copy a run of the input over another place in it.
            let from = rng.below(len);
            let n = 1 + rng.below((len - from).min(32));
            let run = input[from..from + n].to_vec();
            let at = rng.below(len);
            let end = (at + n).min(len);
            input.splice(at..end, run);
        }
        6 if !other.is_empty() => {
            // Splice: a prefix of this input, the rest from another.
            let cut = rng.below(len + 1);
            let from = rng.below(other.len());
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        7 if len > 0 => {
            input.truncate(rng.below(len));
        }
        _ => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(4);
            input.splice(at..at, std::iter::repeat_n(0xff, n));
        }
    }
}

/// `v` as a LEB128 varint.
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}
