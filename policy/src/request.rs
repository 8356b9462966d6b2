//! The request context the gateway fills for one authorization check: who asks, for which
//! IAM action, on which resource, and the condition keys (`aws:SourceIp`, `s3:prefix`, …).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::pattern::Vars;

/// Who makes the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// An unsigned request.
    Anonymous,
    /// A request signed with an access key. A `root` key is never subject to policies.
    Key { access_key: String, root: bool },
}

impl Principal {
    /// A non-root access key.
    pub fn key(access_key: impl Into<String>) -> Self {
        Principal::Key {
            access_key: access_key.into(),
            root: false,
        }
    }

    /// The root access key.
    pub fn root(access_key: impl Into<String>) -> Self {
        Principal::Key {
            access_key: access_key.into(),
            root: true,
        }
    }

    pub fn is_root(&self) -> bool {
        matches!(self, Principal::Key { root: true, .. })
    }

    pub fn is_anonymous(&self) -> bool {
        matches!(self, Principal::Anonymous)
    }

    pub fn access_key(&self) -> Option<&str> {
        match self {
            Principal::Anonymous => None,
            Principal::Key { access_key, .. } => Some(access_key),
        }
    }
}

/// What the action is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    /// The service itself (`ListBuckets`): ARN `arn:aws:s3:::*`, which both `"*"` and
    /// `"arn:aws:s3:::*"` in a policy match.
    Service,
    /// A bucket: `arn:aws:s3:::bucket`.
    Bucket(String),
    /// An object: `arn:aws:s3:::bucket/key`.
    Object { bucket: String, key: String },
}

impl Resource {
    pub fn object(bucket: impl Into<String>, key: impl Into<String>) -> Self {
        Resource::Object {
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    pub fn bucket(&self) -> Option<&str> {
        match self {
            Resource::Service => None,
            Resource::Bucket(b) | Resource::Object { bucket: b, .. } => Some(b),
        }
    }

    /// The resource's ARN, which policy `Resource` patterns are matched against.
    pub fn arn(&self) -> String {
        match self {
            Resource::Service => "arn:aws:s3:::*".to_string(),
            Resource::Bucket(b) => format!("arn:aws:s3:::{b}"),
            Resource::Object { bucket, key } => format!("arn:aws:s3:::{bucket}/{key}"),
        }
    }
}

/// One authorization question: may `principal` do `action` on `resource`, given the
/// condition keys in the context?
///
/// Condition keys are stored lowercased (matching is case-insensitive); a key may have
/// several values (`s3:RequestObjectTag/…` sets, `ForAnyValue:`/`ForAllValues:`). A key with
/// no value counts as missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub principal: Principal,
    /// The IAM action, e.g. `s3:GetObject` (see [`crate::s3_action`]); case-insensitive.
    pub action: String,
    pub resource: Resource,
    context: BTreeMap<String, Vec<String>>,
    /// The canonical user id of the principal's account, for a key that is an account (the
    /// root key, an account key): a bucket policy's principal may name it by that id.
    canonical_user: Option<String>,
}

impl Request {
    /// A request with the principal's keys already in the context: for a key
    /// `aws:username` = `aws:userid` = the access key and `aws:PrincipalType` = `User`
    /// (`Account` for the root key); for an anonymous request `aws:PrincipalType` =
    /// `Anonymous` and `aws:userid` = `anonymous`. Callers may overwrite them.
    pub fn new(principal: Principal, action: impl Into<String>, resource: Resource) -> Self {
        let mut r = Request {
            principal,
            action: action.into(),
            resource,
            context: BTreeMap::new(),
            canonical_user: None,
        };
        match r.principal.clone() {
            Principal::Anonymous => {
                r.set("aws:PrincipalType", ["Anonymous"]);
                r.set("aws:userid", ["anonymous"]);
            }
            Principal::Key { access_key, root } => {
                r.set("aws:PrincipalType", [if root { "Account" } else { "User" }]);
                r.set("aws:username", [access_key.as_str()]);
                r.set("aws:userid", [access_key.as_str()]);
            }
        }
        r
    }

    /// The request of a principal whose account's canonical user id is `id` (see
    /// [`Request::canonical_user`]).
    pub fn with_canonical_user(mut self, id: Option<String>) -> Self {
        self.canonical_user = id;
        self
    }

