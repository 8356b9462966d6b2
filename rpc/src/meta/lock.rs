//! Object Lock (S3 WORM) as each version keeps it: a retention (mode and date) and a legal
//! hold, and the rules of what they forbid. The MNode applies these rules in the batch that
//! deletes a version or changes its lock, so every gateway and mount meets the same answer.
//! A bucket's Object Lock configuration ([`LockConfig`]) is a bucket setting the gateway
//! stores and both front doors read: its default retention locks each new version.

use serde::{Deserialize, Serialize};

use crate::MetaError;

/// How strictly a retention holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockMode {
    /// Callers allowed `s3:BypassGovernanceRetention` may delete or shorten it if they ask to.
    Governance,
    /// Nobody, the root key included, deletes the version or weakens the retention before
    /// its date.
    Compliance,
}

/// A version's retention: it cannot be deleted before `until_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    pub mode: LockMode,
    /// The retain-until date, ns since the epoch.
    pub until_ns: i64,
}

/// The lock of one object version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLock {
    pub retention: Option<Retention>,
    /// A legal hold keeps the version until it is lifted, whatever its retention says.
    pub legal_hold: bool,
}

impl ObjectLock {
    /// Whether it holds nothing (no record needs to be kept).
    pub fn is_empty(&self) -> bool {
        self.retention.is_none() && !self.legal_hold
    }

    /// The retention still in force at `now_ns`.
    fn active(&self, now_ns: i64) -> Option<Retention> {
        self.retention.filter(|r| r.until_ns > now_ns)
    }

    /// May the version go (deleted, overwritten, truncated, renamed away) at `now_ns`?
    /// `bypass`: the caller asked to bypass a governance retention and may.
    pub fn check_delete(&self, now_ns: i64, bypass: bool) -> Result<(), MetaError> {
        if self.legal_hold {
            return Err(MetaError::ObjectLocked);
        }
        match self.active(now_ns) {
            Some(r) if !(r.mode == LockMode::Governance && bypass) => Err(MetaError::ObjectLocked),
            _ => Ok(()),
        }
    }

    /// May the retention become `new` at `now_ns`? Extending it is always allowed; shortening
    /// it or changing its mode only for a governance retention the caller bypasses.
    pub fn check_retention(
        &self,
        new: &Retention,
        now_ns: i64,
        bypass: bool,
    ) -> Result<(), MetaError> {
        let Some(old) = self.active(now_ns) else {
            return Ok(());
        };
        if new.mode == old.mode && new.until_ns >= old.until_ns {
            return Ok(());
        }
        match old.mode {
            LockMode::Governance if bypass => Ok(()),
            _ => Err(MetaError::ObjectLocked),
        }
    }
}

/// A bucket's Object Lock configuration, as its bucket setting stores it (JSON; the record
/// exists once Object Lock is enabled).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockConfig {
    /// The retention a new version gets when its write names none.
    pub default: Option<DefaultLock>,
}

impl LockConfig {
    /// The stored setting.
    pub fn parse(value: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(value)
    }
}

/// A bucket's default retention: a mode and a period in days or years.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultLock {
    pub mode: LockMode,
    pub days: Option<i32>,
    pub years: Option<i32>,
}

impl DefaultLock {
    /// The retention of a version written at `now_ns`.
    pub fn retention(&self, now_ns: i64) -> Retention {
        const DAY_NS: i64 = 86_400 * 1_000_000_000;
        let days = self.days.unwrap_or(0) as i64 + self.years.unwrap_or(0) as i64 * 365;
        Retention {
            mode: self.mode,
            until_ns: now_ns.saturating_add(days.saturating_mul(DAY_NS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000;

    fn lock(mode: LockMode, until_ns: i64, legal_hold: bool) -> ObjectLock {
        ObjectLock {
            retention: Some(Retention { mode, until_ns }),
            legal_hold,
        }
    }

    #[test]
    fn deletes() {
        use LockMode::*;
        assert!(ObjectLock::default().check_delete(NOW, false).is_ok());
        assert!(lock(Governance, NOW + 1, false)
            .check_delete(NOW, false)
            .is_err());
        assert!(lock(Governance, NOW + 1, false)
            .check_delete(NOW, true)
            .is_ok());
        assert!(lock(Compliance, NOW + 1, false)
            .check_delete(NOW, true)
            .is_err());
        // An expired retention holds nothing; a legal hold holds whatever the retention says.
        assert!(lock(Compliance, NOW, false)
            .check_delete(NOW, false)
            .is_ok());
        assert!(lock(Governance, NOW, true).check_delete(NOW, true).is_err());
    }

    #[test]
    fn retention_changes() {
        use LockMode::*;
        let to = |mode, until_ns| Retention { mode, until_ns };
        let gov = lock(Governance, NOW + 10, false);
        assert!(gov
            .check_retention(&to(Governance, NOW + 20), NOW, false)
            .is_ok());
        assert!(gov
            .check_retention(&to(Governance, NOW + 5), NOW, false)
            .is_err());
        assert!(gov
            .check_retention(&to(Governance, NOW + 5), NOW, true)
            .is_ok());
        assert!(gov
            .check_retention(&to(Compliance, NOW + 10), NOW, false)
            .is_err());
        assert!(gov
            .check_retention(&to(Compliance, NOW + 10), NOW, true)
            .is_ok());
        let comp = lock(Compliance, NOW + 10, false);
        assert!(comp
            .check_retention(&to(Compliance, NOW + 20), NOW, false)
            .is_ok());
        assert!(comp
            .check_retention(&to(Compliance, NOW + 5), NOW, true)
            .is_err());
        assert!(comp
            .check_retention(&to(Governance, NOW + 20), NOW, true)
            .is_err());
        // Once its date has passed, a compliance retention may become anything.
        assert!(comp
            .check_retention(&to(Governance, NOW + 5), NOW + 10, false)
            .is_ok());
    }
}
