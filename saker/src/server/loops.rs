//! The once-per-cluster background passes of a server: garbage collection (chunks and
//! remote tier copies), the chunk scrub and repair, lifecycle and balancing rounds, each
//! running only where the coordinator is active when the cluster is replicated.

use std::sync::Arc;
use std::time::Duration;

use saker_chunkstore::RepairReport;
use saker_client::{collect_garbage, Cluster};
use saker_coordinator::benefit::BenefitBalancer;
use saker_coordinator::NamespaceCoordinator;
use saker_gateway::Gateway;

use std::sync::RwLock;

/// The coordinator active in this process, if any (the admin API's exception table).
#[derive(Clone, Default)]
pub struct Active(Arc<RwLock<Option<Arc<NamespaceCoordinator>>>>);

impl Active {
    /// A coordinator that is always active here (one process).
    pub fn fixed(ns: Arc<NamespaceCoordinator>) -> Self {
        Self(Arc::new(RwLock::new(Some(ns))))
    }

    pub fn get(&self) -> Option<Arc<NamespaceCoordinator>> {
        self.0.read().expect("active coordinator lock").clone()
    }

    /// Makes `ns` the active coordinator (`None`: none here); answers the one it replaces.
    pub(crate) fn set(
        &self,
        ns: Option<Arc<NamespaceCoordinator>>,
    ) -> Option<Arc<NamespaceCoordinator>> {
        std::mem::replace(&mut *self.0.write().expect("active coordinator lock"), ns)
    }
}

/// Balancing of the groups, as `saker server` was told.
#[derive(Clone, Copy, Debug)]
pub struct Balance {
    pub every: Duration,
    pub epsilon: f64,
    pub policy: BalancePolicy,
    /// The `even` policy leaves namespaces smaller than this alone.
    pub min_inodes: u64,
    /// The groups' cost window (the `benefit` policy plans once per window).
    pub window: Duration,
}

/// How the balancer picks exception-table entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BalancePolicy {
    /// FalconFS: redirect frequent file names while a group holds more than 1/groups +
    /// epsilon of the inodes.
    Even,
    /// Origami: every cost window, the moves with the largest predicted cut of the job
    /// completion time (the most loaded group's work), their own cost counted.
    Benefit,
}

/// When the once-per-cluster passes of a gateway run, as `saker server` was told.
#[derive(Clone, Copy, Debug)]
pub struct Passes {
    /// Unreferenced chunks older than this are removed by the leak scrub.
    pub scrub_age: Duration,
    pub gc_interval: Duration,
    pub scrub_every: Duration,
    /// The scrub's pace, in MiB/s.
    pub scrub_rate: u64,
    /// The noted and the full repair pass.
    pub repair_every: (Duration, Duration),
    /// The repair's pace, in MiB/s.
    pub repair_rate: u64,
    pub lifecycle_every: Duration,
}

/// Starts the once-per-cluster passes of a gateway process: garbage collection, the chunk
/// scrub and lifecycle, and with `repair` (a replicated cluster) the repair passes; with
/// `only_active`, each runs only while that coordinator is active here.
pub(crate) fn spawn_passes(
    cluster: &Arc<Cluster>,
    gateway: Gateway,
    passes: Passes,
    only_active: Option<Active>,
    repair: bool,
) {
    let tiers = gateway.tiers().clone();
    let (age, interval) = (passes.scrub_age, passes.gc_interval);
    tokio::spawn(gc_loop(
        cluster.clone(),
        tiers,
        age,
        interval,
        only_active.clone(),
    ));
    if repair {
        let (every, rate) = (passes.repair_every, passes.repair_rate);
        tokio::spawn(repair_loop(
            cluster.clone(),
            every,
            rate,
            only_active.clone(),
        ));
    }
    let (every, rate) = (passes.scrub_every, passes.scrub_rate);
    tokio::spawn(scrub_loop(
        cluster.clone(),
        every,
        rate,
        only_active.clone(),
    ));
    tokio::spawn(notify_loop(
        cluster.clone(),
        gateway.tiers().state().clone(),
        only_active.clone(),
    ));
    tokio::spawn(lifecycle_loop(gateway, passes.lifecycle_every, only_active));
}

/// The notification consumer of this process, once it started (the admin API shows its
/// counts).
pub(crate) static NOTIFIER: std::sync::OnceLock<Arc<saker_notify::Notifier>> =
    std::sync::OnceLock::new();

/// The bucket notification consumer ([`saker_notify::Notifier`]): with `only_active`, only
/// while that coordinator is active here (one consumer per cluster, moving with it).
async fn notify_loop(
    cluster: Arc<Cluster>,
    state: Arc<dyn saker_coordinator::StateStore>,
    only_active: Option<Active>,
) {
    let notifier = NOTIFIER
        .get_or_init(|| Arc::new(saker_notify::Notifier::new(cluster, state, "")))
        .clone();
    notifier
        .run(Arc::new(move || active_here(only_active.as_ref())))
        .await
}

