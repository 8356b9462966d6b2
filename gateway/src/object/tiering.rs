//! What S3 shows of objects in a remote tier (their StorageClass is the tier's name, a
//! restored copy's expiry in `x-amz-restore`) and RestoreObject, which brings a local copy
//! back for some days (reads go through to the tier without one too).

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_client::EcLayout;
use saker_rpc::Attr;

use crate::http::error;
use crate::Gateway;

/// The StorageClass of an object: its tier's name, its erasure coding's (`EC_<k>_<m>`), or
/// STANDARD.
pub fn class_name(attr: &Attr) -> String {
    storage_class(attr).map_or(StorageClass::STANDARD.to_string(), |c| {
        c.as_str().to_string()
    })
}

/// Whether the object is kept as storage class `class` says: in that tier, or coded in that
/// layout (`STANDARD_IA` and `EC_4_2` name the same one).
pub fn in_class(attr: &Attr, class: &str) -> bool {
    match (saker_rpc::ec_class(class), attr.layout.coded()) {
        (Some(want), Some(c)) => want == (c.data, c.parity),
        (Some(_), None) => false,
        (None, _) => attr.layout.tiered().is_some_and(|t| t.tier == class),
    }
}

/// The StorageClass header of a GET or HEAD (S3 sends none for STANDARD).
pub fn storage_class(attr: &Attr) -> Option<StorageClass> {
    if let Some(coded) = attr.layout.coded() {
        return Some(StorageClass::from(coded.class_name()));
    }
    attr.layout
        .tiered()
        .map(|t| StorageClass::from(t.tier.clone()))
}

/// The erasure-coding layout storage class `name` names (`EC_<k>_<m>`, or STANDARD_IA for
/// 4+2), checked against the cluster's chunkstores; `Ok(None)` for another class.
pub fn coded_class(gw: &Gateway, name: &str) -> Result<Option<EcLayout>, String> {
    let Some((k, m)) = saker_rpc::ec_class(name) else {
        return Ok(None);
    };
    let layout = EcLayout::new(k, m).map_err(|e| e.to_string())?;
    gw.cluster.takes_coded(layout)?;
    Ok(Some(layout))
}

/// Codes the version at `path` (as found: `attr`; `noncurrent`: a noncurrent version of it) in
/// the layout storage class `class` names, or `None` when `class` is no erasure-coding class
/// (a tier's name).
pub async fn code_version(
    gw: &Gateway,
    class: &str,
    path: &[String],
    attr: &Attr,
    noncurrent: bool,
) -> Option<Result<saker_client::Encoded, String>> {
    let (k, m) = saker_rpc::ec_class(class)?;
    let coded = async {
        let layout = EcLayout::new(k, m).map_err(|e| e.to_string())?;
        gw.cluster
            .encode_version(path, attr, noncurrent, layout)
            .await
            .map_err(|e| e.to_string())
    };
    Some(coded.await)
}

/// The tier a PutObject's or CopyObject's `x-amz-storage-class` names (`None`: STANDARD, or
/// no header): the written object moves there before the answer ([`move_written`]). A class
/// that names no tier is `InvalidStorageClass`, as is a tier for a directory marker.
pub async fn requested_tier(
    gw: &Gateway,
    class: Option<&StorageClass>,
    dir_marker: bool,
) -> S3Result<Option<String>> {
    let Some(name) = class
        .map(|c| c.as_str())
        .filter(|c| *c != StorageClass::STANDARD)
    else {
        return Ok(None);
    };
    let refused = |why: &str| {
        Err(s3_error!(
            InvalidStorageClass,
            "The storage class {} {}",
            name,
            why
        ))
    };
    if dir_marker {
        return refused("is not for keys ending in '/' (they stay STANDARD)");
    }
    match coded_class(gw, name) {
        Ok(Some(_)) => return Ok(Some(name.to_string())),
        Ok(None) => {}
        Err(why) => return refused(&format!("cannot be kept here: {why}")),
    }
    match saker_tier::config::get(&gw.state, name).await {
        Ok(_) => Ok(Some(name.to_string())),
        Err(saker_tier::TierError::NoSuchTier(_)) => {
            refused("names no tier here (saker admin tier list)")
        }
        Err(e) => Err(error::internal(e)),
    }
}

