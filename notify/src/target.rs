//! Notification targets: where a bucket's events go, defined once for the cluster
//! (`saker admin notify target add`) and named in buckets' configurations by their ARN,
//! `arn:saker:sqs::NAME:KIND` (as MinIO's `arn:minio:sqs::ID:webhook`).
//!
//! Kept in the coordinator's replicated state as `notify/targets/<NAME>` (JSON), as tier
//! definitions are, so every node sees the same targets and a backup carries them. A kind is
//! one variant of [`TargetKind`] with its own settings; the delivery of each is a
//! [`crate::sink::Sink`].

use std::borrow::Cow;
use std::sync::Arc;

use saker_coordinator::StateStore;
use serde::{Deserialize, Serialize};

use crate::NotifyError;

const PREFIX: &str = "notify/targets/";

/// What a target is and how it is reached.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TargetKind {
    /// An HTTP(S) endpoint that gets one POST per batch of event records.
    Webhook {
        url: String,
        /// Sent as `Authorization: Bearer <token>` when set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth_token: Option<String>,
    },
    /// A Kafka topic that gets one record per event, keyed `BUCKET/KEY`
    /// ([`crate::kafka`]).
    Kafka {
        /// Bootstrap brokers, `host:port`.
        brokers: Vec<String>,
        topic: String,
        /// SASL PLAIN credentials, when the brokers ask for them (both or neither).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sasl_user: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sasl_password: Option<String>,
        /// TLS to the brokers, verified with the system's roots (or `tls_ca`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        tls: bool,
        /// The CA certificates (PEM) that verify the brokers; implies TLS.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tls_ca: Option<String>,
    },
    /// A NATS server's JetStream: one message per batch on `subject`, delivered once the
    /// stream that captures the subject has stored it (its PubAck).
    Nats {
        /// `nats://HOST:PORT` or `tls://HOST:PORT` (credentials may be in it).
        url: String,
        subject: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        password: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
        /// PEM certificates the server's must chain to (TLS is then required). The
        /// certificates themselves, not a path: the consumer may run on any node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tls_ca: Option<String>,
    },
    /// An AMQP 0.9.1 broker (RabbitMQ): one persistent message per batch to `exchange`,
    /// delivered once the broker confirms it (and routed it to a queue).
    Amqp {
        /// `amqp://USER:PASS@HOST:PORT/VHOST`, `amqps://` for TLS.
        url: String,
        exchange: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        routing_key: String,
    },
}

impl TargetKind {
    /// The KIND of its ARN.
    pub fn name(&self) -> &'static str {
        match self {
            TargetKind::Webhook { .. } => "webhook",
            TargetKind::Kafka { .. } => "kafka",
            TargetKind::Nats { .. } => "nats",
            TargetKind::Amqp { .. } => "amqp",
        }
    }

    /// Where it is, for listings (no credentials).
    pub fn endpoint(&self) -> Cow<'_, str> {
        match self {
            TargetKind::Webhook { url, .. } => without_userinfo(url),
            TargetKind::Kafka { brokers, topic, .. } => {
                crate::kafka::endpoint(brokers, topic).into()
            }
            TargetKind::Nats { url, subject, .. } => {
                format!("{} subject={subject}", without_userinfo(url)).into()
            }
            TargetKind::Amqp {
                url,
                exchange,
                routing_key,
            } => format!(
                "{} exchange={exchange} routing_key={routing_key}",
                without_userinfo(url)
            )
            .into(),
        }
    }
}

/// `url` without its user and password (as given when it has none, or does not parse).
fn without_userinfo(url: &str) -> Cow<'_, str> {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string().into()
        }
        _ => url.into(),
    }
}

/// Never shows credentials (target definitions reach logs and listings).
impl std::fmt::Debug for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetKind::Webhook { url, auth_token } => f
                .debug_struct("Webhook")
                .field("url", url)
                .field("auth_token", &auth_token.as_ref().map(|_| "<redacted>"))
                .finish(),
            TargetKind::Kafka {
                brokers,
                topic,
                sasl_user,
                sasl_password,
                tls,
                tls_ca,
            } => f
                .debug_struct("Kafka")
                .field("brokers", brokers)
                .field("topic", topic)
                .field("sasl_user", sasl_user)
                .field(
                    "sasl_password",
                    &sasl_password.as_ref().map(|_| "<redacted>"),
                )
                .field("tls", tls)
                .field("tls_ca", &tls_ca.as_ref().map(|_| "<PEM>"))
                .finish(),
            TargetKind::Nats {
                url,
                subject,
                user,
                password,
                token,
                tls_ca,
            } => f
                .debug_struct("Nats")
                .field("url", &without_userinfo(url))
                .field("subject", subject)
                .field("user", user)
                .field("password", &password.as_ref().map(|_| "<redacted>"))
                .field("token", &token.as_ref().map(|_| "<redacted>"))
                .field("tls_ca", &tls_ca.as_ref().map(|c| c.len()))
                .finish(),
            TargetKind::Amqp {
                url,
                exchange,
                routing_key,
            } => f
                .debug_struct("Amqp")
                .field("url", &without_userinfo(url))
                .field("exchange", exchange)
                .field("routing_key", routing_key)
                .finish(),
        }
    }
}

