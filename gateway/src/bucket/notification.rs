//! A bucket's notification configuration on the S3 API: Put/GetBucketNotificationConfiguration,
//! a write setting ([`Setting::Notification`]): while a bucket has one, every MNode group
//! records the bucket's changes in its change feed, which the notification consumer reads
//! ([`saker_notify`]).
//!
//! Only `QueueConfigurations` are taken: their `QueueArn` names a target defined with
//! `saker admin notify target add` (`arn:saker:sqs::NAME:KIND`). A configuration naming
//! anything else, an unknown target or an unknown event type is refused whole with
//! `InvalidArgument`, as S3 refuses destinations it cannot validate. An empty configuration
//! turns notifications (and the feed) off.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_notify::{NotificationConfig, NotifyError, QueueRule};

use crate::bucket::lookup::{bucket_exists, settings, store};
use crate::bucket::settings::Setting;
use crate::Gateway;

fn invalid(e: NotifyError) -> s3s::S3Error {
    match e {
        NotifyError::Invalid(m) => s3_error!(InvalidArgument, "{m}"),
        NotifyError::NoSuchTarget(arn) => s3_error!(
            InvalidArgument,
            "Unable to validate the following destination configurations: {arn} (no such target)"
        ),
        other => {
            tracing::warn!(error = %other, "notification targets unavailable");
            s3_error!(ServiceUnavailable, "notification targets are unavailable")
        }
    }
}

/// The rule of one queue configuration.
fn rule_of(q: &QueueConfiguration) -> S3Result<QueueRule> {
    let mut rule = QueueRule {
        id: q
            .id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| hex::encode(rand::random::<[u8; 8]>())),
        arn: q.queue_arn.clone(),
        events: q.events.iter().map(|e| e.as_ref().to_string()).collect(),
        prefix: String::new(),
        suffix: String::new(),
    };
    let rules = q
        .filter
        .as_ref()
        .and_then(|f| f.key.as_ref())
        .and_then(|k| k.filter_rules.as_ref());
    let (mut prefix, mut suffix) = (false, false);
    for r in rules.into_iter().flatten() {
        let name = r.name.as_ref().map(|n| n.as_str().to_ascii_lowercase());
        let value = r.value.clone().unwrap_or_default();
        let (seen, slot) = match name.as_deref() {
            Some("prefix") => (&mut prefix, &mut rule.prefix),
            Some("suffix") => (&mut suffix, &mut rule.suffix),
            _ => {
                return Err(s3_error!(
                    InvalidArgument,
                    "filter rule name must be either prefix or suffix"
                ))
            }
        };
        if *seen {
            return Err(s3_error!(
                InvalidArgument,
                "Cannot specify more than one prefix or suffix rule in a filter."
            ));
        }
        *seen = true;
        *slot = value;
    }
    Ok(rule)
}

pub async fn put_configuration(
    gw: &Gateway,
    req: S3Request<PutBucketNotificationConfigurationInput>,
) -> S3Result<S3Response<PutBucketNotificationConfigurationOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let c = input.notification_configuration;
    let others = c
        .topic_configurations
        .as_ref()
        .is_some_and(|t| !t.is_empty())
        || c.lambda_function_configurations
            .as_ref()
            .is_some_and(|l| !l.is_empty())
        || c.event_bridge_configuration.is_some();
    if others {
        return Err(s3_error!(
            InvalidArgument,
            "only QueueConfigurations naming a saker notification target are supported"
        ));
    }
    let queues = c
        .queue_configurations
        .iter()
        .flatten()
        .map(rule_of)
        .collect::<S3Result<Vec<_>>>()?;
    // The feed's cap survives a change of the rules.
    let feed_cap = settings(gw, &input.bucket)
        .await?
        .notification
        .as_ref()
        .and_then(|n| n.feed_cap);
    let config = NotificationConfig { queues, feed_cap };
    config.validate().map_err(invalid)?;
    for q in &config.queues {
        saker_notify::target::by_arn(&gw.state, &q.arn)
            .await
            .map_err(invalid)?;
    }
    let value = (!config.queues.is_empty()).then(|| config.to_record());
    store(gw, &input.bucket, Setting::Notification, value).await?;
    Ok(S3Response::new(
        PutBucketNotificationConfigurationOutput::default(),
    ))
}

pub async fn get_configuration(
    gw: &Gateway,
    req: S3Request<GetBucketNotificationConfigurationInput>,
) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
    let s = settings(gw, &req.input.bucket).await?;
    let queues = s.notification.as_ref().map(|n| {
        n.queues
            .iter()
            .map(|q| {
                let mut rules = Vec::new();
                for (name, value) in [
                    (FilterRuleName::PREFIX, &q.prefix),
                    (FilterRuleName::SUFFIX, &q.suffix),
                ] {
                    if !value.is_empty() {
                        rules.push(FilterRule {
                            name: Some(FilterRuleName::from_static(name)),
                            value: Some(value.clone()),
                        });
                    }
                }
                QueueConfiguration {
                    events: q.events.iter().map(|e| Event::from(e.clone())).collect(),
                    filter: (!rules.is_empty()).then_some(NotificationConfigurationFilter {
                        key: Some(S3KeyFilter {
                            filter_rules: Some(rules),
                        }),
                    }),
                    id: Some(q.id.clone()),
                    queue_arn: q.arn.clone(),
                }
            })
            .collect::<Vec<_>>()
    });
    Ok(S3Response::new(GetBucketNotificationConfigurationOutput {
        queue_configurations: queues,
        ..Default::default()
    }))
}

impl Gateway {
    /// Sets the most records `bucket`'s change feed keeps per MNode group (`saker admin
    /// notify cap`): past it the oldest are dropped, counted. Refused for a bucket without a
    /// notification configuration (it keeps no feed).
    pub async fn set_feed_cap(&self, bucket: &str, cap: u64) -> Result<(), String> {
        let current = settings(self, bucket).await.map_err(|e| e.to_string())?;
        let Some(config) = current.notification.as_ref() else {
            return Err(format!(
                "bucket {bucket} has no notification configuration (and so no feed)"
            ));
        };
        let mut config = (**config).clone();
        config.feed_cap = Some(cap);
        config.validate().map_err(|e| e.to_string())?;
        store(
            self,
            bucket,
            Setting::Notification,
            Some(config.to_record()),
        )
        .await
        .map_err(|e| e.to_string())
    }
}
