//! Lifecycle rules as a bucket keeps them: parsed and checked from S3's XML
//! (PutBucketLifecycleConfiguration), given back as they were put, and asked what they do to
//! one object.

use std::time::Duration;

use s3s::dto::*;
use s3s::{s3_error, S3Result};
use serde::{Deserialize, Serialize};

/// A bucket may have up to 1,000 rules (S3's limit); an ID is at most 255 characters.
const MAX_RULES: usize = 1000;
const MAX_ID: usize = 255;

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub id: String,
    pub enabled: bool,
    pub filter: Filter,
    /// Whether the filter came as the old top-level `Prefix` (given back the same way).
    pub legacy_prefix: bool,
    pub expiration: Option<Expiration>,
    pub noncurrent: Option<Noncurrent>,
    /// Abort multipart uploads this many days after they began.
    pub abort_upload_days: Option<i32>,
    /// Move current objects to remote tiers (absent in rules stored before tiers).
    #[serde(default)]
    pub transitions: Vec<Transition>,
    /// Move noncurrent versions to remote tiers.
    #[serde(default)]
    pub noncurrent_transitions: Vec<NoncurrentTransition>,
}

/// A `Transition`: current objects move to tier `tier` (its name is the StorageClass) this
/// many days after their creation, or from a date.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub days: Option<i32>,
    /// Seconds since the epoch, midnight UTC.
    pub date: Option<i64>,
    pub tier: String,
}

/// Which objects a rule applies to: all of what is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    pub prefix: Option<String>,
    pub tags: Vec<(String, String)>,
    pub size_gt: Option<i64>,
    pub size_lt: Option<i64>,
    /// Whether the conditions came as an `And` (given back the same way).
    pub and: bool,
}

/// A `NoncurrentVersionTransition`: noncurrent versions move to tier `tier` this many days
/// after they became noncurrent, beyond the newest `newer` ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoncurrentTransition {
    pub days: i32,
    pub newer: Option<i32>,
    pub tier: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiration {
    /// Days after an object's creation.
    pub days: Option<i32>,
    /// A date (seconds since the epoch, midnight UTC) from which objects expire.
    pub date: Option<i64>,
    /// Remove a delete marker that is the only version left of its key.
    pub expired_object_delete_marker: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Noncurrent {
    /// Days after a version became noncurrent.
    pub days: Option<i32>,
    /// Keep this many newer noncurrent versions whatever their age.
    pub newer: Option<i32>,
}

/// What is known of an object when rules are asked about it.
pub struct ObjectFacts<'a> {
    pub key: &'a str,
    pub size: u64,
    pub tags: &'a [(String, String)],
}

impl Filter {
    pub fn matches(&self, o: &ObjectFacts<'_>) -> bool {
        self.prefix.as_deref().is_none_or(|p| o.key.starts_with(p))
            && self.tags.iter().all(|t| o.tags.contains(t))
            && self.size_gt.is_none_or(|n| o.size as i64 > n)
            && self.size_lt.is_none_or(|n| (o.size as i64) < n)
    }

    /// Whether matching needs the object's tags.
    pub fn needs_tags(&self) -> bool {
        !self.tags.is_empty()
    }
}

/// When something `days` after `mtime_ns` (or from `date`, in seconds) is due.
fn due_at(days: Option<i32>, date: Option<i64>, mtime_ns: i64, day_ns: i64) -> Option<i64> {
    match (days, date) {
        (Some(d), _) => Some(mtime_ns.saturating_add(i64::from(d).saturating_mul(day_ns))),
        (None, Some(secs)) => Some(secs.saturating_mul(1_000_000_000)),
        (None, None) => None,
    }
}

impl Rule {
    /// When an object of this rule written at `mtime_ns` expires, `day_ns` being a day.
    pub fn expires_at(&self, mtime_ns: i64, day_ns: i64) -> Option<i64> {
        let e = self.expiration.as_ref()?;
        due_at(e.days, e.date, mtime_ns, day_ns)
    }

