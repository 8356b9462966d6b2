//! The crate's one error type: why a policy document, condition, ACL or setting was refused.
//! The messages are meant for S3 clients (`MalformedPolicy`, `InvalidArgument`, …).

/// Why a document or setting was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("policy document is {size} bytes, over the limit of {max}")]
    TooLarge { size: usize, max: usize },
    #[error("policy is not valid JSON: {0}")]
    Json(String),
    /// The document's structure is wrong (an element of the wrong JSON type, an unknown
    /// field, an empty list, …).
    #[error("{0}")]
    Malformed(String),
    #[error("policy has an empty Statement")]
    EmptyStatement,
    #[error("statement has no Effect")]
    MissingEffect,
    #[error("invalid Effect {0:?}: must be Allow or Deny")]
    UnknownEffect(String),
    #[error("statement has neither Action nor NotAction")]
    MissingAction,
    #[error("statement has neither Resource nor NotResource")]
    MissingResource,
    #[error("bucket policy statement has neither Principal nor NotPrincipal")]
    MissingPrincipal,
    #[error("identity policy statement must not have a Principal or NotPrincipal")]
    UnexpectedPrincipal,
    #[error("statement has both {0} and Not{0}")]
    Conflicting(&'static str),
    #[error("invalid action {0:?}")]
    InvalidAction(String),
    #[error("invalid resource {0:?}")]
    InvalidResource(String),
    #[error("invalid principal {0:?}")]
    InvalidPrincipal(String),
    #[error("unsupported policy Version {0:?}")]
    UnsupportedVersion(String),
    #[error("duplicate statement Sid {0:?}")]
    DuplicateSid(String),
    #[error("unknown condition operator {0:?}")]
    UnknownConditionOperator(String),
    #[error("invalid value {value:?} for condition operator {operator}")]
    InvalidConditionValue { operator: String, value: String },
    #[error("unknown canned ACL {0:?}")]
    UnknownCannedAcl(String),
    #[error("unknown Object Ownership {0:?}")]
    UnknownObjectOwnership(String),
    /// S3's `AccessControlListNotSupported`: the bucket's Object Ownership is
    /// `BucketOwnerEnforced`, which disables ACLs.
    #[error("AccessControlListNotSupported: the bucket does not allow ACLs")]
    AclNotSupported,
    /// The bucket's public access block refuses a public ACL (`block_public_acls`).
    #[error("AccessDenied: the bucket's public access block refuses public ACLs")]
    PublicAclBlocked,
    /// The bucket's public access block refuses a public policy (`block_public_policy`).
    #[error("AccessDenied: the bucket's public access block refuses public bucket policies")]
    PublicPolicyBlocked,
}
