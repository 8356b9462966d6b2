//! ACLs on the S3 API: what a request asks for (a canned ACL, `x-amz-grant-*` headers or an
//! `AccessControlPolicy` body) as a [`saker_policy::Acl`], with every grantee checked (a
//! canonical user id names an account, [`crate::bucket::owner::named`]; saker knows no e-mail
//! addresses; groups are S3's), and an `Acl` as S3's owner and grants, accounts shown by
//! their canonical users. A stored `Acl` names accounts as saker does inside
//! ([`crate::bucket::owner`]).
//!
//! Bucket ACLs are stored with the bucket's settings and grant what S3's ACLs grant (bucket
//! READ lists, WRITE writes and deletes objects, READ_ACP/WRITE_ACP the ACL itself), unless
//! the bucket's Object Ownership is `BucketOwnerEnforced`. An unset Object Ownership leaves
//! ACLs enabled, as RGW and S3 before 2023 do. Object ACLs are kept with the object by the
//! MNode, except the private ACL of the bucket's owner ([`stored`]); an object's owner is its
//! ACL's ([`crate::bucket::owner`]).

use s3s::dto::{AccessControlPolicy, Grant, Grantee, Owner, Permission as DtoPermission, Type};
use s3s::{S3Error, S3ErrorCode, S3Result};
use saker_policy::{Acl, CannedAcl, Group, ObjectOwnership, Permission, PublicAccessBlock};

use crate::Gateway;

/// The [`AclRequest`] of an S3 input with a canned `acl` and the five `grant_*` fields
/// (PutBucketAcl, PutObjectAcl, CreateBucket), with `$policy` its body, if any.
macro_rules! acl_request {
    ($i:expr, $policy:expr) => {
        $crate::bucket::acl::AclRequest {
            canned: $i.acl.as_ref().map(|a| a.as_str()),
            full_control: $i.grant_full_control.as_ref(),
            read: $i.grant_read.as_ref(),
            read_acp: $i.grant_read_acp.as_ref(),
            write: $i.grant_write.as_ref(),
            write_acp: $i.grant_write_acp.as_ref(),
            policy: $policy,
        }
    };
}
pub(crate) use acl_request;

/// The ACL an upload input (PutObject, CopyObject, CreateMultipartUpload: a canned `acl`
/// and four `grant_*` fields) by access key `$writer` gives its object in a bucket of
/// settings `$settings`, checked and as the MNode keeps it ([`for_upload`]).
macro_rules! upload_acl {
    ($gw:expr, $settings:expr, $i:expr, $writer:expr) => {
        $crate::bucket::acl::for_upload(
            $gw,
            $settings,
            &$crate::bucket::acl::AclRequest::object_headers(
                $i.acl.as_ref(),
                $i.grant_full_control.as_ref(),
                $i.grant_read.as_ref(),
                $i.grant_read_acp.as_ref(),
                $i.grant_write_acp.as_ref(),
            ),
            $writer,
        )
        .await
    };
}
pub(crate) use upload_acl;

/// The ACL parts of a PutBucketAcl, PutObjectAcl, CreateBucket or PutObject request.
pub struct AclRequest<'a> {
    pub canned: Option<&'a str>,
    pub full_control: Option<&'a String>,
    pub read: Option<&'a String>,
    pub read_acp: Option<&'a String>,
    pub write: Option<&'a String>,
    pub write_acp: Option<&'a String>,
    pub policy: Option<&'a AccessControlPolicy>,
}

impl<'a> AclRequest<'a> {
    /// The ACL headers of PutObject, CopyObject or CreateMultipartUpload (no WRITE grant on
    /// an object, no body).
    pub fn object_headers(
        canned: Option<&'a s3s::dto::ObjectCannedACL>,
        full_control: Option<&'a String>,
        read: Option<&'a String>,
        read_acp: Option<&'a String>,
        write_acp: Option<&'a String>,
    ) -> Self {
        AclRequest {
            canned: canned.map(|c| c.as_str()),
            full_control,
            read,
            read_acp,
            write: None,
            write_acp,
            policy: None,
        }
    }

    fn headers(&self) -> [(Permission, Option<&String>); 5] {
        [
            (Permission::FullControl, self.full_control),
            (Permission::Read, self.read),
            (Permission::ReadAcp, self.read_acp),
            (Permission::Write, self.write),
            (Permission::WriteAcp, self.write_acp),
        ]
    }