    /// The tier an object of this rule written at `mtime_ns` belongs in at `now_ns` (the
    /// latest of its transitions that is due), with when that transition fell due.
    pub fn tier_at(&self, mtime_ns: i64, day_ns: i64, now_ns: i64) -> Option<(i64, &str)> {
        self.transitions
            .iter()
            .filter_map(|t| {
                due_at(t.days, t.date, mtime_ns, day_ns).map(|at| (at, t.tier.as_str()))
            })
            .filter(|(at, _)| *at <= now_ns)
            .max_by_key(|(at, _)| *at)
    }

    /// The tier a noncurrent version of this rule belongs in at `now_ns`: noncurrent since
    /// `since_ns`, `rank` newer noncurrent versions before it.
    pub fn noncurrent_tier_at(
        &self,
        since_ns: i64,
        rank: usize,
        day_ns: i64,
        now_ns: i64,
    ) -> Option<(i64, &str)> {
        self.noncurrent_transitions
            .iter()
            .filter(|t| t.newer.is_none_or(|keep| rank >= keep as usize))
            .map(|t| {
                let at = since_ns.saturating_add(i64::from(t.days).saturating_mul(day_ns));
                (at, t.tier.as_str())
            })
            .filter(|(at, _)| *at <= now_ns)
            .max_by_key(|(at, _)| *at)
    }

    /// The tiers this rule names.
    pub fn tiers(&self) -> impl Iterator<Item = &str> {
        let current = self.transitions.iter().map(|t| t.tier.as_str());
        current.chain(self.noncurrent_transitions.iter().map(|t| t.tier.as_str()))
    }
}

fn malformed(msg: &str) -> s3s::S3Error {
    s3_error!(MalformedXML, "{msg}")
}

fn invalid(msg: &str) -> s3s::S3Error {
    s3_error!(InvalidArgument, "{msg}")
}

fn tag_pair(t: &Tag) -> (String, String) {
    (
        t.key.clone().unwrap_or_default(),
        t.value.clone().unwrap_or_default(),
    )
}

fn days(n: Option<i32>, what: &str) -> S3Result<Option<i32>> {
    match n {
        Some(d) if d <= 0 => Err(invalid(&format!("{what} must be a positive integer"))),
        other => Ok(other),
    }
}

/// The rules of a PutBucketLifecycleConfiguration, checked as S3 checks them.
pub fn parse(c: &BucketLifecycleConfiguration) -> S3Result<Vec<Rule>> {
    if c.rules.is_empty() || c.rules.len() > MAX_RULES {
        return Err(malformed("A lifecycle configuration has 1 to 1000 rules"));
    }
    let mut out: Vec<Rule> = Vec::with_capacity(c.rules.len());
    for (i, r) in c.rules.iter().enumerate() {
        let rule = parse_rule(r, i)?;
        if out.iter().any(|o| o.id == rule.id) {
            return Err(invalid(
                "Rule ID must be unique. Found same ID for more than one rule",
            ));
        }
        out.push(rule);
    }
    Ok(out)
}

