//! Notification targets: where a bucket's events go, defined once for the cluster
//! (`saker admin notify target add`) and named in buckets' configurations by their ARN,
//! `arn:saker:sqs::NAME:KIND` (as MinIO's `arn:minio:sqs::ID:webhook`).
//!
//! Kept in the coordinator's replicated state as `notify/targets/<NAME>` (JSON), as tier
//! definitions are, so every node sees the same targets and a backup carries them. A kind is
//! one variant of [`TargetKind`] with its own settings; the delivery of each is a
//! [`crate::sink::Sink`].

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
}

impl TargetKind {
    /// The KIND of its ARN.
    pub fn name(&self) -> &'static str {
        match self {
            TargetKind::Webhook { .. } => "webhook",
            TargetKind::Kafka { .. } => "kafka",
        }
    }

    /// Where it is, for listings (no credentials).
    pub fn endpoint(&self) -> std::borrow::Cow<'_, str> {
        match self {
            TargetKind::Webhook { url, .. } => url.into(),
            TargetKind::Kafka { brokers, topic, .. } => {
                crate::kafka::endpoint(brokers, topic).into()
            }
        }
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
        }
        Ok(())
    }
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
