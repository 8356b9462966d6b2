//! A lifecycle pass: every bucket with rules (or one), its current objects, its noncurrent
//! versions and delete markers, and its multipart uploads, each acted on as its rules say.
//! Every action is an ordinary request (a delete, a version delete, an upload abort), so a
//! pass cut short by a crash loses nothing and the next pass finds what is left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use saker_client::Lister;
use saker_rpc::{MetaRequest, MetaResponse, UploadInfo, VersionEntry, VersionKind, Want};
use serde::Serialize;

use futures::StreamExt;
use parking_lot::Mutex;
use saker_coordinator::StateStore;

use super::config::Scope;
use super::cursor::{self, Cursor, Phase, SAVE_EVERY};
use super::rules::{ObjectFacts, Rule};
use crate::Gateway;

/// What one pass did.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct Summary {
    pub buckets: u64,
    /// Current objects looked at.
    pub objects: u64,
    /// Current objects expired (deleted, or hidden behind a delete marker when versioned).
    pub expired: u64,
    /// Noncurrent versions deleted.
    pub noncurrent_expired: u64,
    /// Delete markers removed (the only version left of their key).
    pub markers_removed: u64,
    pub uploads_aborted: u64,
    /// Current objects moved to a remote tier.
    pub transitioned: u64,
    /// Restored copies of tiered objects dropped, their days over.
    pub restores_dropped: u64,
    /// Tier moves not made: the version changed meanwhile, already lived there, or cannot
    /// move (a file with hard links).
    pub skipped: u64,
    /// Actions that failed (they are tried again by the next pass).
    pub errors: u64,
    pub elapsed_ms: u64,
}

/// Items asked of a metadata node per request.
const PAGE: u32 = 1000;

/// Deletes sent at once: the MNode merges concurrent writes into few raft entries, so a
/// pass deletes many times faster than one delete at a time.
const CONCURRENCY: usize = 16;
/// Deletes gathered before they are sent.
const BATCH: usize = 64;

/// What one move to a tier counts for in a pass's pace (items looked at): a lookup, the
/// upload, the commit and the GC of its local bytes, plus one item per this many bytes.
/// Measured (compat_tests/bench/tier.sh): counted as one item, moves at the default pace
/// doubled foreground GET p99 on this 2-core machine.
const MOVE_COST: u64 = 4;
/// Moves in flight at once: fewer than deletes, as each holds an object's bytes and keeps
/// two servers busy. A move starts as soon as the walk decides it (the pace spaces them out);
/// gathering moves into batches made bursts that foreground requests felt.
const MOVE_CONCURRENCY: usize = 4;
const MOVE_BYTES_PER_ITEM: u64 = 256 * 1024;

/// Which summary count an action adds to.
type Field = fn(&mut Summary) -> &mut u64;

/// A delete decided and not sent yet.
struct Pending {
    bucket: String,
    key: String,
    version_id: Option<String>,
    field: Field,
}

/// A pass's walk: paced at `per_sec` items (objects, versions, uploads looked at) a second,
/// so foreground requests keep the machine (0: unpaced); its deletes sent in batches; and its
/// place saved every [`SAVE_EVERY`] items when it is a pass over every bucket (after the
/// deletes decided so far are done, so a resumed pass skips nothing that was due).
pub(super) struct Walk {
    /// Where the pass is, for whoever follows it.
    live: Option<Arc<Mutex<Summary>>>,
    per_sec: u64,
    started: Instant,
    done: u64,
    unsaved: u64,
    state: Option<Arc<dyn StateStore>>,
    pending: Vec<Pending>,
    /// Tier changes under way.
    moving: tokio::task::JoinSet<(Result<(), String>, Field)>,
}

impl Walk {
    pub(super) fn new(
        per_sec: u64,
        state: Option<Arc<dyn StateStore>>,
        live: Option<Arc<Mutex<Summary>>>,
    ) -> Self {
        Self {
            live,
            per_sec,
            started: Instant::now(),
            done: 0,
            unsaved: 0,
            state,
            pending: Vec::new(),
            moving: tokio::task::JoinSet::new(),
        }
    }

