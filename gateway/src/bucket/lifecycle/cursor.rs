//! Where a lifecycle pass is: a record of the coordinator's replicated state, written every
//! [`SAVE_EVERY`] items, so that a pass cut short (a crash, a failover to another node)
//! resumes there instead of starting over. A pass that ends removes it.

use std::sync::Arc;

use saker_coordinator::StateStore;
use serde::{Deserialize, Serialize};

/// The record's key.
const RECORD: &str = "lifecycle/cursor";
/// Items between two saves of the cursor.
pub const SAVE_EVERY: u64 = 500;

/// The parts of a bucket's pass, in the order it walks them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Phase {
    #[default]
    Current,
    Versions,
    Uploads,
}

/// The last item a pass finished with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub bucket: String,
    pub phase: Phase,
    /// The MNode group being walked (versions and uploads are walked group by group).
    pub group: u32,
    /// The last key done.
    pub key: String,
}

impl Cursor {
    /// Where to start `phase` of `bucket` in group `group`: after this key, or (`None`) not
    /// at all (the cursor is past it). `Some("")`: from the start.
    pub fn start(
        resume: Option<&Cursor>,
        bucket: &str,
        phase: Phase,
        group: u32,
    ) -> Option<String> {
        let Some(c) = resume.filter(|c| c.bucket == bucket) else {
            return Some(String::new());
        };
        match (phase.cmp(&c.phase), group.cmp(&c.group)) {
            (std::cmp::Ordering::Less, _) => None,
            (std::cmp::Ordering::Greater, _) => Some(String::new()),
            (_, std::cmp::Ordering::Less) => None,
            (_, std::cmp::Ordering::Greater) => Some(String::new()),
            _ => Some(c.key.clone()),
        }
    }
}

pub async fn load(state: &Arc<dyn StateStore>) -> Option<Cursor> {
    match state.scan(RECORD).await {
        Ok(records) => records
            .into_iter()
            .find(|(k, _)| k == RECORD)
            .and_then(|(_, v)| serde_json::from_slice(&v).ok()),
        Err(e) => {
            tracing::warn!(error = %e, "lifecycle cursor not read: the pass starts over");
            None
        }
    }
}

/// Saves `cursor` (`None`: the pass ended). A failed save costs only work done again.
pub async fn save(state: &Arc<dyn StateStore>, cursor: Option<&Cursor>) {
    let value = cursor.map(|c| serde_json::to_vec(c).expect("a cursor encodes"));
    if let Err(e) = state.put(RECORD, value).await {
        tracing::warn!(error = %e, "lifecycle cursor not saved");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_pass_skips_what_was_done() {
        let c = Cursor {
            bucket: "b".into(),
            phase: Phase::Versions,
            group: 3,
            key: "k".into(),
        };
        let at = |phase, group| Cursor::start(Some(&c), "b", phase, group);
        assert_eq!(at(Phase::Current, 0), None);
        assert_eq!(at(Phase::Versions, 2), None);
        assert_eq!(at(Phase::Versions, 3), Some("k".into()));
        assert_eq!(at(Phase::Versions, 4), Some(String::new()));
        assert_eq!(at(Phase::Uploads, 0), Some(String::new()));
        assert_eq!(
            Cursor::start(Some(&c), "other", Phase::Current, 0),
            Some(String::new())
        );
        assert_eq!(
            Cursor::start(None, "b", Phase::Current, 0),
            Some(String::new())
        );
    }
}
