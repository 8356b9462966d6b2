//! Access control lists: grants, canned ACLs, which ACL permission an IAM action needs, and
//! Object Ownership (whose `BucketOwnerEnforced` disables ACLs). Stored as JSON via serde.
//!
//! Canonical user ids are access keys.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Principal};

/// An S3 predefined group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Group {
    /// Everyone, anonymous requests included.
    AllUsers,
    /// Every signed request.
    AuthenticatedUsers,
    /// S3's log delivery: no request of ours is it.
    LogDelivery,
}

impl Group {
    /// The group's URI in S3's XML.
    pub fn uri(self) -> &'static str {
        match self {
            Group::AllUsers => "http://acs.amazonaws.com/groups/global/AllUsers",
            Group::AuthenticatedUsers => {
                "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
            }
            Group::LogDelivery => "http://acs.amazonaws.com/groups/s3/LogDelivery",
        }
    }

    /// The group a URI names.
    pub fn from_uri(uri: &str) -> Option<Group> {
        [
            Group::AllUsers,
            Group::AuthenticatedUsers,
            Group::LogDelivery,
        ]
        .into_iter()
        .find(|g| g.uri() == uri)
    }
}

/// Who a grant is to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grantee {
    /// A canonical user id: an access key.
    CanonicalUser(String),
    Group(Group),
}

/// What a grant allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    Read,
    Write,
    ReadAcp,
    WriteAcp,
    FullControl,
}

impl Permission {
    /// S3's name: `READ`, `WRITE`, `READ_ACP`, `WRITE_ACP`, `FULL_CONTROL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "READ",
            Permission::Write => "WRITE",
            Permission::ReadAcp => "READ_ACP",
            Permission::WriteAcp => "WRITE_ACP",
            Permission::FullControl => "FULL_CONTROL",
        }
    }
}

impl FromStr for Permission {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        [
            Permission::Read,
            Permission::Write,
            Permission::ReadAcp,
            Permission::WriteAcp,
            Permission::FullControl,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
        .ok_or_else(|| Error::Malformed(format!("unknown ACL permission {s:?}")))
    }
}

/// One grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub grantee: Grantee,
    pub permission: Permission,
}

impl Grant {
    pub fn new(grantee: Grantee, permission: Permission) -> Self {
        Grant {
            grantee,
            permission,
        }
    }

    fn is_public(&self) -> bool {
        matches!(
            self.grantee,
            Grantee::Group(Group::AllUsers | Group::AuthenticatedUsers)
        )
    }
}

/// S3's canned ACLs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CannedAcl {
    Private,
    PublicRead,
    PublicReadWrite,
    AuthenticatedRead,
    AwsExecRead,
    BucketOwnerRead,
    BucketOwnerFullControl,
    LogDeliveryWrite,
}

const CANNED: [(CannedAcl, &str); 8] = [
    (CannedAcl::Private, "private"),
    (CannedAcl::PublicRead, "public-read"),
    (CannedAcl::PublicReadWrite, "public-read-write"),
    (CannedAcl::AuthenticatedRead, "authenticated-read"),
    (CannedAcl::AwsExecRead, "aws-exec-read"),
    (CannedAcl::BucketOwnerRead, "bucket-owner-read"),
    (
        CannedAcl::BucketOwnerFullControl,
        "bucket-owner-full-control",
    ),
    (CannedAcl::LogDeliveryWrite, "log-delivery-write"),
];

impl CannedAcl {
    /// The `x-amz-acl` name.
    pub fn as_str(self) -> &'static str {
        CANNED
            .iter()
            .find(|(c, _)| *c == self)
            .map_or("private", |(_, n)| n)
    }

    /// Whether it grants to AllUsers or AuthenticatedUsers (what `block_public_acls`
    /// refuses).
    pub fn is_public(self) -> bool {
        matches!(
            self,
            CannedAcl::PublicRead | CannedAcl::PublicReadWrite | CannedAcl::AuthenticatedRead
        )
    }
}

impl FromStr for CannedAcl {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        CANNED
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(c, _)| *c)
            .ok_or_else(|| Error::UnknownCannedAcl(s.to_string()))
    }
}

impl fmt::Display for CannedAcl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bucket's or an object's ACL: its owner (an access key) and grants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl {
    pub owner: String,
    pub grants: Vec<Grant>,
}

impl Acl {
    /// The `private` ACL: the owner has full control.
    pub fn private(owner: &str) -> Acl {
        Acl::from_canned(CannedAcl::Private, owner, owner)
    }