    /// `n` more items looked at, the last of them at `at`.
    async fn step(
        &mut self,
        gw: &Gateway,
        sum: &mut Summary,
        n: usize,
        at: impl FnOnce() -> Cursor,
    ) {
        self.done += n as u64;
        self.unsaved += n as u64;
        if let Some(live) = &self.live {
            *live.lock() = sum.clone();
        }
        if self.unsaved >= SAVE_EVERY {
            self.unsaved = 0;
            self.flush(gw, sum).await;
            if let Some(state) = &self.state {
                cursor::save(state, Some(&at())).await;
            }
        }
        if self.per_sec == 0 {
            return;
        }
        let due = self.started + Duration::from_secs_f64(self.done as f64 / self.per_sec as f64);
        tokio::time::sleep_until(due.into()).await;
    }

    /// Deletes `key` (its version `version_id`) of `bucket`, soon.
    async fn delete(
        &mut self,
        gw: &Gateway,
        sum: &mut Summary,
        bucket: &str,
        key: &str,
        version_id: Option<String>,
        field: Field,
    ) {
        self.pending.push(Pending {
            bucket: bucket.to_string(),
            key: key.to_string(),
            version_id,
            field,
        });
        if self.pending.len() >= BATCH {
            self.flush(gw, sum).await;
        }
    }

    /// Moves the object at `path` (as found: `attr`) to `tier` (of the current object, or of
    /// noncurrent version `version`), or drops its restored copy (`None`): starts it once
    /// fewer than [`MOVE_CONCURRENCY`] are under way.
    async fn tier_change(
        &mut self,
        gw: &Gateway,
        sum: &mut Summary,
        path: Vec<String>,
        attr: saker_rpc::Attr,
        version: Option<String>,
        tier: Option<String>,
    ) {
        // A move costs several requests and its bytes twice (read here, written at the tier):
        // it counts as that many items of the pace.
        self.done += MOVE_COST + attr.size / MOVE_BYTES_PER_ITEM;
        while self.moving.len() >= MOVE_CONCURRENCY {
            self.finish_move(sum).await;
        }
        let gw = gw.clone();
        self.moving.spawn(async move {
            use saker_tier::transition::{drop_restored, transition, Moved};
            let (cluster, tiers) = (&gw.cluster, &gw.tiers);
            let Some(tier) = &tier else {
                let r = drop_restored(cluster, &path, &attr, version.is_some()).await;
                let field: Field = |s| &mut s.restores_dropped;
                return (r.map_err(|e| e.to_string()), field);
            };
            let coded =
                crate::object::tiering::code_version(&gw, tier, &path, &attr, version.is_some());
            if let Some(coded) = coded.await {
                return match coded {
                    Ok(saker_client::Encoded::Coded(_)) => {
                        (Ok(()), |s: &mut Summary| &mut s.transitioned)
                    }
                    Ok(_) => (Ok(()), |s: &mut Summary| &mut s.skipped),
                    Err(e) => (Err(e), |s: &mut Summary| &mut s.skipped),
                };
            }
            match transition(cluster, tiers, tier, &path, &attr, version.as_deref()).await {
                Ok(Moved::Moved(_)) => (Ok(()), |s: &mut Summary| &mut s.transitioned),
                Ok(_) => (Ok(()), |s: &mut Summary| &mut s.skipped),
                Err(e) => (Err(e.to_string()), |s: &mut Summary| &mut s.skipped),
            }
        });
    }

    /// Waits for one tier change under way and counts it.
    async fn finish_move(&mut self, sum: &mut Summary) {
        match self.moving.join_next().await {
            Some(Ok((r, field))) => count(sum, r, field),
            Some(Err(e)) => count(sum, Err(e.to_string()), |s| &mut s.skipped),
            None => {}
        }
    }

