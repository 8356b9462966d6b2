//! The simulated cluster's state, shared by its PD and TiKV services: the cluster id, the
//! timestamp oracle, the regions (one store holds every region), the MVCC keyspace and its
//! GC (PD's safe points, the cluster's own GC worker, TiKV's collection of old versions).
//!
//! Region boundaries are kept as raw keys; PD speaks them memcomparable-encoded, as a real PD
//! does for transactional keys ([`encode_key`]).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::mvcc::{Key, Mvcc, LOGICAL_BITS};
use crate::safe_points::{SafePoints, GC_WORKER};

/// The only store's id; its peers' ids are their region's id plus this.
pub const STORE_ID: u64 = 1;
const PEER_ID_BASE: u64 = 1_000_000;

/// One region: `[start, end)` (empty `end`: unbounded), and its version (bumped by splits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub id: u64,
    pub start: Key,
    pub end: Key,
    pub version: u64,
}

impl Region {
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && (self.end.is_empty() || key < self.end.as_slice())
    }

    pub fn peer_id(&self) -> u64 {
        self.id + PEER_ID_BASE
    }
}

/// Knobs for tests: automatic splits and injected region errors.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Split a region once it holds more than this many keys (0: never).
    pub split_keys: usize,
    /// Answer every n-th KV request with a retryable region error (0: never).
    pub region_error_every: u64,
}

/// The addresses PD hands out: its own client URL and the TiKV store's. A real cluster's
/// advertised addresses may not be reachable from its clients (a container's name, say);
/// pointing these elsewhere models that.
#[derive(Clone, Debug)]
pub struct Advertised {
    pub pd: String,
    pub store: String,
}

/// The whole simulated cluster.
pub struct Cluster {
    pub id: u64,
    /// The store's address, as PD hands it out and clients dial it (`host:port`).
    pub store_addr: String,
    /// PD's client URL's address, as `GetMembers` hands it out (`host:port`).
    pub pd_addr: String,
    pub faults: Faults,
    tso: Mutex<u64>,
    regions: Mutex<Vec<Region>>,
    next_region: AtomicU64,
    requests: AtomicU64,
    pub mvcc: Mutex<Mvcc>,
    pub safe_points: Mutex<SafePoints>,
    /// The cluster's own GC worker's life time (TiDB's `tikv_gc_life_time`); `None`: no GC
    /// worker runs, only a client's `UpdateGCSafePoint` moves the GC safe point.
    gc_life_time: Option<Duration>,
    /// `ScanLock` calls answered (a GC worker resolving locks scans them; a tenant never does).
    pub scan_lock_calls: AtomicU64,
}

impl Cluster {
    pub fn new(id: u64, addrs: Advertised, faults: Faults, gc_life_time: Option<Duration>) -> Self {
        Self {
            id,
            store_addr: addrs.store,
            pd_addr: addrs.pd,
            faults,
            tso: Mutex::new(0),
            regions: Mutex::new(vec![Region {
                id: 2,
                start: Vec::new(),
                end: Vec::new(),
                version: 1,
            }]),
            next_region: AtomicU64::new(3),
            requests: AtomicU64::new(0),
            mvcc: Mutex::new(Mvcc::default()),
            safe_points: Mutex::new(SafePoints::default()),
            gc_life_time,
            scan_lock_calls: AtomicU64::new(0),
        }
    }

    /// One round of GC: the cluster's GC worker, if it has one, moves its service safe point
    /// to `now - life time` and the GC safe point to the least service safe point (as TiDB's
    /// does); then the versions below the GC safe point go, whoever moved it (TiKV's part).
    /// How many went.
    pub fn gc_round(&self) -> usize {
        let safe_point = {
            let mut sps = self.safe_points.lock();
            if let Some(life) = self.gc_life_time {
                let now = self.timestamps(1);
                let want = now.saturating_sub((life.as_millis() as u64) << LOGICAL_BITS);
                if let Ok(least) = sps.update_service(GC_WORKER, i64::MAX, want, unix_now()) {
                    sps.update_gc(least.safe_point.min(want));
                }
            }
            sps.gc()
        };
        self.mvcc.lock().gc(safe_point)
    }

    /// What the stats page says about GC and the records of the keys under `prefix`: one
    /// fact a line (`name value...`; keys in hex).
    pub fn stats(&self, prefix: &[u8]) -> String {
        let mut out = String::new();
        let now = self.timestamps(1);
        let mut sps = self.safe_points.lock();
        let _ = writeln!(out, "now {now}");
        let _ = writeln!(out, "gc_safe_point {}", sps.gc());
        let _ = writeln!(out, "gc_safe_point_moves {}", sps.gc_moves);
        let calls = self.scan_lock_calls.load(Ordering::Relaxed);
        let _ = writeln!(out, "scan_lock_calls {calls}");
        for s in sps.services(unix_now()) {
            let _ = writeln!(out, "service {} {} {}", s.id, s.safe_point, s.expires_at);
        }
        drop(sps);
        let v = self.mvcc.lock().versions(prefix);
        let _ = writeln!(out, "keys {}", v.keys);
        let _ = writeln!(out, "held {}", v.held);
        let _ = writeln!(out, "collected {}", v.collected);
        let _ = writeln!(out, "locks {}", v.locks);
        for (key, held, collected) in v.per_key {
            let _ = writeln!(out, "key {} {held} {collected}", hex::encode(key));
        }
        out
    }

