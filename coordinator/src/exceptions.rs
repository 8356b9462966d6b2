//! The exception table at run time (FalconFS §4.2.2): the coordinator owns it, keeps it in its
//! state (record `exceptions`), and changes it one name at a time:
//!
//! 1. write the new table with the name marked as migrating;
//! 2. block the name at every group (`BlockName`: requests for paths ending in it wait, writes
//!    already evaluated are applied first);
//! 3. have every group move the inodes of that name it holds to their owner under the new
//!    table (`MigrateName`: `AdoptEntry` there, then removal here keeping the chunks);
//! 4. install the new table at every group (`SetExceptions`; each keeps it across restarts);
//! 5. unblock, and clear the migrating mark.
//!
//! Every step is idempotent, so a crash anywhere is finished by running them again: the
//! coordinator does that when it starts (and retries while groups do not answer). Clients
//! with an older table send requests for the name to its old owner, which forwards them
//! (counted as misdirections). Only file names are redirected: a name some directory has is
//! refused, since moving a directory record needs the rename protocol.

use std::collections::BTreeMap;

use futures::future::join_all;
use saker_namespace::{Exception, ExceptionTable, GroupId};
use saker_rpc::{MetaError, MetaRequest, MetaResponse};
use serde::{Deserialize, Serialize};

use crate::balance::{balance, bound, shrink, GroupStats};
use crate::calls::tag;
use crate::exception_store::Persisted;
use crate::journal::JournalError;
use crate::namespace::NamespaceCoordinator;

/// File names each group reports to the balancer (its most frequent ones).
pub const TOP_NAMES: u32 = 64;

/// Plan-and-move passes of one balancing round.
const MAX_PASSES: usize = 4;

/// What one balancing round found and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BalanceReport {
    /// The bound: 1/groups + epsilon.
    pub bound: f64,
    /// The most loaded group's share of all inodes, before and after.
    pub max_share_before: f64,
    pub max_share_after: f64,
    /// Entries added (name, route) and removed by the round.
    pub added: Vec<(String, String)>,
    pub removed: Vec<String>,
    /// Names the plan wanted but that cannot be redirected (a directory has the name).
    pub refused: Vec<(String, String)>,
    /// Entries in the table afterwards.
    pub entries: usize,
}

fn max_share(stats: &BTreeMap<GroupId, GroupStats>) -> f64 {
    let total: u64 = stats.values().map(|s| s.inodes).sum();
    let max = stats.values().map(|s| s.inodes).max().unwrap_or(0);
    if total == 0 {
        0.0
    } else {
        max as f64 / total as f64
    }
}

/// How reports name a route: `pathwalk` or `group:N`.
pub(crate) fn route_text(e: &Exception) -> String {
    match e {
        Exception::PathWalk => "pathwalk".into(),
        Exception::Override(g) => format!("group:{g}"),
    }
}

impl NamespaceCoordinator {
    /// Every record of this coordinator's state (exception table, journals), for a backup.
    pub async fn records(&self) -> Result<Vec<(String, Vec<u8>)>, JournalError> {
        self.exceptions.all_records().await
    }

    /// The exception table as the coordinator knows it.
    pub fn exceptions(&self) -> ExceptionTable {
        self.exceptions.table()
    }

    /// Redirects `name` (`Some`) or returns it to the ring (`None`), moving its inodes (module
    /// docs). Answers the new table.
    pub async fn set_exception(
        &self,
        name: &str,
        exception: Option<Exception>,
    ) -> Result<ExceptionTable, MetaError> {
        self.until_ready().await?;
        saker_namespace::Name::new(name)
            .map_err(|e| MetaError::Invalid(format!("bad name: {e}")))?;
        if let Some(Exception::Override(g)) = &exception {
            if !self.groups.contains_key(g) {
                return Err(MetaError::Invalid(format!("there is no group {g}")));
            }
        }
        let _one_at_a_time = self.table_lock.lock().await;
        let mut table = self.exceptions.table();
        let changed = match exception {
            Some(e) if table.get(name) != Some(&e) => {
                table.set(name, e);
                true
            }
            None if table.get(name).is_some() => {
                table.remove(name);
                true
            }
            _ => false,
        };
        if !changed {
            return Ok(table);
        }
        // Refused before anything changes if a directory has the name: every group looks (a
        // move under the table in force moves nothing, and is refused the same way).
        self.everywhere(|| MetaRequest::MigrateName {
            name: name.to_string(),
            table: self.exceptions.table(),
        })
        .await?;
        self.exceptions
            .save(Persisted {
                table: table.clone(),
                migrating: Some(name.to_string()),
            })
            .await?;
        self.migrate(name, &table).await?;
        Ok(table)
    }

