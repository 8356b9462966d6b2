//! A bound on how deep requests and responses nest when decoded.
//!
//! `MetaRequest::Shared`, `MetaRequest::ApplyDirAttr` and `MetaResponse::Deferred` hold
//! another request or response, so postcard (which has no depth limit) decodes a frame of a
//! few kilobytes repeating one of them into a recursion deep enough to overflow the stack and
//! abort the process: found by the `records` fuzz target. Real values nest once or twice.

use std::cell::Cell;

use serde::de::Error;
use serde::{Deserialize, Deserializer};

/// Deepest nesting decoded; deeper is a decode error.
pub const MAX_NESTING: u32 = 8;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Deserializes a nested value (`#[serde(deserialize_with = "nesting::boxed")]`), refusing to
/// go more than [`MAX_NESTING`] levels down.
pub(crate) fn boxed<'de, D, T>(d: D) -> Result<Box<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    /// Restores the depth on the way out, error or unwind alike.
    struct Level(u32);
    impl Drop for Level {
        fn drop(&mut self) {
            DEPTH.set(self.0);
        }
    }
    let depth = DEPTH.get();
    if depth >= MAX_NESTING {
        return Err(D::Error::custom(format!(
            "nested more than {MAX_NESTING} levels deep"
        )));
    }
    let _level = Level(depth);
    DEPTH.set(depth + 1);
    T::deserialize(d).map(Box::new)
}

#[cfg(test)]
mod tests {
    use crate::meta::MetaRequest;
    use crate::MetaResponse;

    fn deferred(depth: u32) -> MetaResponse {
        (0..depth).fold(MetaResponse::Done, |resp, _| MetaResponse::Deferred {
            resp: Box::new(resp),
            group: 1,
            ticket: 2,
        })
    }

    #[test]
    fn nesting_up_to_the_limit_decodes_and_deeper_is_an_error() {
        let ok = postcard::to_allocvec(&deferred(super::MAX_NESTING)).unwrap();
        assert_eq!(
            postcard::from_bytes::<MetaResponse>(&ok).unwrap(),
            deferred(super::MAX_NESTING)
        );
        let deep = postcard::to_allocvec(&deferred(super::MAX_NESTING + 1)).unwrap();
        assert!(postcard::from_bytes::<MetaResponse>(&deep).is_err());
        // What once overflowed the stack: a million levels in a few megabytes.
        let mut bomb = Vec::new();
        let one = postcard::to_allocvec(&MetaRequest::Shared {
            id: 1,
            op: Box::new(MetaRequest::Counters),
        })
        .unwrap();
        let prefix = &one[..one.len() - 1];
        for _ in 0..1_000_000 {
            bomb.extend_from_slice(prefix);
        }
        assert!(postcard::from_bytes::<MetaRequest>(&bomb).is_err());
        // The depth is back to 0 after an error.
        assert!(postcard::from_bytes::<MetaResponse>(&ok).is_ok());
    }
}