    /// Waits for the tier changes under way, then sends the deletes decided so far.
    async fn flush(&mut self, gw: &Gateway, sum: &mut Summary) {
        while !self.moving.is_empty() {
            self.finish_move(sum).await;
        }
        let sent = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|p| async move {
                let r = crate::object::delete::delete_one(
                    gw,
                    &p.bucket,
                    &p.key,
                    None,
                    p.version_id,
                    false,
                    true,
                )
                .await
                .map(|_| ())
                .map_err(|e| format!("{e:?}"));
                (r, p.field)
            });
        let results: Vec<_> = futures::stream::iter(sent)
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for (r, field) in results {
            count(sum, r, field);
        }
    }
}

/// One pass over every bucket with rules (resuming where a pass cut short stopped), or over
/// `only`.
/// How a pass runs.
pub(super) struct Opts {
    pub scope: Scope,
    /// Items looked at per second (0: unpaced).
    pub rate: u64,
    /// Kept up to date with what the pass did so far.
    pub live: Option<Arc<Mutex<Summary>>>,
}

pub(super) async fn pass(
    gw: &Gateway,
    only: Option<&str>,
    now_ns: i64,
    day_ns: i64,
    opts: Opts,
) -> Result<Summary, String> {
    let started = Instant::now();
    // Only a full pass over every bucket keeps (and resumes from) its place.
    let state = (only.is_none() && opts.scope == Scope::All).then(|| gw.state.clone());
    let resume = match &state {
        Some(s) => cursor::load(s).await,
        None => None,
    };
    if let Some(c) = &resume {
        // Object keys are user data: named at debug only.
        tracing::info!(bucket = %c.bucket, "lifecycle pass resumes");
        tracing::debug!(key = %c.key, "lifecycle pass resumes after this key");
    }
    let mut walk = Walk::new(opts.rate, state.clone(), opts.live);
    let mut sum = Summary::default();
    let at = At { now_ns, day_ns };
    for (bucket, rules) in super::config::configured(gw, only, opts.scope).await? {
        if resume.as_ref().is_some_and(|c| bucket < c.bucket) {
            continue;
        }
        sum.buckets += 1;
        let enabled: Vec<Rule> = rules.into_iter().filter(|r| r.enabled).collect();
        let b = Bucket {
            name: &bucket,
            rules: &enabled,
            resume: resume.as_ref(),
        };
        // Each phase's deletes are done before the next phase looks at the bucket.
        current(gw, &b, at, &mut sum, &mut walk).await?;
        walk.flush(gw, &mut sum).await;
        versions(gw, &b, at, &mut sum, &mut walk).await?;
        walk.flush(gw, &mut sum).await;
        uploads(gw, &b, at, &mut sum, &mut walk).await?;
    }
    if let Some(s) = &state {
        cursor::save(s, None).await;
    }
    sum.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(sum)
}

/// A bucket a pass walks.
struct Bucket<'a> {
    name: &'a str,
    rules: &'a [Rule],
    /// Where a pass cut short stopped.
    resume: Option<&'a Cursor>,
}

impl Bucket<'_> {
    fn start(&self, phase: Phase, group: u32) -> Option<String> {
        Cursor::start(self.resume, self.name, phase, group)
    }

    fn at(&self, phase: Phase, group: u32, key: &str) -> Cursor {
        Cursor {
            bucket: self.name.to_string(),
            phase,
            group,
            key: key.to_string(),
        }
    }
}

/// The groups, in the order a pass walks them.
fn groups(gw: &Gateway) -> Vec<u32> {
    let mut g: Vec<u32> = gw.cluster.groups().map(|(g, _)| *g).collect();
    g.sort_unstable();
    g
}

#[derive(Clone, Copy)]
struct At {
    now_ns: i64,
    day_ns: i64,
}

async fn tags_of(gw: &Gateway, bucket: &str, key: &str) -> Vec<(String, String)> {
    let want = Want {
        tags: true,
        ..Want::ATTR
    };
    crate::object::lookup::lookup_object(gw, bucket, key, want)
        .await
        .ok()
        .and_then(|v| v.tags)
        .unwrap_or_default()
}

