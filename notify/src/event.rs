//! The event JSON targets get: S3's event message structure (`Records[]`, event version 2.1),
//! so consumers written for S3 events (AWS Lambda's `S3Event` types, Argo Events, MinIO's
//! clients) read it as it is.
//!
//! Two fields say where the event comes from, as MinIO's do: `eventSource` is `saker:s3`
//! (MinIO writes `minio:s3`; AWS `aws:s3`), so a consumer fed by several stores can tell them
//! apart and nothing claims to be AWS; the bucket's ARN is S3's form, `arn:aws:s3:::BUCKET`,
//! which is what tools parse bucket names from. `eventName` is AWS's (`ObjectCreated:Put`,
//! without MinIO's `s3:` prefix). The object key is URL-encoded as S3 encodes it (a space is
//! `+`, `/` stays), so `unquote_plus(key)` gives the key back.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use saker_rpc::FeedEvent;
use serde::Serialize;

/// Bytes of a key that stay as they are (besides letters and digits); a space becomes `+`.
const KEY_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/')
    .remove(b' ');

/// `eventSource` of every record (module docs).
pub const EVENT_SOURCE: &str = "saker:s3";

/// An object key as S3 events carry it.
pub fn encode_key(key: &str) -> String {
    utf8_percent_encode(key, KEY_KEEP)
        .to_string()
        .replace(' ', "+")
}

/// `ns` since the epoch as S3 writes event times (`2026-12-07T18:00:00.123Z`).
pub fn event_time(ns: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ns as i128)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&format)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".into())
}

/// What every record of one delivery shares.
pub struct Context<'a> {
    pub bucket: &'a str,
    pub region: &'a str,
    /// The id of the configuration that matched.
    pub configuration_id: &'a str,
    /// The bucket owner's canonical id (empty: not known).
    pub owner: &'a str,
}

/// One record of the `Records` array, borrowing what it can from its event and context.
/// Typed rather than built as a JSON value: the consumer makes one per event and target, and
/// a value tree cost it two dozen allocations each.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record<'a> {
    event_version: &'static str,
    event_source: &'static str,
    aws_region: &'a str,
    event_time: String,
    event_name: &'a str,
    user_identity: Principal<'a>,
    request_parameters: RequestParameters,
    response_elements: Empty,
    s3: S3<'a>,
}

#[derive(Clone, Copy, Serialize)]
struct Principal<'a> {
    #[serde(rename = "principalId")]
    principal_id: &'a str,
}

#[derive(Serialize)]
struct RequestParameters {
    #[serde(rename = "sourceIPAddress")]
    source_ip_address: &'static str,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct S3<'a> {
    s3_schema_version: &'static str,
    configuration_id: &'a str,
    bucket: Bucket<'a>,
    object: Object<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Bucket<'a> {
    name: &'a str,
    owner_identity: Principal<'a>,
    arn: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Object<'a> {
    key: String,
    size: u64,
    #[serde(rename = "eTag", skip_serializing_if = "Option::is_none")]
    e_tag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version_id: Option<&'a str>,
    sequencer: String,
}

/// One record of the `Records` array for `ev` named `name` (`ObjectCreated:Put`).
pub fn record<'a>(ctx: &Context<'a>, name: &'a str, ev: &'a FeedEvent) -> Record<'a> {
    let owner = Principal {
        principal_id: ctx.owner,
    };
    Record {
        event_version: "2.1",
        event_source: EVENT_SOURCE,
        aws_region: ctx.region,
        event_time: event_time(ev.time_ns),
        event_name: name,
        user_identity: owner,
        request_parameters: RequestParameters {
            source_ip_address: "",
        },
        response_elements: Empty {},
        s3: S3 {
            s3_schema_version: "1.0",
            configuration_id: ctx.configuration_id,
            bucket: Bucket {
                name: ctx.bucket,
                owner_identity: owner,
                arn: format!("arn:aws:s3:::{}", ctx.bucket),
            },
            object: Object {
                key: encode_key(&ev.key),
                size: ev.size,
                e_tag: Some(ev.etag.as_str()).filter(|e| !e.is_empty()),
                version_id: ev.version_id.as_deref(),
                sequencer: ev.sequencer_hex(),
            },
        },
    }
}

/// The body of one POST: `{"Records": [...]}`.
pub fn body<R: Serialize>(records: &[R]) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'r, R> {
        #[serde(rename = "Records")]
        records: &'r [R],
    }
    serde_json::to_vec(&Body { records }).expect("event records encode as JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use saker_rpc::FeedKind;

    #[test]
    fn keys_are_encoded_as_s3_encodes_them() {
        assert_eq!(encode_key("a/b c.jpg"), "a/b+c.jpg");
        assert_eq!(encode_key("a+b=c&d"), "a%2Bb%3Dc%26d");
        assert_eq!(encode_key("é"), "%C3%A9");
    }

    #[test]
    fn records_parse_as_lambda_s3_events() {
        let ev = FeedEvent {
            seq: 3,
            kind: FeedKind::Put,
            key: "photos/red flower.jpg".into(),
            size: 1024,
            etag: "d41d8cd98f00b204e9800998ecf8427e".into(),
            version_id: Some("00000000000000a1".into()),
            sequencer: 0x1234,
            time_ns: 1_700_000_000_123_456_789,
        };
        let ctx = Context {
            bucket: "lake",
            region: "us-east-1",
            configuration_id: "new-photos",
            owner: "",
        };
        let body = body(&[record(&ctx, "ObjectCreated:Put", &ev)]);
        let parsed: aws_lambda_events::event::s3::S3Event = serde_json::from_slice(&body).unwrap();
        let r = &parsed.records[0];
        assert_eq!(r.event_name.as_deref(), Some("ObjectCreated:Put"));
        assert_eq!(r.event_source.as_deref(), Some(EVENT_SOURCE));
        assert_eq!(r.event_time.timestamp_millis(), 1_700_000_000_123);
        let o = &r.s3.object;
        assert_eq!(o.key.as_deref(), Some("photos/red+flower.jpg"));
        assert_eq!(o.size, Some(1024));
        assert_eq!(o.sequencer.as_deref(), Some("0000000000001234"));
        assert_eq!(o.version_id.as_deref(), Some("00000000000000a1"));
        assert_eq!(r.s3.bucket.arn.as_deref(), Some("arn:aws:s3:::lake"));
        assert_eq!(r.s3.configuration_id.as_deref(), Some("new-photos"));
    }
}