/// A named target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// `[A-Za-z0-9_-]{1,64}`.
    pub name: String,
    #[serde(flatten)]
    pub kind: TargetKind,
}

impl Target {
    /// Its ARN, what bucket configurations name.
    pub fn arn(&self) -> String {
        format!("arn:saker:sqs::{}:{}", self.name, self.kind.name())
    }

    /// Checks what an operator gave before it is stored.
    pub fn validate(&self) -> Result<(), NotifyError> {
        check_name(&self.name)?;
        match &self.kind {
            TargetKind::Webhook { url, auth_token } => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| NotifyError::Invalid(format!("webhook URL {url:?}: {e}")))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
                    return Err(NotifyError::Invalid(format!(
                        "webhook URL {url:?} is not an http:// or https:// URL"
                    )));
                }
                if auth_token.as_ref().is_some_and(|t| t.is_empty()) {
                    return Err(NotifyError::Invalid("an empty auth token".into()));
                }
            }
            TargetKind::Kafka {
                brokers,
                topic,
                sasl_user,
                sasl_password,
                tls: _,
                tls_ca,
            } => crate::kafka::validate(
                brokers,
                topic,
                sasl_user.as_deref(),
                sasl_password.as_deref(),
                tls_ca.as_deref(),
            )?,
            TargetKind::Nats {
                url,
                subject,
                user,
                password,
                token,
                tls_ca,
            } => check_nats(url, subject, user, password, token, tls_ca)?,
            TargetKind::Amqp {
                url,
                exchange,
                routing_key,
            } => check_amqp(url, exchange, routing_key)?,
        }
        Ok(())
    }
}

/// A URL with a host and one of `schemes` (`what` names it in the error).
fn check_url(what: &str, url: &str, schemes: &[&str]) -> Result<(), NotifyError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| NotifyError::Invalid(format!("{what} {url:?}: {e}")))?;
    if !schemes.contains(&parsed.scheme()) || parsed.host_str().is_none_or(str::is_empty) {
        let schemes: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
        return Err(NotifyError::Invalid(format!(
            "{what} {:?} is not a {} URL with a host",
            without_userinfo(url),
            schemes.join(" or ")
        )));
    }
    Ok(())
}

