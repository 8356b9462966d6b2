//! Taking part in TiKV's GC as a tenant of a shared cluster.
//!
//! TiKV keeps every MVCC version until the cluster's GC safe point passes it, and the GC
//! worker (TiDB's, on a shared cluster) moves that safe point no further than the least
//! *service* safe point registered in PD. Each saker process registers one (service id
//! `saker-<keyspace>-<random>`, a TTL of a minute or more, renewed every
//! [`GcPart::every`]) at the oldest timestamp any of its calls reads at or may read at later
//! ([`ReadFloor`]): the timestamp pinned for reads, a fresh call's floor, the newest PD
//! timestamp it saw. So the lease and meta keys rewritten every second and every batch keep
//! only the versions of the last seconds once the GC worker runs, and no version a saker
//! read needs is collected. A process that dies stops renewing; PD drops its safe point when
//! the TTL runs out.
//!
//! A tenant never moves the GC safe point nor resolves locks over the whole key space: that
//! is the GC worker's job, and doing it from a tenant would collect versions other tenants
//! still read. Only with [`GcPart::global`] (a TiKV cluster dedicated to saker, with no other
//! GC worker) does each process also act as the GC worker: it sets `gc_worker`'s service safe
//! point to its own, and runs `tikv-client`'s GC (locks below the least service safe point
//! resolved over the whole key space, then the GC safe point moved there).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tikv_client::{TimestampExt, TransactionClient};

use super::tikv_connect::{header_ok, pd_call, RequestHeader, ResponseHeader};

/// The least TTL of a service safe point: far above the oldest a read may be (a pin lasts
/// 10 s, a call 8 s) and above a few missed renewals.
const SERVICE_TTL: Duration = Duration::from_secs(60);
/// The longest a global GC round may take (resolving locks over the whole key space).
const GLOBAL_GC_FOR: Duration = Duration::from_secs(60);
/// PD's service id of the cluster's GC worker.
const GC_WORKER: &str = "gc_worker";

/// How a process takes part in TiKV's GC.
#[derive(Clone, Copy, Debug)]
pub struct GcPart {
    /// Also act as the cluster's GC worker (a cluster dedicated to saker only).
    pub global: bool,
    /// How often the service safe point (and, global, the GC safe point) is moved on.
    pub every: Duration,
}

impl Default for GcPart {
    fn default() -> Self {
        Self {
            global: false,
            every: Duration::from_secs(10),
        }
    }
}

/// The timestamps this process's calls read at while they do, and the newest PD timestamp it
/// saw: together with the pinned read timestamp, the oldest it may read at from now on.
#[derive(Default)]
pub(super) struct ReadFloor {
    state: Mutex<Floor>,
}

#[derive(Default)]
struct Floor {
    held: BTreeMap<u64, usize>,
    newest: u64,
}

/// A call's read timestamp, held in the floor until dropped: `Some` the pinned one, `None` a
/// fresh one (PD's next, so at or above what is held).
pub(super) struct At {
    pub ts: Option<u64>,
    held: u64,
    floor: Arc<ReadFloor>,
}

impl ReadFloor {
    fn hold(self: &Arc<Self>, f: &mut Floor, ts: u64, pinned: bool) -> At {
        *f.held.entry(ts).or_default() += 1;
        At {
            ts: pinned.then_some(ts),
            held: ts,
            floor: self.clone(),
        }
    }

    /// A read at the pinned timestamp `pinned` (loaded here, so that no safe point computed
    /// meanwhile passes it).
    pub fn pinned(self: &Arc<Self>, pinned: &AtomicU64) -> At {
        let mut f = self.state.lock();
        let ts = pinned.load(Ordering::SeqCst);
        self.hold(&mut f, ts, true)
    }

    /// A call at a timestamp it takes from PD (a fresh read, a transaction, a re-pin).
    pub fn fresh(self: &Arc<Self>) -> At {
        let mut f = self.state.lock();
        let ts = f.newest;
        self.hold(&mut f, ts, false)
    }

