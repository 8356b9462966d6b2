//! SigV4 secret lookup against the access-key store, and authorization: every request is
//! evaluated as AWS does within one account ([`saker_policy::evaluate`]: explicit Deny >
//! Allow > implicit deny) against the key's identity policy, the bucket's policy, its ACL
//! ([`crate::bucket::acl`]), Object Ownership and Public Access Block.
//!
//! - The root key may do everything but what a bucket policy explicitly denies it (and it
//!   may always manage the bucket policy itself); no other policy applies to it.
//! - A key without a policy may do nothing but what a bucket policy or an ACL grants it
//!   (deny by default, as AWS treats a new identity); a key with one, only what it, a bucket
//!   policy or an ACL allows. The ready-made `admin` policy allows everything (keys made
//!   before deny by default have it).
//! - An anonymous request may do only what a bucket policy grants to `"*"` or the bucket's
//!   ACL grants AllUsers; otherwise it is AccessDenied, or NoSuchBucket for a bucket that
//!   does not exist (as S3 answers).
//! - A key of another account than the bucket's owner ([`crate::bucket::owner`]) needs both its own
//!   permission (its policy) and the bucket's: its policy or an ACL grant. The
//!   root key is never another account.
//! - An account key (`--account`) is held to its policy in its own buckets too: without one
//!   it may not even create a bucket.
//! - `x-amz-expected-bucket-owner` naming another account than the bucket's is AccessDenied.
//!
//! Condition keys set: `aws:SourceIp`, `aws:SecureTransport`, `aws:CurrentTime`,
//! `aws:EpochTime`, `aws:username`/`aws:userid`/`aws:PrincipalType`, `s3:prefix`,
//! `s3:delimiter`, `s3:max-keys`, `s3:x-amz-acl`, `s3:x-amz-server-side-encryption`,
//! `s3:x-amz-content-sha256`, `s3:x-amz-grant-*`, `s3:x-amz-copy-source`,
//! `s3:x-amz-metadata-directive`, `aws:Referer`, `aws:UserAgent`,
//! `s3:RequestObjectTag/<key>`, `s3:signatureversion`,
//! `s3:authType`, and `s3:ExistingObjectTag/<key>` (the object's tags, looked up only where a
//! policy reads them).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::dto::{
    CopyObjectInput, CopySource, DeleteObjectsInput, PostObjectInput, UploadPartCopyInput,
};
use s3s::path::S3Path;
use s3s::{s3_error, S3Request, S3Result};
use saker_coordinator::AccessKeyStore;
use saker_policy::{
    evaluate, s3_action, Decision, Policy, Principal, Request, Resource, Sources, Target,
};

mod context;
mod objects;
mod posix;

use context::{fill_context, Wanted};
pub use context::{parts, peer_of, Context};

use crate::bucket::settings::Bucket;
use crate::http::path::query_pairs;
use crate::Gateway;

pub struct KeyAuth {
    keys: Arc<AccessKeyStore>,
}

impl KeyAuth {
    pub fn new(keys: Arc<AccessKeyStore>) -> Self {
        Self { keys }
    }
}

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.keys.lookup(access_key).await {
            Some(k) => Ok(SecretKey::from(k.secret_key)),
            None => Err(s3_error!(InvalidAccessKeyId)),
        }
    }
}

/// Who may do what (see the module documentation).
#[derive(Clone)]
pub struct Access {
    gw: Gateway,
    /// Identity policies parsed, by access key, with the text they were parsed from.
    parsed: Arc<Mutex<HashMap<String, Parsed>>>,
}

/// A key's policy text and the policy parsed from it.
type Parsed = (String, Arc<Policy>);

/// The requester as policies see it, and its identity policy (`None`: no permissions of
/// its own).
struct Requester {
    principal: Principal,
    /// The canonical user id of the key's account, for the root key and account keys (a
    /// bucket policy may name them so).
    canonical: Option<String>,
    account: Account,
    identity: Option<Arc<Policy>>,
    /// The root key, or a key whose policy is the ready-made `admin` for every bucket: its
    /// own policy allows everything, so only a bucket policy (or another account) can refuse
    /// it.
    unrestricted: bool,
}

