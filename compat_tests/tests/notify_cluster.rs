//! Bucket notifications on a replicated cluster: the consumer runs on the node of the active
//! coordinator; that node is SIGKILLed (and restarted) while a writer PUTs through another
//! node, the webhook receiver is down for the first round and the NATS server (a JetStream
//! target beside the webhook) for the second. Every acknowledged PUT must reach both as its
//! `ObjectCreated:Put` event (ledgers: none missing; duplicates are allowed and counted).

mod common;

use std::time::Duration;

use aws_sdk_s3::types::{Event, NotificationConfiguration, QueueConfiguration};
use common::cluster::*;
use common::nats::NatsServer;
use common::webhook::{Received, Webhook};
use common::*;

const BUCKET: &str = "feedkill";

/// Kill rounds: each kills the node the coordinator is active on.
const ROUNDS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_consumer_s_node_loses_no_acknowledged_event() {
    let mut nodes = Nodes::start(&[]);
    let mut hook = Webhook::start().await;
    let mut nats = NatsServer::start().await;
    nats.create_stream("FEED", "feed.events").await;
    let arn = nodes
        .admin(
            0,
            &[
                "notify",
                "target",
                "add",
                "sink",
                "--webhook",
                &hook.url("in"),
            ],
        )
        .trim()
        .to_string();
    let js_arn = nodes
        .admin(
            0,
            &[
                "notify",
                "target",
                "add",
                "js",
                "--nats",
                &nats.url(),
                "--subject",
                "feed.events",
            ],
        )
        .trim()
        .to_string();
    let c = nodes.client(0, true);
    eventually("create the bucket", || {
        c.create_bucket().bucket(BUCKET).send()
    })
    .await;
    let queue = |id: &str, arn: &str| {
        QueueConfiguration::builder()
            .id(id)
            .queue_arn(arn)
            .events(Event::from("s3:ObjectCreated:*"))
            .build()
            .unwrap()
    };
    c.put_bucket_notification_configuration()
        .bucket(BUCKET)
        .notification_configuration(
            NotificationConfiguration::builder()
                .queue_configurations(queue("all", &arn))
                .queue_configurations(queue("js", &js_arn))
                .build(),
        )
        .send()
        .await
        .expect("put bucket notification configuration");

    let mut ledgers = Vec::new();
    let mut posts_down = 0;
    for round in 0..ROUNDS {
        let victim = nodes.leader(1).await;
        let via = (victim + 1) % 3;
        let acks: Progress = Default::default();
        let prefix = format!("r{round}");
        let writer = Writer::start_under(nodes.client(via, true), BUCKET, &prefix, acks.clone());
        writes_resume(&nodes, &acks, 0, 20).await;
        if round == 0 {
            // The receiver goes down for the kill and the writes after it.
            hook.down().await;
            posts_down = hook.posts();
        } else {
            nats.down();
        }
        nodes.kill(victim);
        let at_kill = acks.lock().unwrap().0;
        writes_resume(&nodes, &acks, at_kill, 30).await;
        nodes.restart(victim);
        let at_restart = acks.lock().unwrap().0;
        writes_resume(&nodes, &acks, at_restart, 20).await;
        if round == 0 {
            assert_eq!(
                hook.posts(),
                posts_down,
                "posts while the receiver was down"
            );
            hook.up().await;
        } else {
            nats.up().await;
        }
        ledgers.push(writer.finish().await.0);
    }

    let acked: Vec<String> = ledgers
        .iter()
        .flat_map(|l| l.keys().map(|k| encode(k)))
        .collect();
    let all_put = |got: &[Received]| {
        acked.iter().all(|k| {
            got.iter()
                .any(|r| r.key() == k && r.event_name() == "ObjectCreated:Put")
        })
    };
    // Checked per target below.
    let _ = poll_until(Duration::from_secs(90), || async {
        all_put(&hook.received()) && all_put(&nats.records("FEED").await.0)
    })
    .await;
    let (stored, bad) = nats.records("FEED").await;
    for (target, got) in [("webhook", hook.received()), ("NATS", stored)] {
        let missing: Vec<&String> = acked
            .iter()
            .filter(|k| !got.iter().any(|r| &r.key() == k))
            .collect();
        assert!(
            all_put(&got),
            "{target}: {} of {} acknowledged PUTs have no event: {:?}\nlogs:\n{}",
            missing.len(),
            acked.len(),
            &missing[..missing.len().min(10)],
            nodes.logs()
        );
        let mut distinct: Vec<(&str, &str)> =
            got.iter().map(|r| (r.key(), r.sequencer())).collect();
        distinct.sort();
        distinct.dedup();
        eprintln!(
            "{target}: {} acknowledged PUTs, {} events received, {} distinct, {} duplicates",
            acked.len(),
            got.len(),
            distinct.len(),
            got.len() - distinct.len()
        );
    }
    assert!(hook.bad().is_empty(), "bad posts: {:?}", hook.bad());
    assert!(
        bad.is_empty(),
        "stream messages that are not S3 events: {bad:?}"
    );
}

/// A key as S3 events carry it (the writer's keys have nothing to escape but `/`).
fn encode(key: &str) -> String {
    key.to_string()
}