    /// PD handed out `ts` (a read's, a commit's).
    pub fn saw(&self, ts: u64) {
        let mut f = self.state.lock();
        f.newest = f.newest.max(ts);
    }

    /// The oldest timestamp a call of this process reads at now or may read at later, given
    /// the pinned one (0: none yet); 0 before PD handed out any.
    pub fn oldest(&self, pinned: Option<&AtomicU64>) -> u64 {
        let f = self.state.lock();
        let mut oldest = f.newest;
        if let Some(p) = pinned.map(|p| p.load(Ordering::SeqCst)).filter(|p| *p > 0) {
            oldest = oldest.min(p);
        }
        if let Some((ts, _)) = f.held.first_key_value() {
            oldest = oldest.min(*ts);
        }
        oldest
    }
}

impl Drop for At {
    fn drop(&mut self) {
        let mut f = self.floor.state.lock();
        if let Some(n) = f.held.get_mut(&self.held) {
            *n -= 1;
            if *n == 0 {
                f.held.remove(&self.held);
            }
        }
    }
}

/// What the keeper needs of the store.
pub(super) struct Keeper {
    pub client: TransactionClient,
    /// PD endpoints, the one that answered at start first.
    pub pd: Vec<String>,
    pub cluster_id: u64,
    pub service: String,
    /// The oldest timestamp this process may read at ([`ReadFloor::oldest`]).
    pub oldest: Box<dyn Fn() -> u64 + Send + Sync>,
}

/// The renewals' state, for logging changes only.
#[derive(Default)]
pub(super) struct Renewals {
    failing: bool,
    refused: bool,
}

/// The TTL of this process's service safe point.
pub(super) fn ttl(part: GcPart) -> i64 {
    SERVICE_TTL.max(part.every * 6).as_secs() as i64
}

/// One renewal: this process's service safe point to the oldest timestamp it may read at.
/// The timestamp, if PD took it.
pub(super) async fn renew(k: &Keeper, part: GcPart, state: &mut Renewals) -> Option<u64> {
    let mine = (k.oldest)();
    if mine == 0 {
        return None;
    }
    let least = match update_service(k, &k.service, ttl(part), mine).await {
        Ok(least) => least,
        Err(e) => {
            if !state.failing {
                tracing::warn!(service = %k.service, error = %e, "TiKV service safe point not renewed");
            }
            state.failing = true;
            return None;
        }
    };
    if state.failing {
        tracing::info!(service = %k.service, "TiKV service safe point renewed again");
        state.failing = false;
    }
    // PD refuses a service safe point below the least one: versions below it may go.
    let refused = least.min_safe_point > mine;
    if refused && !state.refused {
        tracing::warn!(
            service = %k.service,
            mine,
            least = least.min_safe_point,
            of = %String::from_utf8_lossy(&least.service_id),
            "PD refused the service safe point (below the least); old reads may fail"
        );
    }
    state.refused = refused;
    tracing::debug!(
        mine,
        least = least.min_safe_point,
        ttl = least.ttl,
        "service safe point"
    );
    (!refused).then_some(mine)
}

/// Renews every `part.every` (and, `global`, runs a GC round as the cluster's GC worker),
/// for as long as the store's runtime runs.
pub(super) async fn keep(k: Arc<Keeper>, part: GcPart, mut state: Renewals) {
    let mut tick = tokio::time::interval(part.every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(mine) = renew(&k, part, &mut state).await else {
            continue;
        };
        if part.global {
            if let Err(e) = global_gc(&k, mine).await {
                tracing::warn!(error = %e, "global TiKV GC round failed");
            }
        }
    }
}

