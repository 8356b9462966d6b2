//! Which IAM actions S3 checks for each S3 operation (by the name s3s gives it,
//! `S3AccessContext::s3_op().name()`), and on which resource.

/// The resource an IAM action is checked on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The service (`ListBuckets`): [`crate::Resource::Service`].
    Service,
    /// The request's bucket: [`crate::Resource::Bucket`].
    Bucket,
    /// The request's object: [`crate::Resource::Object`]. For `DeleteObjects`, each key of
    /// the request.
    Object,
    /// The source object of a copy (`x-amz-copy-source`).
    CopySource,
}

/// One permission check an operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Check {
    /// The IAM action, e.g. `s3:GetObject`.
    pub action: &'static str,
    pub target: Target,
}

macro_rules! c {
    ($action:expr, $target:expr) => {
        Check {
            action: $action,
            target: $target,
        }
    };
}

use Target::{Bucket as B, CopySource as Src, Object as O, Service as Svc};

/// The checks AWS makes for `operation` (every one must allow the request), or `None` for
/// an operation this table does not know (callers deny it to all but the root key).
///
/// Extra checks that depend on the request are the caller's: S3 also checks
/// `s3:PutObjectAcl` when PutObject/CopyObject/CreateMultipartUpload set an ACL,
/// `s3:PutObjectTagging` when they set tags, `s3:PutBucketAcl` when CreateBucket sets one,
/// and `s3:BypassGovernanceRetention` for the bypass header. With a `versionId`, use
/// [`versioned_action`] on the action.
pub fn s3_action(operation: &str) -> Option<&'static [Check]> {
    Some(match operation {
        "ListBuckets" | "ListDirectoryBuckets" => &[c!("s3:ListAllMyBuckets", Svc)],
        "CreateBucket" => &[c!("s3:CreateBucket", B)],
        "DeleteBucket" => &[c!("s3:DeleteBucket", B)],
        "HeadBucket" | "ListObjects" | "ListObjectsV2" => &[c!("s3:ListBucket", B)],
        "ListObjectVersions" => &[c!("s3:ListBucketVersions", B)],
        "GetBucketLocation" => &[c!("s3:GetBucketLocation", B)],
        "ListMultipartUploads" => &[c!("s3:ListBucketMultipartUploads", B)],

        "GetObject" | "HeadObject" | "SelectObjectContent" => &[c!("s3:GetObject", O)],
        "GetObjectAttributes" => &[c!("s3:GetObject", O), c!("s3:GetObjectAttributes", O)],
        "GetObjectTorrent" => &[c!("s3:GetObjectTorrent", O)],
        "PutObject"
        | "PostObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "CompleteMultipartUpload" => &[c!("s3:PutObject", O)],
        "CopyObject" | "UploadPartCopy" => &[c!("s3:PutObject", O), c!("s3:GetObject", Src)],
        "AbortMultipartUpload" => &[c!("s3:AbortMultipartUpload", O)],
        "ListParts" => &[c!("s3:ListMultipartUploadParts", O)],
        "DeleteObject" | "DeleteObjects" => &[c!("s3:DeleteObject", O)],
        "RestoreObject" => &[c!("s3:RestoreObject", O)],

        "GetObjectTagging" => &[c!("s3:GetObjectTagging", O)],
        "PutObjectTagging" => &[c!("s3:PutObjectTagging", O)],
        "DeleteObjectTagging" => &[c!("s3:DeleteObjectTagging", O)],
        "GetObjectAcl" => &[c!("s3:GetObjectAcl", O)],
        "PutObjectAcl" => &[c!("s3:PutObjectAcl", O)],
        "GetObjectRetention" => &[c!("s3:GetObjectRetention", O)],
        "PutObjectRetention" => &[c!("s3:PutObjectRetention", O)],
        "GetObjectLegalHold" => &[c!("s3:GetObjectLegalHold", O)],
        "PutObjectLegalHold" => &[c!("s3:PutObjectLegalHold", O)],

        "GetBucketAcl" => &[c!("s3:GetBucketAcl", B)],
        "PutBucketAcl" => &[c!("s3:PutBucketAcl", B)],
        "GetBucketPolicy" => &[c!("s3:GetBucketPolicy", B)],
        "PutBucketPolicy" => &[c!("s3:PutBucketPolicy", B)],
        "DeleteBucketPolicy" => &[c!("s3:DeleteBucketPolicy", B)],
        "GetBucketPolicyStatus" => &[c!("s3:GetBucketPolicyStatus", B)],
        "GetBucketTagging" => &[c!("s3:GetBucketTagging", B)],
        "PutBucketTagging" | "DeleteBucketTagging" => &[c!("s3:PutBucketTagging", B)],
        "GetBucketVersioning" => &[c!("s3:GetBucketVersioning", B)],
        "PutBucketVersioning" => &[c!("s3:PutBucketVersioning", B)],
        "GetBucketOwnershipControls" => &[c!("s3:GetBucketOwnershipControls", B)],
        "PutBucketOwnershipControls" | "DeleteBucketOwnershipControls" => {
            &[c!("s3:PutBucketOwnershipControls", B)]
        }
        "GetPublicAccessBlock" => &[c!("s3:GetBucketPublicAccessBlock", B)],
        "PutPublicAccessBlock" | "DeletePublicAccessBlock" => {
            &[c!("s3:PutBucketPublicAccessBlock", B)]
        }
        "GetObjectLockConfiguration" => &[c!("s3:GetBucketObjectLockConfiguration", B)],
        "PutObjectLockConfiguration" => &[c!("s3:PutBucketObjectLockConfiguration", B)],
        "GetBucketLifecycleConfiguration" => &[c!("s3:GetLifecycleConfiguration", B)],
        "PutBucketLifecycleConfiguration" | "DeleteBucketLifecycle" => {
            &[c!("s3:PutLifecycleConfiguration", B)]
        }
        "GetBucketCors" => &[c!("s3:GetBucketCORS", B)],
        "PutBucketCors" | "DeleteBucketCors" => &[c!("s3:PutBucketCORS", B)],
        "GetBucketEncryption" => &[c!("s3:GetEncryptionConfiguration", B)],
        "PutBucketEncryption" | "DeleteBucketEncryption" => {
            &[c!("s3:PutEncryptionConfiguration", B)]
        }
        "GetBucketWebsite" => &[c!("s3:GetBucketWebsite", B)],
        "PutBucketWebsite" => &[c!("s3:PutBucketWebsite", B)],
        "DeleteBucketWebsite" => &[c!("s3:DeleteBucketWebsite", B)],
        "GetBucketLogging" => &[c!("s3:GetBucketLogging", B)],
        "PutBucketLogging" => &[c!("s3:PutBucketLogging", B)],
        "GetBucketNotificationConfiguration" => &[c!("s3:GetBucketNotification", B)],
        "PutBucketNotificationConfiguration" => &[c!("s3:PutBucketNotification", B)],
        "GetBucketReplication" => &[c!("s3:GetReplicationConfiguration", B)],
        "PutBucketReplication" | "DeleteBucketReplication" => {
            &[c!("s3:PutReplicationConfiguration", B)]
        }
        "GetBucketRequestPayment" => &[c!("s3:GetBucketRequestPayment", B)],
        "PutBucketRequestPayment" => &[c!("s3:PutBucketRequestPayment", B)],
        "GetBucketAccelerateConfiguration" => &[c!("s3:GetAccelerateConfiguration", B)],
        "PutBucketAccelerateConfiguration" => &[c!("s3:PutAccelerateConfiguration", B)],
        "GetBucketAnalyticsConfiguration" | "ListBucketAnalyticsConfigurations" => {
            &[c!("s3:GetAnalyticsConfiguration", B)]
        }
        "PutBucketAnalyticsConfiguration" | "DeleteBucketAnalyticsConfiguration" => {
            &[c!("s3:PutAnalyticsConfiguration", B)]
        }
        "GetBucketInventoryConfiguration" | "ListBucketInventoryConfigurations" => {
            &[c!("s3:GetInventoryConfiguration", B)]
        }
        "PutBucketInventoryConfiguration" | "DeleteBucketInventoryConfiguration" => {
            &[c!("s3:PutInventoryConfiguration", B)]
        }
        "GetBucketMetricsConfiguration" | "ListBucketMetricsConfigurations" => {
            &[c!("s3:GetMetricsConfiguration", B)]
        }
        "PutBucketMetricsConfiguration" | "DeleteBucketMetricsConfiguration" => {
            &[c!("s3:PutMetricsConfiguration", B)]
        }
        "GetBucketIntelligentTieringConfiguration"
        | "ListBucketIntelligentTieringConfigurations" => {
            &[c!("s3:GetIntelligentTieringConfiguration", B)]
        }
        "PutBucketIntelligentTieringConfiguration"
        | "DeleteBucketIntelligentTieringConfiguration" => {
            &[c!("s3:PutIntelligentTieringConfiguration", B)]
        }
        _ => return None,
    })
}

