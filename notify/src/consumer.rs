//! The consumer: runs where the coordinator is active (one per cluster, moving with it, as
//! the lifecycle worker does) and, pass after pass, reads each group's change feed of each
//! bucket that has a notification configuration, sends the events its rules match to their
//! targets, one batch per target per page, and acknowledges the page only when every target
//! took its batch (a 2xx for a webhook, a PubAck for NATS, a confirm for AMQP). Each
//! target's sink is kept while its definition stays, so a broker connection is reused.
//!
//! So delivery is at least once: a target that fails holds the page back (retried with
//! backoff, per bucket and group), and when the page goes again the targets that had taken it
//! get it twice. Order per key holds: a key's changes are one group's feed, read and sent in
//! seq order, and a page goes whole or not at all. A consumer that dies between a delivery
//! and its acknowledgement sends the page again from wherever the coordinator goes next.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use saker_client::Cluster;
use saker_coordinator::StateStore;
use saker_rpc::{FeedEvent, FeedPage};
use serde::{Deserialize, Serialize};

use crate::event::{self, Context};
use crate::metrics;
use crate::rules::{configured_buckets, NotificationConfig};
use crate::sink::{sink_for, Sink};
use crate::target::{self, Target};
use crate::NotifyError;

/// Records read (and delivered, per target, in one request) at a time.
pub const PAGE: u32 = 100;
/// Pages one pass takes from one group's feed of one bucket before going on to the next
/// (so one busy bucket does not hold the others back).
const PAGES_PER_PASS: usize = 20;
/// Feeds (bucket, group) a pass drains at once.
const FEEDS_AT_ONCE: usize = 16;
/// How long a pass uses the configurations and targets an earlier one read (so a cluster
/// with none configured costs one scan of the records a second, not one a pass).
const CONFIG_REFRESH: Duration = Duration::from_secs(1);
/// The first retry of a failed delivery waits this long, doubling up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What a target has seen, for `saker admin notify status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetStatus {
    pub name: String,
    pub arn: String,
    pub endpoint: String,
    /// Event records delivered since this consumer started.
    pub delivered: u64,
    /// Failed deliveries since this consumer started.
    pub failed: u64,
    /// Records waiting in the feeds of the buckets that route to it, at the last pass.
    pub queue_depth: u64,
    /// Age of the oldest of them, in seconds.
    pub lag_seconds: u64,
    pub last_error: Option<String>,
}

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Feed records acknowledged (delivered, or matching no rule).
    pub acknowledged: u64,
    /// Pages held back by a failed delivery.
    pub failed: u64,
    /// Records still in the feeds after the pass.
    pub pending: u64,
    /// Some feed had more full pages than a pass takes.
    pub more: bool,
}

/// A (bucket, group) feed whose last delivery failed.
struct Backoff {
    failures: u32,
    until: Instant,
}

/// The configured buckets and the targets by ARN, as read at a time.
type Config = (Vec<(String, NotificationConfig)>, BTreeMap<String, Target>);

/// How long one long-poll of a group's feed clock waits.
const LONG_POLL: Duration = Duration::from_secs(10);
/// With nothing waiting and no wake, a pass runs anyway this often (records a group applied
/// under a leader whose wake was lost, at worst this late).
const QUIET_PASS: Duration = Duration::from_secs(5);
/// Between two passes while records wait (a target failing: its backoff decides).
const RETRY_PASS: Duration = Duration::from_millis(250);
/// After a pass that delivered everything there was, the next waits this long for records
/// to gather: under steady writes each pass would otherwise send and acknowledge a page of a
/// record or two per group, one raft entry per page (the acknowledgements cost the writes
/// more than the events themselves).
const LINGER: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Inner {
    config: Option<(Instant, Arc<Config>)>,
    backoff: HashMap<(String, u32), Backoff>,
    status: BTreeMap<String, TargetStatus>,
    /// Records each bucket's feed dropped at its cap (all groups, ever), at the last pass.
    dropped: BTreeMap<String, u64>,
    /// Each target's sink by ARN, with the definition it was made for.
    sinks: HashMap<String, (Target, Arc<dyn Sink>)>,
}

