//! CreateMultipartUpload: the upload's record, with the headers, tags, ACL, lock and
//! encryption its object will have and the checksum algorithm and type its parts use.

use s3s::dto::*;
use s3s::{s3_error, S3Request, S3Response, S3Result};
use saker_rpc::MetaRequest;

use crate::bucket::owner::identity;
use crate::http::checksum::Algorithm;
use crate::http::error;
use crate::keys::write_key;
use crate::multipart::upload::new_upload_id;
use crate::object::write::{headers_of, object_meta, parse_tagging_header};
use crate::Gateway;

/// The algorithm and checksum type of a new upload, checked as S3 does: a type needs an
/// algorithm, FULL_OBJECT needs a CRC, CRC64NVME is always FULL_OBJECT.
fn checksum_choice(
    algorithm: Option<&ChecksumAlgorithm>,
    checksum_type: Option<&ChecksumType>,
) -> S3Result<(Option<Algorithm>, Option<&'static str>)> {
    let Some(a) = algorithm else {
        if checksum_type.is_some() {
            return Err(s3_error!(
                InvalidRequest,
                "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header."
            ));
        }
        return Ok((None, None));
    };
    let a = Algorithm::parse(a.as_str()).ok_or_else(|| {
        s3_error!(
            InvalidRequest,
            "Checksum algorithm provided is unsupported."
        )
    })?;
    let t = match checksum_type.map(|t| t.as_str()) {
        None => a.default_type(),
        Some(t) if a.allows_type(t) => {
            if t == ChecksumType::FULL_OBJECT {
                ChecksumType::FULL_OBJECT
            } else {
                ChecksumType::COMPOSITE
            }
        }
        Some(t) => {
            return Err(s3_error!(
                InvalidRequest,
                "The {} checksum type cannot be used with the {} checksum algorithm.",
                t,
                a.as_str()
            ))
        }
    };
    Ok((Some(a), Some(t)))
}

pub async fn create(
    gw: &Gateway,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let (uid, gid) = identity(gw, req.credentials.as_ref());
    let input = req.input;
    let kp = write_key(&input.bucket, &input.key)?;
    if kp.dir_marker {
        return Err(s3_error!(
            InvalidArgument,
            "a directory marker cannot be uploaded in parts"
        ));
    }
    let tags = parse_tagging_header(input.tagging.as_deref())?;
    let writer = req.credentials.as_ref().map(|c| c.access_key.as_str());
    let settings = crate::bucket::lookup::copy_of(gw, &input.bucket).await?;
    let acl = crate::bucket::acl::upload_acl!(gw, &settings, input, writer)?;
    crate::http::write_headers::check(input.storage_class.as_ref())?;
    let seal = crate::object::sse::for_write_of!(gw, &settings, input)?;
    let lock = crate::bucket::lock::for_write(
        &settings,
        input.object_lock_mode.as_ref(),
        input.object_lock_retain_until_date.as_ref(),
        input.object_lock_legal_hold_status.as_ref(),
    )?;
    let mut meta = object_meta(headers_of!(input));
    let (algorithm, checksum_type) = checksum_choice(
        input.checksum_algorithm.as_ref(),
        input.checksum_type.as_ref(),
    )?;
    meta.checksum_type = checksum_type.map(str::to_string);
    // The parts are encrypted with the upload's data key, which waits wrapped in its record.
    meta.sse = seal.map(|(_, sse)| sse);
    let shown_sse = crate::object::sse::shown(meta.sse.as_ref());
    let upload_id = new_upload_id(algorithm);
    let req = MetaRequest::CreateUpload {
        path: kp.path.clone(),
        upload_id: upload_id.clone(),
        meta,
        tags,
        uid,
        gid,
        lock,
        acl,
    };
    gw.cluster.call(&kp.path, req).await.map_err(error::meta)?;
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(input.bucket),
        key: Some(input.key),
        upload_id: Some(upload_id),
        checksum_algorithm: algorithm.map(|a| ChecksumAlgorithm::from_static(a.as_str())),
        checksum_type: checksum_type.map(ChecksumType::from_static),
        server_side_encryption: shown_sse.sse,
        ssekms_key_id: shown_sse.kms_key_id,
        sse_customer_algorithm: shown_sse.customer_algorithm,
        sse_customer_key_md5: shown_sse.customer_key_md5,
        ..Default::default()
    }))
}