/// Which account a requester is of ([`crate::bucket::owner`]), told without a scan of the keys.
enum Account {
    Anonymous,
    /// The root key's: the root key and every key made without `--account`.
    Root,
    /// An account key's own.
    Own(String),
}

impl Requester {
    /// The root key as a bucket policy sees it: a key of the account with full access of
    /// its own, so only the policy's explicit Deny statements can refuse it. Other
    /// requesters are unchanged.
    fn bound_by_bucket_policy(self) -> Requester {
        match self.principal {
            Principal::Key {
                access_key,
                root: true,
            } => Requester {
                principal: Principal::key(access_key),
                canonical: self.canonical,
                account: self.account,
                identity: Some(full_access()),
                unrestricted: true,
            },
            _ => self,
        }
    }
}

impl Access {
    pub fn new(gw: Gateway) -> Self {
        Self {
            gw,
            parsed: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn requester(&self, access_key: Option<&str>) -> S3Result<Requester> {
        let Some(ak) = access_key else {
            return Ok(Requester {
                principal: Principal::Anonymous,
                canonical: None,
                account: Account::Anonymous,
                identity: None,
                unrestricted: false,
            });
        };
        // SigV4 already found the key; it may have been deleted since.
        let (root, policy, own, canonical) = self
            .gw
            .keys
            .with(ak, |k| {
                let canonical = k.canonical.as_ref().map(|c| c.id.clone());
                (k.root, k.policy.clone(), k.account, canonical)
            })
            .ok_or_else(|| s3_error!(InvalidAccessKeyId))?;
        let account = if own {
            Account::Own(ak.to_string())
        } else {
            Account::Root
        };
        if root {
            return Ok(Requester {
                principal: Principal::root(ak),
                canonical,
                account,
                identity: None,
                unrestricted: true,
            });
        }
        let identity = policy.as_deref().map(|text| self.identity_policy(ak, text));
        let unrestricted = policy.as_deref() == Some(saker_policy::admin_identity_json());
        Ok(Requester {
            principal: Principal::key(ak),
            canonical,
            account,
            identity,
            unrestricted,
        })
    }

    /// Key `ak`'s policy `text`, parsed once per text. One that no longer parses (stored
    /// policies are checked when set) allows nothing.
    fn identity_policy(&self, ak: &str, text: &str) -> Arc<Policy> {
        let mut parsed = self.parsed.lock();
        if let Some((t, p)) = parsed.get(ak) {
            if t == text {
                return p.clone();
            }
        }
        let p = match Policy::parse_identity(text) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                tracing::warn!(access_key = ak, error = %e, "a stored key policy does not parse");
                deny_all()
            }
        };
        parsed.insert(ak.to_string(), (text.to_string(), p.clone()));
        p
    }

    async fn settings(&self, bucket: &str) -> S3Result<Arc<Bucket>> {
        self.gw
            .settings
            .get(bucket)
            .await
            .map_err(crate::bucket::lookup::settings_error)
    }

    /// Whether `who` is of another account than the owner of the bucket of settings `s`.
    fn cross_account(who: &Requester, s: &Bucket) -> bool {
        // An owner is recorded only for a bucket another account than the root's created.
        !who.principal.is_root()
            && match (&who.account, &s.owner) {
                (Account::Anonymous, _) => true,
                (Account::Root, owner) => owner.is_some(),
                (Account::Own(a), Some(owner)) => a != owner,
                (Account::Own(_), None) => true,
            }
    }