/// The notification consumer of one cluster.
pub struct Notifier {
    cluster: Arc<Cluster>,
    state: Arc<dyn StateStore>,
    region: String,
    http: reqwest::Client,
    inner: Mutex<Inner>,
    /// Raised by a group whose feed clock moved.
    wake: tokio::sync::Notify,
}

/// What draining one group's feed of one bucket did.
struct Drained {
    /// Where the feed stands after.
    seen: Seen,
    acknowledged: u64,
    failed: u64,
    /// Full pages were still coming when the pass's share ended.
    more: bool,
}

/// The older of two record times, either maybe unknown.
fn older(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One feed read: what the rest of a pass needs of it.
struct Seen {
    depth: u64,
    oldest_ns: Option<i64>,
    dropped: u64,
}

impl Notifier {
    pub fn new(cluster: Arc<Cluster>, state: Arc<dyn StateStore>, region: &str) -> Self {
        Self {
            cluster,
            state,
            region: region.to_string(),
            http: reqwest::Client::new(),
            inner: Mutex::new(Inner::default()),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Runs passes for ever while `active()` (the coordinator is active here): at once after
    /// a pass that left full pages behind, [`LINGER`] after one that delivered if records came
    /// meanwhile, and otherwise when a group's feed clock moves (each group long-polled,
    /// [`LONG_POLL`]) or every [`RETRY_PASS`] while records wait (a failing target's backoff
    /// decides) or [`QUIET_PASS`]. Idle, it costs one waiting request per group.
    pub async fn run(self: Arc<Self>, active: Arc<dyn Fn() -> bool + Send + Sync>) {
        for g in self.cluster.group_ids() {
            tokio::spawn(self.clone().watch(g, active.clone()));
        }
        loop {
            if !active() {
                tokio::time::sleep(RETRY_PASS).await;
                continue;
            }
            let report = match self.pass().await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "notification pass failed");
                    PassReport {
                        pending: 1,
                        ..Default::default()
                    }
                }
            };
            if report.more {
                continue;
            }
            if report.acknowledged > 0 {
                // The wake below then finds its permit if records came meanwhile.
                tokio::time::sleep(LINGER).await;
            }
            let quiet = if report.pending > 0 {
                RETRY_PASS
            } else {
                QUIET_PASS
            };
            if tokio::time::timeout(quiet, self.wake.notified())
                .await
                .is_ok()
            {
                // Records were written: for a bucket whose configuration may be newer than
                // the copy this consumer has.
                self.inner.lock().config = None;
            }
        }
    }

    /// Long-polls group `g`'s feed clock and wakes the passes when it moves.
    async fn watch(self: Arc<Self>, g: u32, active: Arc<dyn Fn() -> bool + Send + Sync>) {
        let mut seen = 0;
        loop {
            if !active() {
                tokio::time::sleep(RETRY_PASS).await;
                continue;
            }
            match self.cluster.feed_wait(g, seen, LONG_POLL).await {
                Ok(now) if now != seen => {
                    seen = now;
                    // A permit is kept if no pass waits now: the next one does not wait.
                    self.wake.notify_one();
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(group = g, error = %e, "feed clock not read");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// The targets as the last passes saw them.
    pub fn status(&self) -> Vec<TargetStatus> {
        self.inner.lock().status.values().cloned().collect()
    }

    /// The buckets whose feeds dropped records at their cap, with how many (all groups,
    /// ever), as the last pass saw them.
    pub fn dropped(&self) -> Vec<(String, u64)> {
        let inner = self.inner.lock();
        inner
            .dropped
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(b, n)| (b.clone(), *n))
            .collect()
    }

    /// What this consumer delivered to `arn` and its last error, into `status`.
    pub fn add_counts(&self, status: &mut TargetStatus) {
        if let Some(s) = self.inner.lock().status.get(&status.arn) {
            status.delivered = s.delivered;
            status.failed = s.failed;
            status.last_error = s.last_error.clone();
        }
    }

    /// The configured buckets and the targets, read again past [`CONFIG_REFRESH`].
    async fn config(&self) -> Result<Arc<Config>, NotifyError> {
        if let Some((at, c)) = &self.inner.lock().config {
            if at.elapsed() < CONFIG_REFRESH {
                return Ok(c.clone());
            }
        }
        let buckets = configured_buckets(&self.state).await?;
        let targets = target::list(&self.state)
            .await?
            .into_iter()
            .map(|t| (t.arn(), t))
            .collect();
        let c = Arc::new((buckets, targets));
        self.inner.lock().config = Some((Instant::now(), c.clone()));
        Ok(c)
    }

    /// One pass over every configured bucket's feed in every group, [`FEEDS_AT_ONCE`] feeds
    /// at a time (a slow target holds back only its own buckets' feeds).
    pub async fn pass(&self) -> Result<PassReport, NotifyError> {
        use futures::StreamExt;
        let config = self.config().await?;
        let (buckets, targets) = (&config.0, &config.1);
        let groups = self.cluster.group_ids();
        let mut feeds = Vec::with_capacity(buckets.len() * groups.len());
        for (bucket, config) in buckets {
            for &g in &groups {
                feeds.push(self.drain_one(bucket, config, targets, g));
            }
        }
        let results: Vec<_> = futures::stream::iter(feeds)
            .buffer_unordered(FEEDS_AT_ONCE)
            .collect()
            .await;
        let mut report = PassReport::default();
        // Per bucket: (depth, oldest record's time, dropped).
        let mut per_bucket: BTreeMap<&String, (u64, Option<i64>, u64)> = BTreeMap::new();
        for (bucket, g, drained) in results {
            let d = match drained {
                Ok(d) => d,
                Err(e) => {
                    tracing::debug!(bucket, group = g, error = %e, "change feed not read");
                    continue;
                }
            };
            report.acknowledged += d.acknowledged;
            report.failed += d.failed;
            report.more |= d.more;
            let e = per_bucket.entry(bucket).or_default();
            e.0 += d.seen.depth;
            e.1 = older(e.1, d.seen.oldest_ns);
            e.2 += d.seen.dropped;
        }
        // Per target ARN: (depth, oldest record's time).
        let mut queued: BTreeMap<String, (u64, Option<i64>)> = BTreeMap::new();
        let mut drops = BTreeMap::new();
        for (bucket, config) in buckets {
            let (depth, oldest, dropped) = per_bucket.get(bucket).copied().unwrap_or_default();
            report.pending += depth;
            drops.insert(bucket.clone(), dropped);
            metrics::DROPPED
                .with_label_values(&[bucket.as_str()])
                .set(dropped as i64);
            for q in &config.queues {
                let e = queued.entry(q.arn.clone()).or_default();
                e.0 += depth;
                e.1 = older(e.1, oldest);
            }
        }
        let now = saker_client::now_ns();
        let mut inner = self.inner.lock();
        inner.dropped = drops;
        inner.status.retain(|arn, _| targets.contains_key(arn));
        inner.sinks.retain(|arn, _| targets.contains_key(arn));
        for (arn, t) in targets {
            let (depth, oldest) = queued.get(arn).copied().unwrap_or_default();
            let lag = oldest.map_or(0, |o| ((now - o).max(0) / 1_000_000_000) as u64);
            metrics::QUEUE_DEPTH
                .with_label_values(&[t.name.as_str()])
                .set(depth as i64);
            metrics::LAG
                .with_label_values(&[t.name.as_str()])
                .set(lag as i64);
            let s = inner.status.entry(arn.clone()).or_default();
            s.name = t.name.clone();
            s.arn = arn.clone();
            s.endpoint = t.kind.endpoint().to_string();
            s.queue_depth = depth;
            s.lag_seconds = lag;
        }
        Ok(report)
    }

    /// [`Notifier::drain`], with what it drained.
    async fn drain_one<'a>(
        &self,
        bucket: &'a String,
        config: &NotificationConfig,
        targets: &BTreeMap<String, Target>,
        g: u32,
    ) -> (&'a String, u32, Result<Drained, NotifyError>) {
        (bucket, g, self.drain(bucket, config, targets, g).await)
    }

    /// Delivers and acknowledges pages of `bucket`'s feed in group `g` until it is empty, a
    /// delivery fails, or the pass has taken its share.
    async fn drain(
        &self,
        bucket: &str,
        config: &NotificationConfig,
        targets: &BTreeMap<String, Target>,
        g: u32,
    ) -> Result<Drained, NotifyError> {
        let (mut acknowledged, mut failed, mut more) = (0, 0, false);
        let key = (bucket.to_string(), g);
        let waiting = self
            .inner
            .lock()
            .backoff
            .get(&key)
            .is_some_and(|b| b.until > Instant::now());
        // Backing off, only where the feed stands (for the depth and lag) is read.
        let first = if waiting { 1 } else { PAGE };
        let mut page = self.cluster.feed_read(g, bucket, 0, first).await?;
        for n in 0..PAGES_PER_PASS {
            if waiting || page.events.is_empty() {
                break;
            }
            let last = page.events.last().map_or(0, |e| e.seq);
            match self.deliver(bucket, config, targets, &page.events).await {
                Ok(()) => {
                    self.inner.lock().backoff.remove(&key);
                    let after = self.cluster.feed_ack(g, bucket, last).await?;
                    acknowledged += page.events.len() as u64;
                    // A page short of full was the feed's end a moment ago: what came since
                    // waits for the next pass, to go in a fuller page.
                    if after.depth() == 0 || (page.events.len() as u32) < PAGE {
                        page = after;
                        break;
                    }
                    more = n + 1 == PAGES_PER_PASS;
                    page = self.cluster.feed_read(g, bucket, 0, PAGE).await?;
                }
                Err(()) => {
                    failed += 1;
                    let mut inner = self.inner.lock();
                    let b = inner.backoff.entry(key.clone()).or_insert(Backoff {
                        failures: 0,
                        until: Instant::now(),
                    });
                    b.failures = b.failures.saturating_add(1);
                    let wait = FIRST_BACKOFF
                        .saturating_mul(1 << b.failures.min(16))
                        .min(MAX_BACKOFF);
                    b.until = Instant::now() + wait;
                    break;
                }
            }
        }
        Ok(Drained {
            seen: seen(&page),
            acknowledged,
            failed,
            more,
        })
    }

    /// The sink of `target` (ARN `arn`): the one kept while its definition is the same.
    fn sink(&self, arn: &str, target: &Target) -> Arc<dyn Sink> {
        let mut inner = self.inner.lock();
        if let Some((made_for, sink)) = inner.sinks.get(arn) {
            if made_for == target {
                return sink.clone();
            }
        }
        let sink: Arc<dyn Sink> = sink_for(target, &self.http).into();
        inner
            .sinks
            .insert(arn.to_string(), (target.clone(), sink.clone()));
        sink
    }

    /// Sends `events` to the targets whose rules match them: `Err` if any target did not
    /// take its batch (each failure counted and kept in the status).
    async fn deliver(
        &self,
        bucket: &str,
        config: &NotificationConfig,
        targets: &BTreeMap<String, Target>,
        events: &[FeedEvent],
    ) -> Result<(), ()> {
        let mut batches: BTreeMap<&str, Vec<event::Record>> = BTreeMap::new();
        for ev in events {
            let Some(name) = ev.kind.s3_event() else {
                continue;
            };
            for rule in &config.queues {
                if !rule.matches(name, &ev.key) {
                    continue;
                }
                let ctx = Context {
                    bucket,
                    region: &self.region,
                    configuration_id: &rule.id,
                    owner: "",
                };
                batches
                    .entry(rule.arn.as_str())
                    .or_default()
                    .push(event::record(&ctx, name, ev));
            }
        }
        let mut ok = true;
        let mut sends = Vec::new();
        for (arn, records) in batches {
            let Some(target) = targets.get(arn) else {
                // Removal is refused while a configuration names a target, so this is a
                // configuration stored before its target was made: held back, not lost.
                tracing::warn!(bucket, arn, "notification target not defined: events held");
                ok = false;
                continue;
            };
            let n = records.len() as u64;
            let sink = self.sink(arn, target);
            // The targets of one page are sent to at once (a slow one delays the others by
            // its own time only).
            sends.push(async move { (arn, target, n, sink.send(event::body(&records)).await) });
        }
        for (arn, target, n, result) in futures::future::join_all(sends).await {
            let mut inner = self.inner.lock();
            let status = inner.status.entry(arn.to_string()).or_default();
            match result {
                Ok(()) => {
                    metrics::DELIVERED
                        .with_label_values(&[target.name.as_str()])
                        .inc_by(n);
                    status.delivered += n;
                }
                Err(e) => {
                    metrics::FAILED
                        .with_label_values(&[target.name.as_str()])
                        .inc();
                    status.failed += 1;
                    // Logged once per change of error, not at every retry.
                    let text = e.to_string();
                    if status.last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(target = target.name, error = %text, "notification delivery failed; retrying");
                    }
                    status.last_error = Some(text);
                    ok = false;
                }
            }
        }
        if ok {
            Ok(())
        } else {
            Err(())
        }
    }
}

/// Where the feeds stand, read now (from any node: the consumer's counts are where it runs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backlog {
    /// Every target with the records waiting for it and the age of the oldest.
    pub targets: Vec<TargetStatus>,
    /// Buckets whose feeds dropped records at their cap, with how many (all groups, ever).
    pub dropped: BTreeMap<String, u64>,
}

