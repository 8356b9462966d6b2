//! The `Condition` element: operators (`StringEquals`, `NumericLessThan`, `IpAddress`,
//! `Null`, …, each with its `…IfExists` form and the `ForAnyValue:`/`ForAllValues:` set
//! qualifiers) and their evaluation against a request's condition keys.
//!
//! Semantics (AWS's): the values listed for one key are OR-ed; keys and operators are AND-ed.
//! A key the request lacks makes a positive operator false and a negated one
//! (`StringNotEquals`, `NotIpAddress`, `ArnNotLike`, …) true; `…IfExists` is true when the key
//! is missing; `Null` tests presence. `ForAnyValue:` needs one request value to satisfy the
//! operator (false when the key is missing), `ForAllValues:` needs every one to (true when the
//! key is missing). A negated operator on a multi-valued key without a qualifier is true when
//! no request value equals any policy value.

use std::net::IpAddr;

use serde_json::Value;

use crate::pattern::{match_with_vars, substitute, Vars};
use crate::{Error, Request};

/// A condition operator, without its `IfExists` suffix or set qualifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    StringEquals,
    StringNotEquals,
    StringEqualsIgnoreCase,
    StringNotEqualsIgnoreCase,
    StringLike,
    StringNotLike,
    NumericEquals,
    NumericNotEquals,
    NumericLessThan,
    NumericLessThanEquals,
    NumericGreaterThan,
    NumericGreaterThanEquals,
    DateEquals,
    DateNotEquals,
    DateLessThan,
    DateLessThanEquals,
    DateGreaterThan,
    DateGreaterThanEquals,
    Bool,
    IpAddress,
    NotIpAddress,
    ArnEquals,
    ArnNotEquals,
    ArnLike,
    ArnNotLike,
    Null,
}

use Operator::*;

const OPERATORS: [Operator; 26] = [
    StringEquals,
    StringNotEquals,
    StringEqualsIgnoreCase,
    StringNotEqualsIgnoreCase,
    StringLike,
    StringNotLike,
    NumericEquals,
    NumericNotEquals,
    NumericLessThan,
    NumericLessThanEquals,
    NumericGreaterThan,
    NumericGreaterThanEquals,
    DateEquals,
    DateNotEquals,
    DateLessThan,
    DateLessThanEquals,
    DateGreaterThan,
    DateGreaterThanEquals,
    Bool,
    IpAddress,
    NotIpAddress,
    ArnEquals,
    ArnNotEquals,
    ArnLike,
    ArnNotLike,
    Null,
];

#[derive(Clone, Copy, PartialEq)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Str,
    StrIgnoreCase,
    Like,
    Num(Cmp),
    Date(Cmp),
    Bool,
    Ip,
    Null,
}

