//! Buckets' change feeds in the batch: the record of an object change is written by the op's
//! own batch (one raft entry, one TiKV transaction), so a change is acknowledged only with its
//! record and no record exists without its change.
//!
//! A bucket has a feed while its write settings, installed in every group, say so
//! ([`saker_rpc::FeedSettings`]); the op's evaluation reads that copy anyway (a gateway's
//! write checks its settings version against it), so a bucket without notifications pays for
//! nothing but a branch. Records are numbered per (bucket, group) from 1 in table `j`; where
//! the feed stands (next seq, oldest kept, drops, last sequencer) is one record in table `y`.
//! Records are deleted by an acknowledgement (`FeedRequest::Ack`) or, past the bucket's cap,
//! oldest first with a count, a log line and a metric.

use saker_rpc::{
    FeedEvent, FeedPage, FeedSettings, MetaError, MetaRequest, MetaResponse, Versioning,
};
use serde::{Deserialize, Serialize};

use super::feed_events::{self as events, Change};
use super::settings::Copies;
use super::{Ctx, OpResult};
use crate::keys::Keys;
use crate::records::{decode, encode};
use crate::store::prefix_end;
use crate::tree::{internal, View};
use crate::txn::Txn;

/// Where one bucket's feed stands in a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Head {
    /// The seq the next record gets.
    pub next: u64,
    /// The oldest seq kept (`first == next`: empty).
    pub first: u64,
    /// The sequencer of the last record.
    pub sequencer: u64,
    /// Records dropped at the cap, ever.
    pub dropped: u64,
}

impl Default for Head {
    fn default() -> Self {
        Self {
            next: 1,
            first: 1,
            sequencer: 0,
            dropped: 0,
        }
    }
}

/// Most records one acknowledgement deletes (its batch stays small; the consumer acknowledges
/// what it read, a page at a time).
const MAX_ACK: u64 = 10 * saker_rpc::MAX_FEED_PAGE as u64;

pub(crate) fn head_of<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
) -> Result<Head, MetaError> {
    match v.get(&keys.feed_head(bucket)).map_err(internal)? {
        Some(b) => decode(&b).map_err(internal),
        None => Ok(Head::default()),
    }
}

/// After `req` succeeded with `result`: its feed records, in the feeds of the buckets that
/// keep one. `copies` are the buckets' settings as the op's decision read them; a bucket's
/// copy is read here only for an op that may make a record and whose decision did not read
/// it (tagging, retention, a restore).
pub(super) fn after(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    req: &MetaRequest,
    copies: &Copies,
    result: &MetaResponse,
) -> Result<(), MetaError> {
    // Per bucket: its feed settings (none: no feed) and how it keeps versions.
    let mut feeds: Vec<(&str, Option<FeedSettings>, Versioning)> = Vec::new();
    for path in events::paths_of(req) {
        let Some(bucket) = path.first().filter(|_| path.len() >= 2) else {
            continue;
        };
        if feeds.iter().any(|(b, _, _)| *b == bucket) {
            continue;
        }
        let writes = match copies.iter().find(|(b, _)| b == bucket) {
            Some((_, c)) => c.writes.clone(),
            None => super::settings::copy_of(txn, ctx.keys, bucket)?.writes,
        };
        feeds.push((bucket, writes.feed, writes.versioning));
    }
    if feeds.iter().all(|(_, f, _)| f.is_none()) {
        return Ok(());
    }
    let versioning = |bucket: &str| {
        feeds
            .iter()
            .find(|(b, _, _)| *b == bucket)
            .map_or(Versioning::Off, |(_, _, v)| *v)
    };
    for change in events::changes_of(txn, ctx, req, result, &versioning)? {
        let settings = feeds
            .iter()
            .find(|(b, _, _)| *b == change.bucket)
            .and_then(|(_, f, _)| f.clone());
        if let Some(settings) = settings {
            append(txn, ctx, &settings, change)?;
        }
    }
    Ok(())
}

