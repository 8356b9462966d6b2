//! Bucket versioning on the S3 API: Put/GetBucketVersioning (a bucket setting), reads by
//! version id, the version ids writes answer with, and ListObjectVersions.
//!
//! Whether a bucket keeps versions is a bucket setting ([`crate::bucket::settings`]); each write
//! carries it to the MNode with the settings version it was decided under
//! ([`saker_rpc::Decided`]), and the MNode keeps the replaced object as a version in the
//! batch that replaces it, if its group's copy of the settings has that version. Otherwise
//! the write is decided again from a reloaded copy ([`redecide`]), so a change holds for
//! every write answered after it, through any gateway.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_rpc::{version_id, Decided, ObjectView, Versioning, NULL_VERSION};

use crate::bucket::lookup::bucket_exists;
use crate::bucket::lookup::{settings, store};
use crate::bucket::settings::Setting;
use crate::Gateway;

/// Whether `bucket` keeps versions, from this gateway's copy of its settings (no request to
/// a metadata node: this is on every write's and read's path; a bucket that does not exist
/// keeps none, and the operation answers NoSuchBucket as before), with the settings version
/// that is decided under.
pub async fn of_bucket(gw: &Gateway, bucket: &str) -> S3Result<Decided> {
    let s = crate::bucket::lookup::copy_of(gw, bucket).await?;
    Ok(Decided::under(s.versioning, s.settings_version))
}

/// How a write of the object at `kp` keeps versions, its bucket's settings being `s`: as the
/// bucket does, except a directory marker, which keeps none (decided under `s`'s settings
/// version all the same).
pub fn of_key(s: &crate::bucket::settings::Bucket, kp: &crate::keys::KeyPath) -> Decided {
    let versioning = match kp.dir_marker {
        true => Versioning::Off,
        false => s.versioning,
    };
    Decided::under(versioning, s.settings_version)
}

/// How many times a write refused for settings that changed is decided anew.
pub const REDECIDE: usize = 4;

/// After a write into `bucket` was refused for settings that changed since `was` (this
/// gateway's copy it was decided from): the copy reloaded, and the new settings if the
/// write may just be sent again with their versioning, i.e. its lock and encryption, chosen
/// from `was` before its bytes were stored, still stand. `None`: the client must send the
/// request again (503).
pub async fn redecide(
    gw: &Gateway,
    bucket: &str,
    was: &crate::bucket::settings::Bucket,
) -> S3Result<Option<std::sync::Arc<crate::bucket::settings::Bucket>>> {
    gw.settings
        .reload()
        .await
        .map_err(crate::bucket::lookup::settings_error)?;
    let now = crate::bucket::lookup::copy_of(gw, bucket).await?;
    let same = now.object_lock == was.object_lock && now.encryption == was.encryption;
    Ok(same.then_some(now))
}

/// The version id a write answers with: its own while the bucket keeps versions; none
/// otherwise (a write while versioning is suspended makes the `null` version, which S3 does
/// not name in the answer).
pub fn written(versioning: impl Into<Versioning>, id: saker_rpc::InodeId) -> Option<String> {
    (versioning.into() == Versioning::Enabled).then(|| version_id(id))
}

/// The version id a read shows for `view` (`null` for an object of a bucket that keeps
/// versions but is not a version of its own).
pub fn shown(view: &ObjectView, versioning: impl Into<Versioning>) -> Option<String> {
    match (&view.version_id, versioning.into()) {
        (Some(v), _) => Some(v.clone()),
        (None, Versioning::Off) => None,
        (None, _) => Some(NULL_VERSION.into()),
    }
}

pub async fn get_bucket_versioning(
    gw: &Gateway,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    let status = match settings(gw, &req.input.bucket).await?.versioning {
        Versioning::Off => None,
        Versioning::Enabled => Some(BucketVersioningStatus::from_static(
            BucketVersioningStatus::ENABLED,
        )),
        Versioning::Suspended => Some(BucketVersioningStatus::from_static(
            BucketVersioningStatus::SUSPENDED,
        )),
    };
    Ok(S3Response::new(GetBucketVersioningOutput {
        status,
        mfa_delete: None,
    }))
}

pub async fn put_bucket_versioning(
    gw: &Gateway,
    req: S3Request<PutBucketVersioningInput>,
) -> S3Result<S3Response<PutBucketVersioningOutput>> {
    let input = req.input;
    bucket_exists(gw, &input.bucket).await?;
    let c = input.versioning_configuration;
    if c.mfa_delete
        .as_ref()
        .is_some_and(|m| m.as_str() == MFADelete::ENABLED)
    {
        return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
    }
    let status = match c.status.as_ref().map(|s| s.as_str()) {
        Some(BucketVersioningStatus::ENABLED) => "Enabled",
        Some(BucketVersioningStatus::SUSPENDED) => "Suspended",
        _ => {
            return Err(s3_error!(
                MalformedXML,
                "The versioning status must be Enabled or Suspended"
            ))
        }
    };
    if status == "Suspended" && settings(gw, &input.bucket).await?.object_lock.is_some() {
        return Err(s3_error!(
            InvalidBucketState,
            "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed"
        ));
    }
    store(
        gw,
        &input.bucket,
        Setting::Versioning,
        Some(status.as_bytes().to_vec()),
    )
    .await?;
    Ok(S3Response::new(PutBucketVersioningOutput::default()))
}