impl Operator {
    /// The operator's name as written in a policy.
    pub fn name(self) -> &'static str {
        match self {
            StringEquals => "StringEquals",
            StringNotEquals => "StringNotEquals",
            StringEqualsIgnoreCase => "StringEqualsIgnoreCase",
            StringNotEqualsIgnoreCase => "StringNotEqualsIgnoreCase",
            StringLike => "StringLike",
            StringNotLike => "StringNotLike",
            NumericEquals => "NumericEquals",
            NumericNotEquals => "NumericNotEquals",
            NumericLessThan => "NumericLessThan",
            NumericLessThanEquals => "NumericLessThanEquals",
            NumericGreaterThan => "NumericGreaterThan",
            NumericGreaterThanEquals => "NumericGreaterThanEquals",
            DateEquals => "DateEquals",
            DateNotEquals => "DateNotEquals",
            DateLessThan => "DateLessThan",
            DateLessThanEquals => "DateLessThanEquals",
            DateGreaterThan => "DateGreaterThan",
            DateGreaterThanEquals => "DateGreaterThanEquals",
            Bool => "Bool",
            IpAddress => "IpAddress",
            NotIpAddress => "NotIpAddress",
            ArnEquals => "ArnEquals",
            ArnNotEquals => "ArnNotEquals",
            ArnLike => "ArnLike",
            ArnNotLike => "ArnNotLike",
            Null => "Null",
        }
    }

    /// Whether the operator is the negation of another (true when the key is missing).
    pub fn is_negated(self) -> bool {
        matches!(
            self,
            StringNotEquals
                | StringNotEqualsIgnoreCase
                | StringNotLike
                | NumericNotEquals
                | DateNotEquals
                | NotIpAddress
                | ArnNotEquals
                | ArnNotLike
        )
    }

    fn family(self) -> Family {
        match self {
            StringEquals | StringNotEquals => Family::Str,
            StringEqualsIgnoreCase | StringNotEqualsIgnoreCase => Family::StrIgnoreCase,
            StringLike | StringNotLike | ArnEquals | ArnNotEquals | ArnLike | ArnNotLike => {
                Family::Like
            }
            NumericEquals | NumericNotEquals => Family::Num(Cmp::Eq),
            NumericLessThan => Family::Num(Cmp::Lt),
            NumericLessThanEquals => Family::Num(Cmp::Le),
            NumericGreaterThan => Family::Num(Cmp::Gt),
            NumericGreaterThanEquals => Family::Num(Cmp::Ge),
            DateEquals | DateNotEquals => Family::Date(Cmp::Eq),
            DateLessThan => Family::Date(Cmp::Lt),
            DateLessThanEquals => Family::Date(Cmp::Le),
            DateGreaterThan => Family::Date(Cmp::Gt),
            DateGreaterThanEquals => Family::Date(Cmp::Ge),
            Bool => Family::Bool,
            IpAddress | NotIpAddress => Family::Ip,
            Null => Family::Null,
        }
    }
}

/// `ForAnyValue:` or `ForAllValues:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetQualifier {
    ForAnyValue,
    ForAllValues,
}

/// One operator applied to one condition key: `"StringLike": {"s3:prefix": ["a/*", "b/*"]}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    pub operator: Operator,
    pub qualifier: Option<SetQualifier>,
    pub if_exists: bool,
    /// The condition key, lowercased.
    pub key: String,
    /// The policy's values (numbers and booleans as their JSON text); OR-ed.
    pub values: Vec<String>,
}

/// A statement's whole `Condition` element: its clauses, AND-ed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Condition {
    clauses: Vec<Clause>,
}

/// Parses an operator name such as `ForAllValues:StringLikeIfExists` (case-insensitive).
pub fn parse_operator(name: &str) -> Result<(Option<SetQualifier>, Operator, bool), Error> {
    let unknown = || Error::UnknownConditionOperator(name.to_string());
    let lower = name.to_ascii_lowercase();
    let (qualifier, rest) = if let Some(r) = lower.strip_prefix("foranyvalue:") {
        (Some(SetQualifier::ForAnyValue), r)
    } else if let Some(r) = lower.strip_prefix("forallvalues:") {
        (Some(SetQualifier::ForAllValues), r)
    } else {
        (None, lower.as_str())
    };
    let (base, if_exists) = match rest.strip_suffix("ifexists") {
        Some(b) => (b, true),
        None => (rest, false),
    };
    let op = OPERATORS
        .into_iter()
        .find(|o| o.name().eq_ignore_ascii_case(base))
        .ok_or_else(unknown)?;
    if op == Null && if_exists {
        return Err(unknown());
    }
    Ok((qualifier, op, if_exists))
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Condition {
    /// Parses a `Condition` element: `{operator: {key: value | [values]}}`.
    pub(crate) fn parse(v: &Value) -> Result<Self, Error> {
        let ops = v
            .as_object()
            .ok_or_else(|| Error::Malformed("Condition must be an object".into()))?;
        let mut clauses = Vec::new();
        for (name, keys) in ops {
            let (qualifier, operator, if_exists) = parse_operator(name)?;
            let keys = keys.as_object().ok_or_else(|| {
                Error::Malformed(format!("condition {name} must map keys to values"))
            })?;
            for (key, vals) in keys {
                let list: Vec<&Value> = match vals {
                    Value::Array(a) => a.iter().collect(),
                    v => vec![v],
                };
                let bad = |v: &str| Error::InvalidConditionValue {
                    operator: name.clone(),
                    value: v.to_string(),
                };
                let mut values = Vec::with_capacity(list.len());
                for v in list {
                    let s = scalar(v).ok_or_else(|| bad(&v.to_string()))?;
                    if !valid_value(operator.family(), &s) {
                        return Err(bad(&s));
                    }
                    values.push(s);
                }
                if values.is_empty() {
                    return Err(bad("[]"));
                }
                clauses.push(Clause {
                    operator,
                    qualifier,
                    if_exists,
                    key: key.to_lowercase(),
                    values,
                });
            }
        }
        Ok(Condition { clauses })
    }

    pub fn clauses(&self) -> &[Clause] {
        &self.clauses
    }

    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }

    /// Whether every clause holds for `req`; `vars`: policy variables are substituted in
    /// string and ARN values (policy Version 2012-10-17).
    pub fn matches(&self, req: &Request, vars: bool) -> bool {
        self.clauses.iter().all(|c| c.matches(req, vars))
    }
}

