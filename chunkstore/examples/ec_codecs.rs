//! Picks the Reed-Solomon crate for erasure-coded chunks by measurement (issue 63):
//! `reed-solomon-simd` (GF(2^16), what [`saker_chunkstore::ec`] uses) against
//! `reed-solomon-erasure` (GF(2^8), with its C SIMD kernels) at 4+2, 6+3 and 8+3 on 1 MiB and
//! 8 MiB chunks (8 MiB is the client's chunk size): encode, and decode with 1..m data shards
//! lost (the worst case: data, not parity, to rebuild). Every decode is checked byte-exact.
//!
//! `cargo run --release -p saker-chunkstore --example ec_codecs [ROUNDS]` prints JSON: the median
//! GiB/s of chunk data per case over ROUNDS rounds (default 15), one thread.

use std::time::Instant;

use reed_solomon_erasure::galois_8::ReedSolomon;

const LAYOUTS: [(usize, usize); 3] = [(4, 2), (6, 3), (8, 3)];
const CHUNKS: [usize; 2] = [1 << 20, 8 << 20];

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(15, |r| r.parse().expect("ROUNDS is a number"));
    let mut cases = Vec::new();
    for (k, m) in LAYOUTS {
        for chunk_len in CHUNKS {
            let chunk: Vec<u8> = (0..chunk_len)
                .map(|i| (i as u8).wrapping_mul(151) ^ (i >> 11) as u8)
                .collect();
            let s = chunk_len.div_ceil(k).div_ceil(64) * 64;
            let data: Vec<Vec<u8>> = (0..k)
                .map(|i| {
                    let mut d = vec![0u8; s];
                    let piece = chunk
                        .get(i * s..((i + 1) * s).min(chunk_len))
                        .unwrap_or(&[]);
                    d[..piece.len()].copy_from_slice(piece);
                    d
                })
                .collect();
            for lost in 0..=m {
                for crate_name in ["reed-solomon-simd", "reed-solomon-erasure"] {
                    let mut times = Vec::with_capacity(rounds);
                    for _ in 0..rounds {
                        times.push(run(crate_name, k, m, &data, lost));
                    }
                    times.sort_by(f64::total_cmp);
                    let median = times[times.len() / 2];
                    cases.push(format!(
                        "{{\"crate\": \"{crate_name}\", \"layout\": \"{k}+{m}\", \"chunk_bytes\": \
                         {chunk_len}, \"op\": \"{}\", \"data_shards_lost\": {lost}, \
                         \"median_gib_per_s\": {:.3}}}",
                        if lost == 0 { "encode" } else { "decode" },
                        chunk_len as f64 / median / (1u64 << 30) as f64
                    ));
                }
            }
        }
    }
    println!(
        "{{\n \"what\": \"Reed-Solomon crates for erasure-coded chunks: median GiB/s of chunk data, \
         one thread, {rounds} rounds per case (chunkstore/examples/ec_codecs.rs)\",\n \"cases\": [\n  {}\n ]\n}}",
        cases.join(",\n  ")
    );
}

/// Seconds for one encode (`lost` 0) or one decode of `lost` data shards, verified.
fn run(crate_name: &str, k: usize, m: usize, data: &[Vec<u8>], lost: usize) -> f64 {
    let s = data[0].len();
    match crate_name {
        "reed-solomon-simd" => {
            let parity = reed_solomon_simd::encode(k, m, data).expect("encode");
            if lost == 0 {
                let t = Instant::now();
                let parity2 = reed_solomon_simd::encode(k, m, data).expect("encode");
                let took = t.elapsed().as_secs_f64();
                assert_eq!(parity, parity2);
                return took;
            }
            let t = Instant::now();
            let restored = reed_solomon_simd::decode(
                k,
                m,
                (lost..k).map(|i| (i, &data[i])),
                (0..lost).map(|i| (i, &parity[i])),
            )
            .expect("decode");
            let took = t.elapsed().as_secs_f64();
            for i in 0..lost {
                assert_eq!(restored[&i], data[i], "shard {i}");
            }
            took
        }
        _ => {
            let rs = ReedSolomon::new(k, m).expect("layout");
            let mut shards: Vec<Vec<u8>> = data.to_vec();
            shards.extend((0..m).map(|_| vec![0u8; s]));
            let t = Instant::now();
            rs.encode(&mut shards).expect("encode");
            let took = t.elapsed().as_secs_f64();
            if lost == 0 {
                return took;
            }
            let mut some: Vec<Option<Vec<u8>>> = shards.into_iter().map(Some).collect();
            for s in some.iter_mut().take(lost) {
                *s = None;
            }
            let t = Instant::now();
            rs.reconstruct_data(&mut some).expect("decode");
            let took = t.elapsed().as_secs_f64();
            for i in 0..lost {
                assert_eq!(some[i].as_ref().unwrap(), &data[i], "shard {i}");
            }
            took
        }
    }
}