/// Appends `change` to its bucket's feed, dropping the oldest records past the cap.
fn append(
    txn: &mut Txn<'_>,
    ctx: &mut Ctx<'_>,
    settings: &FeedSettings,
    change: Change<'_>,
) -> Result<(), MetaError> {
    let keys = ctx.keys;
    let bucket = change.bucket;
    let mut head = head_of(txn, keys, bucket)?;
    let seq = head.next;
    head.next += 1;
    head.sequencer = (ctx.now_ns.max(0) as u64).max(head.sequencer + 1);
    let event = FeedEvent {
        seq,
        kind: change.kind,
        key: change.key,
        size: change.size,
        etag: change.etag,
        version_id: change.version_id,
        sequencer: head.sequencer,
        time_ns: ctx.now_ns,
    };
    txn.put(keys.feed(bucket, seq), encode(&event));
    ctx.fed = true;
    let mut dropped = 0;
    // (A cap just lowered is reached over several writes, each batch kept small.)
    while head.next - head.first > settings.cap && dropped < MAX_ACK {
        txn.delete(keys.feed(bucket, head.first));
        head.first += 1;
        dropped += 1;
    }
    if dropped > 0 {
        head.dropped += dropped;
        crate::metrics::FEED_DROPPED.inc_by(dropped);
        tracing::warn!(
            bucket,
            group = keys.group,
            cap = settings.cap,
            dropped_total = head.dropped,
            "change feed full: its oldest undelivered record dropped"
        );
    }
    txn.put(keys.feed_head(bucket), encode(&head));
    Ok(())
}

fn page(head: Head, events: Vec<FeedEvent>) -> FeedPage {
    FeedPage {
        events,
        next: head.next,
        first: head.first,
        dropped: head.dropped,
    }
}

/// `Ack`: drops `bucket`'s records up to `upto` (at most [`MAX_ACK`] of them; the answer says
/// where the feed stands).
pub(super) fn ack(txn: &mut Txn<'_>, ctx: &Ctx<'_>, bucket: &str, upto: u64) -> OpResult {
    let mut head = head_of(txn, ctx.keys, bucket)?;
    let end = upto
        .min(head.next - 1)
        .min(head.first.saturating_add(MAX_ACK - 1));
    if head.first > end {
        return Ok(MetaResponse::Feed(page(head, Vec::new())));
    }
    while head.first <= end {
        txn.delete(ctx.keys.feed(bucket, head.first));
        head.first += 1;
    }
    txn.put(ctx.keys.feed_head(bucket), encode(&head));
    Ok(MetaResponse::Feed(page(head, Vec::new())))
}

/// The bucket's feed starts or stops (its notification configuration was put where there was
/// none, or removed, or the bucket deleted): what the feed holds is no longer anyone's to
/// deliver (a new feed is not the old one's), so it starts again after it and drops it (up
/// to [`MAX_ACK`] records here; any beyond are below `first`, never read, left as garbage).
pub(super) fn clear(txn: &mut Txn<'_>, ctx: &Ctx<'_>, bucket: &str) -> Result<(), MetaError> {
    let mut head = head_of(txn, ctx.keys, bucket)?;
    if head.first == head.next {
        return Ok(());
    }
    let end = (head.next - 1).min(head.first.saturating_add(MAX_ACK - 1));
    for seq in head.first..=end {
        txn.delete(ctx.keys.feed(bucket, seq));
    }
    head.first = head.next;
    txn.put(ctx.keys.feed_head(bucket), encode(&head));
    Ok(())
}

