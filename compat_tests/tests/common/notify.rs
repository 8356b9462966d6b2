//! Notification helpers for the tests: a webhook target added with `saker admin notify
//! target add`, queue configurations put with aws-sdk-s3, and waiting for what a receiver
//! ([`super::webhook::Webhook`]) got.

use std::time::Duration;

use aws_sdk_s3::types::{
    Event, FilterRule, FilterRuleName, NotificationConfiguration, NotificationConfigurationFilter,
    QueueConfiguration, S3KeyFilter,
};
use aws_sdk_s3::Client;

use super::webhook::{Received, Webhook};
use super::{ok_stdout, poll_until, Server};

/// How long delivery may take in these tests.
pub const DELIVERY: Duration = Duration::from_secs(30);

/// Adds a webhook target; answers the ARN `target add` printed.
pub fn add_target(srv: &Server, name: &str, url: &str) -> String {
    let out = srv.admin_cmd(&["notify", "target", "add", name, "--webhook", url]);
    ok_stdout(out, "notify target add").trim().to_string()
}

pub fn queue(
    id: &str,
    arn: &str,
    events: &[&str],
    prefix: &str,
    suffix: &str,
) -> QueueConfiguration {
    let mut rules = Vec::new();
    for (name, value) in [
        (FilterRuleName::Prefix, prefix),
        (FilterRuleName::Suffix, suffix),
    ] {
        if !value.is_empty() {
            rules.push(FilterRule::builder().name(name).value(value).build());
        }
    }
    let mut q = QueueConfiguration::builder()
        .id(id)
        .queue_arn(arn)
        .set_events(Some(events.iter().map(|e| Event::from(*e)).collect()));
    if !rules.is_empty() {
        q = q.filter(
            NotificationConfigurationFilter::builder()
                .key(S3KeyFilter::builder().set_filter_rules(Some(rules)).build())
                .build(),
        );
    }
    q.build().unwrap()
}

pub async fn configure(c: &Client, b: &str, queues: Vec<QueueConfiguration>) {
    c.put_bucket_notification_configuration()
        .bucket(b)
        .notification_configuration(
            NotificationConfiguration::builder()
                .set_queue_configurations(Some(queues))
                .build(),
        )
        .send()
        .await
        .expect("put bucket notification configuration");
}

/// Waits until `hook` has received at least `n` records; answers them.
pub async fn wait_for(hook: &Webhook, n: usize) -> Vec<Received> {
    let got = poll_until(DELIVERY, || async { hook.received().len() >= n }).await;
    assert!(
        got,
        "{} of {n} records arrived: {:?}",
        hook.received().len(),
        hook.received()
            .iter()
            .map(|r| (r.event_name().to_string(), r.key().to_string()))
            .collect::<Vec<_>>()
    );
    assert!(hook.bad().is_empty(), "bad posts: {:?}", hook.bad());
    hook.received()
}

/// (event name, key) of each record, in the order received.
pub fn names(got: &[Received]) -> Vec<(String, String)> {
    got.iter()
        .map(|r| (r.event_name().to_string(), r.key().to_string()))
        .collect()
}
