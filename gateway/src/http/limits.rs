//! Per-key admission limits of the S3 front door, off by default: requests in flight and
//! requests per second for each access key (anonymous requests share one budget). They are
//! checked after the signature, so nobody spends another key's budget. A request over either
//! limit is answered 503 SlowDown at once (the SDKs back off and retry), so one key's flood
//! leaves the node to the other keys.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use s3s::{s3_error, S3Result};

/// The limits; zero turns one off.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KeyLimitConfig {
    /// Requests of one key being served at once.
    pub max_inflight: u32,
    /// Requests of one key per second (a token bucket holding one second's worth).
    pub max_rate: f64,
}

impl KeyLimitConfig {
    fn is_off(&self) -> bool {
        self.max_inflight == 0 && self.max_rate <= 0.0
    }
}

/// The budgets of every key that sent a request.
#[derive(Default)]
pub struct KeyLimits {
    config: KeyLimitConfig,
    keys: Mutex<HashMap<String, Budget>>,
}

struct Budget {
    inflight: u32,
    tokens: f64,
    refilled: Instant,
}

/// One admitted request's place among its key's requests in flight; given back when the
/// request is done (dropped with it).
#[derive(Clone)]
pub struct Admitted {
    _slot: Arc<Slot>,
}

struct Slot {
    limits: Arc<KeyLimits>,
    key: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(b) = self.limits.keys.lock().get_mut(&self.key) {
            b.inflight = b.inflight.saturating_sub(1);
        }
    }
}

impl KeyLimits {
    pub fn new(config: KeyLimitConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            keys: Mutex::default(),
        })
    }

    /// Admits one request of `key` (None: anonymous), or SlowDown. `None` when no limit is
    /// set (nothing to give back).
    pub fn admit(self: &Arc<Self>, key: Option<&str>) -> S3Result<Option<Admitted>> {
        if self.config.is_off() {
            return Ok(None);
        }
        let key = key.unwrap_or_default();
        let now = Instant::now();
        let rate = self.config.max_rate;
        let mut keys = self.keys.lock();
        let b = keys.entry(key.to_string()).or_insert_with(|| Budget {
            inflight: 0,
            tokens: rate.max(1.0),
            refilled: now,
        });
        if rate > 0.0 {
            let elapsed = now.duration_since(b.refilled).as_secs_f64();
            b.tokens = (b.tokens + elapsed * rate).min(rate.max(1.0));
            b.refilled = now;
            if b.tokens < 1.0 {
                return Err(s3_error!(
                    SlowDown,
                    "more than {rate} requests per second for this access key; slow down"
                ));
            }
        }
        let max = self.config.max_inflight;
        if max > 0 && b.inflight >= max {
            return Err(s3_error!(
                SlowDown,
                "{max} requests of this access key are being served already; slow down"
            ));
        }
        if rate > 0.0 {
            b.tokens -= 1.0;
        }
        b.inflight += 1;
        drop(keys);
        Ok(Some(Admitted {
            _slot: Arc::new(Slot {
                limits: self.clone(),
                key: key.to_string(),
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: S3Result<Option<Admitted>>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => e.code().as_str().to_string(),
        }
    }

    #[test]
    fn in_flight_requests_are_capped_per_key_and_given_back() {
        let l = KeyLimits::new(KeyLimitConfig {
            max_inflight: 2,
            max_rate: 0.0,
        });
        let a = l.admit(Some("ak")).unwrap();
        let b = l.admit(Some("ak")).unwrap();
        assert_eq!(code(l.admit(Some("ak"))), "SlowDown");
        // Another key and anonymous requests have budgets of their own.
        let _other = l.admit(Some("other")).unwrap();
        let _anon = l.admit(None).unwrap();
        drop(a);
        let _c = l.admit(Some("ak")).unwrap();
        assert_eq!(code(l.admit(Some("ak"))), "SlowDown");
        drop(b);
        assert_eq!(code(l.admit(Some("ak"))), "ok");
    }

    #[test]
    fn the_rate_is_a_bucket_of_one_seconds_requests() {
        let l = KeyLimits::new(KeyLimitConfig {
            max_inflight: 0,
            max_rate: 3.0,
        });
        for _ in 0..3 {
            assert_eq!(code(l.admit(Some("ak"))), "ok");
        }
        assert_eq!(code(l.admit(Some("ak"))), "SlowDown");
        assert_eq!(code(l.admit(Some("other"))), "ok");
        // A refusal spends nothing: after a third of a second one more request passes.
        l.keys.lock().get_mut("ak").unwrap().refilled -= std::time::Duration::from_millis(340);
        assert_eq!(code(l.admit(Some("ak"))), "ok");
        assert_eq!(code(l.admit(Some("ak"))), "SlowDown");
    }

    #[test]
    fn off_admits_everything_without_state() {
        let l = KeyLimits::new(KeyLimitConfig::default());
        for _ in 0..1000 {
            assert!(l.admit(Some("ak")).unwrap().is_none());
        }
        assert!(l.keys.lock().is_empty());
    }
}
