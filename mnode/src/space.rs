//! Whether this process's metadata store is short of disk space. The binary watches the file
//! system of the data directory ([`set_low`]); while space is below its reserve, the MNodes
//! refuse the writes that add data ([`MetaRequest::adds_data`]) before they reach the raft
//! log, so a full disk never fails an append or a state-machine apply (either would stop the
//! group). Deletes still pass, and writes are taken again as soon as space is back, without
//! a restart.
//!
//! A follower whose disk fills before its leader's cannot refuse requests: its leader sends
//! it entries. Below half the reserve ([`set_critical`]) its replicas refuse raft appends and
//! snapshots instead (the leader retries them, as for an unreachable peer), so the follower
//! lags rather than failing an append; it catches up once space is back. Half the reserve
//! leaves room for the deletes that free space, which every replica still takes above it.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use saker_rpc::{MetaError, MetaRequest};

static LOW: AtomicBool = AtomicBool::new(false);
static WHY: Mutex<String> = Mutex::new(String::new());

/// Space is short (`Some(why)`), or back (`None`).
pub fn set_low(why: Option<String>) {
    let mut w = WHY.lock();
    match why {
        Some(why) => {
            if !LOW.load(Ordering::Relaxed) {
                tracing::warn!(why = %why, "metadata writes refused until space is freed");
            }
            *w = why;
            LOW.store(true, Ordering::Release);
        }
        None => {
            if LOW.swap(false, Ordering::AcqRel) {
                tracing::info!("space freed: metadata writes taken again");
            }
            w.clear();
        }
    }
}

static CRITICAL: AtomicBool = AtomicBool::new(false);

/// Space is below half the reserve (`true`): this process's replicas take no raft entries.
pub fn set_critical(critical: bool) {
    if CRITICAL.swap(critical, Ordering::AcqRel) != critical {
        if critical {
            tracing::warn!("raft appends refused until space is freed (below half the reserve)");
        } else {
            tracing::info!("space freed: raft appends taken again");
        }
    }
}

/// Whether raft appends are refused here (see [`set_critical`]).
pub fn critical() -> bool {
    CRITICAL.load(Ordering::Acquire)
}

/// Why writes are refused, while they are.
pub fn low() -> Option<String> {
    LOW.load(Ordering::Acquire).then(|| WHY.lock().clone())
}

/// Refuses `req` if it adds data while space is short.
pub(crate) fn check(req: &MetaRequest) -> Result<(), MetaError> {
    if LOW.load(Ordering::Acquire) && req.adds_data() {
        if let Some(why) = low() {
            return Err(MetaError::NoSpace(why));
        }
    }
    Ok(())
}
