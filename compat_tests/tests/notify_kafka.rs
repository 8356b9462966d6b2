//! Bucket notifications to a real Kafka broker (4.x in KRaft mode, one JVM; its jars from
//! `compat_tests/kafka/install.sh`, which `./test.sh` runs): a Kafka target added with the CLI,
//! a bucket's QueueConfiguration with a key filter, objects put, overwritten and deleted with
//! aws-sdk-s3, and the topic read back with rskafka. Every acknowledged write's event is there
//! (duplicates allowed, counted), as S3's event JSON, one record per event keyed BUCKET/KEY,
//! each key's in one partition and in order, through a broker stopped for a while and started
//! again; SASL PLAIN over TLS delivers, a wrong password or an untrusted certificate does not;
//! a target whose topic does not exist says so and delivers once it does.
//! One test: the broker takes a core and some seconds to start.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_lambda_events::event::s3::S3Event;
use common::kafka::{Broker, Read, SASL_PASSWORD, SASL_USER};
use common::notify::*;
use common::*;

/// How long the events may take to arrive after the broker is back (the consumer's backoff
/// reaches 30 s).
const AFTER_OUTAGE: Duration = Duration::from_secs(120);

/// An event a write must have made.
#[derive(Debug, Clone, PartialEq)]
struct Want {
    name: &'static str,
    size: i64,
    etag: Option<String>,
}

/// One record of the topic, parsed.
#[derive(Debug)]
struct Got {
    partition: i32,
    kafka_key: String,
    name: String,
    encoded_key: String,
    size: i64,
    etag: Option<String>,
    sequencer: String,
}