/// Garbage collection every `interval`: chunks whose grace period ended are deleted. The leak
/// scrub (a walk of every chunk and, when some are older than `scrub_age`, of every group's
/// chunk references) runs on the first pass and then once every `scrub_age / 4`, not every
/// pass: its cost grows with the namespace, and the chunks it finds can wait. With
/// `only_active`, only while that coordinator is active here (once per replicated cluster).
async fn gc_loop(
    cluster: Arc<Cluster>,
    tiers: Arc<saker_tier::Tiers>,
    scrub_age: Duration,
    interval: Duration,
    only_active: Option<Active>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_scrub: Option<tokio::time::Instant> = None;
    loop {
        tick.tick().await;
        if !active_here(only_active.as_ref()) {
            continue;
        }
        let scrub = last_scrub.is_none_or(|t| t.elapsed() >= scrub_age / 4);
        let started = tokio::time::Instant::now();
        let result = collect_garbage(&cluster, scrub_age, scrub).await;
        let remote = tier_garbage(&cluster, &tiers, scrub.then_some(scrub_age)).await;
        if scrub && result.is_ok() && remote {
            last_scrub = Some(started);
        }
        match result {
            Ok(r) if r.released + r.leaked > 0 => {
                tracing::info!(
                    released = r.released,
                    leaked = r.leaked,
                    "garbage collected"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "garbage collection failed"),
        }
    }
}

/// Deletes the remote tier copies whose grace period ended and, with `scrub_age`, this
/// cluster's remote orphans older than it; answers whether it all went through.
async fn tier_garbage(
    cluster: &Cluster,
    tiers: &saker_tier::Tiers,
    scrub_age: Option<Duration>,
) -> bool {
    let mut ok = true;
    match saker_tier::gc::collect(cluster, tiers).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "remote tier copies collected"),
        Err(e) => {
            ok = false;
            tracing::warn!(error = %e, "remote tier collection failed");
        }
    }
    if let Some(age) = scrub_age {
        match saker_tier::gc::scrub(cluster, tiers, age).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "remote tier orphans deleted"),
            Err(e) => {
                ok = false;
                tracing::warn!(error = %e, "remote tier scrub failed");
            }
        }
    }
    ok
}

/// Whether a once-per-cluster task runs here now: always without `only_active`, else while
/// that coordinator is active here.
fn active_here(only_active: Option<&Active>) -> bool {
    only_active.is_none_or(|a| a.get().is_some())
}

/// Runs `pass` every `every` (never when it is zero), with `only_active` only while that
/// coordinator is active here.
async fn periodically<F, Fut>(every: Duration, only_active: Option<Active>, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if every.is_zero() {
        return;
    }
    loop {
        tokio::time::sleep(every).await;
        if active_here(only_active.as_ref()) {
            pass().await;
        }
    }
}

/// Runs a chunk scrub (every copy read whole, CRC-checked, bad ones rewritten) every `every`
/// at `rate_mib` MiB/s.
async fn scrub_loop(
    cluster: Arc<Cluster>,
    every: Duration,
    rate_mib: u64,
    only_active: Option<Active>,
) {
    periodically(every, only_active, || async {
        match saker_client::scrub_chunks(&cluster, rate_mib << 20).await {
            Ok(r) if r.corrupt + r.missing > 0 => tracing::warn!(
                verified = r.verified,
                corrupt = r.corrupt,
                missing = r.missing,
                repaired = r.repaired,
                "chunk scrub found bad copies"
            ),
            Ok(r) => tracing::info!(verified = r.verified, bytes = r.bytes, "chunk scrub"),
            Err(e) => tracing::warn!(error = %e, "chunk scrub failed"),
        }
    })
    .await
}

