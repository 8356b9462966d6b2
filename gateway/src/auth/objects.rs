//! What an authorization decision reads from the objects themselves: whether a key is
//! missing, the ACL and the tags of an object or of one of its versions.

use s3s::S3Result;

use super::Access;

impl Access {
    /// The object at `key` of `bucket` as a GET would find it, with the payloads `want`
    /// asks for (`None`: no object is stored there).
    pub(super) async fn object(
        &self,
        bucket: &str,
        key: &str,
        want: saker_rpc::Want,
    ) -> S3Result<Option<saker_rpc::ObjectView>> {
        match crate::object::lookup::lookup_object(&self.gw, bucket, key, want).await {
            Ok(view) => Ok(Some(view)),
            Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchKey => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether no object is stored under `key` of `bucket` (what cannot be looked up counts
    /// as present: the request is then refused as any other).
    pub(super) async fn missing(&self, bucket: &str, key: &str) -> bool {
        matches!(
            self.object(bucket, key, saker_rpc::Want::ATTR).await,
            Ok(None)
        )
    }

    /// The ACL kept with the object at `key` of `bucket`, or with its version `version`,
    /// whose owner is `bucket_owner` (`None`: a missing object, version or bucket, or the
    /// bucket owner's private ACL).
    pub(super) async fn object_acl(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        bucket_owner: &str,
    ) -> S3Result<Option<saker_policy::Acl>> {
        let want = saker_rpc::Want {
            acl: true,
            ..saker_rpc::Want::ATTR
        };
        let view = self.object_or_version(bucket, key, version, want).await?;
        Ok(view
            .and_then(|v| v.acl)
            .map(|a| crate::bucket::acl::of_object(Some(&a), bucket_owner)))
    }

    /// The tags of the object at `key` of `bucket`, or of its `version` (none for a missing
    /// object or version).
    pub(super) async fn existing_tags(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
    ) -> S3Result<Vec<(String, String)>> {
        let want = saker_rpc::Want {
            tags: true,
            ..saker_rpc::Want::ATTR
        };
        let view = self.object_or_version(bucket, key, version, want).await?;
        Ok(view.and_then(|v| v.tags).unwrap_or_default())
    }

    /// The object at `key` of `bucket`, or its `version`; `None` where there is none (nothing
    /// to read a grant or a tag from).
    pub(super) async fn object_or_version(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        want: saker_rpc::Want,
    ) -> S3Result<Option<saker_rpc::ObjectView>> {
        let found = match version {
            None => crate::object::lookup::lookup_object(&self.gw, bucket, key, want).await,
            Some(v) => crate::object::lookup::lookup(&self.gw, bucket, key, Some(v), want).await,
        };
        match found {
            Ok(view) => Ok(Some(view)),
            Err(e)
                if matches!(
                    e.code(),
                    s3s::S3ErrorCode::NoSuchBucket
                        | s3s::S3ErrorCode::NoSuchKey
                        | s3s::S3ErrorCode::NoSuchVersion
                        | s3s::S3ErrorCode::MethodNotAllowed
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