    /// A canned ACL by its `x-amz-acl` name, for a resource of `owner` in a bucket of
    /// `bucket_owner` (the two are the same for a bucket ACL).
    pub fn canned(name: &str, owner: &str, bucket_owner: &str) -> Result<Acl, Error> {
        Ok(Acl::from_canned(name.parse()?, owner, bucket_owner))
    }

    /// A canned ACL (S3's definitions; `aws-exec-read` grants EC2 READ, which no request of
    /// ours is, so it is the owner's full control only).
    pub fn from_canned(canned: CannedAcl, owner: &str, bucket_owner: &str) -> Acl {
        use Permission::*;
        let user = |id: &str, p| Grant::new(Grantee::CanonicalUser(id.to_string()), p);
        let group = |g, p| Grant::new(Grantee::Group(g), p);
        let mut grants = vec![user(owner, FullControl)];
        match canned {
            CannedAcl::Private | CannedAcl::AwsExecRead => {}
            CannedAcl::PublicRead => grants.push(group(Group::AllUsers, Read)),
            CannedAcl::PublicReadWrite => {
                grants.push(group(Group::AllUsers, Read));
                grants.push(group(Group::AllUsers, Write));
            }
            CannedAcl::AuthenticatedRead => grants.push(group(Group::AuthenticatedUsers, Read)),
            CannedAcl::BucketOwnerRead if bucket_owner != owner => {
                grants.push(user(bucket_owner, Read))
            }
            CannedAcl::BucketOwnerFullControl if bucket_owner != owner => {
                grants.push(user(bucket_owner, FullControl))
            }
            CannedAcl::BucketOwnerRead | CannedAcl::BucketOwnerFullControl => {}
            CannedAcl::LogDeliveryWrite => {
                grants.push(group(Group::LogDelivery, Write));
                grants.push(group(Group::LogDelivery, ReadAcp));
            }
        }
        Acl {
            owner: owner.to_string(),
            grants,
        }
    }

    /// Whether a grant is to AllUsers or AuthenticatedUsers (for GetBucketPolicyStatus and
    /// `block_public_acls`).
    pub fn is_public(&self) -> bool {
        self.grants.iter().any(Grant::is_public)
    }

    /// Whether this is the `private` ACL: the owner's full control and nothing else (an
    /// ACL without grants is not: it takes even the owner's access).
    pub fn is_private(&self) -> bool {
        *self == Acl::private(&self.owner)
    }

    /// Whether the ACL gives `principal` `permission` (see [`acl_allows`]).
    pub fn allows(
        &self,
        principal: &Principal,
        permission: Permission,
        ignore_public: bool,
    ) -> bool {
        if principal.access_key() == Some(self.owner.as_str())
            && matches!(permission, Permission::ReadAcp | Permission::WriteAcp)
        {
            return true;
        }
        self.grants.iter().any(|g| {
            (g.permission == permission || g.permission == Permission::FullControl)
                && !(ignore_public && g.is_public())
                && match (&g.grantee, principal) {
                    (Grantee::Group(Group::AllUsers), _) => true,
                    (Grantee::Group(Group::AuthenticatedUsers), Principal::Key { .. }) => true,
                    (Grantee::CanonicalUser(id), Principal::Key { access_key, .. }) => {
                        id == access_key
                    }
                    _ => false,
                }
        })
    }
}

/// Whether `acl` gives `principal` `permission`: a grant of it or of FULL_CONTROL to the
/// principal's key, to AuthenticatedUsers (any key) or to AllUsers (anyone). The owner
/// always has READ_ACP and WRITE_ACP, as in S3.
pub fn acl_allows(acl: &Acl, principal: &Principal, permission: Permission) -> bool {
    acl.allows(principal, permission, false)
}

/// Which ACL an action's permission is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclTarget {
    Bucket,
    Object,
}

/// The ACL permission that grants IAM action `action` (any case), and whose ACL it is read
/// from, after S3's table: bucket READ lists (ListBucket, ListBucketVersions,
/// ListBucketMultipartUploads), bucket WRITE creates, overwrites and deletes objects
/// (PutObject, DeleteObject(Version), AbortMultipartUpload, ListMultipartUploadParts), object
/// READ reads (GetObject, GetObjectVersion, GetObjectTorrent), READ_ACP/WRITE_ACP read and
/// write the ACL of the bucket or object. `None`: ACLs never grant the action.
pub fn acl_permission(action: &str) -> Option<(AclTarget, Permission)> {
    use AclTarget::*;
    use Permission::*;
    let a = action.to_ascii_lowercase();
    Some(match a.strip_prefix("s3:")? {
        "listbucket" | "listbucketversions" | "listbucketmultipartuploads" => (Bucket, Read),
        "putobject"
        | "deleteobject"
        | "deleteobjectversion"
        | "abortmultipartupload"
        | "listmultipartuploadparts" => (Bucket, Write),
        "getbucketacl" => (Bucket, ReadAcp),
        "putbucketacl" => (Bucket, WriteAcp),
        "getobject" | "getobjectversion" | "getobjecttorrent" => (Object, Read),
        "getobjectacl" | "getobjectversionacl" => (Object, ReadAcp),
        "putobjectacl" | "putobjectversionacl" => (Object, WriteAcp),
        _ => return None,
    })
}