    /// `count` consecutive timestamps; the last one is returned. Never goes back, even if the
    /// wall clock does.
    pub fn timestamps(&self, count: u32) -> u64 {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default();
        let count = count.max(1) as u64;
        let mut last = self.tso.lock();
        let mut first = (*last + 1).max(now_ms << LOGICAL_BITS);
        // A batch shares one physical part: the client counts back from the last logical.
        let logical_mask = (1 << LOGICAL_BITS) - 1;
        if (first & logical_mask) + count > logical_mask {
            first = ((first >> LOGICAL_BITS) + 1) << LOGICAL_BITS;
        }
        *last = first + count - 1;
        *last
    }

    pub fn regions(&self) -> Vec<Region> {
        self.regions.lock().clone()
    }

    /// The region holding `key`.
    pub fn region_of(&self, key: &[u8]) -> Region {
        self.regions
            .lock()
            .iter()
            .find(|r| r.contains(key))
            .cloned()
            .expect("the regions cover the keyspace")
    }

    pub fn region_by_id(&self, id: u64) -> Option<Region> {
        self.regions.lock().iter().find(|r| r.id == id).cloned()
    }

    /// Splits the region holding `key` at `key` (nothing if `key` starts its region).
    pub fn split(&self, key: &[u8]) {
        let mut regions = self.regions.lock();
        let Some(i) = regions.iter().position(|r| r.contains(key)) else {
            return;
        };
        if regions[i].start == key {
            return;
        }
        let old = regions[i].clone();
        let left = Region {
            id: self.next_region.fetch_add(1, Ordering::Relaxed),
            start: old.start.clone(),
            end: key.to_vec(),
            version: old.version + 1,
        };
        let right = Region {
            start: key.to_vec(),
            version: old.version + 1,
            ..old
        };
        regions[i] = right;
        regions.insert(i, left);
        tracing::debug!(key = ?key, regions = regions.len(), "region split");
    }

    /// Splits the regions that outgrew `faults.split_keys`.
    pub fn split_full(&self) {
        if self.faults.split_keys == 0 {
            return;
        }
        for r in self.regions() {
            let mid = {
                let mvcc = self.mvcc.lock();
                if mvcc.keys_in(&r.start, &r.end) <= self.faults.split_keys {
                    continue;
                }
                mvcc.middle_key(&r.start, &r.end)
            };
            if let Some(mid) = mid {
                self.split(&mid);
            }
        }
    }

    /// Whether this KV request gets an injected region error.
    pub fn inject_error(&self) -> bool {
        let every = self.faults.region_error_every;
        every != 0 && self.requests.fetch_add(1, Ordering::Relaxed) % every == every - 1
    }
}

/// Unix seconds by the wall clock (service safe points' TTLs count in them, as PD's do).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

/// Memcomparable encoding of a key (groups of 8 bytes, each followed by a marker byte), as PD
/// keeps transactional region boundaries. The empty key stays empty (an open bound).
pub fn encode_key(key: &[u8]) -> Vec<u8> {
    if key.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(key.len() / 8 * 9 + 9);
    let mut chunks = key.chunks(8);
    loop {
        match chunks.next() {
            Some(c) if c.len() == 8 => {
                out.extend_from_slice(c);
                out.push(0xff);
            }
            rest => {
                let c = rest.unwrap_or_default();
                let pad = 8 - c.len();
                out.extend_from_slice(c);
                out.extend(std::iter::repeat_n(0, pad));
                out.push(0xff - pad as u8);
                return out;
            }
        }
    }
}

/// The inverse of [`encode_key`]; `None` for bytes that are not an encoding. A truncated
/// encoding decodes as far as it goes (PD may be asked about any key).
pub fn decode_key(enc: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(enc.len());
    let mut rest = enc;
    while !rest.is_empty() {
        if rest.len() < 9 {
            return None;
        }
        let (group, marker) = (&rest[..8], rest[8]);
        let pad = 0xff - marker as usize;
        if pad > 8 {
            return None;
        }
        out.extend_from_slice(&group[..8 - pad]);
        if pad > 0 {
            return Some(out);
        }
        rest = &rest[9..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_keeps_order() {
        let keys: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghi".to_vec(),
            vec![0xff; 17],
        ];
        for w in keys.windows(2) {
            assert!(encode_key(&w[0]) < encode_key(&w[1]), "{w:?}");
        }
        for k in &keys {
            assert_eq!(decode_key(&encode_key(k)).as_ref(), Some(k));
        }
        assert_eq!(encode_key(b"abcdefgh").len(), 18);
    }

    #[test]
    fn splits_keep_the_keyspace_covered_and_bump_versions() {
        let addrs = Advertised {
            pd: "x:1".into(),
            store: "x:1".into(),
        };
        let c = Cluster::new(7, addrs, Faults::default(), None);
        c.split(b"m");
        c.split(b"f");
        c.split(b"m");
        let rs = c.regions();
        assert_eq!(rs.len(), 3);
        assert_eq!(c.region_of(b"a").end, b"f".to_vec());
        assert_eq!(c.region_of(b"g").start, b"f".to_vec());
        assert_eq!(c.region_of(b"z").start, b"m".to_vec());
        assert!(rs.windows(2).all(|w| w[0].end == w[1].start));
        let t1 = c.timestamps(1);
        let t2 = c.timestamps(5);
        assert!(t2 >= t1 + 5);
    }
}