    /// Whether the request names an ACL at all.
    pub fn is_given(&self) -> bool {
        self.canned.is_some()
            || self.policy.is_some()
            || self.headers().iter().any(|(_, h)| h.is_some())
    }
}

fn invalid(msg: impl Into<String>) -> S3Error {
    S3Error::with_message(S3ErrorCode::InvalidArgument, msg.into())
}

/// The grantee `kind`=`value` names (`kind` as in the header form: `id`, `emailAddress` or
/// `uri`), if it exists.
async fn grantee(gw: &Gateway, kind: &str, value: &str) -> S3Result<saker_policy::Grantee> {
    match kind {
        "id" => match crate::bucket::owner::named(gw, value).await {
            Some(account) => Ok(saker_policy::Grantee::CanonicalUser(account)),
            None => Err(invalid("Invalid id")),
        },
        "emailAddress" => Err(S3Error::with_message(
            S3ErrorCode::UnresolvableGrantByEmailAddress,
            "The e-mail address you provided does not match any account on record.",
        )),
        "uri" => Group::from_uri(value)
            .map(saker_policy::Grantee::Group)
            .ok_or_else(|| invalid("Invalid group uri")),
        _ => Err(invalid(format!(
            "grantee type {kind:?} is not one of id, emailAddress, uri"
        ))),
    }
}

/// The ACL a request asks for, owned by `owner`, of a resource in a bucket of
/// `bucket_owner` (`None` when it names none). Grantees that do not exist are refused, as S3
/// refuses them; so is a canned ACL with explicit grants.
pub async fn requested(
    gw: &Gateway,
    req: &AclRequest<'_>,
    owner: &str,
    bucket_owner: &str,
) -> S3Result<Option<Acl>> {
    let mut grants = Vec::new();
    for (permission, header) in req.headers() {
        let Some(h) = header else { continue };
        for g in h.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            let (kind, value) = g
                .split_once('=')
                .ok_or_else(|| invalid("a grant is not key=\"value\""))?;
            let who = grantee(gw, kind.trim(), value.trim().trim_matches('"')).await?;
            grants.push(saker_policy::Grant::new(who, permission));
        }
    }
    if let Some(p) = req.policy {
        for g in p.grants.iter().flatten() {
            let e = g
                .grantee
                .as_ref()
                .ok_or_else(|| invalid("a grant has no grantee"))?;
            let (kind, value) = match e.type_.as_str() {
                Type::CANONICAL_USER => ("id", e.id.as_deref()),
                Type::AMAZON_CUSTOMER_BY_EMAIL => ("emailAddress", e.email_address.as_deref()),
                Type::GROUP => ("uri", e.uri.as_deref()),
                other => (other, None),
            };
            let who = grantee(gw, kind, value.unwrap_or("")).await?;
            let permission: Permission = g
                .permission
                .as_ref()
                .map(|p| p.as_str())
                .unwrap_or("")
                .parse()
                .map_err(|_| S3Error::new(S3ErrorCode::MalformedACLError))?;
            grants.push(saker_policy::Grant::new(who, permission));
        }
    }
    match req.canned {
        Some(_) if !grants.is_empty() => Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            "Specifying both Canned ACLs and Header Grants is not allowed",
        )),
        Some(name) => {
            let canned: CannedAcl = name
                .parse()
                .map_err(|_| invalid(format!("{name:?} is not a canned ACL")))?;
            Ok(Some(Acl::from_canned(canned, owner, bucket_owner)))
        }
        None if req.is_given() => Ok(Some(Acl {
            owner: owner.to_string(),
            grants,
        })),
        None => Ok(None),
    }
}

