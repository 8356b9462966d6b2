//! Remote archive tiers: a version's bytes moved to any S3 service while its metadata stays
//! in the MNode (ARCHITECTURE.md, "Versions, locks and tiers").
//!
//! A tier is a named S3 bucket (and key prefix) in the coordinator's replicated state
//! ([`config`]). A transition ([`transition`]) uploads a version's bytes with their CRC32C,
//! then compare-and-sets the version to point at the remote key, which releases the local
//! bytes through the ordinary GC queue; a crash before the commit leaves only a remote orphan,
//! which the tier scrub deletes. Reads go through to the tier ([`Tiers`], a
//! [`saker_client::TierReader`]) with a bounded local cache ([`cache`]).

pub mod cache;
pub mod config;
mod error;
pub mod gc;
pub mod metrics;
mod remote;
mod tiers;
pub mod transition;

pub use config::TierConfig;
pub use error::TierError;
pub use remote::Remote;
pub use tiers::Tiers;