/// A bucket's Object Ownership setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectOwnership {
    /// ACLs are disabled: they grant nothing and only `private`/`bucket-owner-full-control`
    /// may be set (S3's default for new buckets).
    #[default]
    BucketOwnerEnforced,
    BucketOwnerPreferred,
    ObjectWriter,
}

impl ObjectOwnership {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectOwnership::BucketOwnerEnforced => "BucketOwnerEnforced",
            ObjectOwnership::BucketOwnerPreferred => "BucketOwnerPreferred",
            ObjectOwnership::ObjectWriter => "ObjectWriter",
        }
    }

    /// Whether ACLs grant anything in the bucket.
    pub fn acls_enabled(self) -> bool {
        self != ObjectOwnership::BucketOwnerEnforced
    }

    /// Whether a request may set canned ACL `name` (PutObject, CopyObject,
    /// CreateMultipartUpload, PutObjectAcl, PutBucketAcl, CreateBucket): with ACLs disabled
    /// only `bucket-owner-full-control` is accepted (as S3 and RGW do), anything else is
    /// [`Error::AclNotSupported`] (S3's `AccessControlListNotSupported`). An unknown name is
    /// [`Error::UnknownCannedAcl`].
    pub fn check_canned_acl(self, name: &str) -> Result<(), Error> {
        let canned: CannedAcl = name.parse()?;
        match canned {
            CannedAcl::BucketOwnerFullControl => Ok(()),
            _ if self.acls_enabled() => Ok(()),
            _ => Err(Error::AclNotSupported),
        }
    }

    /// Whether a request may set `acl` (from `x-amz-grant-*` headers or an
    /// AccessControlPolicy body): with ACLs disabled it may grant only to its owner or to
    /// `bucket_owner` (the forms of `private`/`bucket-owner-full-control`).
    pub fn check_acl(self, acl: &Acl, bucket_owner: &str) -> Result<(), Error> {
        let own = |g: &Grant| match &g.grantee {
            Grantee::CanonicalUser(id) => id == &acl.owner || id == bucket_owner,
            Grantee::Group(_) => false,
        };
        if self.acls_enabled() || acl.grants.iter().all(own) {
            Ok(())
        } else {
            Err(Error::AclNotSupported)
        }
    }
}

impl FromStr for ObjectOwnership {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        [
            ObjectOwnership::BucketOwnerEnforced,
            ObjectOwnership::BucketOwnerPreferred,
            ObjectOwnership::ObjectWriter,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| Error::UnknownObjectOwnership(s.to_string()))
    }
}