/// Whether a resource of a bucket of `bucket_owner` may take `acl`, asked for as `req`:
/// `BucketOwnerEnforced` takes only `bucket-owner-full-control` or grants to the owners
/// (AccessControlListNotSupported), `block_public_acls` no public ACL (AccessDenied).
pub fn check_settable(
    req: &AclRequest<'_>,
    acl: &Acl,
    ownership: ObjectOwnership,
    block: Option<&PublicAccessBlock>,
    bucket_owner: &str,
) -> S3Result<()> {
    let disabled = || {
        S3Error::with_message(
            S3ErrorCode::AccessControlListNotSupported,
            "The bucket does not allow ACLs",
        )
    };
    if let Some(name) = req.canned {
        ownership.check_canned_acl(name).map_err(|_| disabled())?;
    }
    ownership
        .check_acl(acl, bucket_owner)
        .map_err(|_| disabled())?;
    if let Some(b) = block {
        b.check_acl(acl).map_err(|_| {
            S3Error::with_message(
                S3ErrorCode::AccessDenied,
                "the bucket's public access block refuses public ACLs",
            )
        })?;
    }
    Ok(())
}

/// A bucket's Object Ownership, `ObjectWriter` (ACLs enabled) when unset.
pub fn ownership(set: Option<ObjectOwnership>) -> ObjectOwnership {
    set.unwrap_or(ObjectOwnership::ObjectWriter)
}

/// `acl` as S3's owner and grants, accounts shown by their canonical users: group grants
/// first, then the users' (the order RGW answers in, which clients such as ceph's s3-tests
/// rely on).
pub async fn to_dto(gw: &Gateway, acl: &Acl) -> (Owner, Vec<Grant>) {
    let owner = crate::bucket::owner::dto(gw, &acl.owner).await;
    let mut ordered: Vec<&saker_policy::Grant> = acl.grants.iter().collect();
    ordered.sort_by_key(|g| matches!(g.grantee, saker_policy::Grantee::CanonicalUser(_)));
    let mut grants = Vec::with_capacity(ordered.len());
    for g in ordered {
        let grantee = match &g.grantee {
            saker_policy::Grantee::CanonicalUser(account) => {
                let user = crate::bucket::owner::user(gw, account).await;
                Grantee {
                    display_name: Some(user.display_name),
                    email_address: None,
                    id: Some(user.id),
                    type_: Type::from_static(Type::CANONICAL_USER),
                    uri: None,
                }
            }
            saker_policy::Grantee::Group(group) => Grantee {
                display_name: None,
                email_address: None,
                id: None,
                type_: Type::from_static(Type::GROUP),
                uri: Some(group.uri().to_string()),
            },
        };
        grants.push(Grant {
            grantee: Some(grantee),
            permission: Some(DtoPermission::from(g.permission.as_str().to_string())),
        });
    }
    (owner, grants)
}

/// The ACL an upload by access key `writer` (`None`: anonymous) asking for `req` gives its
/// object in a bucket of settings `s`, as the MNode keeps it ([`stored`]): owned by the
/// writer or the bucket's owner ([`crate::bucket::owner::of_new_object`]); grantees must exist, and
/// the bucket's Object Ownership and Public Access Block apply as to a bucket ACL. (The
/// upload's own request answers NoSuchBucket: no lookup here.)
pub async fn for_upload(
    gw: &Gateway,
    s: &crate::bucket::settings::Bucket,
    req: &AclRequest<'_>,
    writer: Option<&str>,
) -> S3Result<Option<String>> {
    let bucket_owner = crate::bucket::owner::of_bucket(gw, s);
    let ownership = ownership(s.ownership);
    let writer = crate::bucket::owner::account(gw, writer);
    let owner = crate::bucket::owner::of_new_object(
        ownership,
        &bucket_owner,
        writer.as_deref(),
        req.canned,
    );
    let acl = match requested(gw, req, &owner, &bucket_owner).await? {
        Some(acl) => {
            check_settable(
                req,
                &acl,
                ownership,
                s.public_access_block.as_ref(),
                &bucket_owner,
            )?;
            acl
        }
        None => Acl::private(&owner),
    };
    Ok(stored(&acl, &bucket_owner))
}

/// An object ACL as the MNode keeps it: `None` for the private ACL of the bucket's owner
/// (the default), else the ACL's encoding.
pub fn stored(acl: &Acl, bucket_owner: &str) -> Option<String> {
    (!(acl.is_private() && acl.owner == bucket_owner))
        .then(|| serde_json::to_string(acl).expect("an ACL encodes"))
}

/// The ACL of an object in a bucket of `bucket_owner`, from what the MNode keeps.
pub fn of_object(stored: Option<&str>, bucket_owner: &str) -> Acl {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| Acl::private(bucket_owner))
}
