//! Conditional writes (`If-Match`, `If-None-Match`): checked by the MNode in the batch that
//! applies the write, so of racing writers exactly the ones whose condition held win.

use serde::{Deserialize, Serialize};

use crate::error::MetaError;

/// One ETag condition header's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EtagCond {
    /// `*`: any current object.
    Any,
    /// This ETag (unquoted).
    Is(String),
}

impl EtagCond {
    fn matches(&self, etag: &str) -> bool {
        match self {
            EtagCond::Any => true,
            EtagCond::Is(e) => e == etag,
        }
    }
}

/// What must hold of the object at a write's key for the write to apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteCond {
    /// The current object matches (`If-Match`); a missing object fails with `NotFound`.
    pub if_match: Option<EtagCond>,
    /// The current object does not match (`If-None-Match`; `*`: there is none).
    pub if_none_match: Option<EtagCond>,
}

impl WriteCond {
    /// Checks the condition against the ETag of the object at the key now (`None`: there is
    /// none): `PreconditionFailed` if it does not hold, `NotFound` for `If-Match` on a missing
    /// object (as S3 answers).
    pub fn check(&self, current: Option<&str>) -> Result<(), MetaError> {
        if let Some(c) = &self.if_match {
            match current {
                None => return Err(MetaError::NotFound),
                Some(e) if !c.matches(e) => return Err(MetaError::PreconditionFailed),
                Some(_) => {}
            }
        }
        if let (Some(c), Some(e)) = (&self.if_none_match, current) {
            if c.matches(e) {
                return Err(MetaError::PreconditionFailed);
            }
        }
        Ok(())
    }
}

/// Checks an optional condition (no condition always holds).
pub fn check(cond: Option<&WriteCond>, current: Option<&str>) -> Result<(), MetaError> {
    cond.map_or(Ok(()), |c| c.check(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_hold_as_s3_evaluates_them() {
        let absent = WriteCond {
            if_none_match: Some(EtagCond::Any),
            ..Default::default()
        };
        assert_eq!(absent.check(None), Ok(()));
        assert_eq!(absent.check(Some("a")), Err(MetaError::PreconditionFailed));

        let is_a = WriteCond {
            if_match: Some(EtagCond::Is("a".into())),
            ..Default::default()
        };
        assert_eq!(is_a.check(Some("a")), Ok(()));
        assert_eq!(is_a.check(Some("b")), Err(MetaError::PreconditionFailed));
        assert_eq!(is_a.check(None), Err(MetaError::NotFound));

        let not_a = WriteCond {
            if_none_match: Some(EtagCond::Is("a".into())),
            ..Default::default()
        };
        assert_eq!(not_a.check(Some("b")), Ok(()));
        assert_eq!(not_a.check(None), Ok(()));
        assert_eq!(not_a.check(Some("a")), Err(MetaError::PreconditionFailed));
        assert_eq!(check(None, Some("x")), Ok(()));
    }
}