fn count(sum: &mut Summary, r: Result<(), String>, done: Field) {
    match r {
        Ok(()) => *done(sum) += 1,
        Err(e) => {
            sum.errors += 1;
            tracing::warn!(error = %e, "lifecycle action failed");
        }
    }
}

/// Expiration of current objects, their moves to tiers, and the end of restored copies.
async fn current(
    gw: &Gateway,
    b: &Bucket<'_>,
    at: At,
    sum: &mut Summary,
    walk: &mut Walk,
) -> Result<(), String> {
    let (bucket, rules) = (b.name, b.rules);
    let acts = |r: &Rule| r.expires_at(0, 1).is_some() || !r.transitions.is_empty();
    if !rules.iter().any(acts) {
        return Ok(());
    }
    let Some(after) = b.start(Phase::Current, 0) else {
        return Ok(());
    };
    let mut lister = Lister::new(&gw.cluster, bucket)
        .await
        .map_err(|e| e.to_string())?;
    lister.start("", &after).await.map_err(|e| e.to_string())?;
    while let Some((key, attr)) = lister.next_key().await.map_err(|e| e.to_string())? {
        if key.ends_with('/') {
            continue;
        }
        sum.objects += 1;
        let tags = if rules.iter().any(|r| r.filter.needs_tags()) {
            tags_of(gw, bucket, &key).await
        } else {
            Vec::new()
        };
        let facts = ObjectFacts {
            key: &key,
            size: attr.size,
            tags: &tags,
        };
        let due = rules.iter().any(|r| {
            r.filter.matches(&facts)
                && r.expires_at(attr.s3_mtime_ns, at.day_ns)
                    .is_some_and(|t| t <= at.now_ns)
        });
        let tiered = attr.layout.tiered();
        // The latest transition due of any rule; nothing if the object is in that class
        // already (a tier, or an erasure coding).
        let move_to = rules
            .iter()
            .filter(|r| r.filter.matches(&facts))
            .filter_map(|r| r.tier_at(attr.s3_mtime_ns, at.day_ns, at.now_ns))
            .max_by_key(|(t, _)| *t)
            .map(|(_, tier)| tier)
            .filter(|tier| !crate::object::tiering::in_class(&attr, tier));
        let lapsed = tiered.is_some_and(|t| t.restore_lapsed(at.now_ns));
        if due {
            walk.delete(gw, sum, bucket, &key, None, |s| &mut s.expired)
                .await;
        } else if let Some(tier) = move_to {
            if let Ok(kp) = crate::keys::map_key(bucket, &key) {
                let to = Some(tier.to_string());
                walk.tier_change(gw, sum, kp.path, attr.clone(), None, to)
                    .await;
            }
        } else if lapsed {
            if let Ok(kp) = crate::keys::map_key(bucket, &key) {
                walk.tier_change(gw, sum, kp.path, attr.clone(), None, None)
                    .await;
            }
        }
        walk.step(gw, sum, 1, || b.at(Phase::Current, 0, &key))
            .await;
    }
    Ok(())
}

