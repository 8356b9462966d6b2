//! The metadata store workload, run through the `MetaStore` trait against one engine.
//!
//! Keys are shaped like the MNode's dentry keys: 4-byte group (BE), 1-byte tag, 8-byte parent id
//! (BE), then a 10-20 byte name. The store is first loaded with `keys` entries, 100 per directory
//! in random order, then measured, in this order: point gets of loaded keys, prefix scans of a
//! whole 100-entry directory, non-durable applies, durable commits, raft entries. Writes create
//! new names in random loaded directories; values are 200 bytes (48 random bytes, the rest
//! low-entropy, like an encoded inode). A raft entry is what an MNode group does per merged batch
//! (`mnode/src/raft/{log_store,state_machine}.rs`): a durable write of one log key whose value
//! holds the whole batch, then a non-durable apply of the batch plus the state machine's meta key;
//! with several threads, each thread is one raft group sharing the store, as in the product. Each
//! write cell ends with one untimed durable write, so deferred work from non-durable commits is
//! not charged to the next cell.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use saker_mnode::store::{prefix_end, MetaStore, WriteBatch};
use saker_mnode::{FjallStore, RedbStore};

use crate::hist::{Hist, Rng};
use crate::report::Cell;

/// Entries per loaded directory (and so per scan).
pub const DIR_ENTRIES: u64 = 100;
const GROUPS: u64 = 4;
const TAG_DENTRY: u8 = 2;
const TAG_LOG: u8 = 1;
const TAG_SM_META: u8 = 0;
const VALUE_LEN: usize = 200;
/// A write cell stops early after this many ops, to bound the store's growth.
const WRITE_OPS_CAP: u64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Redb,
    Fjall,
}

/// The engine under test, with engine-specific hooks the trait has no room for.
enum Store {
    Redb(RedbStore),
    Fjall(FjallStore),
}

impl Store {
    fn open(engine: Engine, dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(match engine {
            Engine::Redb => Store::Redb(RedbStore::open(&dir.join("meta.redb"))?),
            Engine::Fjall => Store::Fjall(FjallStore::open(&dir.join("fjall"))?),
        })
    }

    fn meta(&self) -> &dyn MetaStore {
        match self {
            Store::Redb(s) => s,
            Store::Fjall(s) => s,
        }
    }