fn parse_rule(r: &LifecycleRule, index: usize) -> S3Result<Rule> {
    let id = match r.id.as_deref() {
        Some(id) if id.chars().count() > MAX_ID => {
            return Err(invalid("ID length should not exceed allowed limit of 255"))
        }
        Some(id) if !id.is_empty() => id.to_string(),
        // S3 names a rule without an ID.
        _ => format!("rule-{index}"),
    };
    let enabled = match r.status.as_str() {
        ExpirationStatus::ENABLED => true,
        ExpirationStatus::DISABLED => false,
        _ => return Err(malformed("Status must be Enabled or Disabled")),
    };
    let transitions = r
        .transitions
        .iter()
        .flatten()
        .map(parse_transition)
        .collect::<S3Result<Vec<_>>>()?;
    let noncurrent_transitions = r
        .noncurrent_version_transitions
        .iter()
        .flatten()
        .map(parse_noncurrent_transition)
        .collect::<S3Result<Vec<_>>>()?;
    let (filter, legacy_prefix) = match (&r.prefix, &r.filter) {
        (Some(_), Some(_)) => {
            return Err(malformed(
                "A rule has either a Prefix or a Filter, not both",
            ))
        }
        (Some(p), None) => (
            Filter {
                prefix: Some(p.clone()),
                ..Default::default()
            },
            true,
        ),
        (None, Some(f)) => (parse_filter(f)?, false),
        (None, None) => (Filter::default(), false),
    };
    let expiration = match &r.expiration {
        None => None,
        Some(e) => {
            let date = e.date.as_ref().map(midnight_secs).transpose()?;
            let days = days(e.days, "Days")?;
            let marker = e.expired_object_delete_marker.unwrap_or(false);
            let given = [
                days.is_some(),
                date.is_some(),
                e.expired_object_delete_marker.is_some(),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                return Err(malformed(
                    "An Expiration has one of Days, Date or ExpiredObjectDeleteMarker",
                ));
            }
            if marker && !filter.tags.is_empty() {
                return Err(invalid(
                    "ExpiredObjectDeleteMarker cannot be specified with a tag filter",
                ));
            }
            Some(Expiration {
                days,
                date,
                expired_object_delete_marker: marker,
            })
        }
    };
    let noncurrent = match &r.noncurrent_version_expiration {
        None => None,
        Some(n) => {
            let newer = match n.newer_noncurrent_versions {
                Some(v) if v <= 0 => {
                    return Err(invalid(
                        "NewerNoncurrentVersions must be a positive integer",
                    ))
                }
                v => v,
            };
            Some(Noncurrent {
                days: days(n.noncurrent_days, "NoncurrentDays")?,
                newer,
            })
        }
    };
    let abort_upload_days = match &r.abort_incomplete_multipart_upload {
        None => None,
        Some(a) => {
            if !filter.tags.is_empty() {
                return Err(invalid(
                    "AbortIncompleteMultipartUpload cannot be specified with a tag filter",
                ));
            }
            days(a.days_after_initiation, "DaysAfterInitiation")?
        }
    };
    if expiration.is_none()
        && noncurrent.is_none()
        && abort_upload_days.is_none()
        && transitions.is_empty()
        && noncurrent_transitions.is_empty()
    {
        return Err(malformed("A rule needs at least one action"));
    }
    Ok(Rule {
        id,
        enabled,
        filter,
        legacy_prefix,
        expiration,
        noncurrent,
        abort_upload_days,
        transitions,
        noncurrent_transitions,
    })
}

/// A NoncurrentVersionTransition: a StorageClass naming a tier, NoncurrentDays (0 or more)
/// and optionally NewerNoncurrentVersions.
fn parse_noncurrent_transition(t: &NoncurrentVersionTransition) -> S3Result<NoncurrentTransition> {
    let Some(class) = &t.storage_class else {
        return Err(malformed(
            "A NoncurrentVersionTransition needs a StorageClass",
        ));
    };
    let days = match t.noncurrent_days {
        Some(d) if d >= 0 => d,
        Some(_) => return Err(invalid("'NoncurrentDays' must be a non-negative integer")),
        None => {
            return Err(malformed(
                "A NoncurrentVersionTransition needs NoncurrentDays",
            ))
        }
    };
    if t.newer_noncurrent_versions.is_some_and(|n| n <= 0) {
        return Err(invalid(
            "NewerNoncurrentVersions must be a positive integer",
        ));
    }
    Ok(NoncurrentTransition {
        days,
        newer: t.newer_noncurrent_versions,
        tier: class.as_str().to_string(),
    })
}

/// A Transition: a StorageClass naming a tier (checked against the tiers by the caller), and
/// Days (0 or more) or a Date.
fn parse_transition(t: &s3s::dto::Transition) -> S3Result<Transition> {
    let Some(class) = &t.storage_class else {
        return Err(malformed("A Transition needs a StorageClass"));
    };
    let date = t.date.as_ref().map(midnight_secs).transpose()?;
    if t.days.is_some() == date.is_some() {
        return Err(malformed("A Transition has one of Days or Date"));
    }
    if t.days.is_some_and(|d| d < 0) {
        return Err(invalid(
            "'Days' for Transition action must be a non-negative integer",
        ));
    }
    Ok(Transition {
        days: t.days,
        date,
        tier: class.as_str().to_string(),
    })
}

