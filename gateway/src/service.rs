//! The `S3` trait implementation: thin, each method delegates to its module and is [`run`].

use std::future::Future;

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::bucket::access as bucket_access;
use crate::bucket::bucket_acl;
use crate::bucket::buckets as bucket;
use crate::bucket::cors;
use crate::bucket::encryption;
use crate::bucket::lifecycle::config as lifecycle;
use crate::bucket::lock;
use crate::bucket::notification;
use crate::bucket::tagging as bucket_tagging;
use crate::bucket::versions;
use crate::list::objects as list;
use crate::list::versions as list_versions;
use crate::metrics::timed;
use crate::multipart::complete;
use crate::multipart::create;
use crate::multipart::list as parts;
use crate::multipart::part;
use crate::multipart::upload;
use crate::object::acl as object_acl;
use crate::object::attributes;
use crate::object::copy;
use crate::object::delete;
use crate::object::get;
use crate::object::put;
use crate::object::tagging;
use crate::Gateway;

const REQUEST_ID: &str = "x-amz-request-id";

/// Runs one operation, timed, and tags its answer with a fresh request id as S3 does: the
/// `x-amz-request-id` header, and `<RequestId>` in an error body.
pub async fn run<T>(
    op: &'static str,
    fut: impl Future<Output = S3Result<S3Response<T>>>,
) -> S3Result<S3Response<T>> {
    let id = format!("{:016X}", rand::random::<u64>());
    let value = http::HeaderValue::from_str(&id).expect("hex is a valid header value");
    match timed(op, fut).await {
        Ok(mut r) => {
            r.headers.insert(REQUEST_ID, value);
            Ok(r)
        }
        Err(mut e) => {
            let mut headers = e.headers().cloned().unwrap_or_default();
            headers.insert(REQUEST_ID, value);
            e.set_headers(headers);
            e.set_request_id(id);
            Err(e)
        }
    }
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        run("CreateBucket", bucket::create_bucket(self, req)).await
    }
    async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        run(
            "PutBucketPolicy",
            bucket_access::put_bucket_policy(self, req),
        )
        .await
    }
    async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        run(
            "GetBucketPolicy",
            bucket_access::get_bucket_policy(self, req),
        )
        .await
    }
    async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        run(
            "DeleteBucketPolicy",
            bucket_access::delete_bucket_policy(self, req),
        )
        .await
    }
    async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        run(
            "GetBucketPolicyStatus",
            bucket_access::get_bucket_policy_status(self, req),
        )
        .await
    }
    async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        run(
            "PutPublicAccessBlock",
            bucket_access::put_public_access_block(self, req),
        )
        .await
    }
    async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        run(
            "GetPublicAccessBlock",
            bucket_access::get_public_access_block(self, req),
        )
        .await
    }
    async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        run(
            "DeletePublicAccessBlock",
            bucket_access::delete_public_access_block(self, req),
        )
        .await
    }
    async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<PutBucketOwnershipControlsOutput>> {
        run(
            "PutBucketOwnershipControls",
            bucket_access::put_bucket_ownership_controls(self, req),
        )
        .await
    }
    async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        run(
            "GetBucketOwnershipControls",
            bucket_access::get_bucket_ownership_controls(self, req),
        )
        .await
    }
    async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<DeleteBucketOwnershipControlsOutput>> {
        run(
            "DeleteBucketOwnershipControls",
            bucket_access::delete_bucket_ownership_controls(self, req),
        )
        .await
    }
    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        run("DeleteBucket", bucket::delete_bucket(self, req)).await
    }
    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        run("HeadBucket", bucket::head_bucket(self, req)).await
    }
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        run("ListBuckets", bucket::list_buckets(self, req)).await
    }
    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        run("GetBucketLocation", bucket::get_bucket_location(self, req)).await
    }
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        run("PutObject", put::put_object(self, req)).await
    }
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        run("GetObject", get::get_object(self, req)).await
    }
    async fn restore_object(
        &self,
        req: S3Request<RestoreObjectInput>,
    ) -> S3Result<S3Response<RestoreObjectOutput>> {
        run(
            "RestoreObject",
            crate::object::tiering::restore_object(self, req),
        )
        .await
    }
    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        run("HeadObject", get::head_object(self, req)).await
    }
    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        run("CopyObject", copy::copy_object(self, req)).await
    }
    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        run("DeleteObject", delete::delete_object(self, req)).await
    }
    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        run("DeleteObjects", delete::delete_objects(self, req)).await
    }
    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        run("ListObjects", list::list_objects(self, req)).await
    }
    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        run("ListObjectsV2", list::list_objects_v2(self, req)).await
    }
    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        run("CreateMultipartUpload", create::create(self, req)).await
    }
    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        run("UploadPart", part::upload_part(self, req)).await
    }
    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        run("UploadPartCopy", part::upload_part_copy(self, req)).await
    }
    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        run("CompleteMultipartUpload", complete::complete(self, req)).await
    }
    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        run("AbortMultipartUpload", upload::abort(self, req)).await
    }
    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        run("ListParts", parts::list_parts(self, req)).await
    }
    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        run("ListMultipartUploads", parts::list_uploads(self, req)).await
    }
    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        run("PutObjectTagging", tagging::put(self, req)).await
    }
    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        run("GetObjectTagging", tagging::get(self, req)).await
    }
    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        run("DeleteObjectTagging", tagging::delete(self, req)).await
    }
    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        run(
            "ListObjectVersions",
            list_versions::list_object_versions(self, req),
        )
        .await
    }
    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        run("GetBucketAcl", bucket_acl::get_bucket_acl(self, req)).await
    }
    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        run("PutBucketAcl", bucket_acl::put_bucket_acl(self, req)).await
    }
    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        run("GetObjectAcl", object_acl::get_object_acl(self, req)).await
    }
    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        run("PutObjectAcl", object_acl::put_object_acl(self, req)).await
    }
    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        run(
            "GetBucketVersioning",
            versions::get_bucket_versioning(self, req),
        )
        .await
    }
    async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        run(
            "PutBucketVersioning",
            versions::put_bucket_versioning(self, req),
        )
        .await
    }
    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        run("GetBucketTagging", bucket_tagging::get_bucket(self, req)).await
    }
    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        run("PutBucketTagging", bucket_tagging::put_bucket(self, req)).await
    }
    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        run(
            "DeleteBucketTagging",
            bucket_tagging::delete_bucket(self, req),
        )
        .await
    }
    async fn get_bucket_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        run("GetBucketEncryption", encryption::get_bucket(self, req)).await
    }
    async fn put_bucket_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
        run("PutBucketEncryption", encryption::put_bucket(self, req)).await
    }
    async fn delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
        run(
            "DeleteBucketEncryption",
            encryption::delete_bucket(self, req),
        )
        .await
    }
    async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        run("GetBucketCors", cors::get_bucket_cors(self, req)).await
    }
    async fn put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        run("PutBucketCors", cors::put_bucket_cors(self, req)).await
    }
    async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        run("DeleteBucketCors", cors::delete_bucket_cors(self, req)).await
    }
    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        // Over HTTP, `route` serves this operation (S3 does not quote this ETag).
        let op = async {
            attributes::get_object_attributes(self, req.input)
                .await
                .map(S3Response::new)
        };
        run("GetObjectAttributes", op).await
    }
    async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        run(
            "PutBucketLifecycleConfiguration",
            lifecycle::put_configuration(self, req),
        )
        .await
    }
    async fn put_bucket_notification_configuration(
        &self,
        req: S3Request<PutBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketNotificationConfigurationOutput>> {
        run(
            "PutBucketNotificationConfiguration",
            notification::put_configuration(self, req),
        )
        .await
    }
    async fn get_bucket_notification_configuration(
        &self,
        req: S3Request<GetBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
        run(
            "GetBucketNotificationConfiguration",
            notification::get_configuration(self, req),
        )
        .await
    }
    async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        run(
            "GetBucketLifecycleConfiguration",
            lifecycle::get_configuration(self, req),
        )
        .await
    }
    async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        run(
            "DeleteBucketLifecycle",
            lifecycle::delete_configuration(self, req),
        )
        .await
    }
    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        run(
            "PutObjectLockConfiguration",
            lock::put_configuration(self, req),
        )
        .await
    }
    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        run(
            "GetObjectLockConfiguration",
            lock::get_configuration(self, req),
        )
        .await
    }
    async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        run("PutObjectRetention", lock::put_retention(self, req)).await
    }
    async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        run("GetObjectRetention", lock::get_retention(self, req)).await
    }
    async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        run("PutObjectLegalHold", lock::put_legal_hold(self, req)).await
    }
    async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        run("GetObjectLegalHold", lock::get_legal_hold(self, req)).await
    }
}