/// As the cluster's GC worker: `gc_worker`'s service safe point to `mine`, then locks below
/// the least service safe point resolved over the whole key space and the GC safe point
/// moved to it.
async fn global_gc(k: &Keeper, mine: u64) -> Result<(), String> {
    let least = update_service(k, GC_WORKER, i64::MAX, mine).await?;
    let safe_point = least.min_safe_point.min(mine);
    let ts = tikv_client::Timestamp::from_version(safe_point);
    match tokio::time::timeout(GLOBAL_GC_FOR, k.client.gc(ts)).await {
        Ok(Ok(_)) => {
            tracing::debug!(safe_point, "TiKV GC safe point moved");
            Ok(())
        }
        Ok(Err(e)) => Err(super::tikv_connect::describe(&e)),
        Err(_) => Err(format!("no GC round within {GLOBAL_GC_FOR:?}")),
    }
}

/// PD's `UpdateServiceGCSafePoint` for `service`, through the first endpoint that answers;
/// the least service safe point after.
async fn update_service(
    k: &Keeper,
    service: &str,
    ttl: i64,
    safe_point: u64,
) -> Result<UpdateServiceGcSafePointResponse, String> {
    let mut errors = Vec::new();
    for ep in &k.pd {
        let req = UpdateServiceGcSafePointRequest {
            header: Some(RequestHeader {
                cluster_id: k.cluster_id,
                sender_id: 0,
            }),
            service_id: service.as_bytes().to_vec(),
            ttl,
            safe_point,
        };
        let resp: Result<UpdateServiceGcSafePointResponse, _> =
            pd_call(ep, "UpdateServiceGCSafePoint", req).await;
        match resp {
            Ok(r) => match header_ok(r.header.as_ref()) {
                Ok(_) => return Ok(r),
                Err(e) => errors.push(format!("{ep}: {e}")),
            },
            Err(e) => errors.push(format!(
                "{ep}: {}",
                e.in_answer_to("UpdateServiceGCSafePoint")
            )),
        }
    }
    Err(errors.join("; "))
}

/// This process's service id: `saker-<keyspace>-<random>`.
pub(super) fn service_id(keyspace: &str) -> String {
    format!("saker-{keyspace}-{:08x}", rand::random::<u32>())
}

#[derive(Clone, PartialEq, prost::Message)]
struct UpdateServiceGcSafePointRequest {
    #[prost(message, optional, tag = "1")]
    header: Option<RequestHeader>,
    #[prost(bytes = "vec", tag = "2")]
    service_id: Vec<u8>,
    #[prost(int64, tag = "3")]
    ttl: i64,
    #[prost(uint64, tag = "4")]
    safe_point: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UpdateServiceGcSafePointResponse {
    #[prost(message, optional, tag = "1")]
    header: Option<ResponseHeader>,
    #[prost(bytes = "vec", tag = "2")]
    service_id: Vec<u8>,
    #[prost(int64, tag = "3")]
    ttl: i64,
    #[prost(uint64, tag = "4")]
    min_safe_point: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_oldest_held_pinned_or_seen_timestamp() {
        let floor = Arc::new(ReadFloor::default());
        let pinned = AtomicU64::new(0);
        assert_eq!(floor.oldest(Some(&pinned)), 0, "nothing seen yet");
        floor.saw(100);
        assert_eq!(
            floor.oldest(Some(&pinned)),
            100,
            "a fresh call reads at 100 or later"
        );
        pinned.store(90, Ordering::SeqCst);
        let read = floor.pinned(&pinned);
        assert_eq!(read.ts, Some(90));
        // The pin moves on; the read still runs at 90.
        pinned.store(120, Ordering::SeqCst);
        floor.saw(130);
        assert_eq!(floor.oldest(Some(&pinned)), 90);
        let fresh = floor.fresh();
        assert_eq!(fresh.ts, None);
        drop(read);
        assert_eq!(floor.oldest(Some(&pinned)), 120);
        drop(fresh);
        pinned.store(140, Ordering::SeqCst);
        assert_eq!(
            floor.oldest(Some(&pinned)),
            130,
            "a fresh call reads at 130 or later"
        );
        assert_eq!(floor.oldest(None), 130);
    }
}
