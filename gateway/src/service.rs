//! The `S3` trait implementation: thin, each method delegates to its module and is timed.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::metrics::timed;
use crate::{attributes, bucket, copy, delete, get, list, multipart, put, tagging, Gateway};

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        timed("CreateBucket", bucket::create_bucket(self, req)).await
    }
    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        timed("DeleteBucket", bucket::delete_bucket(self, req)).await
    }
    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        timed("HeadBucket", bucket::head_bucket(self, req)).await
    }
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        timed("ListBuckets", bucket::list_buckets(self, req)).await
    }
    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        timed("GetBucketLocation", bucket::get_bucket_location(self, req)).await
    }
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        timed("PutObject", put::put_object(self, req)).await
    }
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        timed("GetObject", get::get_object(self, req)).await
    }
    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        timed("HeadObject", get::head_object(self, req)).await
    }
    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        timed("CopyObject", copy::copy_object(self, req)).await
    }
    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        timed("DeleteObject", delete::delete_object(self, req)).await
    }
    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        timed("DeleteObjects", delete::delete_objects(self, req)).await
    }
    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        timed("ListObjects", list::list_objects(self, req)).await
    }
    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        timed("ListObjectsV2", list::list_objects_v2(self, req)).await
    }
    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        timed("CreateMultipartUpload", multipart::create(self, req)).await
    }
    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        timed("UploadPart", multipart::upload_part(self, req)).await
    }
    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        timed("UploadPartCopy", multipart::upload_part_copy(self, req)).await
    }
    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        timed("CompleteMultipartUpload", multipart::complete(self, req)).await
    }
    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        timed("AbortMultipartUpload", multipart::abort(self, req)).await
    }
    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        timed("ListParts", multipart::list_parts(self, req)).await
    }
    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        timed("ListMultipartUploads", multipart::list_uploads(self, req)).await
    }
    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        timed("PutObjectTagging", tagging::put(self, req)).await
    }
    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        timed("GetObjectTagging", tagging::get(self, req)).await
    }
    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        timed("DeleteObjectTagging", tagging::delete(self, req)).await
    }
    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        timed("ListObjectVersions", list::list_object_versions(self, req)).await
    }
    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        timed("GetBucketAcl", bucket::get_bucket_acl(self, req)).await
    }
    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        timed("PutBucketAcl", bucket::put_bucket_acl(self, req)).await
    }
    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        timed("GetObjectAcl", tagging::get_object_acl(self, req)).await
    }
    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        timed("PutObjectAcl", tagging::put_object_acl(self, req)).await
    }
    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        timed(
            "GetBucketVersioning",
            bucket::get_bucket_versioning(self, req),
        )
        .await
    }
    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        timed("GetBucketTagging", bucket::get_bucket_tagging(self, req)).await
    }
    async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        timed("GetBucketCors", bucket::get_bucket_cors(self, req)).await
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
        timed("GetObjectAttributes", op).await
    }
}
