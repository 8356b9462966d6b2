//! The Kafka sink: the client is rskafka (pure Rust, no librdkafka), with no compression
//! codecs. One connection per target definition is kept for the process ([`POOL`]), made at
//! the first delivery and dropped after any failed one (the next makes it again), every
//! delivery bounded by [`DELIVERY_TIMEOUT`]. saker creates no topic: a missing one fails each
//! delivery with a message that says so, and the events wait in the feed until it exists.

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

use super::{partition_of, roots_from_pem, split, Settings};
use crate::sink::{DeliveryError, Sink, DELIVERY_TIMEOUT};

/// How long the client's retries of one request may sleep, within one delivery, before it
/// gives up with the broker's error. rskafka counts only the sleeps, not the attempts (a TLS
/// handshake and a refused login take a while each), so this is well below
/// [`DELIVERY_TIMEOUT`]: the error the status shows is then the broker's, not a bare time-out.
const RETRY_DEADLINE: Duration = Duration::from_secs(3);
/// A target's connection unused this long (the target removed or changed) is closed.
const IDLE: Duration = Duration::from_secs(600);

/// The TLS client configuration: the target's CA certificates, else the system's roots.
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

/// Every Kafka target's producer in this process, by its settings (a changed definition is a
/// new producer; the old one closes once idle for [`IDLE`]).
static POOL: LazyLock<Mutex<HashMap<Settings, Arc<Producer>>>> = LazyLock::new(Default::default);

/// The sink of a Kafka target: its producer from [`POOL`].
pub fn sink(settings: Settings) -> Box<dyn Sink> {
    let mut pool = POOL.lock();
    pool.retain(|_, p| Arc::strong_count(p) > 1 || p.used.lock().elapsed() < IDLE);
    let producer = pool
        .entry(settings.clone())
        .or_insert_with(|| {
            Arc::new(Producer {
                settings,
                connection: tokio::sync::Mutex::new(None),
                used: Mutex::new(Instant::now()),
            })
        })
        .clone();
    Box::new(KafkaSink(producer))
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
        let records = split(body).map_err(DeliveryError::Refused)?;
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
        records: Vec<super::KeyValue>,
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

fn now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    let ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    rskafka::chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
