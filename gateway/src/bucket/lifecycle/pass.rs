//! A gateway's lifecycle state (how long a day is, a pass's pace, the last pass) and the
//! [`Gateway`] methods that run a pass ([`super::worker`]) and tell what it did.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::config::Scope;
use super::cursor;
use super::rules::DAY;
use super::worker::{self, Summary};
use crate::Gateway;

/// The lifecycle state of a gateway: how long a day is, a pass's pace, and the last pass.
#[derive(Debug)]
pub struct Lifecycle {
    day: Duration,
    /// Items a pass looks at per second (0: unpaced).
    rate: u64,
    last: Mutex<Option<(i64, Summary)>>,
    running: tokio::sync::Mutex<()>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::new(DAY, 0)
    }
}

impl Lifecycle {
    pub fn new(day: Duration, rate: u64) -> Self {
        Self {
            day: if day.is_zero() { DAY } else { day },
            rate,
            last: Mutex::new(None),
            running: tokio::sync::Mutex::new(()),
        }
    }

    /// How long a lifecycle day is.
    pub fn day(&self) -> Duration {
        self.day
    }

    fn day_ns(&self) -> i64 {
        i64::try_from(self.day.as_nanos()).unwrap_or(i64::MAX)
    }
}

impl Gateway {
    /// Runs one lifecycle pass now over every bucket with rules, or only `bucket` (one pass
    /// at a time; a second caller waits for the first). Answers what it did.
    pub async fn lifecycle_pass(&self, bucket: Option<&str>) -> Result<Summary, String> {
        let _one = self.lifecycle.running.lock().await;
        let started = crate::keys::now_ns();
        let (day_ns, rate) = (self.lifecycle.day_ns(), self.lifecycle.rate);
        let opts = worker::Opts {
            scope: Scope::All,
            rate,
            live: None,
        };
        let sum = worker::pass(self, bucket, started, day_ns, opts).await?;
        record_lifecycle(&sum);
        *self.lifecycle.last.lock() = Some((started, sum.clone()));
        Ok(sum)
    }

    /// Codes now, unpaced, what the storage classes of every bucket (or only `bucket`) ask
    /// for and is not coded yet: a lifecycle pass of those rules alone, `live` kept up to date
    /// as it goes (`transitioned`: versions coded). One at a time, as lifecycle passes.
    pub async fn ec_pass(
        &self,
        bucket: Option<&str>,
        live: Arc<parking_lot::Mutex<Summary>>,
    ) -> Result<Summary, String> {
        let _one = self.lifecycle.running.lock().await;
        let opts = worker::Opts {
            scope: Scope::Coding,
            rate: 0,
            live: Some(live.clone()),
        };
        let now = crate::keys::now_ns();
        let sum = worker::pass(self, bucket, now, self.lifecycle.day_ns(), opts).await?;
        *live.lock() = sum.clone();
        Ok(sum)
    }

    /// The current objects (directory markers left out) of the buckets with storage classes
    /// (only `bucket`, if given): what an [`Self::ec_pass`] looks at.
    pub async fn coding_objects(&self, bucket: Option<&str>) -> Result<u64, String> {
        let mut n = 0;
        for (b, _) in super::config::configured(self, bucket, Scope::Coding).await? {
            crate::archive::walk(self, &b, "", |batch| {
                n += batch.len() as u64;
                async {}
            })
            .await?;
        }
        Ok(n)
    }

    /// When the last pass started (ns since the epoch) and what it did.
    pub fn lifecycle_status(&self) -> Option<(i64, Summary)> {
        self.lifecycle.last.lock().clone()
    }

    /// Where a pass cut short stopped (a pass over every bucket resumes there).
    pub async fn lifecycle_cursor(&self) -> Option<cursor::Cursor> {
        cursor::load(&self.state).await
    }

    /// How long a lifecycle day is here.
    pub fn lifecycle_day(&self) -> Duration {
        self.lifecycle.day()
    }
}

/// Counts one lifecycle pass.
pub fn record_lifecycle(s: &Summary) {
    for (kind, n) in [
        ("pass", 1),
        ("object_scanned", s.objects),
        ("expired", s.expired),
        ("noncurrent_expired", s.noncurrent_expired),
        ("marker_removed", s.markers_removed),
        ("upload_aborted", s.uploads_aborted),
        ("error", s.errors),
    ] {
        crate::metrics::LIFECYCLE
            .with_label_values(&[kind])
            .inc_by(n);
    }
}