    /// Decides one check of `op` on `resource`, for a requester of another account than the
    /// bucket owner's if `cross`.
    fn decide(
        who: &Requester,
        action: &str,
        resource: Resource,
        (settings, cross): (Option<&Bucket>, bool),
        cx: &Context<'_>,
    ) -> Decision {
        let bucket_policy = settings.and_then(|s| s.policy.as_ref().map(|(_, p)| p));
        let wanted = Wanted::new([who.identity.as_deref(), bucket_policy]);
        let mut req = Request::new(who.principal.clone(), action, resource)
            .with_canonical_user(who.canonical.clone());
        if wanted.any(&["aws:currenttime", "aws:epochtime"]) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            req = req.with_time(now);
        }
        fill_context(&mut req, cx, &wanted);
        // The ACL the action's permission is read from: the bucket's or the object's.
        let acl = match saker_policy::acl_permission(action) {
            Some((saker_policy::AclTarget::Bucket, _)) => settings.and_then(|s| s.acl.as_ref()),
            Some((saker_policy::AclTarget::Object, _)) => cx.object_acl,
            None => None,
        };
        let sources = Sources {
            identity: who.identity.as_deref(),
            bucket_policy,
            acl,
            ownership: crate::bucket::acl::ownership(settings.and_then(|s| s.ownership)),
            public_access_block: settings
                .and_then(|s| s.public_access_block)
                .unwrap_or_default(),
            cross_account: cross,
        };
        evaluate(&req, &sources)
    }

    /// The answer to a denied request: AccessDenied, or NoSuchBucket for an anonymous
    /// request to a bucket that does not exist.
    async fn refuse(&self, who: &Requester, bucket: Option<&str>) -> S3Result<()> {
        if who.principal.is_anonymous() {
            return refuse_anonymous(&self.gw, bucket).await;
        }
        Err(s3_error!(AccessDenied, "Access Denied"))
    }

    /// Whether the holder of `access_key` (`None`: anonymous) may run S3 operation `op`
    /// (s3s's name) on `path`: by the policies, then, for a key with a uid, by the file
    /// modes ([`crate::auth::posix`]).
    pub async fn authorize(
        &self,
        access_key: Option<&str>,
        op: &str,
        path: &S3Path,
        context: &Context<'_>,
    ) -> S3Result<()> {
        self.authorize_by_policies(access_key, op, path, context)
            .await?;
        crate::auth::posix::check(&self.gw, access_key, op, path, context.query).await
    }

    async fn authorize_by_policies(
        &self,
        access_key: Option<&str>,
        op: &str,
        path: &S3Path,
        context: &Context<'_>,
    ) -> S3Result<()> {
        let mut who = self.requester(access_key)?;
        let (bucket, object) = match path {
            S3Path::Root => (None, None),
            S3Path::Bucket { bucket } => (Some(bucket.as_ref()), None),
            S3Path::Object { bucket, key } => (Some(bucket.as_ref()), Some(key.as_ref())),
        };
        let settings = match bucket {
            Some(b) => Some(self.settings(b).await?),
            None => None,
        };
        if let Some(s) = &settings {
            expected_owner(&self.gw, context.headers, s)?;
        }
        let bucket_policy = settings.as_ref().is_some_and(|s| s.policy.is_some());
        // A bucket is created by an account of its own (an existing one is answered by
        // CreateBucket itself).
        let cross = op != "CreateBucket"
            && settings
                .as_deref()
                .is_some_and(|s| Self::cross_account(&who, s));
        // The common case costs no evaluation: the root key, or an admin key in its own
        // account's bucket, and no bucket policy that could deny them.
        if who.unrestricted && !bucket_policy && !cross {
            return Ok(());
        }
        if who.principal.is_root() {
            // A bucket policy's explicit Deny binds the root key too, as it binds an AWS
            // account's own users, except for managing the policy itself (the owner cannot
            // lock itself out).
            if POLICY_ADMIN.contains(&op) {
                return Ok(());
            }
            who = who.bound_by_bucket_policy();
        }
        let Some(checks) = s3_action(op) else {
            tracing::debug!(op, "an operation no policy can allow");
            return self.refuse(&who, bucket).await;
        };
        // A request for a version is checked as S3 does: its action's version form
        // (`s3:GetObjectVersion`…), that version's tags and that version's ACL.
        let version = version_of(context.query);
        let tags;
        let with_tags;
        let mut context = context;
        if let (Some(b), Some(k)) = (bucket, object) {
            let bucket_policy = settings.as_ref().and_then(|s| s.policy.as_ref());
            let wanted = Wanted::new([who.identity.as_deref(), bucket_policy.map(|(_, p)| p)]);
            if wanted.has_prefix("s3:existingobjecttag/") {
                tags = self.existing_tags(b, k, version.as_deref()).await?;
                with_tags = Context {
                    existing_tags: Some(&tags),
                    ..*context
                };
                context = &with_tags;
            }
        }
        let mut object_acl = None;
        for check in checks {
            let resource = match (check.target, bucket, object) {
                (Target::Service, _, _) => Resource::Service,
                (Target::Bucket, Some(b), _) => Resource::Bucket(b.to_string()),
                (Target::Object, Some(b), Some(k)) => Resource::object(b, k),
                // Checked by the operation's own hook: copy sources, the keys of a
                // multi-object delete, the key of a POST upload (a form field).
                (Target::CopySource, _, _) => continue,
                (Target::Object, Some(_), None) if HOOKED.contains(&op) => continue,
                _ => {
                    tracing::debug!(op, ?path, "a check without its resource");
                    return self.refuse(&who, bucket).await;
                }
            };
            let action = match (check.target, &version) {
                (Target::Object, Some(_)) => saker_policy::versioned_action(check.action),
                _ => check.action,
            };
            let of_bucket = (settings.as_deref(), cross);
            let mut d = Self::decide(&who, action, resource.clone(), of_bucket, context);
            let object_acl_grants = matches!(
                saker_policy::acl_permission(action),
                Some((saker_policy::AclTarget::Object, _))
            );
            if let (false, true, Some(b), Some(k)) =
                (d.is_allowed(), object_acl_grants, bucket, object)
            {
                // Only a refusal looks the object's ACL up: it can only allow.
                if object_acl.is_none() {
                    let s = settings
                        .as_deref()
                        .expect("an object's bucket has settings");
                    let owner = crate::bucket::owner::of_bucket(&self.gw, s);
                    object_acl = Some(self.object_acl(b, k, version.as_deref(), &owner).await?);
                }
                if let Some(Some(acl)) = &object_acl {
                    let cx = Context {
                        object_acl: Some(acl),
                        ..*context
                    };
                    d = Self::decide(&who, action, resource, of_bucket, &cx);
                }
            }
            if !d.is_allowed() {
                if let (Some(b), Some(k), "GetObject" | "HeadObject") = (bucket, object, op) {
                    // S3 tells a requester who may list the bucket that a key is missing.
                    // As a listing of the key as a prefix would be decided.
                    let list = Resource::Bucket(b.to_string());
                    let prefix = percent_encoding::utf8_percent_encode(
                        k,
                        percent_encoding::NON_ALPHANUMERIC,
                    );
                    let query = format!("prefix={prefix}");
                    let as_listing = Context {
                        query: Some(&query),
                        ..*context
                    };
                    let may_list =
                        Self::decide(&who, "s3:ListBucket", list, of_bucket, &as_listing);
                    if may_list.is_allowed() && self.missing(b, k).await {
                        return Err(s3_error!(NoSuchKey, "The specified key does not exist."));
                    }
                }
                return self.refuse(&who, bucket).await;
            }
        }
        Ok(())
    }

    /// Whether the requester may bypass governance retention on `path` (a multi-object
    /// delete: on every key of its bucket).
    async fn may_bypass(
        &self,
        access_key: Option<&str>,
        path: &S3Path,
        cx: &Context<'_>,
    ) -> S3Result<bool> {
        let (bucket, key) = match path {
            S3Path::Object { bucket, key } => (bucket.as_ref(), key.as_ref()),
            S3Path::Bucket { bucket } => (bucket.as_ref(), "*"),
            S3Path::Root => return Ok(false),
        };
        let denied = self
            .denied_objects(
                access_key,
                "s3:BypassGovernanceRetention",
                bucket,
                std::iter::once((key, None)),
                cx,
            )
            .await?;
        Ok(denied.is_empty())
    }

    /// Checks `action` on each of `objects` of `bucket` for a per-operation hook (copy
    /// sources, the keys of a multi-object delete).
    async fn check_objects<'k>(
        &self,
        access_key: Option<&str>,
        action: &'static str,
        bucket: &str,
        objects: impl Iterator<Item = Named<'k>>,
        cx: &Context<'_>,
    ) -> S3Result<()> {
        let denied = self
            .denied_objects(access_key, action, bucket, objects, cx)
            .await?;
        if denied.is_empty() {
            return Ok(());
        }
        let who = self.requester(access_key)?.bound_by_bucket_policy();
        self.refuse(&who, Some(bucket)).await
    }

    /// The keys of `objects` in `bucket` the requester may not `action` (an object named
    /// with a version: the action's version form, on that version).
    async fn denied_objects<'k>(
        &self,
        access_key: Option<&str>,
        action: &'static str,
        bucket: &str,
        objects: impl Iterator<Item = Named<'k>>,
        cx: &Context<'_>,
    ) -> S3Result<Vec<String>> {
        let who = self.requester(access_key)?;
        let settings = self.settings(bucket).await?;
        let cross = Self::cross_account(&who, &settings);
        if who.unrestricted && settings.policy.is_none() && !cross {
            return Ok(Vec::new());
        }
        let who = who.bound_by_bucket_policy();
        let action_on = |version: Option<&str>| match version {
            Some(_) => saker_policy::versioned_action(action),
            None => action,
        };
        let decide = |(key, version): Named<'_>, cx: &Context<'_>| {
            let resource = Resource::object(bucket, key);
            let of_bucket = (Some(&*settings), cross);
            Self::decide(&who, action_on(version), resource, of_bucket, cx).is_allowed()
        };
        let refused: Vec<Named<'k>> = objects.filter(|o| !decide(*o, cx)).collect();
        let mut denied = Vec::new();
        let owner = crate::bucket::owner::of_bucket(&self.gw, &settings);
        for (key, version) in refused {
            let object_acl_grants = matches!(
                saker_policy::acl_permission(action_on(version)),
                Some((saker_policy::AclTarget::Object, _))
            );
            // What the policies refuse, the object's (or version's) own ACL may grant (a
            // copy source).
            let acl = match object_acl_grants {
                true => self.object_acl(bucket, key, version, &owner).await?,
                false => None,
            };
            let with_acl = Context {
                object_acl: acl.as_ref(),
                ..*cx
            };
            if acl.is_none() || !decide((key, version), &with_acl) {
                denied.push(key.to_string());
            }
        }
        Ok(denied)
    }
}