fn check_nats(
    url: &str,
    subject: &str,
    user: &Option<String>,
    password: &Option<String>,
    token: &Option<String>,
    tls_ca: &Option<String>,
) -> Result<(), NotifyError> {
    check_url("NATS URL", url, &["nats", "tls"])?;
    // Tokens separated by '.', none empty; a subject to publish to has no wildcard.
    let ok = !subject.is_empty()
        && subject
            .split('.')
            .all(|t| !t.is_empty() && !t.contains(['*', '>']))
        && !subject.chars().any(|c| c.is_whitespace() || c.is_control());
    if !ok {
        return Err(NotifyError::Invalid(format!(
            "NATS subject {subject:?}: tokens separated by '.', none empty, no spaces and no \
             wildcards ('*', '>')"
        )));
    }
    let empty = |v: &Option<String>| v.as_ref().is_some_and(|v| v.is_empty());
    if empty(user) || empty(password) || empty(token) {
        return Err(NotifyError::Invalid(
            "an empty NATS user, password or token".into(),
        ));
    }
    if user.is_some() != password.is_some() {
        return Err(NotifyError::Invalid(
            "a NATS user needs a password, and a password a user".into(),
        ));
    }
    if user.is_some() && token.is_some() {
        return Err(NotifyError::Invalid(
            "a NATS target takes a user and password or a token, not both".into(),
        ));
    }
    if tls_ca
        .as_ref()
        .is_some_and(|c| !c.contains("-----BEGIN CERTIFICATE-----"))
    {
        return Err(NotifyError::Invalid(
            "the NATS TLS CA is not PEM certificates (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(())
}

fn check_amqp(url: &str, exchange: &str, routing_key: &str) -> Result<(), NotifyError> {
    check_url("AMQP URL", url, &["amqp", "amqps"])?;
    url.parse::<lapin::uri::AMQPUri>()
        .map_err(|e| NotifyError::Invalid(format!("AMQP URL {:?}: {e}", without_userinfo(url))))?;
    // AMQP short strings; the default exchange ("") would need a queue's name as the key.
    if exchange.is_empty() || exchange.len() > 255 {
        return Err(NotifyError::Invalid(format!(
            "AMQP exchange {exchange:?}: 1 to 255 bytes"
        )));
    }
    if routing_key.len() > 255 {
        return Err(NotifyError::Invalid(
            "an AMQP routing key over 255 bytes".into(),
        ));
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), NotifyError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(NotifyError::Invalid(format!(
            "target name {name:?}: 1 to 64 letters, digits, '-' or '_'"
        )))
    }
}

/// The (name, kind) an ARN names, if it is a saker target's ARN.
pub fn parse_arn(arn: &str) -> Result<(&str, &str), NotifyError> {
    let bad = || {
        NotifyError::Invalid(format!(
            "the ARN {arn:?} is not a notification target's (arn:saker:sqs::NAME:KIND)"
        ))
    };
    let rest = arn.strip_prefix("arn:saker:sqs::").ok_or_else(bad)?;
    let (name, kind) = rest.split_once(':').ok_or_else(bad)?;
    check_name(name).map_err(|_| bad())?;
    if !matches!(kind, "webhook" | "nats" | "amqp" | "kafka") {
        return Err(bad());
    }
    Ok((name, kind))
}

fn state_err(e: impl std::fmt::Display) -> NotifyError {
    NotifyError::State(e.to_string())
}

/// Every target, by name.
pub async fn list(state: &Arc<dyn StateStore>) -> Result<Vec<Target>, NotifyError> {
    let mut out = Vec::new();
    for (key, value) in state.scan(PREFIX).await.map_err(state_err)? {
        let t: Target = serde_json::from_slice(&value).map_err(|e| NotifyError::Corrupt {
            key,
            reason: e.to_string(),
        })?;
        out.push(t);
    }
    Ok(out)
}

/// The target named `name`.
pub async fn get(state: &Arc<dyn StateStore>, name: &str) -> Result<Target, NotifyError> {
    list(state)
        .await?
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| NotifyError::NoSuchTarget(name.to_string()))
}

/// The target an ARN names, if it exists (of that kind).
pub async fn by_arn(state: &Arc<dyn StateStore>, arn: &str) -> Result<Target, NotifyError> {
    let (name, _) = parse_arn(arn)?;
    match get(state, name).await {
        Ok(t) if t.arn() == arn => Ok(t),
        Ok(_) | Err(NotifyError::NoSuchTarget(_)) => Err(NotifyError::NoSuchTarget(arn.into())),
        Err(e) => Err(e),
    }
}

/// Stores a new target (refused if one has the name); answers its ARN.
pub async fn add(state: &Arc<dyn StateStore>, target: &Target) -> Result<String, NotifyError> {
    target.validate()?;
    if get(state, &target.name).await.is_ok() {
        return Err(NotifyError::Exists(target.name.clone()));
    }
    let value = serde_json::to_vec(target).map_err(state_err)?;
    state
        .put(&format!("{PREFIX}{}", target.name), Some(value))
        .await
        .map_err(state_err)?;
    Ok(target.arn())
}

/// Drops a target, refused while a bucket's configuration names it.
pub async fn remove(state: &Arc<dyn StateStore>, name: &str) -> Result<(), NotifyError> {
    let target = get(state, name).await?;
    let arn = target.arn();
    for (bucket, config) in crate::rules::configured_buckets(state).await? {
        if config.queues.iter().any(|q| q.arn == arn) {
            return Err(NotifyError::InUse(name.to_string(), bucket));
        }
    }
    state
        .put(&format!("{PREFIX}{name}"), None)
        .await
        .map_err(state_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(name: &str, url: &str) -> Target {
        Target {
            name: name.into(),
            kind: TargetKind::Webhook {
                url: url.into(),
                auth_token: Some("s3cret".into()),
            },
        }
    }

    #[tokio::test]
    async fn targets_are_stored_by_name_and_known_by_arn() {
        let state: Arc<dyn StateStore> = Arc::new(saker_coordinator::MemState::default());
        let arn = add(&state, &hook("lake", "http://127.0.0.1:9/hook"))
            .await
            .unwrap();
        assert_eq!(arn, "arn:saker:sqs::lake:webhook");
        assert!(matches!(
            add(&state, &hook("lake", "http://127.0.0.1:9/x")).await,
            Err(NotifyError::Exists(_))
        ));
        assert!(add(&state, &hook("bad name", "http://h/")).await.is_err());
        assert!(add(&state, &hook("x", "ftp://h/")).await.is_err());
        assert_eq!(by_arn(&state, &arn).await.unwrap().name, "lake");
        assert!(by_arn(&state, "arn:saker:sqs::lake:kafka").await.is_err());
        assert!(by_arn(&state, "arn:saker:sqs::other:webhook")
            .await
            .is_err());
        // In use by a bucket: kept.
        let config = crate::NotificationConfig {
            queues: vec![crate::QueueRule {
                id: "r".into(),
                arn: arn.clone(),
                events: vec!["s3:ObjectCreated:*".into()],
                prefix: String::new(),
                suffix: String::new(),
            }],
            feed_cap: None,
        };
        state
            .put("buckets/logs/notification", Some(config.to_record()))
            .await
            .unwrap();
        assert!(matches!(
            remove(&state, "lake").await,
            Err(NotifyError::InUse(_, _))
        ));
        state.put("buckets/logs/notification", None).await.unwrap();
        remove(&state, "lake").await.unwrap();
        assert!(list(&state).await.unwrap().is_empty());
    }

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
    fn kafka_targets_are_checked_named_and_never_show_the_password() {
        let ok = kafka(
            &["127.0.0.1:9092", "kafka-2.lan:19092", "[::1]:9092"],
            "s3.events",
        );
        ok.validate().unwrap();
        assert_eq!(ok.arn(), "arn:saker:sqs::stream:kafka");
        assert_eq!(parse_arn(&ok.arn()).unwrap(), ("stream", "kafka"));
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

    fn nats(url: &str, subject: &str) -> TargetKind {
        TargetKind::Nats {
            url: url.into(),
            subject: subject.into(),
            user: Some("u".into()),
            password: Some("pw-s3cret".into()),
            token: None,
            tls_ca: None,
        }
    }

    fn amqp(url: &str, exchange: &str) -> TargetKind {
        TargetKind::Amqp {
            url: url.into(),
            exchange: exchange.into(),
            routing_key: "k".into(),
        }
    }

    fn valid(name: &str, kind: TargetKind) -> Result<(), NotifyError> {
        Target {
            name: name.into(),
            kind,
        }
        .validate()
    }

    #[test]
    fn nats_and_amqp_targets_are_checked_and_show_no_credentials() {
        valid("n", nats("nats://127.0.0.1:4222", "s3.events")).unwrap();
        valid("n", nats("tls://nats.example:4222", "s3")).unwrap();
        for (url, subject) in [
            ("http://h:4222", "s3"),
            ("nats://", "s3"),
            ("nats://h:4222", ""),
            ("nats://h:4222", "s3.*"),
            ("nats://h:4222", "s3..x"),
            ("nats://h:4222", "s3 x"),
        ] {
            assert!(valid("n", nats(url, subject)).is_err(), "{url} {subject}");
        }
        let token_and_user = TargetKind::Nats {
            url: "nats://h:1".into(),
            subject: "s".into(),
            user: Some("u".into()),
            password: Some("p".into()),
            token: Some("t".into()),
            tls_ca: None,
        };
        assert!(valid("n", token_and_user).is_err());
        valid("a", amqp("amqp://guest:guest@127.0.0.1:5672/%2f", "events")).unwrap();
        valid("a", amqp("amqps://h/vhost", "events")).unwrap();
        assert!(valid("a", amqp("amqp://h:5672/%2f", "")).is_err());
        assert!(valid("a", amqp("nats://h:5672", "e")).is_err());

        let n = nats("nats://me:pw-s3cret@h:4222", "s3.events");
        assert_eq!(n.endpoint(), "nats://h:4222 subject=s3.events");
        let debug = format!("{n:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        let a = amqp("amqp://guest:pw-s3cret@h:5672/%2f", "ex");
        assert_eq!(a.endpoint(), "amqp://h:5672/%2f exchange=ex routing_key=k");
        assert!(!format!("{a:?}").contains("s3cret"));
        let json = serde_json::to_value(Target {
            name: "n".into(),
            kind: n,
        })
        .unwrap();
        assert_eq!(json["kind"], "nats");
        assert_eq!(json["subject"], "s3.events");
    }

    #[test]
    fn arns_name_a_target_and_its_kind() {
        assert_eq!(
            parse_arn("arn:saker:sqs::a-1:nats").unwrap(),
            ("a-1", "nats")
        );
        assert!(parse_arn("arn:minio:sqs::a:webhook").is_err());
        assert!(parse_arn("arn:saker:sqs::a:smtp").is_err());
        assert!(parse_arn("arn:saker:sqs:::webhook").is_err());
        let debug = format!("{:?}", hook("h", "http://h/"));
        assert!(!debug.contains("s3cret"), "{debug}");
    }
}
