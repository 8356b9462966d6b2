//! Network partitions of a replicated cluster: three `saker server` nodes, each in a network
//! namespace of its own (see `common::netns`), cut off from one another with blackhole routes
//! while this test process still reaches every node through the namespaces' bridge.
//!
//! A node cut off from the other two is a minority: it must acknowledge no write (no split
//! brain) and serve no stale read, while the majority keeps serving. Healed, it catches up
//! with the leaders' logs, and every acknowledged write reads back, byte for byte, through
//! every node. A history of acknowledged writes and of the minority's attempts is checked
//! after every heal.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::Client;
use common::cluster::*;
use common::netns::Netns;
use common::*;

/// How long a request to a node cut off from the others may take before the test gives up on
/// it (it is then neither acknowledged nor refused).
const MINORITY_TIMEOUT: Duration = Duration::from_secs(4);

/// The longest the majority may go without acknowledging a write once a node is cut off: an
/// election (1-2 s), and noticing that the connections to the cut-off node went silent (they
/// are not closed as a crashed peer's are; the RPC transport's HTTP/2 pings find out in 5 s).
const MAX_WRITE_GAP: Duration = Duration::from_secs(20);

/// How a write that was not acknowledged ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unacked {
    /// The gateway answered with an error: nothing may come of it.
    Refused(u16),
    /// No answer in time (or the connection failed): it may still have taken effect, but only
    /// with exactly its bytes.
    Unknown,
}

/// Everything written to the bucket: acknowledged writes (the last acknowledged bytes of each
/// key) and the writes that were not acknowledged.
#[derive(Default)]
struct History {
    acked: BTreeMap<String, Vec<u8>>,
    unacked: BTreeMap<String, (Vec<u8>, Unacked)>,
}

impl History {
    fn ack(&mut self, key: &str, data: &[u8]) {
        self.acked.insert(key.to_string(), data.to_vec());
    }
}

/// The object `key` through `c`: its bytes, or `None` if it does not exist. Panics on any other
/// failure (the nodes asked are all connected).
async fn read(c: &Client, bucket: &str, key: &str) -> Option<Vec<u8>> {
    match c.get_object().bucket(bucket).key(key).send().await {
        Ok(out) => Some(out.body.collect().await.unwrap().into_bytes().to_vec()),
        Err(e) => {
            let f = failure::<(), _>(Err(e));
            assert_eq!(f.code.as_deref(), Some("NoSuchKey"), "get {key}: {f:?}");
            None
        }
    }
}

/// Checks the history through every node: each acknowledged write reads back with its bytes
/// and is listed; a refused write does not exist; a write whose outcome is unknown either does
/// not exist or has exactly its bytes, and once any node shows it every node does. Returns the
/// writes of unknown outcome that took effect.
async fn check(nodes: &Nodes, bucket: &str, h: &History) -> usize {
    for i in 0..3 {
        verify(nodes, i, bucket, &h.acked).await;
    }
    let mut landed = 0;
    for (key, (data, how)) in &h.unacked {
        let mut seen = Vec::new();
        for i in 0..3 {
            let got = read(&nodes.client(i, true), bucket, key).await;
            if let Some(got) = &got {
                assert!(
                    *how == Unacked::Unknown,
                    "{key}, refused ({how:?}), exists through node {}",
                    i + 1
                );
                assert!(
                    got == data,
                    "{key} through node {} has other bytes than the only write of it ({} \
                     bytes, not {})",
                    i + 1,
                    got.len(),
                    data.len()
                );
            }
            seen.push(got.is_some());
        }
        if seen.contains(&true) {
            landed += 1;
            // Visible once, visible everywhere from then on.
            for i in 0..3 {
                assert_eq!(
                    read(&nodes.client(i, true), bucket, key).await.as_ref(),
                    Some(data),
                    "{key} seen through some node ({seen:?}) but not through node {}",
                    i + 1
                );
            }
        }
    }
    landed
}

/// Waits until node `i`'s replica of every group follows the group's leader in its term and
/// has applied everything the leader has, and the leader counts it as matched that far.
async fn wait_caught_up(nodes: &Nodes, i: usize) {
    for g in 1..=GROUPS {
        let what = format!(
            "node {}'s replica of group {g} caught up; logs:\n{}",
            i + 1,
            nodes.logs()
        );
        eventually(&what, || async move {
            let leader = nodes.leader(g).await;
            let l = nodes.replica(leader, g).await?;
            let s = nodes.replica(i, g).await?;
            let matched = l
                .matched
                .iter()
                .find(|(id, _)| *id == s.node_id)
                .map(|(_, m)| *m);
            let ok = s.term == l.term
                && s.leader == Some(l.node_id)
                && s.applied >= l.applied
                && matched.is_some_and(|m| m >= l.applied);
            if ok {
                Ok(())
            } else {
                Err(format!("leader {l:?}\nnode {}: {s:?}", i + 1))
            }
        })
        .await;
    }
}

