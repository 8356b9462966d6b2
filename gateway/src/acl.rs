//! ACLs on the S3 API: what a request asks for (a canned ACL, `x-amz-grant-*` headers or an
//! `AccessControlPolicy` body) as a [`saker_policy::Acl`], with every grantee checked (a
//! canonical user id is an access key, saker knows no e-mail addresses, groups are S3's),
//! and an `Acl` as S3's owner and grants.
//!
//! Bucket ACLs are stored with the bucket's settings and grant what S3's ACLs grant (bucket
//! READ lists, WRITE writes and deletes objects, READ_ACP/WRITE_ACP the ACL itself), unless
//! the bucket's Object Ownership is `BucketOwnerEnforced`. An unset Object Ownership leaves
//! ACLs enabled, as RGW and S3 before 2023 do. Object ACLs other than `private` are not kept
//! yet ([`check_object_acl`]).

use s3s::dto::{AccessControlPolicy, Grant, Grantee, Owner, Permission as DtoPermission, Type};
use s3s::{S3Error, S3ErrorCode, S3Result};
use saker_policy::{Acl, CannedAcl, Group, ObjectOwnership, Permission, PublicAccessBlock};

use crate::Gateway;

/// The [`AclRequest`] of an S3 input with a canned `acl` and the five `grant_*` fields
/// (PutBucketAcl, PutObjectAcl, CreateBucket), with `$policy` its body, if any.
macro_rules! acl_request {
    ($i:expr, $policy:expr) => {
        $crate::acl::AclRequest {
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

/// Checks the ACL headers of an upload input (PutObject, CopyObject, CreateMultipartUpload:
/// a canned `acl` and four `grant_*` fields) with [`check_object_acl`]; answers the ACL asked
/// for.
macro_rules! check_upload_acl {
    ($gw:expr, $i:expr) => {
        $crate::acl::check_object_acl(
            $gw,
            &$i.bucket,
            &$crate::acl::AclRequest::object_headers(
                $i.acl.as_ref(),
                $i.grant_full_control.as_ref(),
                $i.grant_read.as_ref(),
                $i.grant_read_acp.as_ref(),
                $i.grant_write_acp.as_ref(),
            ),
        )
    };
}
pub(crate) use check_upload_acl;

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
fn grantee(gw: &Gateway, kind: &str, value: &str) -> S3Result<saker_policy::Grantee> {
    match kind {
        "id" if gw.keys.get(value).is_some() => {
            Ok(saker_policy::Grantee::CanonicalUser(value.to_string()))
        }
        "id" => Err(invalid("Invalid id")),
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

/// The ACL a request asks for, owned by `owner` (`None` when it names none). Grantees that
/// do not exist are refused, as S3 refuses them; so is a canned ACL with explicit grants.
pub fn requested(gw: &Gateway, req: &AclRequest<'_>, owner: &str) -> S3Result<Option<Acl>> {
    let mut grants = Vec::new();
    for (permission, header) in req.headers() {
        let Some(h) = header else { continue };
        for g in h.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            let (kind, value) = g
                .split_once('=')
                .ok_or_else(|| invalid("a grant is not key=\"value\""))?;
            let who = grantee(gw, kind.trim(), value.trim().trim_matches('"'))?;
            grants.push(saker_policy::Grant::new(who, permission));
        }
    }
    if let Some(p) = req.policy {
        for g in p.grants.iter().flatten() {
            let e = g
                .grantee
                .as_ref()
                .ok_or_else(|| invalid("a grant has no grantee"))?;
            let who = match e.type_.as_str() {
                Type::CANONICAL_USER => grantee(gw, "id", e.id.as_deref().unwrap_or(""))?,
                Type::AMAZON_CUSTOMER_BY_EMAIL => {
                    grantee(gw, "emailAddress", e.email_address.as_deref().unwrap_or(""))?
                }
                Type::GROUP => grantee(gw, "uri", e.uri.as_deref().unwrap_or(""))?,
                other => grantee(gw, other, "")?,
            };
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
            Ok(Some(Acl::from_canned(canned, owner, owner)))
        }
        None if req.is_given() => Ok(Some(Acl {
            owner: owner.to_string(),
            grants,
        })),
        None => Ok(None),
    }
}

/// Whether a bucket may take `acl`: `BucketOwnerEnforced` takes only the private ACL
/// (AccessControlListNotSupported), `block_public_acls` no public one (AccessDenied).
pub fn check_settable(
    acl: &Acl,
    ownership: ObjectOwnership,
    block: Option<&PublicAccessBlock>,
) -> S3Result<()> {
    ownership.check_acl(acl, &acl.owner).map_err(|_| {
        S3Error::with_message(
            S3ErrorCode::AccessControlListNotSupported,
            "The bucket does not allow ACLs",
        )
    })?;
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

/// `acl` as S3's owner and grants: group grants first, then the users' (the order RGW
/// answers in, which clients such as ceph's s3-tests rely on).
pub fn to_dto(acl: &Acl) -> (Owner, Vec<Grant>) {
    let owner = Owner {
        display_name: Some(acl.owner.clone()),
        id: Some(acl.owner.clone()),
    };
    let mut ordered: Vec<&saker_policy::Grant> = acl.grants.iter().collect();
    ordered.sort_by_key(|g| matches!(g.grantee, saker_policy::Grantee::CanonicalUser(_)));
    let grants = ordered
        .into_iter()
        .map(|g| {
            let grantee = match &g.grantee {
                saker_policy::Grantee::CanonicalUser(id) => Grantee {
                    display_name: Some(id.clone()),
                    email_address: None,
                    id: Some(id.clone()),
                    type_: Type::from_static(Type::CANONICAL_USER),
                    uri: None,
                },
                saker_policy::Grantee::Group(group) => Grantee {
                    display_name: None,
                    email_address: None,
                    id: None,
                    type_: Type::from_static(Type::GROUP),
                    uri: Some(group.uri().to_string()),
                },
            };
            Grant {
                grantee: Some(grantee),
                permission: Some(DtoPermission::from(g.permission.as_str().to_string())),
            }
        })
        .collect();
    (owner, grants)
}

/// An object ACL a request asks for in `bucket` (`None`: it names none): grantees must
/// exist, and the bucket's Object Ownership and Public Access Block apply as to a bucket ACL.
pub async fn check_object_acl(
    gw: &Gateway,
    bucket: &str,
    req: &AclRequest<'_>,
) -> S3Result<Option<Acl>> {
    if !req.is_given() {
        return Ok(None);
    }
    let owner = crate::bucket::bucket_owner(gw);
    let Some(acl) = requested(gw, req, &owner)? else {
        return Ok(None);
    };
    let s = crate::bucket_access::settings(gw, bucket).await?;
    check_settable(&acl, ownership(s.ownership), s.public_access_block.as_ref())?;
    Ok(Some(acl))
}

/// An object ACL as the MNode keeps it (`None` for the private one, the default).
pub fn stored(acl: Option<&Acl>) -> Option<String> {
    acl.filter(|a| !a.is_private())
        .map(|a| serde_json::to_string(a).expect("an ACL encodes"))
}

/// The ACL of an object from what the MNode keeps (`None`: the private one).
pub fn of_object(gw: &Gateway, stored: Option<&str>) -> Acl {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| Acl::private(&crate::bucket::bucket_owner(gw)))
}
