//! Kafka targets: each event of a batch becomes one record of the topic, its value the
//! `{"Records":[...]}` JSON a webhook gets (with that one record) and its key `BUCKET/KEY` (the
//! object key decoded), placed in a partition as Kafka's Java producer places a key (murmur2).
//! So a key's events stay in one partition, in the order the consumer sends them: per-key order
//! holds for Kafka consumers as it does for webhooks, and a compacted topic keeps each object's
//! last event. A batch is delivered when every record of it is acknowledged by all in-sync
//! replicas (`acks=all`, which the client always asks); a batch that fails is sent again whole,
//! so the records that had gone arrive twice (at least once, as for every target).
//!
//! This module holds the rules, with no I/O (a target's checks, a batch's records and their
//! partitions); [`producer`] sends them.

pub mod producer;

use serde_json::Value;

use crate::NotifyError;

/// What a Kafka target's delivery needs of its definition (`TargetKind::Kafka`). Never
/// printed (it holds the password).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Settings {
    /// Bootstrap brokers, `host:port`.
    pub brokers: Vec<String>,
    pub topic: String,
    /// SASL PLAIN user and password.
    pub sasl: Option<(String, String)>,
    /// TLS, verified with `tls_ca` (PEM) or else the system's roots.
    pub tls: bool,
    pub tls_ca: Option<String>,
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

/// A record's key and value.
type KeyValue = (Vec<u8>, Vec<u8>);

/// The (record key, record value) of each event of a `{"Records":[...]}` body: `BUCKET/KEY`
/// and the body of that one record.
fn split(body: &[u8]) -> Result<Vec<KeyValue>, String> {
    let bad = |why: &str| format!("not an event batch: {why}");
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
            (kafka_key, crate::event::body(&[r]))
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
        let body = crate::event::body(&[
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
