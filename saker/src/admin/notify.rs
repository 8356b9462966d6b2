//! Bucket notification targets and the consumer's state on the admin API
//! (`/admin/notify/targets`, `/admin/notify/status`) and the `saker admin notify` commands
//! that call it.
//!
//! Targets are cluster-wide records ([`saker_notify::target`]); `target add` prints the ARN
//! buckets' `QueueConfigurations` name. `status` shows, per target, the records waiting in
//! the feeds and the age of the oldest (read from the feeds by whichever node answers) and
//! what the consumer delivered and failed (counted where the consumer runs: the node of the
//! active coordinator).

use std::sync::Arc;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use clap::{ArgGroup, Args, Subcommand};
use saker_notify::{NotifyError, Target, TargetKind, TargetStatus};
use serde::{Deserialize, Serialize};

use crate::admin::request::send;
use crate::admin::state::{authorized, deny, json_body, AdminState};

#[derive(Subcommand)]
pub enum NotifyCommand {
    /// Notification targets: add, list, remove.
    Target {
        #[command(subcommand)]
        command: TargetCommand,
    },
    /// Set the most change-feed records BUCKET keeps per MNode group while its targets do
    /// not take them (default 500000); past it the oldest are dropped, counted and logged.
    Cap { bucket: String, records: u64 },
    /// Each target's queue depth, lag, deliveries and failures.
    Status {
        /// Print the JSON the admin API answers instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum TargetCommand {
    /// Define a target NAME of one kind (--webhook, --nats, --amqp or --kafka); prints its
    /// ARN (`arn:saker:sqs::NAME:KIND`) for buckets' QueueConfigurations.
    #[command(group(
        ArgGroup::new("kind")
            .required(true)
            .args(["webhook", "nats", "amqp", "kafka"])
    ))]
    Add {
        name: String,
        /// An http:// or https:// URL that gets one POST of JSON per batch of events.
        #[arg(long, value_name = "URL")]
        webhook: Option<String>,
        /// Sent as `Authorization: Bearer TOKEN` with each POST.
        #[arg(long, env = "SAKER_NOTIFY_AUTH_TOKEN", hide_env_values = true)]
        auth_token: Option<String>,
        #[command(flatten)]
        nats: Box<NatsArgs>,
        #[command(flatten)]
        amqp: Box<AmqpArgs>,
        #[command(flatten)]
        kafka: Box<KafkaArgs>,
    },
    /// List the targets (tokens are not shown).
    List,
    /// Remove a target (refused while a bucket's configuration names it).
    Remove { name: String },
}

/// A NATS JetStream target's options.
#[derive(Args)]
pub struct NatsArgs {
    /// A NATS server (nats://HOST:PORT, tls://HOST:PORT) whose JetStream stores one message
    /// of JSON per batch of events on --subject (a stream must capture the subject).
    #[arg(long, value_name = "URL", requires = "subject")]
    nats: Option<String>,
    /// The subject messages are published to.
    #[arg(long, requires = "nats")]
    subject: Option<String>,
    /// NATS user (with --nats-password).
    #[arg(long, requires = "nats")]
    nats_user: Option<String>,
    /// NATS password (with --nats-user).
    #[arg(long, env = "SAKER_NOTIFY_NATS_PASSWORD", hide_env_values = true)]
    nats_password: Option<String>,
    /// NATS authentication token (instead of a user and password).
    #[arg(long, env = "SAKER_NOTIFY_NATS_TOKEN", hide_env_values = true)]
    nats_token: Option<String>,
    /// A PEM file of the CA certificates the server's must chain to; TLS is then required.
    /// Its contents are stored with the target.
    #[arg(long, value_name = "FILE", requires = "nats")]
    nats_tls_ca: Option<std::path::PathBuf>,
}

/// An AMQP 0.9.1 target's options.
#[derive(Args)]
pub struct AmqpArgs {
    /// An AMQP 0.9.1 broker (amqp://USER:PASS@HOST:PORT/VHOST, amqps:// for TLS) that gets
    /// one persistent message of JSON per batch of events on --exchange, with publisher
    /// confirms.
    #[arg(long, value_name = "URL", requires = "exchange")]
    amqp: Option<String>,
    /// The exchange messages are published to (it must route them to a queue).
    #[arg(long, requires = "amqp")]
    exchange: Option<String>,
    /// The messages' routing key (default empty).
    #[arg(long, requires = "amqp")]
    routing_key: Option<String>,
}

