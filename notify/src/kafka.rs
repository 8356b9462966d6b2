//! Kafka targets: each event of a batch becomes one record of the topic, its value the
//! `{"Records":[...]}` JSON a webhook gets (with that one record) and its key `BUCKET/KEY` (the
//! object key decoded), placed in a partition as Kafka's Java producer places a key (murmur2).
//! So a key's events stay in one partition, in the order the consumer sends them: per-key order
//! holds for Kafka consumers as it does for webhooks, and a compacted topic keeps each object's
//! last event. A batch is delivered when every record of it is acknowledged by all in-sync
//! replicas (`acks=all`, which the client always asks); a batch that fails is sent again whole,
//! so the records that had gone arrive twice (at least once, as for every target).
//!
//! The client is rskafka (pure Rust, no librdkafka), with no compression codecs. One connection
//! per target definition is kept for the process ([`POOL`]), made at the first delivery and
//! dropped after any failed one (the next makes it again), every delivery bounded by
//! [`DELIVERY_TIMEOUT`]. saker creates no topic: a missing one fails each delivery with a
//! message that says so, and the events wait in the feed until it exists.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use parking_lot::Mutex;
use rskafka::client::error::{Error as KafkaError, ProtocolError};
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder, Credentials, SaslConfig};
use rskafka::record::Record;
use rskafka::BackoffConfig;
use serde_json::Value;

use crate::sink::{DeliveryError, Sink, DELIVERY_TIMEOUT};
use crate::target::{Target, TargetKind};
use crate::NotifyError;

/// How long the client retries a broker that does not answer, within one delivery, before it
/// gives up with the broker's error (less than [`DELIVERY_TIMEOUT`], so that error is what the
/// status shows rather than a bare time-out).
const RETRY_DEADLINE: Duration = Duration::from_secs(6);
/// A target's connection unused this long (the target removed or changed) is closed.
const IDLE: Duration = Duration::from_secs(600);

/// The Kafka settings of a target, as [`TargetKind::Kafka`] holds them.
struct Settings {
    brokers: Vec<String>,
    topic: String,
    sasl: Option<(String, String)>,
    tls: bool,
    tls_ca: Option<String>,
}

impl Settings {
    fn of(kind: &TargetKind) -> Option<Self> {
        match kind {
            TargetKind::Kafka {
                brokers,
                topic,
                sasl_user,
                sasl_password,
                tls,
                tls_ca,
            } => Some(Self {
                brokers: brokers.clone(),
                topic: topic.clone(),
                sasl: sasl_user.clone().zip(sasl_password.clone()),
                tls: *tls || tls_ca.is_some(),
                tls_ca: tls_ca.clone(),
            }),
            _ => None,
        }
    }
}

/// Checks a Kafka target's settings: at least one `host:port` broker, a legal topic name, a
/// SASL user and password given together, a CA that is PEM certificates.
pub fn validate(
    brokers: &[String],
    topic: &str,
    sasl_user: Option<&str>,
    sasl_password: Option<&str>,
    tls_ca: Option<&str>,
) -> Result<(), NotifyError> {
    let bad = |m: String| Err(NotifyError::Invalid(m));
    if brokers.is_empty() {
        return bad("a Kafka target needs at least one broker (host:port)".into());
    }
    for b in brokers {
        if !is_host_port(b) {
            return bad(format!(
                "Kafka broker {b:?} is not host:port (a port from 1 to 65535)"
            ));
        }
    }
    // Kafka's own rule (`Topic.validate`).
    let legal = topic
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
    if topic.is_empty() || topic.len() > 249 || !legal || topic == "." || topic == ".." {
        return bad(format!(
            "Kafka topic {topic:?}: 1 to 249 letters, digits, '.', '_' or '-'"
        ));
    }
    match (sasl_user, sasl_password) {
        (None, None) => {}
        (Some(u), Some(p)) if !u.is_empty() && !p.is_empty() => {}
        _ => return bad("a Kafka SASL user and password go together, neither empty".into()),
    }
    if let Some(pem) = tls_ca {
        roots_from_pem(pem).map_err(NotifyError::Invalid)?;
    }
    Ok(())
}

