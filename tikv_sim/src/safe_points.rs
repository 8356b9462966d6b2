//! PD's GC safe points, sans I/O, with PD's rules: the GC safe point (below which TiKV may
//! drop versions) only moves forward; services (TiDB's GC worker as `gc_worker`, BR, TiCDC,
//! saker) each keep a service safe point with a TTL, and the GC worker moves the GC safe point
//! no further than the least of them. A service's update below the least is refused (the
//! least is answered), a TTL of 0 or less removes it, and `gc_worker`'s never expires (it is
//! created at 0 when missing, as PD does).

use std::collections::BTreeMap;

/// The service id of the cluster's GC worker.
pub const GC_WORKER: &str = "gc_worker";

/// One service's safe point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSafePoint {
    pub id: String,
    pub safe_point: u64,
    /// Unix seconds (`i64::MAX`: never).
    pub expires_at: i64,
}

/// PD's safe points.
#[derive(Debug, Default)]
pub struct SafePoints {
    gc: u64,
    services: BTreeMap<String, ServiceSafePoint>,
    /// Calls that moved the GC safe point, whoever made them (for stats).
    pub gc_moves: u64,
}

impl SafePoints {
    /// The GC safe point.
    pub fn gc(&self) -> u64 {
        self.gc
    }

    /// PD's `UpdateGCSafePoint`: moves the GC safe point forward to `safe_point`; the one in
    /// force after.
    pub fn update_gc(&mut self, safe_point: u64) -> u64 {
        if safe_point > self.gc {
            self.gc = safe_point;
            self.gc_moves += 1;
        }
        self.gc
    }

    /// The least live service safe point at `now` (unix seconds), dropping expired ones.
    pub fn least(&mut self, now: i64) -> ServiceSafePoint {
        self.services.retain(|_, s| s.expires_at >= now);
        if !self.services.contains_key(GC_WORKER) {
            let initial = self
                .services
                .values()
                .map(|s| s.safe_point)
                .min()
                .unwrap_or(0);
            self.services.insert(
                GC_WORKER.into(),
                ServiceSafePoint {
                    id: GC_WORKER.into(),
                    safe_point: initial,
                    expires_at: i64::MAX,
                },
            );
        }
        self.services
            .values()
            .min_by_key(|s| s.safe_point)
            .cloned()
            .expect("gc_worker is there")
    }

    /// PD's `UpdateServiceGCSafePoint`: sets `id`'s safe point for `ttl` seconds from `now`
    /// (removes it for `ttl <= 0`) unless it is below the least; the least after.
    pub fn update_service(
        &mut self,
        id: &str,
        ttl: i64,
        safe_point: u64,
        now: i64,
    ) -> Result<ServiceSafePoint, String> {
        if id == GC_WORKER && ttl != i64::MAX {
            return Err("TTL of gc_worker's service safe point must be infinity".into());
        }
        let least = self.least(now);
        if ttl <= 0 {
            self.services.remove(id);
            return Ok(self.least(now));
        }
        if safe_point < least.safe_point {
            return Ok(least);
        }
        self.services.insert(
            id.to_string(),
            ServiceSafePoint {
                id: id.to_string(),
                safe_point,
                expires_at: now.saturating_add(ttl),
            },
        );
        Ok(self.least(now))
    }

    /// The live service safe points at `now`.
    pub fn services(&mut self, now: i64) -> Vec<ServiceSafePoint> {
        self.least(now);
        self.services.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_service_bounds_the_gc_worker() {
        let mut sp = SafePoints::default();
        assert_eq!(sp.least(100).id, GC_WORKER, "created at 0");
        let least = sp.update_service("saker-a", 60, 500, 100).unwrap();
        assert_eq!((least.id.as_str(), least.safe_point), (GC_WORKER, 0));
        // The GC worker moves its own past saker's: saker's is the least now.
        let least = sp.update_service(GC_WORKER, i64::MAX, 900, 100).unwrap();
        assert_eq!((least.id.as_str(), least.safe_point), ("saker-a", 500));
        assert_eq!(sp.update_gc(least.safe_point), 500);
        // Below the least: refused.
        let least = sp.update_service("late", 60, 400, 100).unwrap();
        assert_eq!(least.safe_point, 500);
        assert_eq!(sp.services(100).len(), 2);
        // saker's expires: the GC worker's is the least again.
        assert_eq!(sp.least(161).safe_point, 900);
        assert!(sp.update_service(GC_WORKER, 60, 1, 161).is_err());
    }

    #[test]
    fn the_gc_safe_point_never_goes_back_and_a_zero_ttl_removes() {
        let mut sp = SafePoints::default();
        assert_eq!(sp.update_gc(10), 10);
        assert_eq!(sp.update_gc(5), 10);
        assert_eq!(sp.gc_moves, 1);
        sp.update_service(GC_WORKER, i64::MAX, 50, 0).unwrap();
        sp.update_service("s", 60, 70, 0).unwrap();
        let least = sp.update_service("s", 0, 0, 0).unwrap();
        assert_eq!(least.safe_point, 50);
        assert_eq!(sp.services(0).len(), 1);
    }
}