/// A Kafka target's options.
#[derive(Args)]
pub struct KafkaArgs {
    /// Kafka bootstrap brokers, comma-separated host:port: each event is one record of
    /// --topic, keyed BUCKET/KEY, acknowledged by all in-sync replicas.
    #[arg(
        long,
        value_name = "BROKERS",
        requires = "topic",
        value_delimiter = ','
    )]
    kafka: Option<Vec<String>>,
    /// The Kafka topic (it must exist: saker does not create it).
    #[arg(long, requires = "kafka")]
    topic: Option<String>,
    /// SASL PLAIN user for the Kafka brokers.
    #[arg(long, requires_all = ["kafka", "kafka_sasl_password"])]
    kafka_sasl_user: Option<String>,
    /// SASL PLAIN password for the Kafka brokers.
    #[arg(
        long,
        requires_all = ["kafka", "kafka_sasl_user"],
        env = "SAKER_NOTIFY_KAFKA_SASL_PASSWORD",
        hide_env_values = true
    )]
    kafka_sasl_password: Option<String>,
    /// TLS to the Kafka brokers, verified with the system's root certificates.
    #[arg(long, requires = "kafka")]
    kafka_tls: bool,
    /// TLS to the Kafka brokers, verified with the CA certificates of this PEM file
    /// (stored with the target, so every node has them).
    #[arg(long, value_name = "FILE", requires = "kafka")]
    kafka_tls_ca: Option<std::path::PathBuf>,
}

/// The contents of a CA file a `target add` flag names (stored with the target, so every
/// node has them).
fn read_ca(flag: &str, path: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    path.map(|p| std::fs::read_to_string(p).with_context(|| format!("read {flag} {}", p.display())))
        .transpose()
}

/// The target kind the `target add` options name (clap let exactly one of --webhook, --nats,
/// --amqp and --kafka through).
fn target_kind(
    webhook: Option<String>,
    auth_token: Option<String>,
    nats: NatsArgs,
    amqp: AmqpArgs,
    kafka: KafkaArgs,
) -> anyhow::Result<TargetKind> {
    if let Some(url) = webhook {
        return Ok(TargetKind::Webhook { url, auth_token });
    }
    if let Some(url) = nats.nats {
        let tls_ca = read_ca("--nats-tls-ca", nats.nats_tls_ca.as_deref())?;
        if nats.nats_user.is_some() != nats.nats_password.is_some() {
            anyhow::bail!("--nats-user and --nats-password go together");
        }
        return Ok(TargetKind::Nats {
            url,
            subject: nats.subject.unwrap_or_default(),
            user: nats.nats_user,
            password: nats.nats_password,
            token: nats.nats_token,
            tls_ca,
        });
    }
    if let Some(brokers) = kafka.kafka {
        return Ok(TargetKind::Kafka {
            brokers: brokers.iter().map(|b| b.trim().to_string()).collect(),
            topic: kafka.topic.unwrap_or_default(),
            sasl_user: kafka.kafka_sasl_user,
            sasl_password: kafka.kafka_sasl_password,
            tls: kafka.kafka_tls,
            tls_ca: read_ca("--kafka-tls-ca", kafka.kafka_tls_ca.as_deref())?,
        });
    }
    let url = amqp
        .amqp
        .context("one of --webhook, --nats, --amqp or --kafka")?;
    Ok(TargetKind::Amqp {
        url,
        exchange: amqp.exchange.unwrap_or_default(),
        routing_key: amqp.routing_key.unwrap_or_default(),
    })
}

/// A target as `target list` shows it.
#[derive(Serialize, Deserialize)]
struct TargetInfo {
    name: String,
    kind: String,
    arn: String,
    endpoint: String,
}

/// What `/admin/notify/status` answers.
#[derive(Serialize, Deserialize)]
struct Status {
    /// Whether the consumer runs in the process that answered.
    consumer_here: bool,
    targets: Vec<TargetStatus>,
    /// Buckets whose feeds dropped notifications at their cap, with how many.
    #[serde(default)]
    dropped: std::collections::BTreeMap<String, u64>,
}

fn notify_error(e: NotifyError) -> Response {
    let status = match &e {
        NotifyError::NoSuchTarget(_) => StatusCode::NOT_FOUND,
        NotifyError::Exists(_) | NotifyError::InUse(..) => StatusCode::CONFLICT,
        NotifyError::Invalid(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (status, format!("{e}\n")).into_response()
}

fn state_of(st: &AdminState) -> Result<Arc<dyn saker_coordinator::StateStore>, Box<Response>> {
    match &st.gateway {
        Some(g) => Ok(g.tiers().state().clone()),
        None => Err(Box::new(
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "no S3 gateway in this process: ask a node that has one\n",
            )
                .into_response(),
        )),
    }
}

pub async fn list(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/notify/targets", &headers, b"") {
        return deny();
    }
    let state = match state_of(&st) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    match saker_notify::target::list(&state).await {
        Ok(targets) => axum::Json(
            targets
                .into_iter()
                .map(|t| TargetInfo {
                    name: t.name.clone(),
                    kind: t.kind.name().to_string(),
                    arn: t.arn(),
                    endpoint: t.kind.endpoint().to_string(),
                })
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(e) => notify_error(e),
    }
}

pub async fn add(State(st): State<AdminState>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&st, &Method::POST, "/admin/notify/targets", &headers, &body) {
        return deny();
    }
    let state = match state_of(&st) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let target: Target = match json_body(&body) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    match saker_notify::target::add(&state, &target).await {
        Ok(arn) => {
            tracing::info!(target = ?target, "notification target added");
            (StatusCode::CREATED, format!("{arn}\n")).into_response()
        }
        Err(e) => notify_error(e),
    }
}