fn is_host_port(s: &str) -> bool {
    let Some((host, port)) = s.rsplit_once(':') else {
        return false;
    };
    let host_ok = match host.strip_prefix('[') {
        Some(v6) => v6
            .strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()),
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
        }
    };
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// Where a Kafka target is, for listings: `kafka://BROKER,.../TOPIC` (no credentials).
pub fn endpoint(brokers: &[String], topic: &str) -> String {
    format!("kafka://{}/{topic}", brokers.join(","))
}

/// The certificates of a PEM text as a root store.
fn roots_from_pem(pem: &str) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let cert = cert.map_err(|e| format!("Kafka TLS CA: not PEM certificates: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("Kafka TLS CA: a certificate not taken: {e}"))?;
    }
    if roots.is_empty() {
        return Err("Kafka TLS CA: no certificate in it".into());
    }
    Ok(roots)
}

fn tls_config(settings: &Settings) -> Result<Arc<rustls::ClientConfig>, String> {
    let roots = match &settings.tls_ca {
        Some(pem) => roots_from_pem(pem)?,
        None => {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            roots
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Every Kafka target's producer in this process, by its definition (a changed definition is
/// a new producer; the old one closes once idle for [`IDLE`]).
static POOL: LazyLock<Mutex<HashMap<String, Arc<Producer>>>> = LazyLock::new(Default::default);

/// The sink of a Kafka target (its producer from [`POOL`]). `None` for another kind.
pub fn sink(target: &Target) -> Option<Box<dyn Sink>> {
    let settings = Settings::of(&target.kind)?;
    let key = serde_json::to_string(target).expect("a target encodes");
    let mut pool = POOL.lock();
    pool.retain(|_, p| Arc::strong_count(p) > 1 || p.used.lock().elapsed() < IDLE);
    let producer = pool
        .entry(key)
        .or_insert_with(|| {
            Arc::new(Producer {
                settings,
                connection: tokio::sync::Mutex::new(None),
                used: Mutex::new(Instant::now()),
            })
        })
        .clone();
    Some(Box::new(KafkaSink(producer)))
}

struct KafkaSink(Arc<Producer>);

#[async_trait]
impl Sink for KafkaSink {
    async fn send(&self, body: Vec<u8>) -> Result<(), DeliveryError> {
        *self.0.used.lock() = Instant::now();
        self.0.send(&body).await
    }
}

/// One target's client: connected at the first delivery, again after a failed one.
struct Producer {
    settings: Settings,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    used: Mutex<Instant>,
}

/// A client of the brokers and the topic's partitions (each partition's client made when a
/// record first goes to it).
struct Connection {
    client: Client,
    partitions: Vec<tokio::sync::OnceCell<PartitionClient>>,
}

impl Producer {
    async fn send(&self, body: &[u8]) -> Result<(), DeliveryError> {
        let records = split(body)?;
        if records.is_empty() {
            return Ok(());
        }
        let produced = tokio::time::timeout(DELIVERY_TIMEOUT, async {
            let conn = self.connect().await?;
            self.produce(&conn, records).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(DeliveryError::Unreachable(format!(
                "Kafka {}: no acknowledgement within {DELIVERY_TIMEOUT:?}",
                self.settings.brokers.join(",")
            )))
        });
        if produced.is_err() {
            // Made again at the next delivery (brokers, leaders, partitions may have changed).
            *self.connection.lock().await = None;
        }
        produced
    }

    /// The connection, made if there is none (one at a time: concurrent deliveries wait for
    /// it and share it).
    async fn connect(&self) -> Result<Arc<Connection>, DeliveryError> {
        let mut slot = self.connection.lock().await;
        if let Some(c) = &*slot {
            return Ok(c.clone());
        }
        let s = &self.settings;
        let mut builder = ClientBuilder::new(s.brokers.clone())
            .client_id("saker")
            .backoff_config(BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
                base: 2.0,
                deadline: Some(RETRY_DEADLINE),
            });
        if let Some((user, password)) = &s.sasl {
            builder = builder.sasl_config(SaslConfig::Plain(Credentials::new(
                user.clone(),
                password.clone(),
            )));
        }
        if s.tls {
            builder = builder.tls_config(tls_config(s).map_err(DeliveryError::Refused)?);
        }
        let client = builder.build().await.map_err(|e| self.error(e))?;
        let topics = client.list_topics().await.map_err(|e| self.error(e))?;
        let Some(topic) = topics.iter().find(|t| t.name == s.topic) else {
            return Err(self.no_topic());
        };
        let n = topic.partitions.iter().max().map_or(0, |&p| p + 1);
        if n <= 0 {
            return Err(self.no_topic());
        }
        let conn = Arc::new(Connection {
            client,
            partitions: (0..n).map(|_| tokio::sync::OnceCell::new()).collect(),
        });
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// Sends each partition's records in one request, the partitions at once.
    async fn produce(
        &self,
        conn: &Connection,
        records: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(), DeliveryError> {
        let n = conn.partitions.len();
        let timestamp = now();
        let mut by_partition: BTreeMap<usize, Vec<Record>> = BTreeMap::new();
        for (key, value) in records {
            by_partition
                .entry(partition_of(&key, n))
                .or_default()
                .push(Record {
                    key: Some(key),
                    value: Some(value),
                    headers: BTreeMap::new(),
                    timestamp,
                });
        }
        let sends = by_partition.into_iter().map(|(p, records)| async move {
            let client = conn.partitions[p]
                .get_or_try_init(|| {
                    conn.client.partition_client(
                        self.settings.topic.clone(),
                        p as i32,
                        UnknownTopicHandling::Error,
                    )
                })
                .await
                .map_err(|e| self.error(e))?;
            client
                .produce(records, Compression::NoCompression)
                .await
                .map_err(|e| self.error(e))
        });
        futures::future::try_join_all(sends).await?;
        Ok(())
    }

    fn no_topic(&self) -> DeliveryError {
        DeliveryError::Refused(format!(
            "Kafka topic {:?} does not exist on {} (saker does not create topics)",
            self.settings.topic,
            self.settings.brokers.join(",")
        ))
    }

    /// A client error as a delivery error: the brokers' refusals (a missing topic, denied
    /// access) as [`DeliveryError::Refused`], the rest as unreachable.
    fn error(&self, e: KafkaError) -> DeliveryError {
        match e {
            KafkaError::ServerError {
                protocol_error: ProtocolError::UnknownTopicOrPartition,
                ..
            } => self.no_topic(),
            KafkaError::ServerError {
                protocol_error,
                error_message,
                ..
            } => DeliveryError::Refused(format!(
                "Kafka: {protocol_error}{}",
                error_message.map(|m| format!(": {m}")).unwrap_or_default()
            )),
            e => DeliveryError::Unreachable(format!(
                "Kafka {}: {e}",
                self.settings.brokers.join(",")
            )),
        }
    }
}

/// The (record key, record value) of each event of a `{"Records":[...]}` body: `BUCKET/KEY`
/// and the body of that one record.
fn split(body: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, DeliveryError> {
    let bad = |why: &str| DeliveryError::Refused(format!("not an event batch: {why}"));
    let mut parsed: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
    let Some(Value::Array(records)) = parsed.get_mut("Records").map(Value::take) else {
        return Err(bad("no Records"));
    };
    Ok(records
        .into_iter()
        .map(|r| {
            let s3 = &r["s3"];
            let bucket = s3["bucket"]["name"].as_str().unwrap_or("");
            let key = decode_key(s3["object"]["key"].as_str().unwrap_or(""));
            let kafka_key = format!("{bucket}/{key}").into_bytes();
            (kafka_key, crate::event::body(vec![r]))
        })
        .collect())
}

/// The object key of an event record (the reverse of [`crate::event::encode_key`]).
fn decode_key(encoded: &str) -> String {
    let plus = encoded.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

fn now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    rskafka::chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// The partition Kafka's Java producer picks for `key` among `n` (`Utils.murmur2`, positive,
/// modulo `n`), so saker's records share partitions with other producers' of the same key.
fn partition_of(key: &[u8], n: usize) -> usize {
    (murmur2(key) & 0x7fff_ffff) as usize % n.max(1)
}

/// Kafka's murmur2 (seed `0x9747b28c`), as `org.apache.kafka.common.utils.Utils.murmur2`.
fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate().rev() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka(brokers: &[&str], topic: &str) -> Target {
        Target {
            name: "stream".into(),
            kind: TargetKind::Kafka {
                brokers: brokers.iter().map(|b| b.to_string()).collect(),
                topic: topic.into(),
                sasl_user: Some("svc".into()),
                sasl_password: Some("hunter2".into()),
                tls: false,
                tls_ca: None,
            },
        }
    }

    #[test]
    fn murmur2_and_partitions_are_kafka_s() {
        // From org.apache.kafka.common.utils.Utils 4.4.0 (murmur2, toPositive(h) % 7).
        for (key, hash, p7) in [
            ("", 275646681, 2),
            ("a", -1563381124, 5),
            ("ab", 316155434, 0),
            ("abc", 479470107, 4),
            ("21", -973932308, 3),
            ("foobar", -790332482, 0),
            ("lake/photos/red flower.jpg", -403863078, 6),
            ("b/kéy", -551910547, 3),
        ] {
            assert_eq!(murmur2(key.as_bytes()), hash, "{key:?}");
            assert_eq!(partition_of(key.as_bytes(), 7), p7, "{key:?}");
        }
    }

    #[test]
    fn kafka_targets_are_checked_named_and_never_show_the_password() {
        let ok = kafka(
            &["127.0.0.1:9092", "kafka-2.lan:19092", "[::1]:9092"],
            "s3.events",
        );
        ok.validate().unwrap();
        assert_eq!(ok.arn(), "arn:saker:sqs::stream:kafka");
        assert_eq!(
            crate::target::parse_arn(&ok.arn()).unwrap(),
            ("stream", "kafka")
        );
        assert_eq!(
            ok.kind.endpoint(),
            "kafka://127.0.0.1:9092,kafka-2.lan:19092,[::1]:9092/s3.events"
        );
        let debug = format!("{ok:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("svc"), "{debug}");
        // Stored and read back as it was.
        let json = serde_json::to_string(&ok).unwrap();
        assert!(json.contains(r#""kind":"kafka""#), "{json}");
        assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), ok);

        for (brokers, topic, why) in [
            (&[][..], "t", "at least one broker"),
            (&["localhost"][..], "t", "not host:port"),
            (&["localhost:0"][..], "t", "not host:port"),
            (&["localhost:99999"][..], "t", "not host:port"),
            (&[":9092"][..], "t", "not host:port"),
            (&["h:9092"][..], "", "Kafka topic"),
            (&["h:9092"][..], "a/b", "Kafka topic"),
        ] {
            let e = kafka(brokers, topic).validate().unwrap_err().to_string();
            assert!(e.contains(why), "{brokers:?} {topic:?}: {e}");
        }
        let mut half = kafka(&["h:9092"], "t");
        if let TargetKind::Kafka { sasl_password, .. } = &mut half.kind {
            *sasl_password = None;
        }
        assert!(half.validate().unwrap_err().to_string().contains("SASL"));
        let mut ca = kafka(&["h:9092"], "t");
        if let TargetKind::Kafka { tls_ca, .. } = &mut ca.kind {
            *tls_ca = Some("not a certificate".into());
        }
        assert!(ca.validate().unwrap_err().to_string().contains("TLS CA"));
    }

    #[test]
    fn a_batch_becomes_one_record_per_event_keyed_by_bucket_and_key() {
        let ctx = crate::event::Context {
            bucket: "lake",
            region: "us-east-1",
            configuration_id: "c",
            owner: "",
        };
        let ev = |key: &str| saker_rpc::FeedEvent {
            seq: 1,
            kind: saker_rpc::FeedKind::Put,
            key: key.into(),
            size: 3,
            etag: "e".into(),
            version_id: None,
            sequencer: 1,
            time_ns: 0,
        };
        let body = crate::event::body(vec![
            crate::event::record(&ctx, "ObjectCreated:Put", &ev("a b+c/é.txt")),
            crate::event::record(&ctx, "ObjectCreated:Put", &ev("x")),
        ]);
        let records = split(&body).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].0, "lake/a b+c/é.txt".as_bytes());
        assert_eq!(records[1].0, b"lake/x");
        let one: Value = serde_json::from_slice(&records[0].1).unwrap();
        assert_eq!(one["Records"].as_array().unwrap().len(), 1);
        assert_eq!(
            one["Records"][0]["s3"]["object"]["key"],
            "a+b%2Bc/%C3%A9.txt"
        );
        assert!(split(b"{}").is_err());
    }
}