    /// Steps 2-5 for `name` under `table`.
    async fn migrate(&self, name: &str, table: &ExceptionTable) -> Result<(), MetaError> {
        let blocked = self
            .everywhere(|| MetaRequest::BlockName {
                name: name.to_string(),
                coord: self.term,
            })
            .await;
        let moved = match blocked {
            Ok(_) => {
                let moved = self
                    .everywhere(|| MetaRequest::MigrateName {
                        name: name.to_string(),
                        table: table.clone(),
                    })
                    .await;
                match moved {
                    Ok(replies) => self
                        .everywhere(|| MetaRequest::SetExceptions {
                            table: table.clone(),
                        })
                        .await
                        .map(|_| replies),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        // Unblocked whatever happened: a failed move is finished later, and until then the
        // groups route by the old table, which still finds what was not moved.
        let _ = self
            .everywhere(|| MetaRequest::UnblockName {
                name: name.to_string(),
                coord: self.term,
            })
            .await;
        let replies = moved?;
        let count: u64 = replies
            .iter()
            .map(|r| match r {
                MetaResponse::Moved(n) => *n,
                _ => 0,
            })
            .sum();
        self.router.write().set_exceptions(table.clone());
        self.exceptions
            .save(Persisted {
                table: table.clone(),
                migrating: None,
            })
            .await?;
        tracing::info!(
            name,
            moved = count,
            version = table.version(),
            "name redirected"
        );
        Ok(())
    }

    /// Sends a request to every group; all must succeed.
    async fn everywhere(
        &self,
        req: impl Fn() -> MetaRequest,
    ) -> Result<Vec<MetaResponse>, MetaError> {
        let calls = self.groups.values().map(|g| g.call(tag(), req()));
        join_all(calls).await.into_iter().collect()
    }

    /// Every group's inode count and most frequent file names.
    pub(crate) async fn stats(&self) -> Result<BTreeMap<GroupId, GroupStats>, MetaError> {
        let mut out = BTreeMap::new();
        for (g, svc) in &self.groups {
            match svc
                .call(tag(), MetaRequest::NameStats { top: TOP_NAMES })
                .await?
            {
                MetaResponse::NameStats { inodes, top } => {
                    out.insert(
                        *g,
                        GroupStats {
                            inodes,
                            top_names: top,
                        },
                    );
                }
                other => {
                    return Err(MetaError::Internal(format!(
                        "name stats answered {other:?}"
                    )))
                }
            }
        }
        Ok(out)
    }

    /// One balancing round (FalconFS §4.2.2): drop entries the groups no longer need
    /// ([`shrink`]), then redirect the most frequent names of groups over `1/n + epsilon`
    /// ([`balance`], at most `max_entries` new entries), moving their inodes. A namespace of
    /// fewer than `min_inodes` inodes is left as it is (its unevenness is noise).
    pub async fn balance_once(
        &self,
        epsilon: f64,
        max_entries: usize,
        min_inodes: u64,
    ) -> Result<BalanceReport, MetaError> {
        let mut report = BalanceReport {
            bound: bound(self.groups.len().max(1), epsilon),
            ..Default::default()
        };
        let mut stats = self.stats().await?;
        report.max_share_before = max_share(&stats);
        if stats.values().map(|s| s.inodes).sum::<u64>() < min_inodes {
            report.max_share_after = report.max_share_before;
            return Ok(report);
        }
        let router = self.router.read().clone();
        for name in shrink(&stats, &self.exceptions(), &router, epsilon) {
            self.set_exception(&name, None).await?;
            report.removed.push(name);
        }
        if !report.removed.is_empty() {
            stats = self.stats().await?;
        }
        // The plan works from the names each group reported; once a name moved, the group it
        // went to reports it next time, so a few passes may be needed.
        for _ in 0..MAX_PASSES {
            if max_share(&stats) <= report.bound || report.added.len() >= max_entries {
                break;
            }
            let left = max_entries - report.added.len();
            let plan = balance(&stats, &self.exceptions(), epsilon, left);
            let before = report.added.len();
            for (name, exception) in plan.entries {
                match self.set_exception(&name, Some(exception)).await {
                    Ok(_) => report.added.push((name, route_text(&exception))),
                    Err(MetaError::Invalid(why)) => report.refused.push((name, why)),
                    Err(e) => return Err(e),
                }
            }
            stats = self.stats().await?;
            if report.added.len() == before {
                break;
            }
        }
        report.max_share_after = max_share(&stats);
        report.entries = self.exceptions().len();
        tracing::info!(?report, "balancing round");
        Ok(report)
    }

    /// Installs the coordinator's table at every group (after a restart of either side) and
    /// finishes a migration a crash cut short.
    pub async fn resolve_exceptions(&self) -> Result<(), MetaError> {
        let _one_at_a_time = self.table_lock.lock().await;
        if let Some((name, table)) = self.exceptions.pending() {
            return self.migrate(&name, &table).await;
        }
        let table = self.exceptions.table();
        self.router.write().set_exceptions(table.clone());
        self.everywhere(|| MetaRequest::SetExceptions {
            table: table.clone(),
        })
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::exception_store::ExceptionStore;
    use crate::state::StateStore;

    #[tokio::test]
    async fn the_state_keeps_the_table_and_the_migrating_mark() {
        let dir = tempfile::tempdir().unwrap();
        let state: Arc<dyn StateStore> = Arc::new(crate::state::DirState::new(dir.path()));
        let mut initial = ExceptionTable::new();
        initial.set("train", Exception::PathWalk);
        let store = ExceptionStore::load(state.clone(), initial.clone())
            .await
            .unwrap();
        assert_eq!(store.table(), initial);
        assert_eq!(store.pending(), None);
        let mut next = initial.clone();
        next.set("Makefile", Exception::Override(3));
        store
            .save(Persisted {
                table: next.clone(),
                migrating: Some("Makefile".into()),
            })
            .await
            .unwrap();
        // Reopened: the record wins over the initial table, and the migration is pending.
        let again = ExceptionStore::load(state.clone(), initial).await.unwrap();
        assert_eq!(again.pending(), Some(("Makefile".to_string(), next)));
        std::fs::write(dir.path().join("exceptions.json"), b"{broken").unwrap();
        assert!(ExceptionStore::load(state, ExceptionTable::new())
            .await
            .is_err());
    }
}