fn parse_filter(f: &LifecycleRuleFilter) -> S3Result<Filter> {
    let simple = [
        f.prefix.is_some(),
        f.tag.is_some(),
        f.object_size_greater_than.is_some() || f.object_size_less_than.is_some(),
    ];
    if f.and.is_some() && simple.iter().any(|s| *s) {
        return Err(malformed("A Filter's And holds all its conditions"));
    }
    if let Some(a) = &f.and {
        let tags: Vec<_> = a.tags.iter().flatten().map(tag_pair).collect();
        return Ok(Filter {
            prefix: a.prefix.clone(),
            tags,
            size_gt: a.object_size_greater_than,
            size_lt: a.object_size_less_than,
            and: true,
        });
    }
    Ok(Filter {
        prefix: f.prefix.clone(),
        tags: f.tag.iter().map(tag_pair).collect(),
        size_gt: f.object_size_greater_than,
        size_lt: f.object_size_less_than,
        and: false,
    })
}

/// An Expiration date: S3 takes midnight UTC only (ISO 8601).
fn midnight_secs(d: &Timestamp) -> S3Result<i64> {
    let t: time::OffsetDateTime = d.clone().into();
    if t.time() != time::Time::MIDNIGHT {
        return Err(invalid("'Date' must be at midnight GMT"));
    }
    Ok(t.unix_timestamp())
}

/// The rules as S3's XML gives them back.
pub fn to_dto(rules: &[Rule]) -> Vec<LifecycleRule> {
    rules.iter().map(rule_dto).collect()
}

fn tag_dto((k, v): &(String, String)) -> Tag {
    Tag {
        key: Some(k.clone()),
        value: Some(v.clone()),
    }
}

fn rule_dto(r: &Rule) -> LifecycleRule {
    let f = &r.filter;
    let (prefix, filter) = if r.legacy_prefix {
        (f.prefix.clone(), None)
    } else if f.and {
        let and = LifecycleRuleAndOperator {
            object_size_greater_than: f.size_gt,
            object_size_less_than: f.size_lt,
            prefix: f.prefix.clone(),
            tags: (!f.tags.is_empty()).then(|| f.tags.iter().map(tag_dto).collect()),
        };
        let filter = LifecycleRuleFilter {
            and: Some(and),
            ..Default::default()
        };
        (None, Some(filter))
    } else {
        let filter = LifecycleRuleFilter {
            and: None,
            object_size_greater_than: f.size_gt,
            object_size_less_than: f.size_lt,
            prefix: f.prefix.clone(),
            tag: f.tags.first().map(tag_dto),
        };
        (None, Some(filter))
    };
    let status = if r.enabled {
        ExpirationStatus::ENABLED
    } else {
        ExpirationStatus::DISABLED
    };
    LifecycleRule {
        abort_incomplete_multipart_upload: r.abort_upload_days.map(|d| {
            AbortIncompleteMultipartUpload {
                days_after_initiation: Some(d),
            }
        }),
        expiration: r.expiration.as_ref().map(|e| LifecycleExpiration {
            date: e
                .date
                .map(|s| crate::keys::timestamp(s.saturating_mul(1_000_000_000))),
            days: e.days,
            expired_object_delete_marker: e.expired_object_delete_marker.then_some(true),
        }),
        filter,
        id: Some(r.id.clone()),
        noncurrent_version_expiration: r.noncurrent.as_ref().map(|n| NoncurrentVersionExpiration {
            newer_noncurrent_versions: n.newer,
            noncurrent_days: n.days,
        }),
        noncurrent_version_transitions: (!r.noncurrent_transitions.is_empty()).then(|| {
            r.noncurrent_transitions
                .iter()
                .map(|t| NoncurrentVersionTransition {
                    newer_noncurrent_versions: t.newer,
                    noncurrent_days: Some(t.days),
                    storage_class: Some(TransitionStorageClass::from(t.tier.clone())),
                })
                .collect()
        }),
        prefix,
        status: ExpirationStatus::from_static(status),
        transitions: (!r.transitions.is_empty()).then(|| {
            r.transitions
                .iter()
                .map(|t| s3s::dto::Transition {
                    date: t
                        .date
                        .map(|s| crate::keys::timestamp(s.saturating_mul(1_000_000_000))),
                    days: t.days,
                    storage_class: Some(TransitionStorageClass::from(t.tier.clone())),
                })
                .collect()
        }),
    }
}

