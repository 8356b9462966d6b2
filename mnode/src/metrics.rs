//! MNode metrics (Prometheus, default registry).

use std::sync::LazyLock;

use prometheus::{register_histogram, register_int_counter_vec, Histogram, IntCounterVec};

pub static BATCH_SIZE: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "saker_mnode_batch_size_ops",
        "Operations per executor batch (one raft entry)",
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]
    )
    .expect("metric registers once")
});

/// From an executor batch's proposal until it is applied on its leader: with replication,
/// until a majority has it on disk.
pub static RAFT_COMMIT: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "saker_mnode_raft_commit_seconds",
        "Raft commit latency of executor batches (proposal to applied on the leader)",
        prometheus::exponential_buckets(0.0001, 2.0, 16).expect("valid buckets")
    )
    .expect("metric registers once")
});

/// Change-log records a group's leader holds that their owners have not acknowledged yet.
pub static CHANGE_LOG: LazyLock<prometheus::IntGaugeVec> = LazyLock::new(|| {
    prometheus::register_int_gauge_vec!(
        "saker_mnode_change_log_records",
        "Change-log records (parent-directory updates owed to other groups) not pushed yet, by group",
        &["group"]
    )
    .expect("metric registers once")
});

/// 1 once the raft log journal refused writes after an I/O error (until a restart).
pub static JOURNAL_POISONED: LazyLock<prometheus::IntGauge> = LazyLock::new(|| {
    prometheus::register_int_gauge!(
        "saker_mnode_journal_poisoned",
        "1 once the raft log journal failed a write or sync and refuses writes (restart to recover)"
    )
    .expect("metric registers once")
});

pub static OPS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_mnode_ops_total",
        "MNode operations by op and outcome",
        &["op", "outcome"]
    )
    .expect("metric registers once")
});

fn counter(name: &str, help: &str) -> prometheus::IntCounter {
    prometheus::register_int_counter!(name, help).expect("metric registers once")
}

pub static JOURNAL_DISK_SYNCS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_journal_disk_syncs_total",
        "fdatasyncs of the raft log journal beyond each write's own (durability process: background and fsync(2) syncs)",
    )
});

pub static RAFT_COMMITS_PIGGYBACKED: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_raft_commits_piggybacked_total",
        "Commit-only AppendEntries a leader answered itself, the next message carrying the index",
    )
});

pub static CHANGE_PUSHES: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_change_pushes_total",
        "Change-log records pushed to a parent directory's owner",
    )
});

pub static CHANGE_RECORDS_COMPACTED: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_change_records_compacted_total",
        "Change-log records folded into another before a push (one delta per directory)",
    )
});

pub static REMOTE_LOOKUPS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_remote_lookups_total",
        "Dentry replica misses filled by a lookup at the owner",
    )
});

pub static REPLICA_HITS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_replica_hits_total",
        "Path steps resolved from the dentry replica",
    )
});

pub static INVALIDATIONS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_invalidations_total",
        "Dentry replica invalidations received",
    )
});

pub static MIGRATED: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_migrated_inodes_total",
        "Inodes this MNode moved to another group after their name was redirected",
    )
});

pub static MISDIRECTED: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_misdirected_total",
        "Requests received by a group that does not own them, forwarded",
    )
});

pub static RETRIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_mnode_retries_total",
        "Ops the executor handed back for a retry, by reason",
        &["reason"]
    )
    .expect("metric registers once")
});

pub static REPLICA_SIZE: LazyLock<prometheus::IntGaugeVec> = LazyLock::new(|| {
    prometheus::register_int_gauge_vec!(
        "saker_mnode_replica_dentries",
        "Directory entries cached in the dentry replica, by group",
        &["group"]
    )
    .expect("metric registers once")
});

pub static DIRTY_MARKS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_dirty_marks_total",
        "Dirty marks sent to directory owners (async parent updates, one per owner per batch)",
    )
});

pub static AGGREGATIONS: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_aggregations_total",
        "Directory attribute reads that pulled pending changes first",
    )
});

pub static DIRTY_DIRS: LazyLock<prometheus::IntGaugeVec> = LazyLock::new(|| {
    prometheus::register_int_gauge_vec!(
        "saker_mnode_dirty_dirs",
        "Directories with changes other groups have not pushed yet, by owner group",
        &["group"]
    )
    .expect("metric registers once")
});

pub static INODES: LazyLock<prometheus::IntGaugeVec> = LazyLock::new(|| {
    prometheus::register_int_gauge_vec!(
        "saker_mnode_inodes",
        "Inode records (files and directories) a group holds, counted every minute, by group",
        &["group"]
    )
    .expect("metric registers once")
});