/// Whether the request asked to bypass governance retention
/// (`x-amz-bypass-governance-retention: true`) and its requester may
/// (`s3:BypassGovernanceRetention`); set by the access check of the operations it concerns.
#[derive(Clone, Copy, Debug)]
pub struct BypassGovernance(pub bool);

/// The operations a governance retention can refuse, and so the bypass header concerns.
const GOVERNED: [&str; 3] = ["DeleteObject", "DeleteObjects", "PutObjectRetention"];

/// The keys of a multi-object delete the requester may not delete (set by the access check,
/// answered AccessDenied one by one).
#[derive(Clone, Debug, Default)]
pub struct DeniedKeys(pub Arc<std::collections::BTreeSet<String>>);

/// The answer to an anonymous request nothing allows: NoSuchBucket for a bucket that does
/// not exist, else AccessDenied.
pub async fn refuse_anonymous(gw: &Gateway, bucket: Option<&str>) -> S3Result<()> {
    if let Some(b) = bucket {
        crate::bucket::lookup::bucket_exists(gw, b).await?;
    }
    Err(s3_error!(AccessDenied, "Anonymous access is forbidden"))
}

/// Refuses a request whose `x-amz-expected-bucket-owner` names another account than the
/// owner of the bucket of settings `s` (by its canonical user id, or the access key id saker
/// took before accounts had one).
fn expected_owner(gw: &Gateway, headers: &http::HeaderMap, s: &Bucket) -> S3Result<()> {
    let Some(expected) = headers.get("x-amz-expected-bucket-owner") else {
        return Ok(());
    };
    let owner = crate::bucket::owner::of_bucket(gw, s);
    let canonical = gw.keys.canonical_of(&owner).map(|c| c.id);
    if expected.as_bytes() == owner.as_bytes()
        || canonical.is_some_and(|id| expected.as_bytes() == id.as_bytes())
    {
        return Ok(());
    }
    Err(s3_error!(AccessDenied, "the bucket has another owner"))
}

