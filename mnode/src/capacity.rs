//! `--group-ops-limit`: a fixed capacity per group, as each of Origami's metadata servers has.
//! On one machine every group shares the same cores, so moving load between groups gains
//! nothing by itself; a token bucket per group makes each one a server of its own size, and
//! the balancer's choices show in job completion times. Off unless configured.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use saker_rpc::MetaRequest;

/// A token bucket of `rate` operations per second. A caller reserves its token at once and
/// waits until the bucket would have had it, so callers are served in arrival order.
pub struct OpsLimit {
    rate: f64,
    burst: f64,
    /// Tokens (negative: reserved ahead) as of the instant.
    state: Mutex<(f64, Instant)>,
}

impl OpsLimit {
    pub fn new(ops_per_sec: u32) -> Self {
        let rate = f64::from(ops_per_sec.max(1));
        // A twentieth of a second's worth: smooth, yet no stall between two ops.
        let burst = (rate / 20.0).max(1.0);
        Self {
            rate,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// How long the caller must wait for its token at `now` (taking it).
    fn reserve(&self, now: Instant) -> Duration {
        let mut s = self.state.lock();
        let refill = now.saturating_duration_since(s.1).as_secs_f64() * self.rate;
        s.0 = (s.0 + refill).min(self.burst) - 1.0;
        s.1 = now.max(s.1);
        if s.0 >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-s.0 / self.rate)
        }
    }

    /// Waits until the group may do one more operation.
    pub async fn take(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            crate::metrics::OPS_LIMIT_WAIT.inc_by(wait.as_secs_f64());
            tokio::time::sleep(wait).await;
        }
    }
}

/// Whether `req` is work a group's capacity pays for: the namespace's operations (served or
/// forwarded) and what they make groups do for each other. The protocols' controls, status
/// and raft requests are not.
pub fn costs(req: &MetaRequest) -> bool {
    req.path().is_some()
        || matches!(
            req,
            MetaRequest::LookupDentry { .. }
                | MetaRequest::ApplyChanges { .. }
                | MetaRequest::MarkDirty { .. }
                | MetaRequest::SharedAttrs { .. }
                | MetaRequest::Shared { .. }
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_admits_its_rate_after_its_burst() {
        let limit = OpsLimit::new(100);
        let t0 = limit.state.lock().1;
        // The burst (5 tokens) goes at once; then one token every 10 ms, reserved in order.
        for _ in 0..5 {
            assert_eq!(limit.reserve(t0), Duration::ZERO);
        }
        let waits: Vec<Duration> = (0..3).map(|_| limit.reserve(t0)).collect();
        let ms = |d: Duration| (d.as_secs_f64() * 1000.0).round() as u64;
        assert_eq!(
            waits.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
            [10, 20, 30]
        );
        // A second later the debt is paid and the bucket holds its burst again, no more.
        let later = t0 + Duration::from_secs(1);
        for _ in 0..5 {
            assert_eq!(limit.reserve(later), Duration::ZERO);
        }
        assert_eq!(ms(limit.reserve(later)), 10);
    }
}
