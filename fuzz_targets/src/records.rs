//! The `records` target: values the MNode persists (`mnode/src/records.rs`: a version byte,
//! then postcard; multipart uploads in three versions that migrate).
//!
//! Input: one byte selecting the record type (`saker_mnode::fuzzing::Record`), then the
//! stored value.

use saker_mnode::fuzzing::{record, Record};

/// Decodes a stored value as the selected record type.
pub fn records(data: &[u8]) {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    record(crate::select(&Record::ALL, kind), bytes);
}