/// The longest a presigned URL may be valid for: seven days, as in S3.
const PRESIGN_MAX_SECS: u64 = 7 * 24 * 3600;

/// Refuses a presigned URL made to be valid longer than [`PRESIGN_MAX_SECS`].
fn presign_lifetime(query: Option<&str>) -> S3Result<()> {
    let expires = query
        .into_iter()
        .flat_map(query_pairs)
        .find(|(k, _)| k == "X-Amz-Expires");
    match expires.map(|(_, v)| v.parse::<u64>()) {
        Some(Ok(secs)) if secs > PRESIGN_MAX_SECS => Err(s3_error!(
            AccessDenied,
            "X-Amz-Expires must be at most {PRESIGN_MAX_SECS} seconds (seven days)"
        )),
        _ => Ok(()),
    }
}

/// Operations the root key may run whatever a bucket policy denies.
const POLICY_ADMIN: [&str; 3] = ["GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"];

/// Operations on a bucket path whose object checks are made by their own hook.
const HOOKED: [&str; 2] = ["DeleteObjects", "PostObject"];

/// The root key's identity policy where a bucket policy applies to it: everything.
fn full_access() -> Arc<Policy> {
    static FULL: OnceLock<Arc<Policy>> = OnceLock::new();
    FULL.get_or_init(|| Arc::new(saker_policy::full_access()))
        .clone()
}