fn parse(bucket: &str, r: &Read) -> Got {
    let ev: S3Event = serde_json::from_slice(&r.value).unwrap_or_else(|e| {
        panic!(
            "record {}@{} is not an S3 event ({e}): {}",
            r.partition,
            r.offset,
            String::from_utf8_lossy(&r.value)
        )
    });
    assert_eq!(ev.records.len(), 1, "one event per record");
    let rec = &ev.records[0];
    assert_eq!(rec.event_source.as_deref(), Some("saker:s3"));
    assert_eq!(rec.s3.bucket.name.as_deref(), Some(bucket));
    let o = &rec.s3.object;
    Got {
        partition: r.partition,
        kafka_key: String::from_utf8(r.key.clone()).expect("a UTF-8 record key"),
        name: rec.event_name.clone().unwrap_or_default(),
        encoded_key: o.key.clone().unwrap_or_default(),
        size: o.size.unwrap_or(-1),
        etag: o.e_tag.clone().filter(|e| !e.is_empty()),
        sequencer: o.sequencer.clone().unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_gets_every_acknowledged_event_in_order_per_key_through_a_broker_outage() {
    let began = Instant::now();
    let mut kafka = Broker::start().await;
    kafka.create_topic("s3-events", 3).await;
    kafka.create_topic("secure-events", 1).await;
    eprintln!("Kafka answered in {:?}", began.elapsed());

    let srv = Server::default_start();
    let c = srv.client();
    let out = srv.admin_cmd(&[
        "notify",
        "target",
        "add",
        "stream",
        "--kafka",
        &kafka.addr(),
        "--topic",
        "s3-events",
    ]);
    let arn = ok_stdout(out, "notify target add --kafka")
        .trim()
        .to_string();
    assert_eq!(arn, "arn:saker:sqs::stream:kafka");
    let listed = ok_stdout(srv.admin_cmd(&["notify", "target", "list"]), "target list");
    let endpoint = format!("kafka://{}/s3-events", kafka.addr());
    assert!(listed.contains(&endpoint), "{listed}");
    // A broker that is not host:port is refused before anything is stored.
    let bad = srv.admin_cmd(&[
        "notify", "target", "add", "bad", "--kafka", "nohost", "--topic", "t",
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("host:port"));

    let b = new_bucket(&c, "kafkafeed").await;
    let events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"];
    configure(&c, &b, vec![queue("in", &arn, &events, "in/", "")]).await;

    // Keys and how S3 events encode them; `out/` is outside the filter.
    let keys: [(&str, &str); 4] = [
        ("in/plain.txt", "in/plain.txt"),
        ("in/a b+c.txt", "in/a+b%2Bc.txt"),
        ("in/ü/x", "in/%C3%BC/x"),
        ("in/deep/er/k", "in/deep/er/k"),
    ];
    let mut ledger: BTreeMap<String, Vec<Want>> = BTreeMap::new();
    let mut writes = 0;
    let round = |round: usize| {
        let c = c.clone();
        let b = b.clone();
        async move {
            let mut done = Vec::new();
            for (i, (k, _)) in keys.iter().enumerate() {
                // A put, then an overwrite of another size, and every other round a delete.
                for body in [format!("{round}"), format!("{round}-{i}-again")] {
                    let etag = put(&c, &b, k, body.as_bytes()).await;
                    let want = Want {
                        name: "ObjectCreated:Put",
                        size: body.len() as i64,
                        etag: Some(etag.trim_matches('"').to_string()),
                    };
                    done.push((k.to_string(), want));
                }
                if round % 2 == 1 {
                    c.delete_object().bucket(&b).key(*k).send().await.unwrap();
                    let want = Want {
                        name: "ObjectRemoved:Delete",
                        size: 0,
                        etag: None,
                    };
                    done.push((k.to_string(), want));
                }
            }
            put(&c, &b, &format!("out/{round}"), b"not notified").await;
            done
        }
    };
    let mut record = |done: Vec<(String, Want)>| {
        for (k, w) in done {
            writes += 1;
            ledger.entry(k).or_default().push(w);
        }
    };
    record(round(0).await);
    record(round(1).await);

    // The broker goes away: writes are acknowledged all the same, their events wait.
    kafka.stop();
    let outage = Instant::now();
    record(round(2).await);
    record(round(3).await);
    let retrying = poll_until(Duration::from_secs(60), || async {
        let t = target_status(&srv, "stream");
        t["failed"].as_u64().unwrap_or(0) >= 2 && t["queue_depth"].as_u64().unwrap_or(0) > 0
    })
    .await;
    let t = target_status(&srv, "stream");
    assert!(retrying, "status did not show the failing target: {t}");
    assert!(
        t["last_error"].as_str().unwrap_or("").contains("Kafka"),
        "{t}"
    );
    kafka.restart().await;
    eprintln!("Kafka down for {:?}", outage.elapsed());
    record(round(4).await);

    let all_in = poll_until(AFTER_OUTAGE, || async {
        let got: Vec<Got> = kafka
            .read_all("s3-events")
            .await
            .iter()
            .map(|r| parse(&b, r))
            .collect();
        keys.iter().all(|(k, enc)| {
            let distinct = {
                let mut s: Vec<&str> = got
                    .iter()
                    .filter(|g| g.encoded_key == *enc)
                    .map(|g| g.sequencer.as_str())
                    .collect();
                s.sort();
                s.dedup();
                s.len()
            };
            distinct >= ledger[*k].len()
        })
    })
    .await;
    let reads = kafka.read_all("s3-events").await;
    let got: Vec<Got> = reads.iter().map(|r| parse(&b, r)).collect();
    assert!(
        all_in,
        "{} records for {writes} acknowledged writes after the outage",
        got.len()
    );

    for (k, enc) in keys {
        let mine: Vec<&Got> = got.iter().filter(|g| g.encoded_key == enc).collect();
        // Keyed BUCKET/KEY (the key as it is), all in one partition.
        assert!(
            mine.iter().all(|g| g.kafka_key == format!("{b}/{k}")),
            "{k}"
        );
        assert!(
            mine.iter().all(|g| g.partition == mine[0].partition),
            "{k}: in more than one partition"
        );
        // Each event's first record, in offset order: sequencers increasing, and the events
        // the ledger has for this key, in its order.
        let mut first: Vec<&Got> = Vec::new();
        for g in &mine {
            if !first.iter().any(|f| f.sequencer == g.sequencer) {
                first.push(g);
            }
        }
        assert!(
            first.windows(2).all(|w| w[0].sequencer < w[1].sequencer),
            "{k}: events out of order: {:?}",
            first.iter().map(|g| &g.sequencer).collect::<Vec<_>>()
        );
        let seen: Vec<Want> = first
            .iter()
            .map(|g| Want {
                name: if g.name == "ObjectCreated:Put" {
                    "ObjectCreated:Put"
                } else {
                    "ObjectRemoved:Delete"
                },
                size: g.size,
                etag: g.etag.clone(),
            })
            .collect();
        assert!(
            first.iter().all(|g| matches!(
                g.name.as_str(),
                "ObjectCreated:Put" | "ObjectRemoved:Delete"
            )),
            "{k}: {first:?}"
        );
        assert_eq!(seen, ledger[k], "{k}");
    }
    assert!(
        got.iter().all(|g| g.encoded_key.starts_with("in/")),
        "an event outside the filter"
    );
    eprintln!(
        "{writes} acknowledged writes, {} records ({} duplicates) in {:?}",
        got.len(),
        got.len() - writes,
        began.elapsed()
    );

    // SASL PLAIN over TLS verified with a CA file delivers, the password shown nowhere. A wrong
    // password, or a CA that did not sign the broker's certificate, fails each delivery,
    // saying why.
    let other = tempfile::tempdir().unwrap();
    common::certs::make_certificates(other.path());
    let secure = |name: &str, password: &str, ca: &std::path::Path| {
        let out = srv.admin_cmd(&[
            "notify",
            "target",
            "add",
            name,
            "--kafka",
            &kafka.secure_addr(),
            "--topic",
            "secure-events",
            "--kafka-sasl-user",
            SASL_USER,
            "--kafka-sasl-password",
            password,
            "--kafka-tls-ca",
            ca.to_str().unwrap(),
        ]);
        ok_stdout(out, "notify target add --kafka-sasl-user")
            .trim()
            .to_string()
    };
    let mut buckets = Vec::new();
    for (name, password, ca) in [
        ("secure", SASL_PASSWORD, kafka.ca()),
        ("denied", "not-the-password", kafka.ca()),
        ("untrusted", SASL_PASSWORD, other.path().join("ca.pem")),
    ] {
        let arn = secure(name, password, &ca);
        let bucket = new_bucket(&c, &format!("kafka{name}")).await;
        configure(&c, &bucket, vec![queue("all", &arn, &events, "", "")]).await;
        put(&c, &bucket, "over/tls", b"sealed").await;
        buckets.push(bucket);
    }
    let secured = poll_until(DELIVERY, || async {
        let reads = kafka.read_all("secure-events").await;
        reads
            .iter()
            .any(|r| r.key == format!("{}/over/tls", buckets[0]).as_bytes())
    })
    .await;
    assert!(
        secured,
        "no record over SASL_SSL: {}",
        target_status(&srv, "secure")
    );
    for (name, why) in [
        ("denied", "SaslAuthenticationFailed"),
        ("untrusted", "certificate"),
    ] {
        let s = await_target_error(&srv, name, why).await;
        eprintln!("{name}: {}", s["last_error"]);
    }
    let reads = kafka.read_all("secure-events").await;
    assert_eq!(reads.len(), 1, "records sent by the failing targets");
    let listed = ok_stdout(srv.admin_cmd(&["notify", "target", "list"]), "target list");
    let statuses = srv.admin_cmd(&["notify", "status", "--json"]).stdout;
    let statuses = String::from_utf8_lossy(&statuses).to_string();
    for text in [listed, statuses, srv.stderr_tail()] {
        assert!(!text.contains(SASL_PASSWORD), "the password shown: {text}");
    }

    // A target whose topic does not exist: each delivery fails saying so, and the events are
    // delivered once the topic is made.
    let out = srv.admin_cmd(&[
        "notify",
        "target",
        "add",
        "late",
        "--kafka",
        &kafka.addr(),
        "--topic",
        "later",
    ]);
    let late_arn = ok_stdout(out, "notify target add late").trim().to_string();
    let b2 = new_bucket(&c, "kafkalate").await;
    configure(&c, &b2, vec![queue("all", &late_arn, &events, "", "")]).await;
    put(&c, &b2, "waits", b"for its topic").await;
    await_target_error(&srv, "late", "\"later\" does not exist").await;
    kafka.create_topic("later", 1).await;
    let delivered = poll_until(AFTER_OUTAGE, || async {
        let reads = kafka.read_all("later").await;
        reads.iter().any(|r| parse(&b2, r).encoded_key == "waits")
    })
    .await;
    assert!(delivered, "the event did not arrive once its topic existed");
    eprintln!("the Kafka test took {:?}", began.elapsed());
}