impl Clause {
    /// Whether this clause holds for `req` (see the module documentation).
    pub fn matches(&self, req: &Request, vars: bool) -> bool {
        let present = req.get(&self.key);
        let fam = self.operator.family();
        if fam == Family::Null {
            let missing = present.is_none();
            return self
                .values
                .iter()
                .any(|v| v.eq_ignore_ascii_case("true") == missing);
        }
        let negated = self.operator.is_negated();
        let Some(values) = present else {
            return self.if_exists
                || match self.qualifier {
                    Some(SetQualifier::ForAllValues) => true,
                    Some(SetQualifier::ForAnyValue) => false,
                    None => negated,
                };
        };
        let var = req.vars(vars);
        // Whether one request value equals/matches any of the policy's values.
        let hit = |rv: &String| self.values.iter().any(|pv| value_matches(fam, pv, rv, var));
        match self.qualifier {
            None if negated => !values.iter().any(hit),
            None => values.iter().any(hit),
            Some(SetQualifier::ForAnyValue) => values.iter().any(|v| hit(v) != negated),
            Some(SetQualifier::ForAllValues) => values.iter().all(|v| hit(v) != negated),
        }
    }
}

fn valid_value(fam: Family, v: &str) -> bool {
    match fam {
        Family::Num(_) => v.parse::<f64>().is_ok_and(f64::is_finite),
        Family::Date(_) => parse_date(v).is_some(),
        Family::Bool | Family::Null => {
            v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false")
        }
        Family::Ip => Cidr::parse(v).is_some(),
        Family::Str | Family::StrIgnoreCase | Family::Like => true,
    }
}

fn compare<T: PartialOrd>(cmp: Cmp, request: T, policy: T) -> bool {
    match cmp {
        Cmp::Eq => request == policy,
        Cmp::Lt => request < policy,
        Cmp::Le => request <= policy,
        Cmp::Gt => request > policy,
        Cmp::Ge => request >= policy,
    }
}

fn value_matches(fam: Family, pv: &str, rv: &str, var: Option<&dyn Vars>) -> bool {
    match fam {
        // Without a variable to substitute, the policy's text is compared as it is (no copy:
        // this runs for every clause of every evaluated request).
        Family::Str if !has_var(pv, var) => pv == rv,
        Family::Str => substitute(pv, var).is_some_and(|p| p == rv),
        Family::StrIgnoreCase if !has_var(pv, var) => eq_ignore_case(pv, rv),
        Family::StrIgnoreCase => substitute(pv, var).is_some_and(|p| eq_ignore_case(&p, rv)),
        Family::Like => match_with_vars(pv, rv, false, var),
        Family::Num(cmp) => match (rv.trim().parse::<f64>(), pv.parse::<f64>()) {
            (Ok(r), Ok(p)) => compare(cmp, r, p),
            _ => false,
        },
        Family::Date(cmp) => match (parse_date(rv.trim()), parse_date(pv)) {
            (Some(r), Some(p)) => compare(cmp, r, p),
            _ => false,
        },
        Family::Bool => pv.eq_ignore_ascii_case(rv.trim()),
        Family::Ip => match (Cidr::parse(pv), rv.trim().parse::<IpAddr>()) {
            (Some(c), Ok(ip)) => c.contains(ip),
            _ => false,
        },
        Family::Null => false,
    }
}