/// Whether this group's feeds hold a record not delivered yet of a key whose last component
/// is `name` (in a bucket whose feed is on): a name the balancer would move to another group
/// waits until they are delivered, so that a key's events keep their order (the records of
/// its old group and those of its new one are read apart).
pub(crate) fn holds_name<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    name: &str,
) -> Result<bool, MetaError> {
    const PAGE: usize = 4096;
    let prefix = keys.table(crate::keys::FEED);
    let end = keys.table_end(crate::keys::FEED);
    // Per bucket: the oldest seq its feed keeps, if the feed is on.
    let mut live: Vec<(Vec<u8>, Option<u64>)> = Vec::new();
    let mut start = prefix.clone();
    loop {
        let page = v.scan(&start, &end, PAGE).map_err(internal)?;
        let Some((last, _)) = page.last() else {
            return Ok(false);
        };
        start = last.clone();
        start.push(0);
        for (k, val) in &page {
            let rest = &k[prefix.len()..];
            let Some(split) = rest.len().checked_sub(9) else {
                continue;
            };
            let (bucket, seq) = (&rest[..split], &rest[split + 1..]);
            let seq = u64::from_be_bytes(seq.try_into().expect("8 bytes"));
            let first = match live.iter().find(|(b, _)| b == bucket) {
                Some((_, f)) => *f,
                None => {
                    let b = String::from_utf8_lossy(bucket);
                    let on = super::settings::copy_of(v, keys, &b)?.writes.feed.is_some();
                    let f = match on {
                        true => Some(head_of(v, keys, &b)?.first),
                        false => None,
                    };
                    live.push((bucket.to_vec(), f));
                    f
                }
            };
            if first.is_none_or(|f| seq < f) {
                continue;
            }
            let ev: FeedEvent = decode(val).map_err(internal)?;
            if ev.key.rsplit('/').next() == Some(name) {
                return Ok(true);
            }
        }
    }
}