/// A policy that allows nothing.
fn deny_all() -> Arc<Policy> {
    static NONE: OnceLock<Arc<Policy>> = OnceLock::new();
    NONE.get_or_init(|| {
        Arc::new(
            Policy::parse_identity(
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Action":"*","Resource":"*"}]}"#,
            )
            .expect("a valid policy"),
        )
    })
    .clone()
}

/// An object a hook checks: its key, and the version the request names.
type Named<'k> = (&'k str, Option<&'k str>);

/// The `versionId` a request's query names.
fn version_of(query: Option<&str>) -> Option<String> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("versionId="))
        .map(|v| {
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned()
        })
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        // Which operation it is, for the log of a failure.
        let logged = cx
            .extensions_mut()
            .get::<crate::http::request_log::Operation>();
        if let Some(logged) = logged.cloned() {
            logged.set(cx.s3_op().name());
        }
        let context = Context {
            peer: peer_of(cx.extensions_mut()),
            query: cx.uri().query(),
            headers: cx.headers(),
            existing_tags: None,
            object_acl: None,
        };
        let ak = cx.credentials().map(|c| c.access_key.as_str());
        presign_lifetime(context.query)?;
        let admitted = self.gw.limits.admit(ak)?;
        let op = cx.s3_op().name();
        self.authorize(ak, op, cx.s3_path(), &context).await?;
        let asked = context
            .headers
            .get("x-amz-bypass-governance-retention")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        if asked && GOVERNED.contains(&op) {
            let may = self.may_bypass(ak, cx.s3_path(), &context).await?;
            cx.extensions_mut().insert(BypassGovernance(may));
        }
        if let Some(admitted) = admitted {
            // Held by the request until its handler is done.
            cx.extensions_mut().insert(admitted);
        }
        Ok(())
    }

    async fn copy_object(&self, req: &mut S3Request<CopyObjectInput>) -> S3Result<()> {
        let (ak, cx) = parts(req);
        copy_source_check(self, ak, &req.input.copy_source, &cx).await
    }

    async fn upload_part_copy(&self, req: &mut S3Request<UploadPartCopyInput>) -> S3Result<()> {
        let (ak, cx) = parts(req);
        copy_source_check(self, ak, &req.input.copy_source, &cx).await
    }

    /// A browser-form upload names its key in the form: `s3:PutObject` on it.
    async fn post_object(&self, req: &mut S3Request<PostObjectInput>) -> S3Result<()> {
        let (ak, cx) = parts(req);
        let key = std::iter::once((req.input.key.as_str(), None));
        self.check_objects(ak, "s3:PutObject", &req.input.bucket, key, &cx)
            .await
    }

    /// A multi-object delete is answered per key, as S3 does: the keys the requester may not
    /// delete are left alone and answered AccessDenied ([`DeniedKeys`]), the others deleted.
    /// An anonymous request that may delete none is refused whole, like other anonymous ones.
    async fn delete_objects(&self, req: &mut S3Request<DeleteObjectsInput>) -> S3Result<()> {
        let (ak, cx) = parts(req);
        let anonymous = ak.is_none();
        let keys = req.input.delete.objects.iter();
        let keys = keys.map(|o| (o.key.as_str(), o.version_id.as_deref()));
        let mut denied = self
            .denied_objects(ak, "s3:DeleteObject", &req.input.bucket, keys, &cx)
            .await?;
        // A key with a uid deletes only what the file modes let it (the keys the policies
        // left it).
        let keys = req.input.delete.objects.iter().map(|o| o.key.as_str());
        let left = keys.filter(|k| !denied.iter().any(|d| d == k));
        let by_modes =
            crate::auth::posix::denied_keys(&self.gw, ak, "DeleteObject", &req.input.bucket, left)
                .await?;
        denied.extend(by_modes);
        if denied.is_empty() {
            return Ok(());
        }
        if anonymous && denied.len() == req.input.delete.objects.len() {
            return refuse_anonymous(&self.gw, Some(&req.input.bucket)).await;
        }
        req.extensions
            .insert(DeniedKeys(Arc::new(denied.into_iter().collect())));
        Ok(())
    }
}

