//! [`Hist`]: a log-linear latency histogram (about 1% resolution, no allocation per sample), and
//! [`Rng`], a small deterministic generator for keys, sizes and picks.

use std::time::Duration;

/// Mantissa bits per power of two: 2^7 = 128 sub-buckets, under 1% relative error.
const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;

/// Latencies in nanoseconds.
#[derive(Clone)]
pub struct Hist {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Self {
            counts: vec![0; 64 * SUB],
            total: 0,
        }
    }
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros();
    let shift = msb - SUB_BITS;
    let mantissa = (ns >> shift) as usize - SUB;
    (shift as usize + 1) * SUB + mantissa
}

/// The smallest value that falls in bucket `b` (its lower edge).
fn lower_edge(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let shift = (b / SUB - 1) as u32;
    ((SUB + b % SUB) as u64) << shift
}

impl Hist {
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[bucket(ns)] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The `q` quantile (0..=1) in microseconds, 0 when empty.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return lower_edge(b) as f64 / 1000.0;
            }
        }
        unreachable!("rank is at most the total count")
    }
}

/// SplitMix64: fast, seedable, good enough to pick keys and fill buffers.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let x = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for ns in (0..2_000_000u64).step_by(37) {
            let b = bucket(ns);
            assert!(b >= last);
            last = b;
            let lo = lower_edge(b);
            assert!(lo <= ns && ns - lo <= ns / 100 + 1, "ns {ns} edge {lo}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Hist::default();
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        assert!((h.quantile_us(0.5) - 50.0).abs() < 1.0);
        assert!((h.quantile_us(0.99) - 99.0).abs() < 1.5);
        assert_eq!(h.total, 100);
    }
}
