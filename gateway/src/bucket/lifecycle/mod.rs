//! S3 lifecycle: a bucket's rules (a bucket setting, Put/Get/DeleteBucketLifecycleConfiguration)
//! and the passes that apply them ([`worker`]): expiration of current objects by age or date,
//! of noncurrent versions (keeping the newest N), of delete markers left alone, and aborts of
//! stale multipart uploads. A pass runs once per cluster (the binary schedules it with the
//! active coordinator, or on `saker admin lifecycle run`); its "day" is configurable so tests
//! can age objects in seconds. PUT, GET and HEAD answer `x-amz-expiration` for an object a
//! rule will expire (in real days, as S3 and RGW announce it).

pub(crate) mod config;
mod cursor;
mod pass;
pub mod rules;
mod worker;

pub use cursor::Cursor;
pub use pass::Lifecycle;
pub use rules::Rule;
pub use worker::Summary;