/// Moves the object just written at `path` (`attr`) to `tier` (or codes it, for an
/// erasure-coding class), as a lifecycle transition would. A move that fails leaves the
/// object stored and STANDARD, and the write answers 503 (a retry writes it again and moves
/// it).
pub async fn move_written(gw: &Gateway, tier: &str, path: &[String], attr: &Attr) -> S3Result<()> {
    use saker_tier::transition::transition;
    if let Some(coded) = code_version(gw, tier, path, attr, false).await {
        return match coded {
            Ok(_) => Ok(()),
            Err(e) => Err(s3_error!(
                ServiceUnavailable,
                "The object was stored but could not be erasure-coded as {}: {}",
                tier,
                e
            )),
        };
    }
    match transition(&gw.cluster, &gw.tiers, tier, path, attr, None).await {
        // (`Changed`: a newer write took the key meanwhile, and stands.)
        Ok(_) => Ok(()),
        Err(e) => Err(s3_error!(
            ServiceUnavailable,
            "The object was stored but could not move to tier {}: {}",
            tier,
            e
        )),
    }
}

/// `x-amz-restore` of an object with a restored copy that lasts.
pub fn restore_header(attr: &Attr) -> Option<String> {
    let r = attr.layout.tiered()?.restored.as_ref()?;
    if r.until_ns <= crate::keys::now_ns() {
        return None;
    }
    let date = crate::keys::format_http_date(&crate::keys::timestamp(r.until_ns))?;
    Some(format!("ongoing-request=\"false\", expiry-date=\"{date}\""))
}

pub async fn restore_object(
    gw: &Gateway,
    req: S3Request<RestoreObjectInput>,
) -> S3Result<S3Response<RestoreObjectOutput>> {
    let i = &req.input;
    let days = i
        .restore_request
        .as_ref()
        .and_then(|r| r.days)
        .ok_or_else(|| s3_error!(MalformedXML, "A RestoreRequest needs Days"))?;
    if days <= 0 {
        return Err(s3_error!(
            InvalidArgument,
            "Days must be a positive integer"
        ));
    }
    let view = crate::object::lookup::lookup(
        gw,
        &i.bucket,
        &i.key,
        i.version_id.as_deref(),
        saker_rpc::Want::HEAD,
    )
    .await?;
    let Some(t) = view.attr.layout.tiered() else {
        return Err(s3_error!(
            InvalidObjectState,
            "Restore is not allowed for the object's current storage class"
        ));
    };
    // A version asked for by id may be a noncurrent one (NoncurrentVersionTransition).
    let noncurrent = match i.version_id {
        None => false,
        Some(_) => {
            crate::object::lookup::lookup(gw, &i.bucket, &i.key, None, saker_rpc::Want::ATTR)
                .await
                .map_or(true, |current| current.attr.id != view.attr.id)
        }
    };
    let already = t
        .restored
        .as_ref()
        .is_some_and(|r| r.until_ns > crate::keys::now_ns());
    let day = i64::try_from(gw.lifecycle_day().as_nanos()).unwrap_or(i64::MAX);
    let until = crate::keys::now_ns().saturating_add(i64::from(days).saturating_mul(day));
    let path = crate::keys::write_key(&i.bucket, &i.key)?.path;
    let sse = view.meta.as_ref().and_then(|m| m.sse.as_ref());
    saker_tier::transition::restore(&gw.cluster, &path, &view.attr, sse, until, noncurrent)
        .await
        .map_err(|e| match e {
            saker_tier::TierError::Meta(saker_rpc::MetaError::PreconditionFailed) => s3_error!(
                SlowDown,
                "The object changed while it was restored; try again"
            ),
            saker_tier::TierError::Client(c) => error::client(c),
            saker_tier::TierError::Meta(m) => error::meta(m),
            e => {
                tracing::warn!(error = %e, "restore failed");
                s3_error!(
                    ServiceUnavailable,
                    "the archive tier is unreachable; try again"
                )
            }
        })?;
    let mut resp = S3Response::new(RestoreObjectOutput::default());
    // 202 for a new copy, 200 when one was there and only its days changed (as S3).
    resp.status = Some(if already {
        http::StatusCode::OK
    } else {
        http::StatusCode::ACCEPTED
    });
    Ok(resp)
}
