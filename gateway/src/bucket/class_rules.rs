//! A storage-class rule as a bucket keeps it ([`crate::bucket::storage_class`] sets them), and
//! the lifecycle rule that applies it.

use serde::{Deserialize, Serialize};

use crate::bucket::lifecycle::rules::{Filter, NoncurrentTransition, Rule, Transition};

/// Objects under `prefix` are kept as storage class `class` (an erasure-coding class,
/// `EC_<k>_<m>`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassRule {
    pub prefix: String,
    pub class: String,
}

impl ClassRule {
    /// The lifecycle rule that codes what this one names: current objects and noncurrent
    /// versions, from their first day.
    pub fn as_lifecycle(&self) -> Rule {
        Rule {
            id: format!("saker storage-class {} {}", self.class, self.prefix),
            enabled: true,
            filter: Filter {
                prefix: Some(self.prefix.clone()),
                ..Filter::default()
            },
            legacy_prefix: false,
            expiration: None,
            noncurrent: None,
            abort_upload_days: None,
            transitions: vec![Transition {
                days: Some(0),
                date: None,
                tier: self.class.clone(),
            }],
            noncurrent_transitions: vec![NoncurrentTransition {
                days: 0,
                newer: None,
                tier: self.class.clone(),
            }],
        }
    }
}