/// Groups this process leads whose raft heartbeats are off because they are idle
/// (`raft::liveness`).
pub static QUIET_GROUPS: LazyLock<prometheus::IntGauge> = LazyLock::new(|| {
    prometheus::register_int_gauge!(
        "saker_mnode_quiet_groups",
        "Groups led here whose raft heartbeats are off while they are idle"
    )
    .expect("metric registers once")
});

/// Peer nodes whose liveness pings say they take no raft entries for want of disk space
/// (`space`): a group with too few voters left with room refuses writes.
pub static PEERS_OUT_OF_SPACE: LazyLock<prometheus::IntGauge> = LazyLock::new(|| {
    prometheus::register_int_gauge!(
        "saker_mnode_peers_out_of_space",
        "Peer nodes below half their disk reserve, which take no raft entries"
    )
    .expect("metric registers once")
});

/// Raft state of each group replica in this process, by group and field: `leader` (1 if this
/// replica leads and serves), `term`, `last_log`, `applied`, `snapshot` (the last
/// log index in the latest snapshot), `voters`, and (on a
/// leader) `max_lag`, the most entries any voter or learner is behind the leader's log.
pub static RAFT: LazyLock<prometheus::IntGaugeVec> = LazyLock::new(|| {
    prometheus::register_int_gauge_vec!(
        "saker_mnode_raft",
        "Raft state of the MNode group replicas in this process, by group and field (leader, term, last_log, applied, snapshot, voters, max_lag)",
        &["group", "field"]
    )
    .expect("metric registers once")
});

/// One replica's series of [`RAFT`], looked up once: they are set on every change of its
/// raft metrics (every append).
pub struct RaftGauges {
    fields: [prometheus::IntGauge; 7],
    /// Only a serving leader pushes change-log records; the others show none.
    change_log: prometheus::IntGauge,
}

impl RaftGauges {
    const FIELDS: [&'static str; 7] = [
        "leader", "term", "last_log", "snapshot", "applied", "voters", "max_lag",
    ];

    pub fn new(group: u32) -> Self {
        let g = group.to_string();
        Self {
            fields: Self::FIELDS.map(|f| RAFT.with_label_values(&[g.as_str(), f])),
            change_log: CHANGE_LOG.with_label_values(&[g.as_str()]),
        }
    }

    /// Publishes one replica's raft metrics.
    pub fn set(&self, serving: bool, m: &openraft::RaftMetrics<u64, openraft::BasicNode>) {
        let last = m.last_log_index.unwrap_or(0);
        let lag = m
            .replication
            .iter()
            .flat_map(|r| r.values())
            .map(|matched| last.saturating_sub(matched.map_or(0, |l| l.index)))
            .max()
            .unwrap_or(0);
        let values = [
            serving as u64,
            m.current_term,
            last,
            m.snapshot.map_or(0, |l| l.index),
            m.last_applied.map_or(0, |l| l.index),
            m.membership_config.membership().voter_ids().count() as u64,
            lag,
        ];
        for (gauge, v) in self.fields.iter().zip(values) {
            gauge.set(v as i64);
        }
        if !serving {
            self.change_log.set(0);
        }
    }
}

/// Snapshots written for a follower (`sent`) and installed from a leader (`installed`).
pub static SNAPSHOTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_mnode_snapshots_total",
        "Group snapshots written to send to a lagging replica (sent) and installed from the leader (installed)",
        &["kind"]
    )
    .expect("metric registers once")
});

/// What each group's work cost, by kind ([`saker_rpc::CostKind`]): the balancer's input.
pub static COST_EVENTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_mnode_cost_events_total",
        "Work a group did, by group and kind (read, write, forward, remote_lookup, lookup_served, change_push, change_apply, dirty_mark)",
        &["group", "kind"]
    )
    .expect("metric registers once")
});

/// Time requests waited for their group's `--group-ops-limit`.
pub static OPS_LIMIT_WAIT: LazyLock<prometheus::Counter> = LazyLock::new(|| {
    prometheus::register_counter!(
        "saker_mnode_ops_limit_wait_seconds_total",
        "Seconds requests waited for their group's ops limit (--group-ops-limit)"
    )
    .expect("metric registers once")
});

/// Data keys asked for by library mounts ([`saker_rpc::MetaRequest::SseKey`]), by `kind`
/// (`open`: an existing file's, `fresh`: for new bytes) and `outcome` (`given`, `denied` by
/// the permission check, `failed`).
pub static SSE_KEYS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "saker_mnode_sse_keys_total",
        "Data keys asked for by library mounts, by kind and outcome",
        &["kind", "outcome"]
    )
    .expect("metric registers once")
});

/// Change-feed records dropped at a bucket's cap, oldest first: the one way a notification
/// is lost (counted where the batch that dropped them was evaluated).
pub static FEED_DROPPED: LazyLock<prometheus::IntCounter> = LazyLock::new(|| {
    counter(
        "saker_mnode_feed_dropped_total",
        "Change-feed records dropped because a bucket's feed reached its cap",
    )
});
