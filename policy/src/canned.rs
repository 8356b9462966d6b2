//! Ready-made identity policies for access keys: `admin`, `readonly`, `readwrite`,
//! `writeonly` (optionally limited to one bucket), and full access. Each document's `Id` is
//! `saker-<name>`, so a stored policy shows which one it is.

use serde_json::json;

use crate::Policy;

/// The names [`canned_identity`] knows.
pub const CANNED_IDENTITY_NAMES: [&str; 4] = ["admin", "readonly", "readwrite", "writeonly"];

/// Every S3 action.
const ADMIN: &[&str] = &["s3:*"];

const READ: &[&str] = &["s3:Get*", "s3:List*"];
const WRITE: &[&str] = &[
    "s3:PutObject",
    "s3:PutObjectTagging",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:DeleteObjectTagging",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];
const WRITE_ONLY: &[&str] = &[
    "s3:PutObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
];

/// The JSON text of ready-made policy `name` (see [`canned_identity`]), `None` for an
/// unknown name.
pub fn canned_identity_json(name: &str, bucket: Option<&str>) -> Option<String> {
    let actions: Vec<&str> = match name {
        "admin" => ADMIN.to_vec(),
        "readonly" => READ.to_vec(),
        "readwrite" => READ.iter().chain(WRITE).copied().collect(),
        "writeonly" => WRITE_ONLY.to_vec(),
        _ => return None,
    };
    let resources = match bucket {
        Some(b) => json!([format!("arn:aws:s3:::{b}"), format!("arn:aws:s3:::{b}/*")]),
        None => json!("*"),
    };
    let mut statements = vec![json!({
        "Sid": name,
        "Effect": "Allow",
        "Action": actions,
        "Resource": resources,
    })];
    if name != "writeonly" && bucket.is_some() {
        statements.push(json!({
            "Sid": "ListAllMyBuckets",
            "Effect": "Allow",
            "Action": "s3:ListAllMyBuckets",
            "Resource": "arn:aws:s3:::*",
        }));
    }
    let doc = json!({
        "Version": "2012-10-17",
        "Id": format!("saker-{name}"),
        "Statement": statements,
    });
    serde_json::to_string_pretty(&doc).ok()
}

/// The text of the `admin` policy for every bucket: what keys made before deny-by-default
/// were given (they could do everything), and the one policy a gateway need not evaluate.
pub fn admin_identity_json() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| canned_identity_json("admin", None).expect("admin is ready-made"))
}

/// A ready-made identity policy:
/// - `admin`: every S3 action (`s3:*`): creating buckets and changing their settings too;
/// - `readonly`: `s3:Get*` and `s3:List*` (objects, listings, bucket settings), plus
///   `s3:ListAllMyBuckets`;
/// - `readwrite`: `readonly` plus writing, tagging and deleting objects and multipart
///   uploads (not creating or deleting buckets, nor changing their settings);
/// - `writeonly`: `s3:PutObject` (single and multipart uploads, copies into the bucket),
///   `s3:AbortMultipartUpload` and `s3:ListMultipartUploadParts`; no reads or listings.
///
/// With `bucket`, the statements cover `arn:aws:s3:::<bucket>` and `arn:aws:s3:::<bucket>/*`
/// only (ListAllMyBuckets still lists every bucket name); without, every bucket.
pub fn canned_identity(name: &str, bucket: Option<&str>) -> Option<Policy> {
    let text = canned_identity_json(name, bucket)?;
    Policy::parse_identity(&text).ok()
}

/// An identity policy allowing every S3 action on everything (`Id` `saker-full`): what a
/// caller passes for keys it gives full access to.
pub fn full_access() -> Policy {
    let text = r#"{"Version":"2012-10-17","Id":"saker-full","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#;
    Policy::parse_identity(text).expect("the full-access policy parses")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{evaluate, Decision, Principal, Request, Resource, Sources};

    fn decide(p: &Policy, action: &str, resource: Resource) -> bool {
        let r = Request::new(Principal::key("K"), action, resource);
        let src = Sources {
            identity: Some(p),
            ..Default::default()
        };
        evaluate(&r, &src) == Decision::Allow
    }

    #[test]
    fn canned_policies_allow_what_they_say() {
        let obj = |b: &str| Resource::object(b, "k");
        let bkt = |b: &str| Resource::Bucket(b.into());
        let cases = [
            ("readonly", "s3:GetObject", obj("b"), true),
            ("readonly", "s3:ListBucket", bkt("b"), true),
            ("readonly", "s3:ListAllMyBuckets", Resource::Service, true),
            ("readonly", "s3:GetObject", obj("other"), false),
            ("readonly", "s3:PutObject", obj("b"), false),
            ("readonly", "s3:DeleteObject", obj("b"), false),
            ("readonly", "s3:CreateBucket", bkt("new"), false),
            ("readwrite", "s3:PutObject", obj("b"), true),
            ("readwrite", "s3:DeleteObject", obj("b"), true),
            ("readwrite", "s3:GetObject", obj("b"), true),
            ("readwrite", "s3:PutObject", obj("other"), false),
            ("readwrite", "s3:PutBucketPolicy", bkt("b"), false),
            ("readwrite", "s3:DeleteBucket", bkt("b"), false),
            ("writeonly", "s3:PutObject", obj("b"), true),
            ("writeonly", "s3:AbortMultipartUpload", obj("b"), true),
            ("writeonly", "s3:ListMultipartUploadParts", obj("b"), true),
            ("writeonly", "s3:GetObject", obj("b"), false),
            ("writeonly", "s3:ListBucket", bkt("b"), false),
            ("writeonly", "s3:ListAllMyBuckets", Resource::Service, false),
            ("admin", "s3:PutObject", obj("b"), true),
            ("admin", "s3:PutBucketTagging", bkt("b"), true),
            ("admin", "s3:GetObject", obj("other"), false),
        ];
        for (name, action, resource, want) in cases {
            let p = canned_identity(name, Some("b")).unwrap();
            assert_eq!(
                decide(&p, action, resource.clone()),
                want,
                "{name} {action} {resource:?}"
            );
        }
        let any = canned_identity("readwrite", None).unwrap();
        assert!(decide(&any, "s3:PutObject", obj("other")));
        assert!(decide(&any, "s3:ListAllMyBuckets", Resource::Service));
        assert!(!decide(&any, "s3:CreateBucket", bkt("new")));
        assert!(canned_identity("superuser", None).is_none());
        let admin = canned_identity("admin", None).unwrap();
        assert!(decide(&admin, "s3:CreateBucket", bkt("new")));
        assert!(decide(&admin, "s3:PutBucketPolicy", bkt("b")));
        assert!(decide(&admin, "s3:ListAllMyBuckets", Resource::Service));
        let admin_of_b = canned_identity("admin", Some("b")).unwrap();
        assert!(decide(&admin_of_b, "s3:DeleteBucket", bkt("b")));
        assert!(!decide(&admin_of_b, "s3:GetObject", obj("other")));
        let full = full_access();
        assert!(decide(&full, "s3:CreateBucket", bkt("new")));
        assert_eq!(full.id(), Some("saker-full"));
        for name in CANNED_IDENTITY_NAMES {
            let p = canned_identity(name, Some("b")).unwrap();
            assert_eq!(p.id(), Some(format!("saker-{name}").as_str()));
            assert!(!p.is_public());
        }
    }
}