    /// Waits (up to a minute) for background flushes and compactions to finish.
    fn settle(&self) {
        if let Store::Fjall(s) = self {
            let deadline = Instant::now() + Duration::from_secs(60);
            while s.busy() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

pub struct Params {
    pub engine: Engine,
    pub dir: std::path::PathBuf,
    pub keys: u64,
    pub secs: f64,
    pub threads: Vec<usize>,
    pub batches: Vec<usize>,
}

/// A loaded entry's key.
fn key(dir: u64, entry: u64) -> Vec<u8> {
    let mut k = dir_prefix(dir);
    name(&mut k, dir * DIR_ENTRIES + entry, &format!("{entry:03}"));
    k
}

fn dir_prefix(dir: u64) -> Vec<u8> {
    let parent = dir + 1;
    let mut k = Vec::with_capacity(13 + 20);
    k.extend_from_slice(&((parent % GROUPS) as u32).to_be_bytes());
    k.push(TAG_DENTRY);
    k.extend_from_slice(&parent.to_be_bytes());
    k
}

/// Appends a 10-20 byte name: `stem` (unique within the directory, at most 19 bytes), a dot,
/// then hex filler from `seed` up to a length drawn from `seed`.
fn name(k: &mut Vec<u8>, seed: u64, stem: &str) {
    let mut rng = Rng::new(seed);
    let len = (10 + rng.below(11) as usize).max(stem.len() + 1);
    let start = k.len();
    k.extend_from_slice(stem.as_bytes());
    k.push(b'.');
    let mut bits = rng.next_u64();
    while k.len() - start < len {
        k.push(b"0123456789abcdef"[(bits & 15) as usize]);
        bits = bits.rotate_right(4);
    }
}

/// Stems of written names: unique for the whole run.
static WRITE_SEQ: AtomicU64 = AtomicU64::new(0);

fn value(rng: &mut Rng) -> Bytes {
    let mut v = vec![0u8; VALUE_LEN];
    rng.fill(&mut v[..48]);
    for (i, b) in v[48..].iter_mut().enumerate() {
        *b = [0, 0, 0, 1, 0x20, 0x7f][i % 6];
    }
    Bytes::from(v)
}

pub fn run(p: &Params) -> Result<Vec<Cell>> {
    let _ = std::fs::remove_dir_all(&p.dir);
    let store = Store::open(p.engine, &p.dir).context("open store")?;
    let mut cells = vec![load(store.meta(), p.keys)?];
    store.settle();
    let dirs = p.keys / DIR_ENTRIES;
    for &t in &p.threads {
        cells.push(reads(&store, "get", t, p.secs, dirs)?);
    }
    for &t in &p.threads {
        cells.push(reads(&store, "scan", t, p.secs, dirs)?);
    }
    for kind in [Write::Apply, Write::Commit, Write::Entry] {
        for &b in &p.batches {
            for &t in &p.threads {
                cells.push(writes(&store, kind, b, t, p.secs, dirs)?);
                store.settle();
            }
        }
    }
    drop(store);
    std::fs::remove_dir_all(&p.dir)?;
    Ok(cells)
}

/// Loads `keys` entries in a fixed random order, 1000 per non-durable batch, then one durable one.
fn load(s: &dyn MetaStore, keys: u64) -> Result<Cell> {
    // i -> i * P mod keys is a permutation when P is a prime that does not divide `keys`.
    const P: u64 = 999_983;
    anyhow::ensure!(
        keys.is_multiple_of(DIR_ENTRIES) && !keys.is_multiple_of(P),
        "bad key count {keys}"
    );
    let mut rng = Rng::new(1);
    let start = Instant::now();
    let mut batch = WriteBatch::default();
    for i in 0..keys {
        let idx = (i as u128 * P as u128 % keys as u128) as u64;
        batch.put(key(idx / DIR_ENTRIES, idx % DIR_ENTRIES), value(&mut rng));
        if batch.ops.len() == 1000 || i + 1 == keys {
            s.write(&batch, i + 1 == keys)?;
            batch.ops.clear();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Cell::new(
        "load",
        1000,
        1,
        secs,
        keys / 1000,
        keys,
        &Hist::default(),
    ))
}

fn reads(store: &Store, kind: &'static str, threads: usize, secs: f64, dirs: u64) -> Result<Cell> {
    let s = store.meta();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let results: Vec<Result<(Hist, u64, u64)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    let mut rng = Rng::new(100 + t as u64);
                    let (mut h, mut calls, mut ops) = (Hist::default(), 0u64, 0u64);
                    while Instant::now() < deadline {
                        let dir = rng.below(dirs);
                        let t0 = Instant::now();
                        let found = if kind == "get" {
                            let got = s.get(&key(dir, rng.below(DIR_ENTRIES)))?;
                            usize::from(got.is_some())
                        } else {
                            let prefix = dir_prefix(dir);
                            let end = prefix_end(&prefix).expect("prefix is not all 0xff");
                            s.scan(&prefix, Some(&end), DIR_ENTRIES as usize)?.len()
                        };
                        h.record(t0.elapsed());
                        let want = if kind == "get" {
                            1
                        } else {
                            DIR_ENTRIES as usize
                        };
                        anyhow::ensure!(found == want, "{kind} found {found}, expected {want}");
                        calls += 1;
                        ops += found as u64;
                    }
                    Ok((h, calls, ops))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let (mut hist, mut calls, mut ops) = (Hist::default(), 0, 0);
    for r in results {
        let (h, c, o) = r?;
        hist.merge(&h);
        calls += c;
        ops += o;
    }
    let batch = if kind == "get" {
        1
    } else {
        DIR_ENTRIES as usize
    };
    Ok(Cell::new(kind, batch, threads, elapsed, calls, ops, &hist))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Write {
    /// One non-durable write of the batch.
    Apply,
    /// One durable write of the batch.
    Commit,
    /// A raft entry: durable log append of the encoded batch, then a non-durable apply.
    Entry,
}

/// The log key of entry `index` of raft group `group`.
fn log_key(group: u32, index: u64) -> Vec<u8> {
    let mut k = group.to_be_bytes().to_vec();
    k.push(TAG_LOG);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// A raft log entry's value: the batch's keys and values, length-prefixed.
fn encode_entry(b: &WriteBatch) -> Bytes {
    let mut v = Vec::new();
    for (k, val) in &b.ops {
        let val = val.as_deref().unwrap_or_default();
        v.extend_from_slice(&(k.len() as u16).to_le_bytes());
        v.extend_from_slice(k);
        v.extend_from_slice(&(val.len() as u32).to_le_bytes());
        v.extend_from_slice(val);
    }
    Bytes::from(v)
}

fn writes(
    store: &Store,
    write: Write,
    batch: usize,
    threads: usize,
    secs: f64,
    dirs: u64,
) -> Result<Cell> {
    let s = store.meta();
    let kind = match write {
        Write::Apply => "apply",
        Write::Commit => "commit",
        Write::Entry => "entry",
    };
    let total_ops = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    let results: Vec<Result<(Hist, u64)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let total_ops = total_ops.clone();
                sc.spawn(move || {
                    let seed = (write as u64) << 40 | (batch as u64) << 20 | t as u64;
                    let mut rng = Rng::new(seed);
                    let (mut h, mut calls) = (Hist::default(), 0u64);
                    let mut b = WriteBatch::default();
                    let mut log = WriteBatch::default();
                    // This thread's raft group: its log keys and state machine meta key.
                    let group = 1000 + t as u32;
                    let mut sm_meta = group.to_be_bytes().to_vec();
                    sm_meta.push(TAG_SM_META);
                    while Instant::now() < deadline
                        && total_ops.load(Ordering::Relaxed) < WRITE_OPS_CAP
                    {
                        b.ops.clear();
                        for _ in 0..batch {
                            let mut k = dir_prefix(rng.below(dirs));
                            let seq = WRITE_SEQ.fetch_add(1, Ordering::Relaxed);
                            name(&mut k, rng.next_u64(), &format!("w{seq:x}"));
                            b.put(k, value(&mut rng));
                        }
                        let t0 = Instant::now();
                        match write {
                            Write::Apply => s.write(&b, false)?,
                            Write::Commit => s.write(&b, true)?,
                            Write::Entry => {
                                log.ops.clear();
                                log.put(log_key(group, calls), encode_entry(&b));
                                s.write(&log, true)?;
                                b.put(sm_meta.clone(), Bytes::from(calls.to_le_bytes().to_vec()));
                                s.write(&b, false)?;
                            }
                        }
                        h.record(t0.elapsed());
                        calls += 1;
                        total_ops.fetch_add(batch as u64, Ordering::Relaxed);
                    }
                    Ok((h, calls))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    // Untimed: make everything durable so the next cell starts clean.
    let mut tail = WriteBatch::default();
    tail.put(b"\xff-settle".to_vec(), &b"x"[..]);
    s.write(&tail, true)?;
    let (mut hist, mut calls) = (Hist::default(), 0);
    for r in results {
        let (h, c) = r?;
        hist.merge(&h);
        calls += c;
    }
    let ops = calls * batch as u64;
    Ok(Cell::new(kind, batch, threads, elapsed, calls, ops, &hist))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_shaped_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for dir in 0..50 {
            for e in 0..DIR_ENTRIES {
                let k = key(dir, e);
                assert!((13 + 10..=13 + 20).contains(&k.len()), "len {}", k.len());
                assert!(k.starts_with(&dir_prefix(dir)));
                assert!(seen.insert(k));
            }
        }
    }
}
