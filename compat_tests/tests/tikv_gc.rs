//! saker as a tenant of TiKV's GC (`saker server --store tikv` against `saker-tikv-sim`, whose
//! PD keeps service safe points as PD does and whose GC worker, when it runs, collects the
//! versions below them): each node keeps a PD service safe point trailing the oldest
//! timestamp it reads at, so the versions of the keys it rewrites all the time (a group's
//! lease key every second, its meta and fence keys every batch) stay few; it never moves the
//! GC safe point nor scans locks itself unless `--tikv-gc global` says so, with a warning.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tikv::{Sim, Stats};
use common::*;

/// MNode groups of a server (the default).
const GROUPS: u32 = 4;

fn prefix(keyspace: &str) -> Vec<u8> {
    format!("saker/{keyspace}/").into_bytes()
}

/// The key of group `group`'s single record `tag` (`L` lease, `m` meta, `F` fence).
fn single(keyspace: &str, group: u32, tag: u8) -> Vec<u8> {
    let mut k = prefix(keyspace);
    k.extend_from_slice(&group.to_be_bytes());
    k.push(tag);
    k
}

/// The service safe points of the saker processes on `keyspace`.
fn saker_services(st: &Stats, keyspace: &str) -> Vec<u64> {
    let id = format!("saker-{keyspace}-");
    st.services
        .iter()
        .filter(|(s, _)| s.starts_with(&id))
        .map(|(_, sp)| *sp)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_and_meta_keys_keep_few_versions_under_the_clusters_gc() {
    // The cluster's GC worker would collect everything at once (a life time of 0): only
    // saker's service safe point holds it back.
    let sim = Sim::spawn_with(
        "127.0.0.1:0",
        &["--gc-life-time-ms", "0", "--gc-every-ms", "200"],
    );
    let ks = "gc";
    let s = Server::start(sim.opts(ks).arg("--tikv-gc-every", "1s"));
    let c = s.client();
    let bucket = new_bucket(&c, "gc").await;

    // New objects: each batch raises its group's inode high-water mark, a meta key write.
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (c, bucket, stop) = (c.clone(), bucket.clone(), stop.clone());
            tokio::spawn(async move {
                let mut written = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("w{w}/{}", written.len());
                    put(&c, &bucket, &key, key.as_bytes()).await;
                    written.push(key);
                }
                written
            })
        })
        .collect();

    // Until every lease key was written 16 times (a round a second), the most versions any
    // lease key held at once.
    let most_lease_held = Arc::new(Mutex::new(0u64));
    let done = poll_until(Duration::from_secs(60), || {
        let (sim, most) = (&sim, most_lease_held.clone());
        async move {
            let st = sim.stats(&prefix(ks)).await;
            let lease: Vec<(u64, u64)> =
                (1..=GROUPS).map(|g| st.key(&single(ks, g, b'L'))).collect();
            let held = lease.iter().map(|(h, _)| *h).max().unwrap_or(0);
            let mut m = most.lock().unwrap();
            *m = (*m).max(held);
            lease.iter().all(|(h, c)| h + c >= 16)
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut written = Vec::new();
    for w in writers {
        written.extend(w.await.unwrap());
    }
    assert!(done, "the lease keys were not renewed 16 times within 60 s");
    let st = sim.stats(&prefix(ks)).await;
    eprintln!(
        "{} objects written; {} records held, {} collected; GC safe point {}, services {:?}",
        written.len(),
        st.held,
        st.collected,
        st.gc_safe_point,
        st.services
    );

    let most = *most_lease_held.lock().unwrap();
    assert!(
        most <= 6,
        "a lease key held {most} versions at once (16 written)"
    );
    for g in 1..=GROUPS {
        let (held, collected) = st.key(&single(ks, g, b'm'));
        let meta = held + collected;
        assert!(meta >= 20, "group {g}'s meta key written {meta} times");
        assert!(
            held * 3 <= meta,
            "group {g}'s meta key holds {held} of its {meta} versions"
        );
        let (held, collected) = st.key(&single(ks, g, b'F'));
        assert!(
            held * 3 <= held + collected,
            "group {g}'s fence key holds {held} of its {} records",
            held + collected
        );
    }
    // The GC safe point follows saker's service safe point, a few seconds behind now at most,
    // and never passes it.
    let mine = saker_services(&st, ks);
    assert_eq!(mine.len(), 1, "{:?}", st.services);
    assert!(
        st.gc_safe_point > 0 && st.gc_safe_point <= mine[0],
        "{st:?}"
    );
    let lag = Stats::ms_between(st.gc_safe_point, st.now);
    assert!(lag <= 5000, "the GC safe point trails now by {lag} ms");
    assert_eq!(st.scan_lock_calls, 0, "a tenant scanned locks");
    // Nothing a read needed went.
    for key in written.iter().step_by(37) {
        assert_eq!(get_bytes(&c, &bucket, key).await, key.as_bytes());
    }
    let log = s.stderr_tail();
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_never_moves_the_gc_safe_point_and_global_gc_needs_a_flag_that_warns() {
    // No GC worker of the cluster's own: only a client could move the GC safe point.
    let sim = Sim::spawn("127.0.0.1:0");
    let tenant = Server::start(sim.opts("tenant").arg("--tikv-gc-every", "200ms"));
    let c = tenant.client();
    let bucket = new_bucket(&c, "tenant").await;
    put(&c, &bucket, "k", b"v").await;
    // Its service safe point moved on twice: it renews, and did nothing else.
    let first = saker_services(&sim.stats(b"").await, "tenant");
    assert_eq!(first.len(), 1, "registered before the server served");
    let renewed = poll_until(Duration::from_secs(10), || {
        let (sim, first) = (&sim, first[0]);
        async move {
            let now = saker_services(&sim.stats(b"").await, "tenant");
            now.first().is_some_and(|sp| *sp > first)
        }
    })
    .await;
    assert!(renewed, "the service safe point was not renewed");
    let st = sim.stats(b"").await;
    assert_eq!(st.gc_safe_point, 0, "a tenant moved the GC safe point");
    assert_eq!(st.gc_safe_point_moves, 0);
    assert_eq!(st.scan_lock_calls, 0, "a tenant scanned locks");

    // A dedicated cluster's saker acts as its GC worker: it warns, scans locks and moves
    // the GC safe point, never past another service's safe point (the tenant's).
    let global = Server::start(
        sim.opts("dedicated")
            .arg("--tikv-gc", "global")
            .arg("--tikv-gc-every", "200ms")
            .whole_log(),
    );
    let log = global.stderr_tail();
    assert!(
        log.contains("--tikv-gc global") && log.contains("dedicated to saker"),
        "no warning:\n{log}"
    );
    let moved = poll_until(Duration::from_secs(20), || {
        let sim = &sim;
        async move {
            let st = sim.stats(b"").await;
            st.gc_safe_point > 0 && st.scan_lock_calls > 0
        }
    })
    .await;
    let st = sim.stats(b"").await;
    assert!(moved, "the global GC did not run: {st:?}");
    let tenant_sp = saker_services(&st, "tenant");
    assert!(
        tenant_sp.iter().all(|sp| st.gc_safe_point <= *sp),
        "the GC safe point passed the tenant's: {st:?}"
    );
    assert_eq!(get_bytes(&c, &bucket, "k").await, b"v");
}
