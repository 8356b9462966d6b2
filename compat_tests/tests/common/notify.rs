//! Notification helpers for the tests: a webhook target added with `saker admin notify
//! target add`, queue configurations put with aws-sdk-s3, and waiting for what a receiver
//! ([`super::webhook::Webhook`]) got.

use std::collections::BTreeMap;
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

/// The records of one delivered body (`{"Records": [...]}`, as AWS Lambda's `S3Event`
/// parses it), each with `path` (where it came: a URL path, a subject, a queue).
pub fn parse_records(path: &str, body: &[u8]) -> Result<Vec<Received>, String> {
    let ev: aws_lambda_events::event::s3::S3Event = serde_json::from_slice(body)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(body)))?;
    Ok(ev
        .records
        .into_iter()
        .map(|record| Received {
            path: path.to_string(),
            record,
        })
        .collect())
}

/// Every acknowledged write of the ledger (key -> event names in the order made) has a
/// record in `got` (duplicates allowed).
pub fn ledger_in(got: &[Received], ledger: &BTreeMap<String, Vec<&str>>) -> bool {
    ledger.iter().all(|(k, want)| {
        let mine = got.iter().filter(|r| r.key() == k).count();
        mine >= want.len()
    })
}

/// Per key, the first delivery of each event, in sequencer order, is the ledger's.
pub fn check_ledger(got: &[Received], ledger: &BTreeMap<String, Vec<&str>>) {
    for (k, want) in ledger {
        let mut first: Vec<(&str, &str)> = Vec::new();
        for r in got.iter().filter(|r| r.key() == k) {
            if !first.iter().any(|(s, _)| *s == r.sequencer()) {
                first.push((r.sequencer(), r.event_name()));
            }
        }
        assert!(
            first.windows(2).all(|w| w[0].0 < w[1].0),
            "{k}: events out of order: {first:?}"
        );
        let names: Vec<&str> = first.iter().map(|(_, n)| *n).collect();
        assert_eq!(&names, want, "{k}");
    }
}

/// The status `saker admin notify status --json` shows for target `name`.
pub fn target_status(srv: &Server, name: &str) -> serde_json::Value {
    let out = srv.admin_cmd(&["notify", "status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["targets"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name).cloned())
        .unwrap_or_default()
}

/// Waits up to [`DELIVERY`] for target `name`'s last error in `notify status` to say `why`;
/// fails the test with the status otherwise. Answers the status.
pub async fn await_target_error(srv: &Server, name: &str, why: &str) -> serde_json::Value {
    let said = poll_until(DELIVERY, || async {
        target_status(srv, name)["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(why))
    })
    .await;
    let status = target_status(srv, name);
    assert!(said, "{name}: no error saying {why:?}: {status}");
    status
}

/// Adds a target with `saker admin notify target add NAME ARGS...`; answers its ARN.
pub fn add_target_with(srv: &Server, name: &str, args: &[&str]) -> String {
    let mut all = vec!["notify", "target", "add", name];
    all.extend_from_slice(args);
    ok_stdout(srv.admin_cmd(&all), "notify target add")
        .trim()
        .to_string()
}

/// One round of writes for a ledger: PUT each key (with `round` as its body), and on odd
/// rounds DELETE it after; answers (key, event name) of each, in the order made.
pub async fn write_round(
    c: &Client,
    b: &str,
    keys: &[String],
    round: usize,
) -> Vec<(String, &'static str)> {
    let mut done = Vec::new();
    for k in keys {
        super::put(c, b, k, format!("{round}").as_bytes()).await;
        done.push((k.clone(), "ObjectCreated:Put"));
        if round % 2 == 1 {
            c.delete_object().bucket(b).key(k).send().await.unwrap();
            done.push((k.clone(), "ObjectRemoved:Delete"));
        }
    }
    done
}