impl fmt::Display for ObjectOwnership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Permission::*;

    #[test]
    fn canned_acls_grant_what_s3_documents() {
        let anon = Principal::Anonymous;
        let other = Principal::key("OTHER");
        let owner = Principal::key("OWNER");
        let bowner = Principal::key("BOWNER");
        let cases: [(&str, &Principal, Permission, bool); 16] = [
            ("private", &owner, Read, true),
            ("private", &owner, WriteAcp, true),
            ("private", &other, Read, false),
            ("private", &anon, Read, false),
            ("public-read", &anon, Read, true),
            ("public-read", &anon, Write, false),
            ("public-read", &other, Read, true),
            ("public-read-write", &anon, Write, true),
            ("public-read-write", &anon, ReadAcp, false),
            ("authenticated-read", &anon, Read, false),
            ("authenticated-read", &other, Read, true),
            ("aws-exec-read", &anon, Read, false),
            ("bucket-owner-read", &bowner, Read, true),
            ("bucket-owner-read", &bowner, Write, false),
            ("bucket-owner-full-control", &bowner, WriteAcp, true),
            ("log-delivery-write", &other, Write, false),
        ];
        for (name, p, perm, want) in cases {
            let acl = Acl::canned(name, "OWNER", "BOWNER").unwrap();
            assert_eq!(acl_allows(&acl, p, perm), want, "{name} {p:?} {perm:?}");
        }
        assert_eq!(
            Acl::canned("public", "o", "o"),
            Err(Error::UnknownCannedAcl("public".into()))
        );
        // The owner keeps READ_ACP/WRITE_ACP even without a grant.
        let bare = Acl {
            owner: "OWNER".into(),
            grants: vec![],
        };
        assert!(acl_allows(&bare, &owner, ReadAcp) && !acl_allows(&bare, &owner, Read));
        // ignore_public drops group grants only.
        let pr = Acl::canned("public-read", "OWNER", "OWNER").unwrap();
        assert!(!pr.allows(&anon, Read, true) && pr.allows(&owner, Read, true));
    }

    #[test]
    fn publicity_and_serde() {
        for (name, public, private) in [
            ("private", false, true),
            ("public-read", true, false),
            ("authenticated-read", true, false),
            ("bucket-owner-full-control", false, false),
        ] {
            let acl = Acl::canned(name, "o", "b").unwrap();
            assert_eq!(
                (acl.is_public(), acl.is_private()),
                (public, private),
                "{name}"
            );
            assert_eq!(
                name.parse::<CannedAcl>().unwrap().is_public(),
                public,
                "{name}"
            );
        }
        let acl = Acl::canned("public-read", "o", "o").unwrap();
        let json = serde_json::to_string(&acl).unwrap();
        assert!(json.contains(r#""permission":"FULL_CONTROL""#), "{json}");
        assert_eq!(serde_json::from_str::<Acl>(&json).unwrap(), acl);
        assert_eq!(
            Group::from_uri(Group::AllUsers.uri()),
            Some(Group::AllUsers)
        );
        assert_eq!("READ_ACP".parse::<Permission>(), Ok(ReadAcp));
    }

    #[test]
    fn action_permissions() {
        let cases = [
            ("s3:ListBucket", Some((AclTarget::Bucket, Read))),
            (
                "s3:ListBucketMultipartUploads",
                Some((AclTarget::Bucket, Read)),
            ),
            ("s3:PutObject", Some((AclTarget::Bucket, Write))),
            ("S3:DeleteObject", Some((AclTarget::Bucket, Write))),
            ("s3:GetBucketAcl", Some((AclTarget::Bucket, ReadAcp))),
            ("s3:PutBucketAcl", Some((AclTarget::Bucket, WriteAcp))),
            ("s3:GetObject", Some((AclTarget::Object, Read))),
            ("s3:GetObjectAcl", Some((AclTarget::Object, ReadAcp))),
            ("s3:PutObjectAcl", Some((AclTarget::Object, WriteAcp))),
            ("s3:PutBucketPolicy", None),
            ("s3:DeleteBucket", None),
            ("iam:GetObject", None),
        ];
        for (a, want) in cases {
            assert_eq!(acl_permission(a), want, "{a}");
        }
    }

    #[test]
    fn object_ownership() {
        use ObjectOwnership::*;
        for o in [BucketOwnerEnforced, BucketOwnerPreferred, ObjectWriter] {
            assert_eq!(o.to_string().parse::<ObjectOwnership>(), Ok(o));
        }
        assert!("bucketownerenforced".parse::<ObjectOwnership>().is_err());
        assert_eq!(ObjectOwnership::default(), BucketOwnerEnforced);
        let cases = [
            (BucketOwnerEnforced, "private", Err(Error::AclNotSupported)),
            (BucketOwnerEnforced, "bucket-owner-full-control", Ok(())),
            (BucketOwnerPreferred, "private", Ok(())),
            (
                BucketOwnerEnforced,
                "public-read",
                Err(Error::AclNotSupported),
            ),
            (
                BucketOwnerEnforced,
                "bucket-owner-read",
                Err(Error::AclNotSupported),
            ),
            (ObjectWriter, "public-read", Ok(())),
            (
                BucketOwnerPreferred,
                "nope",
                Err(Error::UnknownCannedAcl("nope".into())),
            ),
        ];
        for (o, name, want) in cases {
            assert_eq!(o.check_canned_acl(name), want, "{o} {name}");
        }
        let private = Acl::private("B");
        let public = Acl::canned("public-read", "B", "B").unwrap();
        assert_eq!(BucketOwnerEnforced.check_acl(&private, "B"), Ok(()));
        assert_eq!(
            BucketOwnerEnforced.check_acl(&public, "B"),
            Err(Error::AclNotSupported)
        );
        assert_eq!(ObjectWriter.check_acl(&public, "B"), Ok(()));
    }
}