/// `Read`: up to `limit` records of `bucket`'s feed after seq `after`, oldest first.
pub(crate) fn read<V: View + ?Sized>(
    v: &V,
    keys: &Keys,
    bucket: &str,
    after: u64,
    limit: u32,
) -> Result<FeedPage, MetaError> {
    let head = head_of(v, keys, bucket)?;
    let from = after.saturating_add(1).max(head.first);
    let prefix = keys.feed_of(bucket);
    let end = prefix_end(&prefix).expect("a feed prefix has an end");
    let rows = v
        .scan(&keys.feed(bucket, from), &end, limit as usize)
        .map_err(internal)?;
    let events = rows
        .iter()
        .map(|(_, val)| decode(val).map_err(internal))
        .collect::<Result<Vec<FeedEvent>, _>>()?;
    Ok(page(head, events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::apply_write;
    use crate::store::MemStore;
    use crate::tree::Resolver;
    use saker_rpc::{
        version_id, BucketWrites, Cred, Decided, FeedKind, FileKind, Layout, NewObject,
        SealedWrites, SettingsRequest, TierRef, Versioning,
    };

    fn p(s: &str) -> Vec<String> {
        s.split('/').map(String::from).collect()
    }

    fn put(path: &str, size: u64, versioning: Decided) -> MetaRequest {
        MetaRequest::PutObject {
            path: p(path),
            obj: NewObject {
                size,
                etag: format!("\"e{size}\""),
                layout: Layout::Inline,
                inline: Some(vec![7; size as usize].into()),
                ..Default::default()
            },
            cond: None,
            versioning,
        }
    }

    fn delete(path: &str, versioning: Decided, version_id: Option<&str>) -> MetaRequest {
        MetaRequest::DeleteObject {
            path: p(path),
            dir_marker: false,
            cond: None,
            versioning,
            version_id: version_id.map(String::from),
            bypass_governance: false,
            lifecycle: false,
        }
    }

    /// Runs `f` on group 1 of a one-group namespace with buckets `logs` (its write settings
    /// at version 1, `feed` as given, `versioning`) and `quiet` (no settings).
    fn with_bucket(
        versioning: Versioning,
        feed: Option<FeedSettings>,
        f: impl FnOnce(
            &mut dyn FnMut(MetaRequest) -> OpResult,
            &dyn Fn() -> FeedPage,
            &dyn Fn(&str) -> bool,
        ),
    ) {
        let keys = Keys::new(1);
        let store = MemStore::new();
        let router = saker_namespace::SharedRouter::new(saker_namespace::Router::single(1));
        let replica = parking_lot::Mutex::new(saker_namespace::DentryReplica::default());
        let frozen = crate::frozen::FrozenDirs::default();
        let ns = Resolver::new(&keys, router.get(), &replica, &frozen, true);
        let mut ctx = Ctx {
            keys: &keys,
            ns: &ns,
            now_ns: 1_000,
            gc_grace_ns: 0,
            next_id: 100,
            changes: Vec::new(),
            reap: None,
            reaped: false,
            fed: false,
        };
        let txn = std::cell::RefCell::new(Txn::new(&store));
        let sealed = SealedWrites {
            version: 1,
            writes: BucketWrites {
                versioning,
                feed,
                ..Default::default()
            },
        };
        {
            let mut t = txn.borrow_mut();
            for name in ["logs", "quiet"] {
                let req = MetaRequest::CreateBucket {
                    name: name.into(),
                    uid: 0,
                    gid: 0,
                };
                apply_write(&mut t, &mut ctx, &req).unwrap();
            }
            let install = SettingsRequest::Install {
                bucket: "logs".into(),
                sealed,
            };
            apply_write(&mut t, &mut ctx, &MetaRequest::BucketSettings(install)).unwrap();
        }
        let mut write = |req: MetaRequest| {
            ctx.now_ns += 1;
            let mut t = txn.borrow_mut();
            let sp = t.savepoint();
            let r = apply_write(&mut t, &mut ctx, &req);
            if r.is_err() {
                t.rollback(sp);
            }
            r
        };
        let read = || read(&*txn.borrow(), &keys, "logs", 0, 1000).unwrap();
        let holds = |name: &str| holds_name(&*txn.borrow(), &keys, name).unwrap();
        f(&mut write, &read, &holds);
    }

    fn kinds(page: &FeedPage) -> Vec<(FeedKind, &str, Option<&str>)> {
        page.events
            .iter()
            .map(|e| (e.kind, e.key.as_str(), e.version_id.as_deref()))
            .collect()
    }

    #[test]
    fn each_change_of_a_bucket_with_a_feed_is_recorded_in_its_batch() {
        let off = Decided::under(Versioning::Off, 1);
        with_bucket(
            Versioning::Off,
            Some(FeedSettings::default()),
            |write, read, _| {
                write(put("logs/a", 3, off)).unwrap();
                write(put("logs/a", 5, off)).unwrap();
                write(delete("logs/a", off, None)).unwrap();
                // A write refused (settings version) leaves no record.
                assert!(write(put("logs/b", 1, Decided::under(Versioning::Off, 0))).is_err());
                // Another bucket keeps no feed and pays for none.
                write(put("quiet/x", 1, Decided::under(Versioning::Off, 0))).unwrap();
                let page = read();
                assert_eq!(
                    kinds(&page),
                    vec![
                        (FeedKind::Put, "a", None),
                        (FeedKind::Put, "a", None),
                        (FeedKind::Delete, "a", None),
                    ]
                );
                let e = &page.events[1];
                assert_eq!((e.seq, e.size, e.etag.as_str()), (2, 5, "e5"));
                assert!(page
                    .events
                    .windows(2)
                    .all(|w| w[0].sequencer < w[1].sequencer));
                assert_eq!((page.first, page.next, page.dropped), (1, 4, 0));
            },
        );
    }

    #[test]
    fn versions_markers_tags_and_restores_are_recorded() {
        let on = Decided::under(Versioning::Enabled, 1);
        with_bucket(
            Versioning::Enabled,
            Some(FeedSettings::default()),
            |write, read, _| {
                let MetaResponse::Attr(first) = write(put("logs/k", 2, on)).unwrap() else {
                    panic!("a put answers its attributes")
                };
                write(MetaRequest::PutTags {
                    path: p("logs/k"),
                    dir_marker: false,
                    version_id: None,
                    tags: Some(vec![("a".into(), "b".into())]),
                })
                .unwrap();
                write(delete("logs/k", on, None)).unwrap();
                let v1 = version_id(first.id);
                write(delete("logs/k", on, Some(&v1))).unwrap();
                write(MetaRequest::SetTier {
                    path: p("logs/k"),
                    inode: 1,
                    mtime_ns: 0,
                    noncurrent: false,
                    to: Box::new(TierRef {
                        tier: "COLD".into(),
                        key: "x".into(),
                        size: 2,
                        crc32c: 0,
                        restored: None,
                    }),
                })
                .unwrap_err();
                let page = read();
                let got = kinds(&page);
                assert_eq!(got[0], (FeedKind::Put, "k", Some(v1.as_str())));
                assert_eq!(got[1], (FeedKind::TagsPut, "k", Some(v1.as_str())));
                assert_eq!(got[2].0, FeedKind::DeleteMarker);
                assert_eq!(got[3], (FeedKind::Delete, "k", Some(v1.as_str())));
                assert_eq!(got.len(), 4, "a refused change has no record");
            },
        );
    }

    #[test]
    fn acknowledged_records_go_and_the_cap_drops_the_oldest_counted() {
        let off = Decided::under(Versioning::Off, 1);
        with_bucket(
            Versioning::Off,
            Some(FeedSettings { cap: 3 }),
            |write, read, _| {
                for i in 0..5 {
                    write(put(&format!("logs/k{i}"), 1, off)).unwrap();
                }
                let page = read();
                assert_eq!((page.first, page.next, page.dropped), (3, 6, 2));
                assert_eq!(
                    page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
                    [3, 4, 5]
                );
                let ack = |upto| {
                    MetaRequest::Feed(saker_rpc::FeedRequest::Ack {
                        bucket: "logs".into(),
                        upto,
                    })
                };
                let MetaResponse::Feed(after) = write(ack(4)).unwrap() else {
                    panic!("an ack answers where the feed stands")
                };
                assert_eq!((after.first, after.depth()), (5, 1));
                // Acknowledging again, or past the end, is harmless.
                write(ack(4)).unwrap();
                write(ack(99)).unwrap();
                let page = read();
                assert!(page.events.is_empty());
                assert_eq!((page.first, page.next), (6, 6));
                write(put("logs/z", 1, off)).unwrap();
                assert_eq!(read().events[0].seq, 6);
            },
        );
    }

    #[test]
    fn the_mount_s_commits_unlinks_and_renames_are_recorded() {
        with_bucket(
            Versioning::Off,
            Some(FeedSettings::default()),
            |write, read, _| {
                let create = |path: &str| MetaRequest::Create {
                    path: p(path),
                    mode: 0o644,
                    uid: 0,
                    gid: 0,
                    exclusive: true,
                    symlink: None,
                    special: None,
                    cred: Cred::default(),
                    defer: false,
                    versioning: Versioning::Off,
                };
                let MetaResponse::Attr(f) = write(create("logs/f")).unwrap() else {
                    panic!("a create answers its attributes")
                };
                assert_eq!(f.kind, FileKind::File);
                write(MetaRequest::CommitFile {
                    path: p("logs/f"),
                    id: f.id,
                    size: 0,
                    etag: "\"abc\"".into(),
                    layout: Layout::Inline,
                    inline: None,
                    cred: Cred::default(),
                    receipt: None,
                    versioning: Versioning::Off,
                    replaces: None,
                    default_lock: None,
                    sse: None,
                })
                .unwrap();
                write(MetaRequest::Rename {
                    from: p("logs/f"),
                    to: p("logs/g"),
                    noreplace: false,
                    cred: Cred::default(),
                    versioning: Default::default(),
                })
                .unwrap();
                write(MetaRequest::Unlink {
                    path: p("logs/g"),
                    cred: Cred::default(),
                    versioning: Versioning::Off,
                })
                .unwrap();
                let page = read();
                assert_eq!(
                    kinds(&page),
                    vec![
                        (FeedKind::Put, "f", None),
                        (FeedKind::Delete, "f", None),
                        (FeedKind::Put, "g", None),
                        (FeedKind::Delete, "g", None),
                    ],
                    "the create makes no record; its commit does"
                );
                assert_eq!(page.events[0].etag, "abc");
            },
        );
    }

    #[test]
    fn a_feed_started_again_does_not_deliver_an_old_one_s_records() {
        let off = Decided::under(Versioning::Off, 1);
        with_bucket(
            Versioning::Off,
            Some(FeedSettings::default()),
            |write, read, _| {
                write(put("logs/a", 1, off)).unwrap();
                write(put("logs/b", 1, off)).unwrap();
                let install = |version, feed| {
                    MetaRequest::BucketSettings(SettingsRequest::Install {
                        bucket: "logs".into(),
                        sealed: SealedWrites {
                            version,
                            writes: BucketWrites {
                                feed,
                                ..Default::default()
                            },
                        },
                    })
                };
                // Off: nothing more recorded, the old records dropped.
                write(install(2, None)).unwrap();
                write(put("logs/c", 1, Decided::under(Versioning::Off, 2))).unwrap();
                assert_eq!(read().depth(), 0);
                // On again: a new feed, after the old one.
                write(install(3, Some(FeedSettings::default()))).unwrap();
                write(put("logs/d", 1, Decided::under(Versioning::Off, 3))).unwrap();
                let page = read();
                assert_eq!(kinds(&page), vec![(FeedKind::Put, "d", None)]);
                assert_eq!((page.first, page.next), (3, 4));
            },
        );
    }

    #[test]
    fn a_name_with_records_not_delivered_is_held() {
        let off = Decided::under(Versioning::Off, 1);
        with_bucket(
            Versioning::Off,
            Some(FeedSettings::default()),
            |write, read, holds| {
                write(put("logs/k", 1, off)).unwrap();
                assert!(holds("k"));
                assert!(!holds("j"), "another name");
                let upto = read().next - 1;
                write(MetaRequest::Feed(saker_rpc::FeedRequest::Ack {
                    bucket: "logs".into(),
                    upto,
                }))
                .unwrap();
                assert!(!holds("k"), "delivered");
            },
        );
    }

    #[test]
    fn a_mount_s_unlink_where_versions_are_kept_names_its_marker() {
        with_bucket(
            Versioning::Enabled,
            Some(FeedSettings::default()),
            |write, read, _| {
                let MetaResponse::Attr(f) = write(MetaRequest::Create {
                    path: p("logs/f"),
                    mode: 0o644,
                    uid: 0,
                    gid: 0,
                    exclusive: true,
                    symlink: None,
                    special: None,
                    cred: Cred::default(),
                    defer: false,
                    versioning: Versioning::Off,
                })
                .unwrap() else {
                    panic!("a create answers its attributes")
                };
                write(MetaRequest::CommitFile {
                    path: p("logs/f"),
                    id: f.id,
                    size: 1,
                    etag: "e".into(),
                    layout: Layout::Inline,
                    inline: Some(vec![1].into()),
                    cred: Cred::default(),
                    receipt: None,
                    versioning: Versioning::Off,
                    replaces: None,
                    default_lock: None,
                    sse: None,
                })
                .unwrap();
                write(MetaRequest::Unlink {
                    path: p("logs/f"),
                    cred: Cred::default(),
                    versioning: Versioning::Off,
                })
                .unwrap();
                let page = read();
                let got: Vec<_> = page
                    .events
                    .iter()
                    .map(|e| (e.kind, e.version_id.is_some()))
                    .collect();
                assert_eq!(
                    got,
                    vec![(FeedKind::Put, true), (FeedKind::DeleteMarker, true)],
                    "{page:?}"
                );
                assert_ne!(page.events[0].version_id, page.events[1].version_id);
            },
        );
    }

    #[test]
    fn a_bucket_without_a_feed_gets_no_record() {
        let off = Decided::under(Versioning::Off, 1);
        with_bucket(Versioning::Off, None, |write, read, _| {
            write(put("logs/a", 1, off)).unwrap();
            write(delete("logs/a", off, None)).unwrap();
            let page = read();
            assert!(page.events.is_empty());
            assert_eq!(page.next, 1);
        });
    }
}