/// One page of the versions of `bucket` that `group` holds after (`key`, `id`), newest first
/// within a key; whether more may follow.
async fn version_page(
    gw: &Gateway,
    group: u32,
    bucket: &str,
    key: &str,
    id: Option<u64>,
) -> Result<(Vec<VersionEntry>, bool), String> {
    let r = MetaRequest::ScanVersions {
        bucket: bucket.to_string(),
        prefix: String::new(),
        key_marker: key.to_string(),
        id_marker: id,
        limit: PAGE,
        with_current: false,
    };
    match gw.cluster.call_group(group, r).await {
        Ok(MetaResponse::Versions(v)) => {
            let full = v.len() == PAGE as usize;
            Ok((v, full))
        }
        Ok(other) => Err(format!("ScanVersions answered {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Splits versions (in key order) into runs of one key each.
fn by_key(versions: Vec<VersionEntry>) -> Vec<(String, Vec<VersionEntry>)> {
    let mut out: Vec<(String, Vec<VersionEntry>)> = Vec::new();
    for v in versions {
        match out.last_mut() {
            Some((k, list)) if *k == v.key => list.push(v),
            _ => out.push((v.key.clone(), vec![v])),
        }
    }
    out
}

/// What to do with one version.
enum Act {
    Noncurrent(String),
    Marker(String),
    /// A noncurrent version (id, as found) to move to a tier, or (`None`) whose restored
    /// copy lapsed.
    Move(String, saker_rpc::Attr, Option<String>),
}

/// Noncurrent version expiration and expired delete markers.
async fn versions(
    gw: &Gateway,
    b: &Bucket<'_>,
    at: At,
    sum: &mut Summary,
    walk: &mut Walk,
) -> Result<(), String> {
    let (bucket, rules) = (b.name, b.rules);
    let wants_noncurrent = rules
        .iter()
        .any(|r| r.noncurrent.is_some() || !r.noncurrent_transitions.is_empty());
    let wants_markers = rules.iter().any(|r| {
        r.expiration
            .as_ref()
            .is_some_and(|e| e.expired_object_delete_marker)
    });
    if !wants_noncurrent && !wants_markers {
        return Ok(());
    }
    for g in groups(gw) {
        let Some(after) = b.start(Phase::Versions, g) else {
            continue;
        };
        // Page by page (a key's versions are all in one group, in one run); the last key of
        // a full page may go on in the next one, so it waits for it.
        let (mut key, mut id) = (after, None);
        let mut carry: Vec<VersionEntry> = Vec::new();
        loop {
            let (page, more) = version_page(gw, g, bucket, &key, id).await?;
            if let Some(last) = page.last() {
                (key, id) = (last.key.clone(), Some(last.id));
            }
            let mut runs = by_key(carry.drain(..).chain(page).collect());
            if more {
                carry = runs.pop().map(|(_, list)| list).unwrap_or_default();
            }
            for (k, list) in runs {
                let n = list.len();
                for act in plan(gw, bucket, &k, list, rules, at).await {
                    let (vid, field): (String, Field) = match act {
                        Act::Noncurrent(v) => (v, |s| &mut s.noncurrent_expired),
                        Act::Marker(v) => (v, |s| &mut s.markers_removed),
                        Act::Move(v, attr, tier) => {
                            if let Ok(kp) = crate::keys::map_key(bucket, &k) {
                                walk.tier_change(gw, sum, kp.path, attr, Some(v), tier)
                                    .await;
                            }
                            continue;
                        }
                    };
                    walk.delete(gw, sum, bucket, &k, Some(vid), field).await;
                }
                walk.step(gw, sum, n, || b.at(Phase::Versions, g, &k)).await;
            }
            if !more {
                break;
            }
        }
    }
    Ok(())
}

/// The versions of `key` (newest first, as its group lists them) its rules remove.
async fn plan(
    gw: &Gateway,
    bucket: &str,
    key: &str,
    list: Vec<VersionEntry>,
    rules: &[Rule],
    at: At,
) -> Vec<Act> {
    let current = crate::object::lookup::lookup_object(gw, bucket, key, Want::ATTR)
        .await
        .ok();
    let noncurrent: Vec<&VersionEntry> = list
        .iter()
        .filter(|v| !matches!(v.kind, VersionKind::Current))
        .collect();
    let mut out = Vec::new();
    // A delete marker with no other version left is expired (ExpiredObjectDeleteMarker).
    if current.is_none() && noncurrent.len() == 1 {
        if let VersionKind::DeleteMarker = noncurrent[0].kind {
            let facts = ObjectFacts {
                key,
                size: 0,
                tags: &[],
            };
            let expire = rules.iter().any(|r| {
                r.filter.matches(&facts)
                    && r.expiration
                        .as_ref()
                        .is_some_and(|e| e.expired_object_delete_marker)
            });
            if expire {
                out.push(Act::Marker(noncurrent[0].version_id.clone()));
            }
            return out;
        }
    }
    // A version became noncurrent when the next newer one was written.
    let mut newer_mtime = current.as_ref().map(|c| c.attr.s3_mtime_ns);
    for (rank, v) in noncurrent.iter().enumerate() {
        let since = newer_mtime.unwrap_or(v.mtime_ns);
        newer_mtime = Some(v.mtime_ns);
        let VersionKind::Object(attr) = &v.kind else {
            continue;
        };
        let facts = ObjectFacts {
            key,
            size: attr.size,
            tags: &[],
        };
        let due = rules.iter().any(|r| {
            let Some(n) = &r.noncurrent else {
                return false;
            };
            let kept = n.newer.is_some_and(|keep| rank < keep as usize);
            let old = n.days.is_none_or(|d| {
                since.saturating_add(i64::from(d).saturating_mul(at.day_ns)) <= at.now_ns
            });
            r.filter.matches(&facts) && !kept && old && (n.days.is_some() || n.newer.is_some())
        });
        if due {
            out.push(Act::Noncurrent(v.version_id.clone()));
            continue;
        }
        let tier = rules
            .iter()
            .filter(|r| r.filter.matches(&facts))
            .filter_map(|r| r.noncurrent_tier_at(since, rank, at.day_ns, at.now_ns))
            .max_by_key(|(t, _)| *t)
            .map(|(_, tier)| tier)
            .filter(|tier| !crate::object::tiering::in_class(attr, tier));
        let lapsed = (attr.layout.tiered()).is_some_and(|t| t.restore_lapsed(at.now_ns));
        if tier.is_some() || lapsed {
            let (vid, attr) = (v.version_id.clone(), (**attr).clone());
            out.push(Act::Move(vid, attr, tier.map(str::to_string)));
        }
    }
    out
}

/// Aborts multipart uploads started more than their rule's days ago.
async fn uploads(
    gw: &Gateway,
    b: &Bucket<'_>,
    at: At,
    sum: &mut Summary,
    walk: &mut Walk,
) -> Result<(), String> {
    let (bucket, rules) = (b.name, b.rules);
    if !rules.iter().any(|r| r.abort_upload_days.is_some()) {
        return Ok(());
    }
    for g in groups(gw) {
        let Some(after) = b.start(Phase::Uploads, g) else {
            continue;
        };
        let (mut key, mut upload) = (after, String::new());
        loop {
            let r = MetaRequest::ListUploads {
                bucket: bucket.to_string(),
                prefix: String::new(),
                key_marker: key.clone(),
                upload_id_marker: upload.clone(),
                limit: PAGE,
            };
            let page: Vec<UploadInfo> = match gw.cluster.call_group(g, r).await {
                Ok(MetaResponse::Uploads(u)) => u,
                Ok(other) => return Err(format!("ListUploads answered {other:?}")),
                Err(e) => return Err(e.to_string()),
            };
            let full = page.len() == PAGE as usize;
            for u in &page {
                let facts = ObjectFacts {
                    key: &u.key,
                    size: 0,
                    tags: &[],
                };
                let due = rules.iter().any(|r| {
                    r.filter.matches(&facts)
                        && r.abort_upload_days.is_some_and(|d| {
                            u.initiated_ns
                                .saturating_add(i64::from(d).saturating_mul(at.day_ns))
                                <= at.now_ns
                        })
                });
                if due {
                    let r =
                        crate::multipart::upload::abort_upload(gw, bucket, &u.key, &u.upload_id)
                            .await;
                    count(sum, r.map_err(|e| format!("{e:?}")), |s| {
                        &mut s.uploads_aborted
                    });
                }
            }
            if let Some(last) = page.last() {
                walk.step(gw, sum, page.len(), || b.at(Phase::Uploads, g, &last.key))
                    .await;
            }
            match page.last() {
                Some(last) if full => (key, upload) = (last.key.clone(), last.upload_id.clone()),
                _ => break,
            }
        }
    }
    Ok(())
}