/// Waits until the group of `g` is led by a node other than `not`.
async fn wait_leader_elsewhere(nodes: &Nodes, g: u32, not: usize) -> usize {
    let what = format!("group {g} led by a node other than {}", not + 1);
    eventually(&what, || async move {
        let l = nodes.leader(g).await;
        if l == not {
            Err(format!("node {} leads", l + 1))
        } else {
            Ok(l)
        }
    })
    .await
}

/// PUTs `data` at `key` through the cut-off node `i`; it must not be acknowledged. Records the
/// attempt and returns how it ended and when.
async fn minority_put(nodes: &Nodes, i: usize, bucket: &str, key: &str, data: &[u8]) -> Unacked {
    let c = nodes.client_timeout(i, MINORITY_TIMEOUT);
    let started = Instant::now();
    let r = c
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(body(data))
        .send()
        .await;
    let how = match &r {
        Ok(out) => panic!(
            "node {}, cut off from the others, acknowledged PUT {key} ({} bytes): {out:?}\nsplit \
             brain; logs:\n{}",
            i + 1,
            data.len(),
            nodes.logs()
        ),
        Err(SdkError::ServiceError(e)) => Unacked::Refused(e.raw().status().as_u16()),
        Err(SdkError::ResponseError(e)) => Unacked::Refused(e.raw().status().as_u16()),
        Err(_) => Unacked::Unknown,
    };
    // A refusal says "try again" (503), never "internal error" (500).
    if let Unacked::Refused(status) = how {
        assert_eq!(
            status,
            503,
            "the cut-off node refused PUT {key} ({} bytes) with {status}",
            data.len()
        );
    }
    eprintln!(
        "minority PUT {key} ({} bytes) through node {}: {how:?} after {:?}: {}",
        data.len(),
        i + 1,
        started.elapsed(),
        r.err()
            .map(|e| format!("{:?}", aws_sdk_s3::error::DisplayErrorContext(&e)))
            .unwrap_or_default()
    );
    how
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_leader_acknowledges_nothing_and_catches_up_after_the_heal() {
    // Declared first, dropped last: the servers are killed before their namespaces go.
    let net = Netns::new(3);
    let nodes = Nodes::start_in(&net, &[]);
    nodes.wait_voters(&[]).await;
    let bucket = "partition";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    let mut history = History::default();

    // The node leading group 1 (the coordinator's) is the one cut off; the writer goes through
    // another.
    let victim = nodes.leader(1).await;
    let (major, other) = ((victim + 1) % 3, (victim + 2) % 3);
    let v0 = random_bytes(500);
    put(&setup, bucket, "probe", &v0).await;
    history.ack("probe", &v0);
    let acks: Progress = Arc::default();
    let writer = Writer::start(nodes.client(major, false), bucket, acks.clone());
    writes_resume(&nodes, &acks, 0, 30).await;

    let cut_at = Instant::now();
    net.isolate(victim);
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 30).await;
    let resumed = cut_at.elapsed();
    assert!(
        resumed < MAX_WRITE_GAP,
        "the majority acknowledged no write for {resumed:?} after node {} was cut off",
        victim + 1
    );
    for g in 1..=GROUPS {
        wait_leader_elsewhere(&nodes, g, victim).await;
    }

    // The majority overwrites the probe; the cut-off node must not serve the old bytes.
    let v1 = random_bytes(600);
    put(&nodes.client(other, true), bucket, "probe", &v1).await;
    history.ack("probe", &v1);

    // The cut-off node's gateway: PUTs (no chunk, one chunk, several) and the probe's GET, at
    // once. None may be acknowledged, nor the old probe served.
    let attempts: Vec<(String, Vec<u8>)> = [0usize, 300, 300_000]
        .iter()
        .enumerate()
        .map(|(n, &len)| (format!("minority/obj-{n}"), random_bytes(len)))
        .collect();
    let stale = nodes.client_timeout(victim, MINORITY_TIMEOUT);
    let (outcomes, probe) = tokio::join!(
        futures::future::join_all(
            attempts
                .iter()
                .map(|(key, data)| minority_put(&nodes, victim, bucket, key, data))
        ),
        async {
            let r = stale.get_object().bucket(bucket).key("probe").send().await;
            match r {
                Ok(out) => Ok(out.body.collect().await.map(|b| b.into_bytes().to_vec())),
                Err(e) => Err(format!("{:?}", aws_sdk_s3::error::DisplayErrorContext(&e))),
            }
        }
    );
    match probe {
        Ok(Ok(got)) => assert!(
            got == v1,
            "the cut-off node served the probe's {} bytes (v0 is {}, v1 {}): a stale read",
            got.len(),
            v0.len(),
            v1.len()
        ),
        Ok(Err(e)) => eprintln!("probe GET through the cut-off node: body failed: {e:?}"),
        Err(e) => eprintln!("probe GET through the cut-off node: {e}"),
    }
    for ((key, data), how) in attempts.iter().zip(outcomes) {
        history.unacked.insert(key.clone(), (data.clone(), how));
    }
    // Nothing the cut-off node was asked reached the majority.
    let c = nodes.client(major, true);
    for (key, _) in &attempts {
        assert_eq!(
            read(&c, bucket, key).await,
            None,
            "{key}, sent only to the cut-off node, exists at the majority"
        );
    }
    assert_eq!(read(&c, bucket, "probe").await, Some(v1.clone()));
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 20).await;

    // Heal: the writes go on, and the healed node's gateway takes writes again.
    let healed_at = Instant::now();
    net.heal();
    let before = acks.lock().unwrap().0;
    writes_resume(&nodes, &acks, before, 20).await;
    let back = random_bytes(700);
    let c = nodes.client_timeout(victim, MINORITY_TIMEOUT);
    eventually("a PUT through the healed node", || {
        c.put_object()
            .bucket(bucket)
            .key("healed/obj")
            .body(body(&back))
            .send()
    })
    .await;
    history.ack("healed/obj", &back);
    let took_write = healed_at.elapsed();
    let (acked, attempts_log) = writer.finish().await;
    history.acked.extend(acked);

    wait_caught_up(&nodes, victim).await;
    let caught_up = healed_at.elapsed();
    let landed = check(&nodes, bucket, &history).await;
    eprintln!(
        "cut off node {} (leader of group 1): writes resumed after {resumed:?}, longest gap \
         {:?}; healed: PUT through it after {took_write:?}, caught up after {caught_up:?}; \
         {} writes acknowledged, {landed} of {} minority writes took effect late",
        victim + 1,
        longest_gap(&attempts_log, cut_at, healed_at),
        history.acked.len(),
        history.unacked.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_node_cut_off_in_turn_loses_no_acknowledged_write() {
    let net = Netns::new(3);
    let nodes = Nodes::start_in(&net, &[]);
    nodes.wait_voters(&[]).await;
    let bucket = "rolling";
    let setup = nodes.client(0, true);
    eventually("create the bucket", || {
        setup.create_bucket().bucket(bucket).send()
    })
    .await;
    let mut history = History::default();

    for victim in 0..3 {
        // Writes through the next node, which stays with the majority.
        let through = (victim + 1) % 3;
        let acks: Progress = Arc::default();
        let prefix = format!("round{victim}");
        let writer =
            Writer::start_under(nodes.client(through, false), bucket, &prefix, acks.clone());
        writes_resume(&nodes, &acks, 0, 10).await;

        // Cut off: the majority's writes go on while the cut-off node is sent a PUT of its own.
        let cut_at = Instant::now();
        net.isolate(victim);
        let before = acks.lock().unwrap().0;
        let key = format!("minority/round{victim}");
        let data = random_bytes(400);
        let ((), how) = tokio::join!(
            writes_resume(&nodes, &acks, before, 20),
            minority_put(&nodes, victim, bucket, &key, &data)
        );
        history.unacked.insert(key.clone(), (data, how));
        assert_eq!(
            read(&nodes.client(through, true), bucket, &key).await,
            None,
            "{key}, sent only to the cut-off node {}, exists at the majority",
            victim + 1
        );

        let healed_at = Instant::now();
        net.heal();
        let before = acks.lock().unwrap().0;
        writes_resume(&nodes, &acks, before, 10).await;
        let (acked, attempts) = writer.finish().await;
        history.acked.extend(acked);
        let gap = longest_gap(&attempts, cut_at, healed_at);
        assert!(
            gap < MAX_WRITE_GAP,
            "the majority acknowledged no write for {gap:?} while node {} was cut off",
            victim + 1
        );
        wait_caught_up(&nodes, victim).await;
        let caught_up = healed_at.elapsed();
        let landed = check(&nodes, bucket, &history).await;
        eprintln!(
            "round {}: node {} cut off for {:?} (longest write gap {gap:?}), caught up \
             {caught_up:?} after the heal; {} writes acknowledged so far, {landed} minority \
             writes took effect late",
            victim + 1,
            victim + 1,
            healed_at.duration_since(cut_at),
            history.acked.len()
        );
    }
}