/// The `x-amz-expiration` of a current object (`expiry-date="…", rule-id="…"`) in a bucket
/// with lifecycle `rules`: the earliest expiration any enabled rule gives it.
pub fn expiration_header(
    rules: Option<&[Rule]>,
    key: &str,
    attr: &saker_rpc::Attr,
    tags: &[(String, String)],
) -> Option<String> {
    let rules = rules?;
    let facts = ObjectFacts {
        key,
        size: attr.size,
        tags,
    };
    // Always in real days rounded up to the next midnight UTC, as S3 (and RGW, whatever
    // its lc_debug_interval) announce it.
    let day = DAY.as_nanos() as i64;
    let first = rules
        .iter()
        .filter(|r| r.enabled && r.filter.matches(&facts))
        .filter_map(|r| r.expires_at(attr.s3_mtime_ns, day).map(|t| (t, &r.id)))
        .min();
    let (at, id) = first?;
    let at = at
        .saturating_add(day - 1)
        .div_euclid(day)
        .saturating_mul(day);
    let date = crate::keys::format_http_date(&crate::keys::timestamp(at)).unwrap_or_default();
    Some(format!("expiry-date=\"{date}\", rule-id=\"{id}\""))
}

/// A real day: `x-amz-expiration` counts in these, whatever a pass's day is.
pub const DAY: Duration = Duration::from_secs(86_400);

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(prefix: Option<&str>, days: i32) -> LifecycleRule {
        LifecycleRule {
            expiration: Some(LifecycleExpiration {
                days: Some(days),
                ..Default::default()
            }),
            id: Some("r".into()),
            prefix: prefix.map(str::to_string),
            status: ExpirationStatus::from_static(ExpirationStatus::ENABLED),
            abort_incomplete_multipart_upload: None,
            filter: None,
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            transitions: None,
        }
    }

    fn code(r: S3Result<Vec<Rule>>) -> String {
        r.expect_err("refused").code().as_str().to_string()
    }

    #[test]
    fn rules_round_trip_and_match() {
        let c = BucketLifecycleConfiguration {
            rules: vec![rule(Some("logs/"), 3)],
        };
        let rules = parse(&c).unwrap();
        assert_eq!(to_dto(&rules), c.rules);
        let r = &rules[0];
        let facts = |key| ObjectFacts {
            key,
            size: 10,
            tags: &[],
        };
        assert!(r.filter.matches(&facts("logs/a")));
        assert!(!r.filter.matches(&facts("data/a")));
        assert_eq!(r.expires_at(100, 10), Some(130));
    }

    #[test]
    fn bad_rules_are_refused() {
        let mut same = BucketLifecycleConfiguration {
            rules: vec![rule(None, 1), rule(None, 2)],
        };
        assert_eq!(code(parse(&same)), "InvalidArgument");
        same.rules[1].id = Some("x".repeat(256));
        assert_eq!(code(parse(&same)), "InvalidArgument");
        let mut bad = BucketLifecycleConfiguration {
            rules: vec![rule(None, 0)],
        };
        assert_eq!(code(parse(&bad)), "InvalidArgument");
        bad.rules[0] = rule(None, 1);
        bad.rules[0].status = ExpirationStatus::from_static("enabled");
        assert_eq!(code(parse(&bad)), "MalformedXML");
    }
}