/// The action S3 checks instead of `action` when the request names a `versionId`
/// (`s3:GetObject` → `s3:GetObjectVersion`, `s3:DeleteObject` → `s3:DeleteObjectVersion`,
/// the tagging, ACL and attributes actions likewise); other actions are unchanged.
pub fn versioned_action(action: &'static str) -> &'static str {
    match action {
        "s3:GetObject" => "s3:GetObjectVersion",
        "s3:DeleteObject" => "s3:DeleteObjectVersion",
        "s3:GetObjectAcl" => "s3:GetObjectVersionAcl",
        "s3:PutObjectAcl" => "s3:PutObjectVersionAcl",
        "s3:GetObjectTagging" => "s3:GetObjectVersionTagging",
        "s3:PutObjectTagging" => "s3:PutObjectVersionTagging",
        "s3:DeleteObjectTagging" => "s3:DeleteObjectVersionTagging",
        "s3:GetObjectAttributes" => "s3:GetObjectVersionAttributes",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_map_to_aws_actions() {
        let cases = [
            ("GetObject", "s3:GetObject", O),
            ("HeadObject", "s3:GetObject", O),
            ("PutObject", "s3:PutObject", O),
            ("ListObjectsV2", "s3:ListBucket", B),
            ("ListObjects", "s3:ListBucket", B),
            ("HeadBucket", "s3:ListBucket", B),
            ("ListBuckets", "s3:ListAllMyBuckets", Svc),
            ("ListObjectVersions", "s3:ListBucketVersions", B),
            ("CreateMultipartUpload", "s3:PutObject", O),
            ("UploadPart", "s3:PutObject", O),
            ("CompleteMultipartUpload", "s3:PutObject", O),
            ("AbortMultipartUpload", "s3:AbortMultipartUpload", O),
            ("ListParts", "s3:ListMultipartUploadParts", O),
            ("ListMultipartUploads", "s3:ListBucketMultipartUploads", B),
            ("DeleteObjects", "s3:DeleteObject", O),
            ("GetBucketPolicyStatus", "s3:GetBucketPolicyStatus", B),
            ("DeleteBucketLifecycle", "s3:PutLifecycleConfiguration", B),
            ("DeleteBucketCors", "s3:PutBucketCORS", B),
            ("DeleteBucketTagging", "s3:PutBucketTagging", B),
            (
                "DeletePublicAccessBlock",
                "s3:PutBucketPublicAccessBlock",
                B,
            ),
            (
                "DeleteBucketOwnershipControls",
                "s3:PutBucketOwnershipControls",
                B,
            ),
            (
                "GetObjectLockConfiguration",
                "s3:GetBucketObjectLockConfiguration",
                B,
            ),
            ("SelectObjectContent", "s3:GetObject", O),
            ("RestoreObject", "s3:RestoreObject", O),
        ];
        for (op, action, target) in cases {
            let checks = s3_action(op).unwrap_or_else(|| panic!("{op} unmapped"));
            assert_eq!(checks[0], Check { action, target }, "{op}");
        }
        assert_eq!(
            s3_action("CopyObject").unwrap(),
            [c!("s3:PutObject", O), c!("s3:GetObject", Src)]
        );
        assert_eq!(s3_action("GetObjectAttributes").unwrap().len(), 2);
        assert_eq!(s3_action("WriteGetObjectResponse"), None);
        assert_eq!(s3_action("getobject"), None);
        assert_eq!(versioned_action("s3:GetObject"), "s3:GetObjectVersion");
        assert_eq!(versioned_action("s3:PutObject"), "s3:PutObject");
    }

    #[test]
    fn every_s3s_operation_brief_lists_is_mapped() {
        let ops = "GetObject HeadObject PutObject CopyObject DeleteObject DeleteObjects ListObjects \
            ListObjectsV2 ListObjectVersions HeadBucket CreateBucket DeleteBucket ListBuckets \
            GetBucketLocation CreateMultipartUpload UploadPart UploadPartCopy CompleteMultipartUpload \
            AbortMultipartUpload ListParts ListMultipartUploads GetObjectTagging PutObjectTagging \
            DeleteObjectTagging GetBucketTagging PutBucketTagging DeleteBucketTagging GetObjectAcl \
            PutObjectAcl GetBucketAcl PutBucketAcl GetBucketPolicy PutBucketPolicy DeleteBucketPolicy \
            GetBucketPolicyStatus GetBucketVersioning PutBucketVersioning GetObjectAttributes \
            GetBucketOwnershipControls PutBucketOwnershipControls DeleteBucketOwnershipControls \
            GetPublicAccessBlock PutPublicAccessBlock DeletePublicAccessBlock GetObjectLockConfiguration \
            PutObjectLockConfiguration GetObjectRetention PutObjectRetention GetObjectLegalHold \
            PutObjectLegalHold GetBucketLifecycleConfiguration PutBucketLifecycleConfiguration \
            DeleteBucketLifecycle GetBucketCors PutBucketCors DeleteBucketCors RestoreObject \
            SelectObjectContent PostObject GetBucketEncryption GetBucketWebsite";
        for op in ops.split_whitespace() {
            let checks = s3_action(op).unwrap_or_else(|| panic!("{op} unmapped"));
            assert!(checks.iter().all(|c| c.action.starts_with("s3:")), "{op}");
        }
    }
}
