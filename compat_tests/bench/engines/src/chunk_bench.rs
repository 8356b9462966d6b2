//! The chunk layout workload, run through the `ChunkStore` trait against one layout.
//!
//! Puts: for each size and concurrency, a fresh store and `concurrency` tasks putting chunks of
//! that size with fresh random ids (every put durable, as the trait requires) until the time or
//! the byte cap runs out. Reads: for each size, a fresh store filled with enough chunks to hold
//! `read_set_mib` (at least 64), then `concurrency` tasks reading whole random chunks. The files
//! were just written, so reads mostly hit the page cache: they measure each layout's software path
//! (open + fstat + reads + close per chunk, against reads on an open volume), not the device.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use saker_chunkstore::volume::VOLUME_SIZE;
use saker_chunkstore::{ChunkId, ChunkStore, DiskChunkStore};

use crate::hist::{Hist, Rng};
use crate::report::Cell;

/// A put cell stops early once this many bytes were written, to bound disk use.
const PUT_BYTES_CAP: u64 = 4 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `DiskChunkStore` with no volume chunks: one file per chunk.
    File,
    /// `DiskChunkStore` with every chunk in volumes (`saker_chunkstore::volume`): group commit.
    Volume,
}

pub struct Params {
    pub layout: Layout,
    pub dir: PathBuf,
    pub sizes: Vec<u64>,
    pub concurrency: Vec<usize>,
    pub secs: f64,
    pub read_set_mib: u64,
}

/// A fresh store, and again as a `DiskChunkStore` for the volume sync counter.
type Opened = (Arc<dyn ChunkStore>, Option<Arc<DiskChunkStore>>);

fn open(layout: Layout, dir: &Path) -> Result<Opened> {
    let _ = std::fs::remove_dir_all(dir);
    Ok(match layout {
        Layout::File => (Arc::new(DiskChunkStore::open_with(dir, 0, VOLUME_SIZE)?), None),
        Layout::Volume => {
            let v = Arc::new(DiskChunkStore::open_with(dir, u64::MAX, VOLUME_SIZE)?);
            (v.clone(), Some(v))
        }
    })
}

fn payload(size: u64) -> Bytes {
    let mut v = vec![0u8; size as usize];
    Rng::new(size).fill(&mut v);
    Bytes::from(v)
}

pub async fn run(p: &Params) -> Result<Vec<Cell>> {
    let mut cells = Vec::new();
    for &size in &p.sizes {
        for &conc in &p.concurrency {
            cells.push(puts(p, size, conc).await?);
        }
    }
    for &size in &p.sizes {
        cells.extend(reads(p, size).await?);
    }
    Ok(cells)
}

async fn puts(p: &Params, size: u64, conc: usize) -> Result<Cell> {
    let dir = p.dir.join("puts");
    let (store, volume) = open(p.layout, &dir)?;
    let data = payload(size);
    let written = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(p.secs);
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (store, data, written) = (store.clone(), data.clone(), written.clone());
        tasks.push(tokio::spawn(async move {
            let (mut h, mut calls) = (Hist::default(), 0u64);
            while Instant::now() < deadline && written.load(Ordering::Relaxed) < PUT_BYTES_CAP {
                let t0 = Instant::now();
                store.put(ChunkId::random(), data.clone()).await?;
                h.record(t0.elapsed());
                calls += 1;
                written.fetch_add(size, Ordering::Relaxed);
            }
            anyhow::Ok((h, calls))
        }));
    }
    let (hist, calls) = join(tasks).await?;
    let elapsed = start.elapsed().as_secs_f64();
    let mut cell = Cell::new("put", 1, conc, elapsed, calls, calls, &hist).with_size(size);
    if let Some(v) = volume {
        cell.puts_per_sync = Some(calls as f64 / v.volumes().syncs().max(1) as f64);
    }
    drop(store);
    remove(&dir).await?;
    Ok(cell)
}

async fn reads(p: &Params, size: u64) -> Result<Vec<Cell>> {
    let dir = p.dir.join("reads");
    let (store, _) = open(p.layout, &dir)?;
    let data = payload(size);
    let count = ((p.read_set_mib << 20) / size).max(64) as usize;
    // Fill with 16 writers (untimed).
    let ids: Arc<Vec<ChunkId>> = Arc::new((0..count).map(|_| ChunkId::random()).collect());
    let mut fill = Vec::new();
    for w in 0..16 {
        let (store, data, ids) = (store.clone(), data.clone(), ids.clone());
        fill.push(tokio::spawn(async move {
            for id in ids.iter().skip(w).step_by(16) {
                store.put(*id, data.clone()).await?;
            }
            anyhow::Ok((Hist::default(), 0))
        }));
    }
    join(fill).await?;

    let mut cells = Vec::new();
    for &conc in &p.concurrency {
        let start = Instant::now();
        let deadline = start + Duration::from_secs_f64(p.secs);
        let mut tasks = Vec::new();
        for t in 0..conc {
            let (store, ids) = (store.clone(), ids.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::new(size ^ (t as u64) << 32);
                let (mut h, mut calls) = (Hist::default(), 0u64);
                while Instant::now() < deadline {
                    let id = ids[rng.below(ids.len() as u64) as usize];
                    let t0 = Instant::now();
                    let got = store.get(id, 0, size).await?;
                    h.record(t0.elapsed());
                    anyhow::ensure!(got.len() as u64 == size, "short read of {id}");
                    calls += 1;
                }
                anyhow::Ok((h, calls))
            }));
        }
        let (hist, calls) = join(tasks).await?;
        let elapsed = start.elapsed().as_secs_f64();
        cells.push(Cell::new("get", 1, conc, elapsed, calls, calls, &hist).with_size(size));
    }
    drop(store);
    remove(&dir).await?;
    Ok(cells)
}

async fn join(tasks: Vec<tokio::task::JoinHandle<Result<(Hist, u64)>>>) -> Result<(Hist, u64)> {
    let (mut hist, mut calls) = (Hist::default(), 0);
    for t in tasks {
        let (h, c) = t.await??;
        hist.merge(&h);
        calls += c;
    }
    Ok((hist, calls))
}

async fn remove(dir: &Path) -> Result<()> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await??;
    Ok(())
}