/// Runs a lifecycle pass every `every` (never when it is zero), with `only_active` only
/// while that coordinator is active here.
async fn lifecycle_loop(gateway: Gateway, every: Duration, only_active: Option<Active>) {
    periodically(every, only_active, || async {
        match gateway.lifecycle_pass(None).await {
            Ok(s)
                if s.expired
                    + s.noncurrent_expired
                    + s.markers_removed
                    + s.uploads_aborted
                    + s.transitioned
                    + s.restores_dropped
                    > 0 =>
            {
                tracing::info!(
                    expired = s.expired,
                    noncurrent = s.noncurrent_expired,
                    markers = s.markers_removed,
                    uploads = s.uploads_aborted,
                    transitioned = s.transitioned,
                    restores_dropped = s.restores_dropped,
                    errors = s.errors,
                    "lifecycle pass"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "lifecycle pass failed"),
        }
    })
    .await
}

/// Runs a repair pass over the chunks writes noted as short every `every` (and over the
/// erasure-coded ones degraded reads here found short), and a full pass (every referenced
/// chunk to all its replicas) every `full_every`, at `rate_mib` MiB/s.
async fn repair_loop(
    cluster: Arc<Cluster>,
    (every, full_every): (Duration, Duration),
    rate_mib: u64,
    only_active: Option<Active>,
) {
    let noted = periodically(every, only_active.clone(), || async {
        log_repair(
            "noted",
            saker_client::repair_noted_chunks(&cluster, rate_mib << 20).await,
        )
    });
    let full = periodically(full_every, only_active, || async {
        log_repair(
            "full",
            saker_client::repair_chunks(&cluster, rate_mib << 20).await,
        )
    });
    // What this process's degraded reads of erasure-coded chunks noted (in its memory, so on
    // every node, not only the coordinator's).
    let degraded = periodically(every, None, || async {
        log_repair(
            "degraded",
            Ok(saker_client::repair_degraded_chunks(&cluster, rate_mib << 20).await),
        )
    });
    tokio::join!(noted, full, degraded);
}

fn log_repair(kind: &str, report: Result<RepairReport, saker_client::ClientError>) {
    match report {
        Ok(r) if r.under_replicated > 0 || r.failed > 0 => tracing::info!(
            kind,
            scanned = r.scanned,
            under_replicated = r.under_replicated,
            repaired = r.repaired,
            failed = r.failed,
            lost = r.lost,
            "chunk repair pass"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(kind, error = %e, "chunk repair pass failed"),
    }
}

/// Periodic balancing rounds: `even` every `every` (none when it is zero), `benefit` once per
/// cost window.
pub(crate) async fn balance_loop(namespace: Arc<NamespaceCoordinator>, settings: Balance) {
    match settings.policy {
        BalancePolicy::Even => {
            periodically(settings.every, None, || async {
                let start = std::time::Instant::now();
                let round = namespace.balance_once(
                    settings.epsilon,
                    BALANCE_MAX_ENTRIES,
                    settings.min_inodes,
                );
                if let Err(e) = round.await {
                    tracing::warn!(error = %e, "balancing round failed");
                }
                BALANCE_ROUNDS
                    .with_label_values(&["even"])
                    .inc_by(start.elapsed().as_secs_f64());
            })
            .await
        }
        BalancePolicy::Benefit => {
            let balancer = tokio::sync::Mutex::new(BenefitBalancer::new(Default::default()));
            let secs = settings.window.as_secs_f64();
            // Twice a window, so each new window is taken soon after it closes.
            periodically(settings.window / 2, None, || async {
                let start = std::time::Instant::now();
                match namespace.balance_benefit_once(&balancer, secs).await {
                    Ok(report) => {
                        BALANCE_PLAN.inc_by(report.plan_micros as f64 / 1e6);
                        if let Some(e) = report.evaluation {
                            PREDICTION_ERROR
                                .with_label_values(&["ewma"])
                                .set(e.ewma_error);
                            PREDICTION_ERROR
                                .with_label_values(&["model"])
                                .set(e.model_error);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "benefit balancing round failed"),
                }
                BALANCE_ROUNDS
                    .with_label_values(&["benefit"])
                    .inc_by(start.elapsed().as_secs_f64());
            })
            .await
        }
    }
}

/// Time in balancing rounds, by policy (calls to the groups and moves included).
static BALANCE_ROUNDS: std::sync::LazyLock<prometheus::CounterVec> =
    std::sync::LazyLock::new(|| {
        prometheus::register_counter_vec!(
            "saker_balance_round_seconds_total",
            "Seconds spent in balancing rounds, by policy (calls to the groups and moves included)",
            &["policy"]
        )
        .expect("metric registers once")
    });

/// The benefit policy's own work: predicting and planning.
static BALANCE_PLAN: std::sync::LazyLock<prometheus::Counter> = std::sync::LazyLock::new(|| {
    prometheus::register_counter!(
        "saker_balance_plan_seconds_total",
        "Seconds the benefit policy spent predicting and planning"
    )
    .expect("metric registers once")
});

/// How the benefit policy's predictors did on the later part of the traces they keep.
static PREDICTION_ERROR: std::sync::LazyLock<prometheus::GaugeVec> =
    std::sync::LazyLock::new(|| {
        prometheus::register_gauge_vec!(
            "saker_balance_prediction_error",
            "Mean absolute error over load of the benefit policy's predictors on held-out windows",
            &["predictor"]
        )
        .expect("metric registers once")
    });

/// New exception entries one balancing round may add.
pub(crate) const BALANCE_MAX_ENTRIES: usize = 16;