    /// The canonical user id of the principal, when it is an account's key: a policy
    /// principal naming that id names it.
    pub fn canonical_user(&self) -> Option<&str> {
        self.canonical_user.as_deref()
    }

    /// Replaces the values of condition key `key`.
    pub fn set<I, S>(&mut self, key: &str, values: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        self.context.insert(key.to_lowercase(), values);
        self
    }

    /// Adds one value to condition key `key`.
    pub fn add(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.context
            .entry(key.to_lowercase())
            .or_default()
            .push(value.into());
        self
    }

    /// Builder form of [`Request::set`] with one value.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.set(key, [value.into()]);
        self
    }

    /// Removes condition key `key`.
    pub fn remove(&mut self, key: &str) -> &mut Self {
        self.context.remove(&key.to_lowercase());
        self
    }

    /// Sets `aws:SourceIp`.
    pub fn with_source_ip(self, ip: IpAddr) -> Self {
        self.with("aws:SourceIp", ip.to_string())
    }

    /// Sets `aws:SecureTransport` (`true` for HTTPS).
    pub fn with_secure_transport(self, https: bool) -> Self {
        self.with("aws:SecureTransport", https.to_string())
    }

    /// Sets `aws:CurrentTime` (RFC 3339) and `aws:EpochTime` from seconds since the epoch.
    pub fn with_time(self, epoch_seconds: i64) -> Self {
        let rfc = time::OffsetDateTime::from_unix_timestamp(epoch_seconds)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            });
        let r = self.with("aws:EpochTime", epoch_seconds.to_string());
        match rfc {
            Some(rfc) => r.with("aws:CurrentTime", rfc),
            None => r,
        }
    }

    /// The values of condition key `key` (any case); `None` when missing or empty.
    pub fn get(&self, key: &str) -> Option<&[String]> {
        let v = match self.context.get(key) {
            Some(v) => v,
            None => self.context.get(&key.to_lowercase())?,
        };
        (!v.is_empty()).then_some(v.as_slice())
    }

    /// The value of a single-valued key, as policy variables use it.
    pub(crate) fn single(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            [one] => Some(one),
            _ => None,
        }
    }

    /// The request as the source of policy variables, when `enabled`.
    pub(crate) fn vars(&self, enabled: bool) -> Option<&dyn Vars> {
        enabled.then_some(self as &dyn Vars)
    }

    /// Every condition key (lowercased) and its values.
    pub fn context(&self) -> &BTreeMap<String, Vec<String>> {
        &self.context
    }
}

impl Vars for Request {
    fn var(&self, key: &str) -> Option<&str> {
        self.single(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_and_context() {
        assert_eq!(Resource::Service.arn(), "arn:aws:s3:::*");
        assert_eq!(Resource::Bucket("b".into()).arn(), "arn:aws:s3:::b");
        assert_eq!(Resource::object("b", "k/x").arn(), "arn:aws:s3:::b/k/x");
        assert_eq!(Resource::object("b", "k").bucket(), Some("b"));

        let r = Request::new(Principal::key("AK1"), "s3:GetObject", Resource::Service)
            .with("S3:Prefix", "home/")
            .with_source_ip("10.1.2.3".parse().unwrap())
            .with_secure_transport(false)
            .with_time(0);
        assert_eq!(r.get("s3:prefix"), Some(&["home/".to_string()][..]));
        assert_eq!(r.get("AWS:SOURCEIP").unwrap(), ["10.1.2.3"]);
        assert_eq!(r.get("aws:securetransport").unwrap(), ["false"]);
        assert_eq!(r.get("aws:currenttime").unwrap(), ["1970-01-01T00:00:00Z"]);
        assert_eq!(r.single("aws:username"), Some("AK1"));
        assert_eq!(r.get("aws:principaltype").unwrap(), ["User"]);
        let mut r = r;
        r.set("empty", Vec::<String>::new())
            .add("multi", "a")
            .add("multi", "b");
        assert_eq!(r.get("empty"), None);
        assert_eq!(r.single("multi"), None);
        r.remove("S3:PREFIX");
        assert_eq!(r.get("s3:prefix"), None);

        let anon = Request::new(Principal::Anonymous, "s3:GetObject", Resource::Service);
        assert_eq!(anon.get("aws:principaltype").unwrap(), ["Anonymous"]);
        assert_eq!(anon.get("aws:username"), None);
        assert!(Principal::root("R").is_root() && !Principal::key("K").is_root());
    }
}
