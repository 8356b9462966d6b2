//! The `policy` target: IAM policy documents (`policy/src/document.rs`), their conditions
//! (`policy/src/condition.rs`) evaluated against a request, and ACLs as stored (JSON).
//!
//! Input: the policy's JSON, then optionally a NUL and a request, one field per line:
//! principal (empty: anonymous, `root:KEY`: a root key, else a key), action, resource (`*`:
//! the service, `b`: a bucket, `b/k`: an object), then `key=value` condition keys; then
//! optionally a NUL and an ACL's JSON. A policy that parses parses the same from its own JSON
//! written again.

use saker_policy::{
    acl_allows, acl_permission, evaluate, wildcard_match, Acl, ObjectOwnership, Policy, PolicyKind,
    Principal, PublicAccessBlock, Request, Resource, Sources,
};

/// Parses a policy (as a bucket and as an identity policy) and an ACL, and evaluates a
/// request against them.
pub fn policy(data: &[u8]) {
    let mut parts = data.splitn(3, |&b| b == 0);
    let doc = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let req = request(&String::from_utf8_lossy(parts.next().unwrap_or_default()));
    let acl: Option<Acl> = parts.next().and_then(|a| serde_json::from_slice(a).ok());

    let bucket = Policy::parse_bucket(&doc).ok();
    let identity = Policy::parse_identity(&doc).ok();
    for p in bucket.iter().chain(&identity) {
        reparses(p);
        let _ = p.is_public();
        let _ = PublicAccessBlock {
            block_public_policy: true,
            ..Default::default()
        }
        .check_policy(p);
    }
    if let Some(acl) = &acl {
        let _ = acl.is_public();
        for permission in [
            saker_policy::Permission::Read,
            saker_policy::Permission::Write,
            saker_policy::Permission::FullControl,
        ] {
            let _ = acl_allows(acl, &req.principal, permission);
        }
        let _ = ObjectOwnership::BucketOwnerPreferred.check_acl(acl, "owner");
    }
    let _ = acl_permission(&req.action);
    for resource in [&req.resource] {
        let arn = resource.arn();
        for p in bucket.iter().chain(&identity) {
            for r in p.resources() {
                let _ = wildcard_match(r, &arn);
            }
        }
    }
    for cross_account in [false, true] {
        let sources = Sources {
            identity: identity.as_ref(),
            bucket_policy: bucket.as_ref(),
            acl: acl.as_ref(),
            ownership: ObjectOwnership::BucketOwnerPreferred,
            public_access_block: PublicAccessBlock::default(),
            cross_account,
        };
        let _ = evaluate(&req, &sources);
    }
}

/// Panics unless `p`'s document, parsed to JSON and written again, parses to the same policy.
fn reparses(p: &Policy) {
    let value: serde_json::Value = serde_json::from_str(p.text()).expect("a parsed policy is JSON");
    let again = Policy::parse(
        &value.to_string(),
        p.kind(),
        saker_policy::ParseOptions {
            max_size: usize::MAX,
        },
    )
    .expect("a policy written again parses");
    assert_eq!(
        again.statements(),
        p.statements(),
        "a policy written again differs"
    );
    assert_eq!((again.version(), again.id()), (p.version(), p.id()));
    assert!(matches!(
        p.kind(),
        PolicyKind::Bucket | PolicyKind::Identity
    ));
}

/// The request `text` describes (see the module documentation).
fn request(text: &str) -> Request {
    let mut lines = text.split('\n');
    let principal = match lines.next().unwrap_or_default() {
        "" => Principal::Anonymous,
        p => match p.strip_prefix("root:") {
            Some(key) => Principal::root(key),
            None => Principal::key(p),
        },
    };
    let action = lines.next().unwrap_or("s3:GetObject");
    let resource = match lines.next().unwrap_or("*") {
        "*" => Resource::Service,
        r => match r.split_once('/') {
            Some((bucket, key)) => Resource::object(bucket, key),
            None => Resource::Bucket(r.to_string()),
        },
    };
    let mut req = Request::new(principal, action, resource);
    for line in lines {
        if let Some((key, value)) = line.split_once('=') {
            req.add(key, value);
        }
    }
    req
}

/// Inputs for the seed corpus: policies with each condition operator, and requests and ACLs
/// to evaluate them against.
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let conditions = [
        r#"{"StringEquals":{"s3:prefix":["home/","home/${aws:username}/"]}}"#,
        r#"{"StringLike":{"aws:Referer":"http://*.example.com/*"}}"#,
        r#"{"StringNotEqualsIgnoreCase":{"s3:x-amz-acl":"public-read"}}"#,
        r#"{"IpAddress":{"aws:SourceIp":["192.0.2.0/24","2001:db8::/32"]}}"#,
        r#"{"NotIpAddress":{"aws:SourceIp":"203.0.113.7/32"}}"#,
        r#"{"Bool":{"aws:SecureTransport":"false"}}"#,
        r#"{"NumericLessThanEquals":{"s3:max-keys":"10"}}"#,
        r#"{"NumericGreaterThan":{"s3:max-keys":1.5}}"#,
        r#"{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01T00:00:00Z"}}"#,
        r#"{"DateLessThan":{"aws:EpochTime":"1700000000"}}"#,
        r#"{"Null":{"s3:x-amz-server-side-encryption":"true"}}"#,
        r#"{"ForAnyValue:StringLike":{"s3:RequestObjectTagKeys":["team*"]}}"#,
        r#"{"ForAllValues:StringEquals":{"s3:RequestObjectTagKeys":["a","b"]}}"#,
        r#"{"StringEqualsIfExists":{"s3:x-amz-storage-class":"STANDARD"}}"#,
        r#"{"ArnLike":{"aws:SourceArn":"arn:aws:s3:::b*"}}"#,
    ];
    let requests = [
        "\ns3:GetObject\nb/k\naws:SourceIp=192.0.2.9\naws:SecureTransport=true",
        "AKIAKEY\ns3:ListBucket\nb\ns3:prefix=home/AKIAKEY/\ns3:max-keys=5",
        "root:AKIAROOT\ns3:PutObject\nb/dir/k\naws:CurrentTime=2024-05-01T12:00:00Z\naws:EpochTime=1714564800",
        "AKIAKEY\ns3:PutObject\nb/k\ns3:RequestObjectTagKeys=team-a\ns3:x-amz-acl=private",
    ];
    let acl = Acl::canned("public-read", "owner", "owner").expect("a canned ACL");
    let acl = serde_json::to_string(&acl).expect("an ACL is JSON");
    let mut out = Vec::new();
    for (i, condition) in conditions.iter().enumerate() {
        for (principal, kind) in [(r#""Principal":"*","#, 0), ("", 1)] {
            let doc = format!(
                r#"{{"Version":"2012-10-17","Id":"seed{i}","Statement":[{{"Sid":"s{i}","Effect":"{}",{principal}"Action":["s3:GetObject","s3:List*","s3:PutObject"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"],"Condition":{condition}}}]}}"#,
                if i % 3 == 2 { "Deny" } else { "Allow" }
            );
            let mut input = doc.into_bytes();
            input.push(0);
            input.extend(requests[(i + kind) % requests.len()].as_bytes());
            if i % 4 == 0 {
                input.push(0);
                input.extend(acl.as_bytes());
            }
            out.push(input);
        }
    }
    out.push(
        br#"{"Statement":{"Effect":"Allow","NotPrincipal":{"AWS":"arn:aws:iam::123456789012:root"},"NotAction":"s3:Delete*","NotResource":"arn:aws:s3:::b/private/*"}}"#
            .to_vec(),
    );
    out
}