/// A copy reads its source: `s3:GetObject` on it.
async fn copy_source_check(
    access: &Access,
    ak: Option<&str>,
    src: &CopySource,
    cx: &Context<'_>,
) -> S3Result<()> {
    match src {
        CopySource::Bucket {
            bucket,
            key,
            version_id,
        } => {
            let source = std::iter::once((key.as_ref(), version_id.as_deref()));
            access
                .check_objects(ak, "s3:GetObject", bucket, source, cx)
                .await?;
            let source = S3Path::Object {
                bucket: bucket.clone(),
                key: key.clone(),
            };
            crate::auth::posix::check(&access.gw, ak, "GetObject", &source, None).await
        }
        _ => Err(s3_error!(NotImplemented, "copy sources are buckets")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presigned_urls_live_seven_days_at_most() {
        let ok = [
            None,
            Some("list-type=2"),
            Some("X-Amz-Expires=600&X-Amz-Signature=ab"),
            Some("X-Amz-Expires=604800"),
        ];
        for q in ok {
            assert!(presign_lifetime(q).is_ok(), "{q:?}");
        }
        let refused = presign_lifetime(Some("X-Amz-Date=x&X-Amz-Expires=609901")).unwrap_err();
        assert_eq!(*refused.code(), s3s::S3ErrorCode::AccessDenied);
    }
}