pub async fn remove(
    State(st): State<AdminState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/admin/notify/targets/{name}");
    if !authorized(&st, &Method::DELETE, &path, &headers, b"") {
        return deny();
    }
    let state = match state_of(&st) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    match saker_notify::target::remove(&state, &name).await {
        Ok(()) => (StatusCode::OK, "removed\n").into_response(),
        Err(e) => notify_error(e),
    }
}

/// What `/admin/notify/cap/{bucket}` takes.
#[derive(Serialize, Deserialize)]
struct Cap {
    records: u64,
}

pub async fn set_cap(
    State(st): State<AdminState>,
    Path(bucket): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/admin/notify/cap/{bucket}");
    if !authorized(&st, &Method::PUT, &path, &headers, &body) {
        return deny();
    }
    let Some(gw) = &st.gateway else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "no S3 gateway in this process\n",
        )
            .into_response();
    };
    let cap: Cap = match json_body(&body) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    match gw.set_feed_cap(&bucket, cap.records).await {
        Ok(()) => (StatusCode::OK, "set\n").into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

pub async fn status(State(st): State<AdminState>, headers: HeaderMap) -> Response {
    if !authorized(&st, &Method::GET, "/admin/notify/status", &headers, b"") {
        return deny();
    }
    let state = match state_of(&st) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let backlog = match saker_notify::consumer::backlog(&st.cluster, &state).await {
        Ok(b) => b,
        Err(e) => return notify_error(e),
    };
    let mut targets = backlog.targets;
    let consumer = crate::server::loops::NOTIFIER
        .get()
        .filter(|_| st.namespace.get().is_some());
    if let Some(c) = consumer {
        for t in &mut targets {
            c.add_counts(t);
        }
    }
    axum::Json(Status {
        consumer_here: consumer.is_some(),
        targets,
        dropped: backlog.dropped,
    })
    .into_response()
}

pub async fn run(endpoint: &str, command: NotifyCommand) -> anyhow::Result<()> {
    match command {
        NotifyCommand::Target {
            command:
                TargetCommand::Add {
                    name,
                    webhook,
                    auth_token,
                    nats,
                    amqp,
                    kafka,
                },
        } => {
            let target = Target {
                name,
                kind: target_kind(webhook, auth_token, *nats, *amqp, *kafka)?,
            };
            target.validate()?;
            let body = serde_json::to_vec(&target)?;
            let arn = send(endpoint, Method::POST, "/admin/notify/targets", body).await?;
            println!("{}", arn.trim());
        }
        NotifyCommand::Target {
            command: TargetCommand::List,
        } => {
            let text = send(endpoint, Method::GET, "/admin/notify/targets", Vec::new()).await?;
            let targets: Vec<TargetInfo> =
                serde_json::from_str(&text).context("unexpected reply")?;
            for t in targets {
                println!("{}\t{}\t{}\t{}", t.name, t.kind, t.arn, t.endpoint);
            }
        }
        NotifyCommand::Target {
            command: TargetCommand::Remove { name },
        } => {
            let path = format!("/admin/notify/targets/{name}");
            send(endpoint, Method::DELETE, &path, Vec::new()).await?;
            println!("removed target {name}");
        }
        NotifyCommand::Cap { bucket, records } => {
            let body = serde_json::to_vec(&Cap { records })?;
            let path = format!("/admin/notify/cap/{bucket}");
            send(endpoint, Method::PUT, &path, body).await?;
            println!("{bucket}: the feed keeps at most {records} records per group");
        }
        NotifyCommand::Status { json } => {
            let text = send(endpoint, Method::GET, "/admin/notify/status", Vec::new()).await?;
            if json {
                println!("{}", text.trim());
                return Ok(());
            }
            let s: Status = serde_json::from_str(&text).context("unexpected reply")?;
            println!("TARGET\tQUEUED\tLAG_S\tDELIVERED\tFAILED\tLAST_ERROR");
            for t in &s.targets {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    t.name,
                    t.queue_depth,
                    t.lag_seconds,
                    t.delivered,
                    t.failed,
                    t.last_error.as_deref().unwrap_or("-")
                );
            }
            for (bucket, n) in &s.dropped {
                println!("bucket {bucket}: {n} notifications dropped at the feed's cap");
            }
            if !s.consumer_here {
                println!("(deliveries are counted on the node of the active coordinator)");
            }
        }
    }
    Ok(())
}