/// Whether `pv` has a `${…}` variable that `var` would substitute.
fn has_var(pv: &str, var: Option<&dyn Vars>) -> bool {
    var.is_some() && pv.contains("${")
}

fn eq_ignore_case(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// A date as nanoseconds since the epoch: RFC 3339 (`2024-01-31T12:00:00Z`), a date alone
/// (`2024-01-31`, midnight UTC) or seconds since the epoch (`1706702400`).
pub(crate) fn parse_date(s: &str) -> Option<i128> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(secs) = s.parse::<i64>() {
        return Some(i128::from(secs) * 1_000_000_000);
    }
    let parse = |t: &str| time::OffsetDateTime::parse(t, &Rfc3339).ok();
    let t = if s.len() == 10 {
        parse(&format!("{s}T00:00:00Z"))?
    } else {
        parse(s)?
    };
    Some(t.unix_timestamp_nanos())
}

/// An IPv4 or IPv6 network: `203.0.113.0/24`, `2001:db8::/32`, or one address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cidr {
    net: IpAddr,
    pub(crate) prefix: u8,
}

impl Cidr {
    pub(crate) fn parse(s: &str) -> Option<Cidr> {
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let net: IpAddr = addr.parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => p.parse().ok()?,
            Some(_) => return None,
            None => max,
        };
        (prefix <= max).then_some(Cidr { net, prefix })
    }

    pub(crate) fn is_ipv4(&self) -> bool {
        self.net.is_ipv4()
    }

    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Principal, Resource};
    use serde_json::json;

    fn req(pairs: &[(&str, &[&str])]) -> Request {
        let mut r = Request::new(Principal::key("alice"), "s3:ListBucket", Resource::Service);
        for (k, v) in pairs {
            r.set(k, v.iter().copied());
        }
        r
    }

    fn holds(cond: Value, r: &Request) -> bool {
        Condition::parse(&cond).unwrap().matches(r, true)
    }

    #[test]
    fn operators_table() {
        let ip = [("aws:SourceIp", &["192.0.2.10"][..])];
        let none: [(&str, &[&str]); 0] = [];
        type Keys<'a> = &'a [(&'a str, &'a [&'a str])];
        #[rustfmt::skip]
        let cases: Vec<(Value, Keys, bool)> = vec![
            (json!({"StringEquals": {"s3:prefix": "home/"}}), &[("s3:prefix", &["home/"])], true),
            (json!({"StringEquals": {"s3:prefix": "home/"}}), &[("s3:prefix", &["HOME/"])], false),
            (json!({"StringEquals": {"s3:prefix": ["a", "home/"]}}), &[("s3:prefix", &["home/"])], true),
            (json!({"StringEquals": {"s3:prefix": "home/"}}), &none, false),
            (json!({"StringNotEquals": {"s3:prefix": "home/"}}), &none, true),
            (json!({"StringNotEquals": {"s3:prefix": ["a", "b"]}}), &[("s3:prefix", &["b"])], false),
            (json!({"StringNotEquals": {"s3:prefix": ["a", "b"]}}), &[("s3:prefix", &["c"])], true),
            (json!({"StringEqualsIgnoreCase": {"s3:prefix": "HOME/"}}), &[("s3:prefix", &["home/"])], true),
            (json!({"StringNotEqualsIgnoreCase": {"s3:prefix": "HOME/"}}), &[("s3:prefix", &["home/"])], false),
            (json!({"StringLike": {"s3:prefix": "home/*"}}), &[("s3:prefix", &["home/x/y"])], true),
            (json!({"StringLike": {"s3:prefix": "home/${aws:username}/*"}}), &[("s3:prefix", &["home/alice/x"])], true),
            (json!({"StringLike": {"s3:prefix": "home/${aws:username}/*"}}), &[("s3:prefix", &["home/bob/x"])], false),
            (json!({"StringEquals": {"s3:prefix": "${aws:username}"}}), &[("s3:prefix", &["alice"])], true),
            (json!({"StringNotLike": {"s3:prefix": "tmp/*"}}), &[("s3:prefix", &["tmp/a"])], false),
            (json!({"StringNotLike": {"s3:prefix": "tmp/*"}}), &none, true),
            (json!({"NumericLessThanEquals": {"s3:max-keys": "10"}}), &[("s3:max-keys", &["10"])], true),
            (json!({"NumericLessThanEquals": {"s3:max-keys": 10}}), &[("s3:max-keys", &["11"])], false),
            (json!({"NumericLessThan": {"s3:max-keys": 10}}), &[("s3:max-keys", &["9.5"])], true),
            (json!({"NumericGreaterThan": {"s3:max-keys": 10}}), &[("s3:max-keys", &["x"])], false),
            (json!({"NumericGreaterThanEquals": {"s3:max-keys": 10}}), &[("s3:max-keys", &["10"])], true),
            (json!({"NumericEquals": {"s3:max-keys": 10}}), &[("s3:max-keys", &["10.0"])], true),
            (json!({"NumericNotEquals": {"s3:max-keys": 10}}), &[("s3:max-keys", &["10"])], false),
            (json!({"DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}}), &[("aws:CurrentTime", &["2021-06-01T00:00:00Z"])], true),
            (json!({"DateLessThan": {"aws:CurrentTime": "2020-01-01"}}), &[("aws:CurrentTime", &["2021-06-01T00:00:00+02:00"])], false),
            (json!({"DateEquals": {"aws:EpochTime": 1577836800}}), &[("aws:EpochTime", &["2020-01-01T00:00:00Z"])], true),
            (json!({"DateLessThanEquals": {"aws:EpochTime": "2020-01-01T00:00:00Z"}}), &[("aws:EpochTime", &["1577836800"])], true),
            (json!({"DateGreaterThanEquals": {"aws:EpochTime": "2020-01-01T00:00:00Z"}}), &[("aws:EpochTime", &["1577836799"])], false),
            (json!({"DateNotEquals": {"aws:EpochTime": 5}}), &[("aws:EpochTime", &["5"])], false),
            (json!({"Bool": {"aws:SecureTransport": "false"}}), &[("aws:SecureTransport", &["false"])], true),
            (json!({"Bool": {"aws:SecureTransport": false}}), &[("aws:SecureTransport", &["true"])], false),
            (json!({"Bool": {"aws:SecureTransport": "false"}}), &none, false),
            (json!({"BoolIfExists": {"aws:SecureTransport": "false"}}), &none, true),
            (json!({"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}), &ip, true),
            (json!({"IpAddress": {"aws:SourceIp": ["10.0.0.0/8", "192.0.2.10"]}}), &ip, true),
            (json!({"IpAddress": {"aws:SourceIp": "192.0.3.0/24"}}), &ip, false),
            (json!({"NotIpAddress": {"aws:SourceIp": "192.0.2.0/24"}}), &ip, false),
            (json!({"NotIpAddress": {"aws:SourceIp": "192.0.3.0/24"}}), &ip, true),
            (json!({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}), &ip, true),
            (json!({"IpAddress": {"aws:SourceIp": "2001:db8::/32"}}), &[("aws:SourceIp", &["2001:db8:1::5"])], true),
            (json!({"IpAddress": {"aws:SourceIp": "2001:db8::/32"}}), &[("aws:SourceIp", &["2001:db9::5"])], false),
            (json!({"IpAddress": {"aws:SourceIp": "2001:db8::/32"}}), &ip, false),
            (json!({"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}), &[("aws:SourceIp", &["::ffff:192.0.2.7"])], true),
            (json!({"ArnLike": {"aws:SourceArn": "arn:aws:s3:::b*"}}), &[("aws:SourceArn", &["arn:aws:s3:::bx"])], true),
            (json!({"ArnNotEquals": {"aws:SourceArn": "arn:aws:s3:::b"}}), &none, true),
            (json!({"Null": {"s3:x-amz-server-side-encryption": "true"}}), &none, true),
            (json!({"Null": {"s3:x-amz-server-side-encryption": true}}), &[("s3:x-amz-server-side-encryption", &["AES256"])], false),
            (json!({"Null": {"s3:x-amz-server-side-encryption": "false"}}), &[("s3:x-amz-server-side-encryption", &["AES256"])], true),
            (json!({"StringEqualsIfExists": {"s3:x-amz-acl": "private"}}), &none, true),
            (json!({"StringEqualsIfExists": {"s3:x-amz-acl": "private"}}), &[("s3:x-amz-acl", &["public-read"])], false),
            (json!({"StringNotEqualsIfExists": {"s3:x-amz-acl": "public-read"}}), &[("s3:x-amz-acl", &["public-read"])], false),
            // Keys are case-insensitive, operators too; keys and operators are AND-ed.
            (json!({"stringequals": {"S3:PREFIX": "a"}}), &[("s3:prefix", &["a"])], true),
            (json!({"StringEquals": {"s3:prefix": "a", "s3:delimiter": "/"}}), &[("s3:prefix", &["a"])], false),
            (json!({"StringEquals": {"s3:prefix": "a"}, "StringLike": {"s3:delimiter": "*"}}), &[("s3:prefix", &["a"]), ("s3:delimiter", &["/"])], true),
            (json!({}), &none, true),
        ];
        for (i, (cond, pairs, want)) in cases.into_iter().enumerate() {
            assert_eq!(holds(cond.clone(), &req(pairs)), want, "case {i}: {cond}");
        }
    }

    #[test]
    fn set_qualifiers() {
        let tags = |v: &[&str]| req(&[("aws:TagKeys", v)]);
        let all = json!({"ForAllValues:StringEquals": {"aws:TagKeys": ["env", "team"]}});
        let any = json!({"ForAnyValue:StringEquals": {"aws:TagKeys": ["env", "team"]}});
        let not_any = json!({"ForAnyValue:StringNotEquals": {"aws:TagKeys": ["env", "team"]}});
        let not_all = json!({"ForAllValues:StringNotLike": {"aws:TagKeys": ["secret*"]}});
        let cases = [
            (&all, tags(&["env"]), true),
            (&all, tags(&["env", "team"]), true),
            (&all, tags(&["env", "cost"]), false),
            (&all, req(&[]), true),
            (&any, tags(&["cost", "team"]), true),
            (&any, tags(&["cost"]), false),
            (&any, req(&[]), false),
            (&not_any, tags(&["env", "cost"]), true),
            (&not_any, tags(&["env", "team"]), false),
            (&not_any, req(&[]), false),
            (&not_all, tags(&["a", "b"]), true),
            (&not_all, tags(&["a", "secret-x"]), false),
        ];
        for (i, (cond, r, want)) in cases.into_iter().enumerate() {
            assert_eq!(holds(cond.clone(), &r), want, "case {i}: {cond}");
        }
    }

    #[test]
    fn parse_errors() {
        let bad = [
            json!({"StringEqualz": {"k": "v"}}),
            json!({"NullIfExists": {"k": "true"}}),
            json!({"ForSomeValues:StringEquals": {"k": "v"}}),
            json!({"NumericEquals": {"k": "ten"}}),
            json!({"DateEquals": {"k": "yesterday"}}),
            json!({"Bool": {"k": "yes"}}),
            json!({"IpAddress": {"k": "10.0.0.0/33"}}),
            json!({"IpAddress": {"k": "10.0.0/8"}}),
            json!({"StringEquals": {"k": {"nested": 1}}}),
            json!({"StringEquals": {"k": []}}),
            json!({"StringEquals": {"k": null}}),
            json!({"StringEquals": "v"}),
            json!(["StringEquals"]),
        ];
        for b in bad {
            assert!(Condition::parse(&b).is_err(), "{b} parsed");
        }
        assert_eq!(
            parse_operator("ForAnyValue:StringLikeIfExists").unwrap(),
            (Some(SetQualifier::ForAnyValue), StringLike, true)
        );
        assert!(matches!(
            Condition::parse(&json!({"Foo": {"k": "v"}})),
            Err(Error::UnknownConditionOperator(o)) if o == "Foo"
        ));
    }

    #[test]
    fn cidrs() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.255.0.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        let one = Cidr::parse("10.0.0.1").unwrap();
        assert_eq!(one.prefix, 32);
        assert!(!one.contains("10.0.0.2".parse().unwrap()));
        assert!(Cidr::parse("::/0")
            .unwrap()
            .contains("2001:db8::1".parse().unwrap()));
        assert!(Cidr::parse("10.0.0.0/").is_none());
        assert!(Cidr::parse("10.0.0.0/-1").is_none());
    }
}
