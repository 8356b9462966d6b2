//! GetObjectAttributes: size, ETag, storage class, checksums and the part table, without data.
//!
//! S3 answers it with the ETag unquoted (`<ETag>abc</ETag>`), unlike every other response.
//! s3s always quotes ETags, so [`crate::http::route`] serves this operation over HTTP: it builds the
//! input from the request ([`input`]) and writes the XML ([`render`]).

use s3s::dto::{
    Checksum, GetObjectAttributesInput, GetObjectAttributesOutput, GetObjectAttributesParts,
    ObjectAttributes, ObjectAttributesList, ObjectPart, StorageClass,
};
use s3s::path::S3Path;
use s3s::{s3_error, S3Result};
use saker_rpc::Want;

use crate::http::checksum;
use crate::keys::timestamp;
use crate::Gateway;

const KNOWN: [&str; 5] = [
    ObjectAttributes::CHECKSUM,
    ObjectAttributes::ETAG,
    ObjectAttributes::OBJECT_PARTS,
    ObjectAttributes::OBJECT_SIZE,
    ObjectAttributes::STORAGE_CLASS,
];

/// The attribute names asked for. Clients send one comma-separated header; some put spaces
/// after the commas.
fn wanted(list: &ObjectAttributesList) -> S3Result<Vec<String>> {
    let names: Vec<String> = list
        .iter()
        .flat_map(|x| x.as_str().split(','))
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect();
    if names.is_empty() {
        return Err(s3_error!(
            InvalidArgument,
            "The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty"
        ));
    }
    if names.iter().any(|n| !KNOWN.contains(&n.as_str())) {
        return Err(s3_error!(
            InvalidArgument,
            "Invalid attribute name specified."
        ));
    }
    Ok(names)
}

pub async fn get_object_attributes(
    gw: &Gateway,
    input: GetObjectAttributesInput,
) -> S3Result<GetObjectAttributesOutput> {
    let names = wanted(&input.object_attributes)?;
    let wants = |name: &str| names.iter().any(|n| n == name);
    let vid = input.version_id.as_deref();
    let view =
        crate::object::lookup::lookup(gw, &input.bucket, &input.key, vid, Want::HEAD).await?;
    // An SSE-C object shows its attributes only to holders of its key.
    crate::object::sse::for_read(
        gw,
        view.meta.as_ref(),
        crate::object::sse::customer_key_of!(input)?,
    )?;
    let versioning = crate::bucket::versions::of_bucket(gw, &input.bucket).await?;
    let version_id = crate::bucket::versions::shown(&view, versioning);
    let a = &view.attr;
    let meta = view.meta.clone().unwrap_or_default();
    let checksum =
        (wants(ObjectAttributes::CHECKSUM) && !meta.checksums.is_empty()).then(|| Checksum {
            checksum_crc32: meta.checksums.crc32.clone(),
            checksum_crc32c: meta.checksums.crc32c.clone(),
            checksum_crc64nvme: meta.checksums.crc64nvme.clone(),
            checksum_sha1: meta.checksums.sha1.clone(),
            checksum_sha256: meta.checksums.sha256.clone(),
            checksum_type: checksum::object_type(&meta),
        });
    let object_parts = (wants(ObjectAttributes::OBJECT_PARTS) && !a.parts.is_empty()).then(|| {
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
        let marker = input.part_number_marker.unwrap_or(0).max(0) as usize;
        let after: Vec<(usize, &saker_rpc::PartInfo)> = a
            .parts
            .iter()
            .enumerate()
            .map(|(i, p)| (i + 1, p))
            .filter(|(n, _)| *n > marker)
            .collect();
        let truncated = after.len() > max;
        let shown: Vec<_> = after.into_iter().take(max).collect();
        GetObjectAttributesParts {
            is_truncated: Some(truncated),
            max_parts: Some(max as i32),
            next_part_number_marker: shown.last().map(|(n, _)| *n as i32),
            part_number_marker: input.part_number_marker,
            total_parts_count: Some(a.parts.len() as i32),
            parts: Some(
                shown
                    .into_iter()
                    .map(|(n, p)| ObjectPart {
                        part_number: Some(n as i32),
                        size: Some(p.size as i64),
                        checksum_crc32: p.checksums.crc32.clone(),
                        checksum_crc32c: p.checksums.crc32c.clone(),
                        checksum_crc64nvme: p.checksums.crc64nvme.clone(),
                        checksum_sha1: p.checksums.sha1.clone(),
                        checksum_sha256: p.checksums.sha256.clone(),
                    })
                    .collect(),
            ),
        }
    });
    Ok(GetObjectAttributesOutput {
        e_tag: wants(ObjectAttributes::ETAG).then(|| s3s::dto::ETag::Strong(a.etag.clone())),
        object_size: wants(ObjectAttributes::OBJECT_SIZE).then_some(a.size as i64),
        storage_class: wants(ObjectAttributes::STORAGE_CLASS)
            .then(|| StorageClass::from(crate::object::tiering::class_name(a))),
        last_modified: Some(timestamp(a.s3_mtime_ns)),
        checksum,
        object_parts,
        version_id,
        ..Default::default()
    })
}

fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> S3Result<Option<&'a str>> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map_err(|_| s3_error!(InvalidArgument, "the {} header is not ASCII", name))
        })
        .transpose()
}

fn int_header(headers: &http::HeaderMap, name: &str) -> S3Result<Option<i32>> {
    header(headers, name)?
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| s3_error!(InvalidArgument, "the {} header is not an integer", name))
        })
        .transpose()
}

/// The input of a GetObjectAttributes request, from its path, query and headers.
pub fn input(
    path: S3Path,
    uri: &http::Uri,
    headers: &http::HeaderMap,
) -> S3Result<GetObjectAttributesInput> {
    let S3Path::Object { bucket, key } = path else {
        return Err(s3_error!(
            InvalidRequest,
            "GetObjectAttributes needs a bucket and a key"
        ));
    };
    let object_attributes = headers
        .get_all("x-amz-object-attributes")
        .iter()
        .map(|v| {
            v.to_str()
                .map(|s| ObjectAttributes::from(s.to_string()))
                .map_err(|_| s3_error!(InvalidArgument, "Invalid attribute name specified."))
        })
        .collect::<S3Result<Vec<_>>>()?;
    let version_id = crate::http::path::query_value(uri, "versionId");
    Ok(GetObjectAttributesInput {
        bucket: bucket.into(),
        key: key.into(),
        object_attributes,
        max_parts: int_header(headers, "x-amz-max-parts")?,
        part_number_marker: int_header(headers, "x-amz-part-number-marker")?,
        expected_bucket_owner: header(headers, "x-amz-expected-bucket-owner")?.map(str::to_string),
        version_id,
        sse_customer_algorithm: header(headers, "x-amz-server-side-encryption-customer-algorithm")?
            .map(str::to_string),
        sse_customer_key: header(headers, "x-amz-server-side-encryption-customer-key")?
            .map(str::to_string),
        sse_customer_key_md5: header(headers, "x-amz-server-side-encryption-customer-key-md5")?
            .map(str::to_string),
        ..Default::default()
    })
}

/// The XML body of a GetObjectAttributes response, the ETag unquoted as S3 sends it here.
pub fn render(out: &GetObjectAttributesOutput) -> S3Result<Vec<u8>> {
    use s3s::xml::Serialize as _;
    let mut buf = Vec::with_capacity(512);
    {
        let mut ser = s3s::xml::Serializer::new(&mut buf);
        ser.decl()
            .and_then(|()| out.serialize(&mut ser))
            .map_err(crate::http::error::internal)?;
    }
    let Some(etag) = &out.e_tag else {
        return Ok(buf);
    };
    let xml = String::from_utf8(buf).map_err(crate::http::error::internal)?;
    let quoted = format!("<ETag>\"{}\"</ETag>", etag.value());
    let bare = format!("<ETag>{}</ETag>", etag.value());
    Ok(xml.replacen(&quoted, &bare, 1).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_unquoted() {
        let out = GetObjectAttributesOutput {
            e_tag: Some(s3s::dto::ETag::Strong("abc-2".into())),
            object_size: Some(3),
            ..Default::default()
        };
        let xml = String::from_utf8(render(&out).unwrap()).unwrap();
        assert!(xml.contains("<ETag>abc-2</ETag>"), "{xml}");
        assert!(xml.contains("<ObjectSize>3</ObjectSize>"), "{xml}");
    }

    #[test]
    fn attribute_names() {
        let list = |s: &str| vec![ObjectAttributes::from(s.to_string())];
        assert_eq!(
            wanted(&list("ETag, ObjectSize")).unwrap(),
            vec!["ETag".to_string(), "ObjectSize".to_string()]
        );
        assert!(wanted(&list("ETag,Bogus")).is_err());
        assert!(wanted(&vec![]).is_err());
    }
}