/// Reads every configured bucket's feed head in every group ([`Backlog`]).
pub async fn backlog(
    cluster: &Cluster,
    state: &Arc<dyn StateStore>,
) -> Result<Backlog, NotifyError> {
    let mut out: BTreeMap<String, TargetStatus> = target::list(state)
        .await?
        .into_iter()
        .map(|t| {
            let s = TargetStatus {
                name: t.name.clone(),
                arn: t.arn(),
                endpoint: t.kind.endpoint().to_string(),
                ..Default::default()
            };
            (t.arn(), s)
        })
        .collect();
    let mut dropped = BTreeMap::new();
    let now = saker_client::now_ns();
    for (bucket, config) in configured_buckets(state).await? {
        let (mut depth, mut oldest, mut lost) = (0, None::<i64>, 0);
        for g in cluster.group_ids() {
            let s = seen(&cluster.feed_read(g, &bucket, 0, 1).await?);
            depth += s.depth;
            lost += s.dropped;
            oldest = older(oldest, s.oldest_ns);
        }
        if lost > 0 {
            dropped.insert(bucket.clone(), lost);
        }
        for q in &config.queues {
            if let Some(t) = out.get_mut(&q.arn) {
                t.queue_depth += depth;
                let lag = oldest.map_or(0, |o| ((now - o).max(0) / 1_000_000_000) as u64);
                t.lag_seconds = t.lag_seconds.max(lag);
            }
        }
    }
    Ok(Backlog {
        targets: out.into_values().collect(),
        dropped,
    })
}

fn seen(page: &FeedPage) -> Seen {
    Seen {
        depth: page.depth(),
        oldest_ns: page.events.first().map(|e| e.time_ns),
        dropped: page.dropped,
    }
}
