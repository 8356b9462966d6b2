//! Bucket notifications to the broker targets, each a real broker on loopback: a NATS
//! JetStream (`nats-server -js`) that is stopped and started again while events wait, and a
//! private RabbitMQ node. Every acknowledged write's event must be in the stream or queue,
//! each key's in order, as the broker stored it (PubAck, publisher confirm).

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::nats::NatsServer;
use common::notify::*;
use common::rabbit::Rabbit;
use common::webhook::Received;
use common::*;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::ExchangeKind;

const EVENTS: [&str; 2] = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"];

type Ledger = BTreeMap<String, Vec<&'static str>>;

fn record(ledger: &mut Ledger, done: Vec<(String, &'static str)>) {
    for (k, e) in done {
        ledger.entry(k).or_default().push(e);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_stream_gets_every_event_in_order_through_a_server_restart() {
    const SUBJECT: &str = "saker.events";
    let srv = Server::default_start();
    let c = srv.client();
    let mut nats = NatsServer::start().await;
    let arn = add_target_with(&srv, "js", &["--nats", &nats.url(), "--subject", SUBJECT]);
    assert_eq!(arn, "arn:saker:sqs::js:nats");
    let listed = ok_stdout(srv.admin_cmd(&["notify", "target", "list"]), "list");
    assert!(listed.contains("subject=saker.events"), "{listed}");
    let b = new_bucket(&c, "natsfeed").await;
    configure(&c, &b, vec![queue("all", &arn, &EVENTS, "", "")]).await;

    // No stream captures the subject yet: the event waits, and the status says why.
    let mut ledger = Ledger::new();
    put(&c, &b, "early", b"e").await;
    ledger.insert("early".into(), vec!["ObjectCreated:Put"]);
    await_target_error(&srv, "js", "no JetStream stream captures subject").await;
    nats.create_stream("EVENTS", SUBJECT).await;

    let keys: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
    record(&mut ledger, write_round(&c, &b, &keys, 0).await);
    let first = poll_until(DELIVERY, || async {
        ledger_in(&nats.records("EVENTS").await.0, &ledger)
    })
    .await;
    assert!(first, "the first round did not arrive:\n{}", nats.log());

    // The server goes away while events are written: they wait in the feed.
    let failed_before = target_status(&srv, "js")["failed"].as_u64().unwrap_or(0);
    nats.down();
    for round in 1..4 {
        record(&mut ledger, write_round(&c, &b, &keys, round).await);
    }
    let failing = poll_until(DELIVERY, || async {
        let t = target_status(&srv, "js");
        t["failed"].as_u64().unwrap_or(0) > failed_before
            && t["queue_depth"].as_u64().unwrap_or(0) > 0
    })
    .await;
    assert!(failing, "status: {}", target_status(&srv, "js"));
    nats.up().await;

    let total: usize = ledger.values().map(Vec::len).sum();
    let all_in = poll_until(Duration::from_secs(60), || async {
        ledger_in(&nats.records("EVENTS").await.0, &ledger)
    })
    .await;
    let (got, bad) = nats.records("EVENTS").await;
    assert!(
        all_in,
        "{} of {total} events in the stream\n{}",
        got.len(),
        srv.stderr_tail()
    );
    assert!(bad.is_empty(), "messages that are not S3 events: {bad:?}");
    assert!(got.iter().all(|r| r.path == SUBJECT));
    check_ledger(&got, &ledger);
    eprintln!("{total} events, {} stored twice", got.len() - total);
}

/// Takes every message waiting in `queue` into `got` (records), checking each was sent as
/// a persistent `application/json` message (else into `bad`).
async fn take(ch: &lapin::Channel, queue: &str, got: &mut Vec<Received>, bad: &mut Vec<String>) {
    let no_ack = BasicGetOptions { no_ack: true };
    while let Some(m) = ch.basic_get(queue.into(), no_ack).await.expect("basic.get") {
        let d = m.delivery;
        let json = d
            .properties
            .content_type()
            .as_ref()
            .is_some_and(|t| t.as_str() == "application/json");
        if !json || *d.properties.delivery_mode() != Some(2) {
            bad.push(format!("properties {:?}", d.properties));
            continue;
        }
        match parse_records(queue, &d.data) {
            Ok(r) => got.extend(r),
            Err(e) => bad.push(e),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rabbitmq_queue_gets_every_event_confirmed_and_in_order() {
    let mut rabbit = Rabbit::start().await;
    let conn = rabbit.connect().await;
    let ch = conn.create_channel().await.unwrap();
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        "saker".into(),
        ExchangeKind::Direct,
        durable,
        FieldTable::default(),
    )
    .await
    .unwrap();
    for q in ["events", "later"] {
        let durable = QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        ch.queue_declare(q.into(), durable, FieldTable::default())
            .await
            .unwrap();
    }
    let bind = |q: &'static str, key: &'static str| {
        ch.queue_bind(
            q.into(),
            "saker".into(),
            key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
    };
    bind("events", "s3").await.unwrap();

    let srv = Server::default_start();
    let c = srv.client();
    let url = rabbit.url();
    let amqp = |key: &'static str| ["--amqp", &url, "--exchange", "saker", "--routing-key", key];
    let arn = add_target_with(&srv, "rabbit", &amqp("s3"));
    assert_eq!(arn, "arn:saker:sqs::rabbit:amqp");
    // Its routing key reaches no queue until one is bound.
    let unbound = add_target_with(&srv, "unbound", &amqp("late"));
    let listed = ok_stdout(srv.admin_cmd(&["notify", "target", "list"]), "list");
    assert!(
        !listed.contains("guest:guest"),
        "credentials listed: {listed}"
    );
    assert!(listed.contains("exchange=saker routing_key=s3"), "{listed}");
    let b = new_bucket(&c, "amqpfeed").await;
    configure(
        &c,
        &b,
        vec![
            queue("all", &arn, &EVENTS, "", ""),
            queue("late", &unbound, &["s3:ObjectCreated:*"], "late/", ""),
        ],
    )
    .await;

    let mut ledger = Ledger::new();
    let keys: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
    for round in 0..4 {
        record(&mut ledger, write_round(&c, &b, &keys, round).await);
    }
    let total: usize = ledger.values().map(Vec::len).sum();
    let (mut got, mut bad) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + DELIVERY;
    while !ledger_in(&got, &ledger) && Instant::now() < deadline {
        take(&ch, "events", &mut got, &mut bad).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ledger_in(&got, &ledger),
        "{} of {total} events in the queue\n{}",
        got.len(),
        srv.stderr_tail()
    );
    assert!(bad.is_empty(), "bad messages: {bad:?}");
    check_ledger(&got, &ledger);
    eprintln!("{total} events, {} delivered twice", got.len() - total);

    // Unroutable is not delivered: retried until a queue is bound, then there.
    put(&c, &b, "late/x", b"l").await;
    await_target_error(&srv, "unbound", "routed the message to no queue").await;
    bind("later", "late").await.unwrap();
    let (mut late, deadline) = (Vec::new(), Instant::now() + DELIVERY);
    while !late.iter().any(|r: &Received| r.key() == "late/x") && Instant::now() < deadline {
        take(&ch, "later", &mut late, &mut bad).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        late.iter().any(|r| r.key() == "late/x"),
        "late/x did not arrive once bound: {:?}",
        names(&late)
    );
    assert!(bad.is_empty(), "bad messages: {bad:?}");
    let _ = conn.close(200, "OK".into()).await;
    rabbit.stop();
}
